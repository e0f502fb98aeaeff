"""The restart soak's DAG (tests/benchmarks/restart_soak.py): the chain of the example `restart_operator`, with
`per_run=True` (every manual run its own chain) and the retries the soak's faults cost (each killed worker costs a
try, besides those Airflow itself fails on a loaded machine). The soak runs it from a DAG folder beside the
examples' `dispatch_examples.py`.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

# what the example DAGs share (dispatch_examples.py, copied beside this file into the soak's DAG folder)
from dispatch_examples import KUBERNETES_CONN_ID, example_dag, runtime_param, trainjob_manifest

from airflow_provider_dispatch.operators.restarts import TrainJobRestartOperator

with example_dag(
    "restart_soak",
    __doc__,
    params={
        "namespace": Param("default", type="string"),
        "name": Param("soak", type="string"),
        "runtime": runtime_param(),
        "num_nodes": Param(2, type="integer", minimum=1),
        "max_restarts": Param(3, type="integer", minimum=0, maximum=25),
    },
) as restart_soak:
    TrainJobRestartOperator(
        task_id="train",
        manifest=trainjob_manifest(submission=None),
        max_restarts="{{ params.max_restarts }}",
        per_run=True,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        training_timeout=timedelta(hours=2),
        wait_timeout=timedelta(hours=1),
        retries=6,
        retry_delay=timedelta(seconds=5),
    )
