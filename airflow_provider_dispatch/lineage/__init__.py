"""OpenLineage for the TrainJob operators: what they report (`trainjob`) and the facets they report it in (`facets`).

Part of the Airflow layer: `operators/trainjob.py` calls `trainjob.trainjob_lineage`, which imports `facets` (and
with it the OpenLineage client) only when the OpenLineage provider is installed. This file re-exports nothing.
"""
