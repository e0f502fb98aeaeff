"""Restarts in one task: `TrainJobRestartOperator` runs a training and restarts it on failure, up to N times.

What it shows: the chain of `chained_restarts.py` (open, wait for the outcome, on failure hold, wait for the
pods, open the next submission) as one deferrable task, with no branch and no trigger rule to get wrong. The
task opens submission 1 (TrainJob `<name>-1`), and while submission k fails and restarts remain, holds it, waits
until its pods are gone or proven ceased (a pod on a lost node: the wait reason names it and says what would
unblock it), and opens submission k+1 (`<name>-<k+1>`, the same job id). It succeeds with the first `Complete`,
and fails with a clear message when `max_restarts` restarts all failed. Every wait is in the triggerer; the
task's XCom `restarts` holds the history (each submission's TrainJob, admission, outcome and times) and its
XCom `wait_reason` what it waits for now.

`report` then reads that history, as a DAG's next step would (a notification, a metric).

What it needs: a runtime (`runtime` param, a ClusterTrainingRuntime; the lab's default is
`torch-distributed`) whose training ends by itself, and the `kubernetes_default` connection
(KUBERNETES_CONN_ID) with the writer's permissions (docs: rbac). Works against a real cluster and the lab; in
the lab, the workload annotation `lab.dispatch.phpboyscout.uk/exit-code-by-submission` on the runtime's pod
template makes chosen submissions fail (`lab/simulated/nodes/workload.py`).

A new try of the task (its retries, a Clear) resumes the chain from what the cluster shows of job id `name`:
a second run with the same `name` therefore takes up the first run's chain (a completed one succeeds at once).
Give each run its own `name`, or see `nightly_restarts.py`, where each run gets a chain of its own (`per_run`).

Params: `namespace`, `name` (the job id, and the TrainJob names' prefix), `runtime`, `num_nodes`,
`max_restarts`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, get_current_context, task

# what the example DAGs share (dispatch_examples.py, beside this file; Airflow puts the DAG folder on sys.path)
from dispatch_examples import KUBERNETES_CONN_ID, example_dag, runtime_param, trainjob_manifest

from airflow_provider_dispatch.operators.restarts import TrainJobRestartOperator

#: the chain's TrainJob: no submission label (the operator numbers the submissions); job id and name prefix `name`
MANIFEST = trainjob_manifest(submission=None)

with example_dag(
    "restart_operator",
    __doc__,
    params={
        "namespace": Param("default", type="string", description="Namespace of the TrainJobs."),
        "name": Param("restarted", type="string", description="Job id, and prefix of the TrainJob names."),
        "runtime": runtime_param(),
        "num_nodes": Param(2, type="integer", minimum=1, description="Pods per TrainJob (one per node)."),
        "max_restarts": Param(3, type="integer", minimum=0, maximum=25, description="Restarts at most."),
    },
) as restart_operator:
    train = TrainJobRestartOperator(
        task_id="train",
        manifest=MANIFEST,
        max_restarts="{{ params.max_restarts }}",
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        training_timeout=timedelta(days=7),
        wait_timeout=timedelta(hours=1),
        # retries (DEFAULT_ARGS: 3): a new try resumes the chain from its TrainJobs, wherever it stood
    )

    @task(task_id="report")
    def report() -> dict[str, Any]:
        """XCom: how many submissions ran, and how each ended."""
        history = get_current_context()["ti"].xcom_pull(task_ids="train", key="restarts")["history"]
        return {"submissions": len(history), "outcomes": [entry["outcome"] for entry in history]}

    train >> report()
