"""Kueue mode: restart a queued TrainJob; Kueue admits it, dispatch's admission check holds the door.

A TrainJob with the label `kueue.x-k8s.io/queue-name` belongs to Kueue: Kueue suspends and unsuspends it, and
re-admits it by itself whenever its Workload is requeued. dispatch therefore runs its drain check in a Kueue
admission check controller (`dispatch admission-controller`): each time Kueue reserves quota for the Workload,
the check stays `Pending` while pods of the previous execution remain, its message saying first what to do (or what
is awaited) about them, then `pods of the previous execution remain: <pod> on <node> (<node state>), ...`, and turns
`Ready` (raising the admission number A on the TrainJob) only when none remains. Then Kueue admits (docs: kueue).

What it shows:

1. `open`: create the TrainJob held in its LocalQueue and release it; in Kueue mode release does not admit, it
   (re)activates the Workload and returns the current execution (A=0 for a new TrainJob);
2. `wait_admitted`: until Kueue admitted it and it runs a new execution (A=1), the wait reason being dispatch's
   status of it: the Workload's state and the admission check's message;
3. `hold`: deactivates the Workload (`spec.active: false`); Kueue evicts it and suspends the TrainJob;
4. `wait_suspended`: until the TrainJob is suspended (its pods go within their grace period);
5. `release`: reactivates the Workload at once, without waiting for the pods: Kueue requeues it and reserves
   quota, and the admission check keeps it Pending while the old pods remain;
6. `wait_readmitted`: the wait reason shows the check's message naming the pods; once they are gone the
   check is Ready, A=2, Kueue admits. The XCom lists every wait reason seen.

What it needs: Kueue with its TrainJob integration, a LocalQueue (`queue` param) in the namespace whose
ClusterQueue lists an AdmissionCheck with `controllerName: dispatch.phpboyscout.uk/drained`, dispatch's
admission check controller running (docs: kueue, with the manifests in `deploy/`), a runtime (`runtime`), and
the `kubernetes_default` connection (KUBERNETES_CONN_ID) with the writer's permissions. In the lab the
admission check controller runs with Kueue (`lab.scenario.presets`); the queues are created as an administrator would
(`lab.scenario.kueue.KueueScenario.create_queues`, or the YAML in docs/kueue). Works against a real
cluster and the lab.

Params: `namespace`, `name` (a new TrainJob: the DAG opens it), `queue`, `runtime`, `num_nodes`.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import Param, PokeReturnValue, get_current_context, task

# what the example DAGs share (dispatch_examples.py, beside this file; Airflow puts the DAG folder on sys.path)
from dispatch_examples import KUBERNETES_CONN_ID, NAME, NAMESPACE, example_dag, runtime_param, trainjob_manifest

from airflow_provider_dispatch.dispatch.assessment import State, Status
from airflow_provider_dispatch.dispatch.validation import parse_ref
from airflow_provider_dispatch.hooks.dispatch import DispatchHook
from airflow_provider_dispatch.hooks.errors import airflow_errors
from airflow_provider_dispatch.operators.trainjob import (
    TrainJobHoldOperator,
    TrainJobOpenOperator,
    TrainJobReleaseOperator,
)

WAIT_TIMEOUT = timedelta(hours=1)
log = logging.getLogger(__name__)

#: in a LocalQueue: the label makes the TrainJob Kueue's to admit
MANIFEST = trainjob_manifest(labels={"kueue.x-k8s.io/queue-name": "{{ params.queue }}"})


def current_status() -> Status:
    """dispatch's status of the DAG's TrainJob (read-only: the state, the execution, Kueue's checks)."""
    params = get_current_context()["params"]
    with airflow_errors():
        ref = parse_ref(f"{params['namespace']}/{params['name']}")
        return DispatchHook(KUBERNETES_CONN_ID).get_adapter(read_only=True).inspect(ref)


def show_wait_reason(status: Status) -> list[str]:
    """Log the status as the wait reason when it changed; keep every distinct one in the XCom `wait_reasons`."""
    ti = get_current_context()["ti"]
    reason = f"TrainJob {status.ref} is {status.state.value}: {status.cause}"
    if status.detail:
        reason += "\n" + status.detail
    seen: list[str] = list(ti.xcom_pull(task_ids=ti.task_id, key="wait_reasons") or [])
    if reason not in seen:
        log.info("waiting: %s", reason)
        seen.append(reason)
        ti.xcom_push(key="wait_reasons", value=seen)
    return seen


with example_dag(
    "kueue_mode",
    __doc__,
    tags=("kueue",),
    params={
        "namespace": Param("default", type="string", description="Namespace of the TrainJob and its LocalQueue."),
        "name": Param("queued", type="string", description="Name of the TrainJob the DAG opens (a new one)."),
        "queue": Param("user-queue", type="string", description="The LocalQueue (kueue.x-k8s.io/queue-name)."),
        "runtime": runtime_param(),
        "num_nodes": Param(2, type="integer", minimum=1, description="Pods of the TrainJob (one per node)."),
    },
) as kueue_mode:
    open_trainjob = TrainJobOpenOperator(
        task_id="open", manifest=MANIFEST, kubernetes_conn_id=KUBERNETES_CONN_ID, deferrable=True
    )

    @task.sensor(poke_interval=0.5, timeout=WAIT_TIMEOUT.total_seconds(), mode="poke")
    def wait_admitted(after: str) -> PokeReturnValue:
        """Until the TrainJob runs an execution newer than the one task `after` returned; XCom: it, and every
        wait reason seen (the admission check's messages among them)."""
        before = int(get_current_context()["ti"].xcom_pull(task_ids=after)["admission"])
        status = current_status()
        if status.state is State.RUNNING and status.execution.admission > before:
            log.info("TrainJob %s runs execution %s, admitted by Kueue", status.ref, status.execution.admission)
            reasons = show_wait_reason(status)
            return PokeReturnValue(is_done=True, xcom_value={**status.execution.as_dict(), "wait_reasons": reasons})
        show_wait_reason(status)
        return PokeReturnValue(is_done=False)

    @task.sensor(poke_interval=0.5, timeout=WAIT_TIMEOUT.total_seconds(), mode="poke")
    def wait_suspended() -> PokeReturnValue:
        """Until Kueue has suspended the TrainJob (it is no longer running); XCom: its status."""
        status = current_status()
        show_wait_reason(status)
        if status.state is State.RUNNING:
            return PokeReturnValue(is_done=False)
        summary: dict[str, Any] = {"state": status.state.value, "cause": status.cause, "detail": status.detail}
        return PokeReturnValue(is_done=True, xcom_value=summary)

    hold = TrainJobHoldOperator(task_id="hold", namespace=NAMESPACE, name=NAME, kubernetes_conn_id=KUBERNETES_CONN_ID)
    release = TrainJobReleaseOperator(
        task_id="release", namespace=NAMESPACE, name=NAME, kubernetes_conn_id=KUBERNETES_CONN_ID
    )

    admitted = wait_admitted.override(task_id="wait_admitted")("open")
    readmitted = wait_admitted.override(task_id="wait_readmitted")("wait_admitted")
    open_trainjob >> admitted >> hold >> wait_suspended() >> release >> readmitted
