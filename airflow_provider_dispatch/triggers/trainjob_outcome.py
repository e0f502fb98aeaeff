"""`TrainJobOutcomeTrigger`: wait until a TrainJob finished (condition `Complete` or `Failed` True).

Subscribes to the shared WATCHes (`triggers.hub`) of the namespace's TrainJobs, of its pods and of the nodes, and
wakes on an event that matters (this TrainJob; a pod of its execution; a node of one of those pods whose state,
as DESIGN §7 names it, changed), on a relist, or at the jittered safety-net interval; then checks with
`hooks.checks.outcome_check` (the TrainJob; while it has not finished, its execution's pods in one consistent
read, their Nodes and its Kueue Workload, explained by `unfinished.explain_unfinished`) and decides with
`hooks.checks.outcome_decision`. With `admission`, only that execution's outcome counts: a lower current
admission number waits, a higher one is an error (superseded, a refusal).

Events (payload `status`, plus `OutcomeCheck.as_dict()`: `ref`, `outcome`, `reason`, `message`, `execution`,
`admission`, `resource_version`, and while not finished `waiting`, the explanation within its limit):

* `finished`;
* `progress`: what keeps the TrainJob from finishing changed from what the worker last showed
  (`known_fingerprint`, the explanation's `fingerprint`): the worker shows the new wait reason and defers again,
  so the reason in the UI follows the cluster while the sensor is deferred. The kwargs carry only the
  fingerprint (64 characters). Not before `quiet_until` (`triggers.base`): a change inside the quiet period is
  logged, and sent when the period ends if it still stands;
* `timeout`, `error` (see `triggers.base`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, ClassVar

from airflow_provider_dispatch.dispatch.nodes import NodeRead, node_state
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.vocabulary import NODE, POD, TRAINJOB
from airflow_provider_dispatch.hooks.checks import OutcomeCheck, outcome_check, outcome_decision, superseded_error
from airflow_provider_dispatch.triggers.base import DispatchTrigger
from airflow_provider_dispatch.triggers.hub import SharedConnection
from airflow_provider_dispatch.triggers.watch import Changes


def waiting_fingerprint(check: OutcomeCheck) -> str | None:
    """The fingerprint of what keeps the TrainJob from finishing (None when finished or not explained)."""
    found = (check.waiting or {}).get("fingerprint")
    return found if isinstance(found, str) else None


class TrainJobOutcomeTrigger(DispatchTrigger):
    """Wait until TrainJob `namespace/name` has `Complete` or `Failed` (of execution `admission`, if given).

    :param admission: the admission number A whose outcome is awaited; None: whatever execution runs.
    :param known_fingerprint: the `waiting.fingerprint` of the check the worker last showed; a check whose
        explanation differs yields `progress`. None: the first check sets it, and only later changes count.
    :param report_progress: yield `progress` on changes (else only the final outcomes).

    Other parameters: `DispatchTrigger`.
    """

    outcomes: ClassVar[tuple[str, ...]] = ("finished", "progress")

    def __init__(
        self,
        namespace: str,
        name: str,
        *,
        admission: int | None = None,
        known_fingerprint: str | None = None,
        report_progress: bool = True,
        **common: Any,
    ) -> None:
        super().__init__(namespace, name, **common)
        if admission is not None and (isinstance(admission, bool) or not isinstance(admission, int) or admission < 1):
            raise ValueError(f"admission must be a positive integer or None, not {admission!r}")
        self.admission = admission
        self.known_fingerprint = known_fingerprint
        self.report_progress = report_progress
        # What the last check learnt, so that watch events can be judged: whose pods, which nodes in which state.
        self._selection: Selection | None = None
        self._node_states: dict[str, str] = {}

    def own_kwargs(self) -> dict[str, Any]:
        return {
            "admission": self.admission,
            "known_fingerprint": self.known_fingerprint,
            "report_progress": self.report_progress,
        }

    # --- what wakes it -------------------------------------------------------------------------------------

    def trainjob_matters(self, kind: str, trainjob: Mapping[str, Any]) -> bool:
        metadata = trainjob.get("metadata")
        return isinstance(metadata, Mapping) and metadata.get("name") == self.name

    def pod_matters(self, kind: str, pod: Mapping[str, Any]) -> bool:
        """A pod of the execution last seen (before the first check, none: the TrainJob's event comes first)."""
        return self._selection is not None and self._selection.matches(pod)

    def node_matters(self, kind: str, node: Mapping[str, Any]) -> bool:
        """A node of an unfinished pod whose state (DESIGN §7) changed."""
        metadata = node.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not isinstance(name, str) or name not in self._node_states:
            return False
        return node_state(name, NodeRead.GONE if kind == "DELETED" else node).label != self._node_states[name]

    # --- the decision --------------------------------------------------------------------------------------

    def learn(self, check: OutcomeCheck) -> None:
        self._selection = check.selection
        self._node_states = dict(check.node_states)

    async def wait(self, shared: SharedConnection) -> dict[str, Any]:
        changes = Changes()
        known = self.known_fingerprint
        held_back: str | None = None  # the change last logged as held back by the quiet period
        async with contextlib.AsyncExitStack() as watches:
            for coords, namespace, matters, label in (
                (TRAINJOB, self.namespace, self.trainjob_matters, f"trainjobs in {self.namespace}"),
                (POD, self.namespace, self.pod_matters, f"pods in {self.namespace}"),
                (NODE, None, self.node_matters, "nodes"),
            ):
                await watches.enter_async_context(shared.watching(coords, namespace, matters, changes, label))
            while True:
                seen = changes.version  # taken before the read: a change during it wakes the next wait
                check = await self.checked(shared, lambda: outcome_check(self.ref, shared.adapter.operations))
                self.learn(check)
                decision = outcome_decision(check, self.admission)
                if decision == "finished":
                    return {"status": "finished", **check.as_dict()}
                if decision == "superseded" and self.admission is not None:
                    raise superseded_error(check, self.admission)
                current = waiting_fingerprint(check)
                changed = self.report_progress and known is not None and current is not None and current != known
                quiet = self.quiet_left()
                if changed and quiet <= 0:
                    return {"status": "progress", **check.as_dict()}
                known = current if known is None else known
                wait = self.next_wait()
                if wait <= 0:
                    return {"status": "timeout", **check.as_dict()}
                headline = (check.waiting or {}).get("headline") or "Waiting for the TrainJob to finish"
                if changed and current != held_back:
                    held_back = current
                    self.log.info(
                        "dispatch: TrainJob %s: what keeps it from finishing changed (%s); the task hears of it in "
                        "%.0fs, when the quiet period after its deferral is over",
                        self.ref,
                        headline,
                        quiet,
                    )
                if changed:
                    wait = min(wait, quiet)
                self.log.info(
                    "%s (dispatch: TrainJob %s runs execution %s; the trigger waits for a change, full re-check in "
                    "%.0fs)",
                    headline,
                    self.ref,
                    check.execution.admission,
                    wait,
                )
                reason = await changes.wait(seen, wait)
                self.log.info("dispatch: re-checking TrainJob %s (%s)", self.ref, reason or "periodic re-check")


__all__ = ["TrainJobOutcomeTrigger", "waiting_fingerprint"]
