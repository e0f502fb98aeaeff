"""`TrainJobOutcomeTrigger`: wait until a TrainJob finished (condition `Complete` or `Failed` True).

Subscribes to the shared WATCH of the namespace's TrainJobs (`triggers.hub`) and wakes on an event for this
name, on a relist, or at the jittered safety-net interval; then reads the TrainJob (`hooks.checks.outcome_check`,
one GET) and decides with `hooks.checks.outcome_decision`. With `admission`, only that execution's outcome
counts: a lower current admission number waits, a higher one is an error (superseded, a refusal).

Events (payload `status`, plus `OutcomeCheck.as_dict()`: `ref`, `outcome`, `reason`, `message`, `execution`,
`admission`, `resource_version`): `finished`, `timeout`, `error` (see `triggers.base`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from airflow_provider_dispatch.dispatch.vocabulary import TRAINJOB
from airflow_provider_dispatch.hooks.checks import outcome_check, outcome_decision, superseded_error
from airflow_provider_dispatch.triggers.base import DispatchTrigger
from airflow_provider_dispatch.triggers.hub import SharedConnection
from airflow_provider_dispatch.triggers.watch import Changes


class TrainJobOutcomeTrigger(DispatchTrigger):
    """Wait until TrainJob `namespace/name` has `Complete` or `Failed` (of execution `admission`, if given).

    :param admission: the admission number A whose outcome is awaited; None: whatever execution runs.

    Other parameters: `DispatchTrigger`.
    """

    outcomes: ClassVar[tuple[str, ...]] = ("finished",)

    def __init__(self, namespace: str, name: str, *, admission: int | None = None, **common: Any) -> None:
        super().__init__(namespace, name, **common)
        if admission is not None and (isinstance(admission, bool) or not isinstance(admission, int) or admission < 1):
            raise ValueError(f"admission must be a positive integer or None, not {admission!r}")
        self.admission = admission

    def own_kwargs(self) -> dict[str, Any]:
        return {"admission": self.admission}

    def trainjob_matters(self, kind: str, trainjob: Mapping[str, Any]) -> bool:
        metadata = trainjob.get("metadata")
        return isinstance(metadata, Mapping) and metadata.get("name") == self.name

    async def wait(self, shared: SharedConnection) -> dict[str, Any]:
        changes = Changes()
        label = f"trainjobs in {self.namespace}"
        async with shared.watching(TRAINJOB, self.namespace, self.trainjob_matters, changes, label):
            while True:
                seen = changes.version
                check = await self.checked(shared, lambda: outcome_check(self.ref))
                decision = outcome_decision(check, self.admission)
                if decision == "finished":
                    return {"status": "finished", **check.as_dict()}
                if decision == "superseded" and self.admission is not None:
                    raise superseded_error(check, self.admission)
                wait = self.next_wait()
                if wait <= 0:
                    return {"status": "timeout", **check.as_dict()}
                awaited = f"execution {self.admission}" if self.admission is not None else "its execution"
                self.log.info(
                    "dispatch: TrainJob %s runs execution %s and has not finished; waiting for %s to finish "
                    "(full re-check in %.0fs)",
                    self.ref,
                    check.execution.admission,
                    awaited,
                    wait,
                )
                reason = await changes.wait(seen, wait)
                self.log.info("dispatch: re-checking TrainJob %s (%s)", self.ref, reason or "periodic re-check")


__all__ = ["TrainJobOutcomeTrigger"]
