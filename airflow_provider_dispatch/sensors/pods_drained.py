"""`PodsDrainedSensor`: succeed when no pod of a TrainJob remains, or when every remaining pod ceased.

It is the wait between a hold and a release: the hold suspends the TrainJob, and its pods go by themselves
(their grace period on a reachable node) or never (a frozen or lost node) until the node is deleted or tainted
out-of-service after its shutdown is confirmed (DESIGN §4). The sensor says which of these it is waiting for,
and a timeout is a failure to prove cessation, never an assumption of it.

Each check is `hooks.checks.drain_check` (one consistent read, decided by the dispatch assessment) through a
read-only adapter; the deferrable mode waits in `PodsDrainedTrigger`, which re-checks on watch events.

XCom (the return value) on success::

    {"outcome": "drained" | "ceased", "ref": "ns/name",
     "remaining": [{"pod": ..., "node": ..., "node_state": "Ready=Unknown, out-of-service"}, ...],
     "remaining_count": 312, "node_count": 300,
     "node_states": [{"state": "Ready=Unknown, out-of-service", "nodes": 1, "pods": 1, "first_nodes": ["n-7"]},
                     ...],
     "execution": {"job_id": ..., "submission": ..., "admission": ...},
     "detail": "...", "resource_version": "<pod list resourceVersion>"}

`remaining` is empty when drained; when ceased it names the pods whose processes are proven gone (their objects
are still there, so a release still waits for them: use `accept_ceased=False` to wait for `drained`): the first
ones by name, as many as the report carries (`remaining_count` counts them all, `node_states` gives every
distinct node state). The XCom, like the wait reason, stays within its limit however many pods remain
(`payloads.DRAIN_XCOM_LIMIT`, `payloads.WAIT_REASON_LIMIT`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowSensorTimeout
from airflow.sdk import Context, PokeReturnValue

from airflow_provider_dispatch.dispatch.reasons import WaitReason, compose, pods_line
from airflow_provider_dispatch.hooks.checks import drain_check
from airflow_provider_dispatch.hooks.errors import airflow_errors, exception_for_event
from airflow_provider_dispatch.sensors.base import DispatchSensor
from airflow_provider_dispatch.triggers.pods_drained import PodsDrainedTrigger, remaining_summary


def drain_wait_reason(check: Mapping[str, Any], *, accept_ceased: bool, ref: str) -> tuple[str | None, WaitReason]:
    """The outcome of one check (`DrainCheck.as_dict()`: `drained`, `ceased`, or None to keep waiting) and its wait
    reason (`reasons.WaitReason`; its first line is also what is logged while the reason does not change).

    While it waits, the reason is composed as every wait reason (`dispatch.reasons`): the report's first line
    (what to do about the most urgent node, or what is awaited, and its subject: `explain.urgent`), the lines
    with the command, the permission it needs and the runbook section, the TrainJob and execution waited on, then
    the report's detail (every remaining pod's node state, what would unblock each node). Each part is within its
    limit (`payloads.HEADLINE_ROOM`, `payloads.DETAIL_LIMIT`), so the reason stays within
    `payloads.WAIT_REASON_LIMIT` however many pods remain."""
    report = check["report"]
    ref = str(check.get("ref", ref))
    detail = str(report.get("detail", ""))
    if report.get("drained"):
        return "drained", compose(f"Drained: no pod of TrainJob {ref} remains")
    if accept_ceased and report.get("ceased"):
        first = f"Ceased: every remaining pod of TrainJob {ref} is proven stopped"
        return "ceased", compose(first, details=detail)
    execution = check.get("execution") or {}
    admission = execution.get("admission") if isinstance(execution, Mapping) else None
    first = str(report.get("headline") or "") or (detail.splitlines()[0] if detail else "Waiting for pods to go")
    how = [str(line) for line in report.get("how") or ()]
    return None, compose(first, how, (pods_line(ref, admission, accept_ceased=accept_ceased),), detail)


class PodsDrainedSensor(DispatchSensor):
    """Wait until TrainJob `namespace/name` has no remaining pod, or (with `accept_ceased`) all of them ceased.

    :param accept_ceased: succeed with outcome `ceased` when pods remain but every one is proven gone
        (default). False waits until the pod objects are gone too (`drained`), which is what a release needs.

    Other parameters: `DispatchSensor` (connection, `deferrable`, `recheck_interval`) and `BaseSensorOperator`
    (`mode`, `poke_interval`, `timeout`, `soft_fail`, ...).
    """

    def __init__(self, *, namespace: str, name: str, accept_ceased: bool = True, **kwargs: Any) -> None:
        super().__init__(namespace=namespace, name=name, **kwargs)
        self.accept_ceased = accept_ceased
        self._last_check: Mapping[str, Any] | None = None

    def poke(self, context: Context) -> PokeReturnValue:
        adapter = self.adapter()
        with airflow_errors():
            check = adapter.run(drain_check(self.ref, adapter.operations))
        return self.evaluate(context, check.as_dict())

    def evaluate(self, context: Context, check: Mapping[str, Any]) -> PokeReturnValue:
        """Show the wait reason of one check (`DrainCheck.as_dict()`) and say whether the wait is over."""
        self._last_check = check
        outcome, reason = drain_wait_reason(check, accept_ceased=self.accept_ceased, ref=self.ref)
        self.show_wait_reason(context, reason)
        if outcome is None:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=self.outcome_xcom(outcome, check))

    @staticmethod
    def outcome_xcom(outcome: str, check: Mapping[str, Any]) -> dict[str, Any]:
        report = check["report"]
        return {
            "outcome": outcome,
            "ref": check.get("ref"),
            "remaining": remaining_summary(report),
            "remaining_count": report.get("remaining_count", 0),
            "node_count": report.get("node_count", 0),
            "node_states": report.get("node_states", []),
            "execution": check.get("execution"),
            "detail": report.get("detail"),
            "resource_version": report.get("resource_version"),
        }

    def make_trigger(self, **kwargs: Any) -> PodsDrainedTrigger:
        known = self._last_check["report"].get("fingerprint") if self._last_check is not None else None
        kwargs.setdefault("known_fingerprint", known)
        return PodsDrainedTrigger(self.namespace, self.name, accept_ceased=self.accept_ceased, **kwargs)

    def execute_complete(self, context: Context, event: Mapping[str, Any] | None = None) -> Any:
        """Resume from the trigger: refresh the wait reason; return, defer again (progress), or raise."""
        event = event or {}
        status = event.get("status")
        if status == "error":
            raise exception_for_event(event)
        if not isinstance(event.get("report"), Mapping):
            raise AirflowException(f"PodsDrainedTrigger sent an event this sensor does not know: {status!r}")
        result = self.evaluate(context, event)
        if result.is_done:
            return result.xcom_value
        if status == "timeout":
            raise AirflowSensorTimeout(self.timeout_message(f"Sensor has timed out after {self.timeout:.0f}s"))
        self.defer_wait(context, known_fingerprint=event["report"].get("fingerprint"))

    def timeout_detail(self) -> str:
        if self._last_check is None:
            return (
                f"Cessation was NOT proven for TrainJob {self.ref}: no consistent read of its pods succeeded, so "
                "its previous execution may still run."
            )
        detail = str(self._last_check["report"].get("detail", ""))
        lines = [line.strip().rstrip(".") for line in detail.splitlines() if line.strip()]
        said = ". ".join(lines)
        return f"Cessation was NOT proven for TrainJob {self.ref}: its previous execution may still run. {said}."


__all__ = ["PodsDrainedSensor", "drain_wait_reason"]
