"""A nightly training, restarted when it fails: each DAG run a restart chain of its own, resumed by every retry.

What it shows: the DAG a team schedules for a training that must be restarted safely when it fails. At 02:00
every night `TrainJobRestartOperator` runs the training as submission 1 and, while submission k fails and
restarts remain, holds it, waits until its pods are gone or proven ceased, and opens submission k+1
(`restart_operator.py` says more).

`per_run=True` gives each DAG run its own chain, whatever kind of run it is: the TrainJobs are
`<name>-<YYYYMMDD>-<6 hex>-<k>` (the run's date, then a digest of the DAG, the task and the run id), so the
scheduled run of 5 December opens `nightly-20261205-3fa9c2-1`, a manual run the same day another key. Nothing
here needs `{{ ds_nodash }}`, which fails on an Airflow 3 manual run without a logical date. The key is the same
for every try of the run: with `retries` set, a try that fails (Airflow's stale executor race, a worker lost
mid-chain) or a Clear of the task goes on with the run's chain from what the cluster shows, never from
submission 1 again, and a chain that used up its restarts fails again with its own message. The Rendered
Templates tab lists the run's TrainJobs as they are opened (`trainjobs`).

What it needs: a runtime (`runtime` param, a ClusterTrainingRuntime) whose training ends by itself, a triggerer,
and the `kubernetes_default` connection (KUBERNETES_CONN_ID) with the writer's permissions (docs: rbac). Works
against a real cluster and the lab.

Params: `namespace`, `name` (the prefix of the TrainJob names and of the job id, at most 44 characters: the run's
key and `-<k>` make the rest of 63), `runtime`, `num_nodes`, `max_restarts`.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

# what the example DAGs share (dispatch_examples.py, beside this file; Airflow puts the DAG folder on sys.path)
from dispatch_examples import KUBERNETES_CONN_ID, example_dag, runtime_param, trainjob_manifest

from airflow_provider_dispatch.operators.restarts import TrainJobRestartOperator

with example_dag(
    "nightly_restarts",
    __doc__,
    schedule="0 2 * * *",
    params={
        "namespace": Param("default", type="string", description="Namespace of the TrainJobs."),
        "name": Param("nightly", type="string", maxLength=44, description="Prefix of the TrainJob names."),
        "runtime": runtime_param(),
        "num_nodes": Param(2, type="integer", minimum=1, description="Pods per TrainJob (one per node)."),
        "max_restarts": Param(3, type="integer", minimum=0, maximum=25, description="Restarts at most."),
    },
) as nightly_restarts:
    TrainJobRestartOperator(
        task_id="train",
        manifest=trainjob_manifest(submission=None),
        max_restarts="{{ params.max_restarts }}",
        per_run=True,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        training_timeout=timedelta(hours=20),
        wait_timeout=timedelta(hours=1),
        retries=3,
        retry_delay=timedelta(minutes=1),
    )
