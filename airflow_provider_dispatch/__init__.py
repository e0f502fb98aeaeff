"""airflow-provider-dispatch: restart Kubeflow Trainer v2 TrainJobs without ever running two executions at once.

The top-level package imports nothing heavy: the rule (`dispatch`) runs without Airflow, and the Airflow layer
(`hooks`, `operators`, `sensors`, `triggers`) guards the Airflow version where it is imported. The lab is a
distribution of its own (`airflow-provider-dispatch-lab`, package `airflow_provider_dispatch_lab`, in `lab/` of the
repository), released at the same version; this package never imports it.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
