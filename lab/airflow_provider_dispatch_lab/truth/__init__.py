"""The ground truth dispatch cannot see: the simulated container processes, when each ran, and the
admissions the store counted (the overlap recorder and the admission ledger).
"""
