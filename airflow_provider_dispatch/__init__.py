"""airflow-provider-dispatch: restart Kubeflow Trainer v2 TrainJobs without ever running two executions at once.

The top-level package imports nothing heavy: the rule (`dispatch`) and the lab (`lab`) run without Airflow, and
the Airflow layer (`hooks`, `operators`, `sensors`, `triggers`) guards the Airflow version where it is imported.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
