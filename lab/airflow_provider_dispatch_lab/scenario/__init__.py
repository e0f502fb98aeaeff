"""Scenario controls: what a test, a drill or a person does to the simulated cluster (machines, Kueue),
the ready-made cluster presets and the sample objects they start from. They act through the API.
"""
