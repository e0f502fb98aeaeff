"""Scheduled retries: restart a TrainJob, letting the task's retries do the waiting for its old pods.

What it shows: `hold` suspends the running TrainJob; `release` with `on_pods_remaining="retry"` does not wait
in a worker or the triggerer. While pods of the previous execution remain (or Trainer has not yet observed the
hold) it raises the retryable error, whose message names the pods, their nodes and what would unblock them,
and Airflow's `retries` / `retry_delay` schedule the next check. The try that finds no pod left admits the
next execution (A+1), in the one conditional write dispatch makes. A retry after a lost response returns the
execution it admitted instead of admitting again (the task state store, `operators.execution_record`).

Use this where waiting in the triggerer is not wanted (no triggerer, or short waits that should show as retries
in the grid). A pod on a lost node makes every try fail until its node is deleted or tainted out-of-service:
then the retries run out, and the last try's message says what to do (docs: runbook).

What it needs: a running TrainJob managed by dispatch (labels `dispatch.phpboyscout.uk/job-id` and
`dispatch.phpboyscout.uk/submission`, as `open` creates it), the `kubernetes_default` connection
(KUBERNETES_CONN_ID) with the writer's permissions (docs: rbac). Works against a real cluster and the lab.

Params: `namespace`, `name`. The retry schedule is fixed when the DAG is parsed (RETRIES, RETRY_DELAY: Airflow
does not template them): the defaults wait up to three minutes, enough for pods with the default 30 s grace
period on reachable nodes; raise them for longer graces.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import Param

# what the example DAGs share (dispatch_examples.py, beside this file; Airflow puts the DAG folder on sys.path)
from dispatch_examples import KUBERNETES_CONN_ID, NAME, NAMESPACE, example_dag

from airflow_provider_dispatch.operators.trainjob import TrainJobHoldOperator, TrainJobReleaseOperator

RETRIES = 36
RETRY_DELAY = timedelta(seconds=5)

with example_dag(
    "scheduled_retries",
    __doc__,
    params={
        "namespace": Param("default", type="string", description="Namespace of the TrainJob."),
        "name": Param("quickstart", type="string", description="Name of the running TrainJob to restart."),
    },
) as scheduled_retries:
    hold = TrainJobHoldOperator(task_id="hold", namespace=NAMESPACE, name=NAME, kubernetes_conn_id=KUBERNETES_CONN_ID)
    release = TrainJobReleaseOperator(
        task_id="release",
        namespace=NAMESPACE,
        name=NAME,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        on_pods_remaining="retry",
        retries=RETRIES,
        retry_delay=RETRY_DELAY,
    )
    hold >> release
