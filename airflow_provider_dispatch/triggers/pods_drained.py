"""`PodsDrainedTrigger`: wait until no pod of a TrainJob remains, or (if accepted) all remaining ones ceased.

How it waits (DESIGN §8; research airflow.md §3):

1. subscribe to the shared WATCH of the namespace's pods and of the nodes (`triggers.hub`: one of each per
   connection in the triggerer, whatever the number of triggers), and with `stop_when_running` of the
   namespace's TrainJobs;
2. check with one consistent read (`hooks.checks.drain_check`: the TrainJob, its pods by both selections in a
   quorum read, their nodes); the decision is the dispatch assessment's (`DrainReport.drained`/`.ceased`);
3. if it is not decided, wait until a watch event that matters arrives (a pod of this object changed, a node
   of a remaining pod changed its state as DESIGN §7 names it, or a watch relisted), or until the jittered
   safety-net interval `recheck_interval` passed, or the deadline; then check again from step 2.

The watch only wakes the trigger: every event it yields comes from a consistent read, never from the watch's
objects. Events (payload `status`, plus the check as `DrainCheck.as_dict()`: `ref`, `report`, `execution`,
`held`; at most `payloads.TRIGGER_EVENT_LIMIT` characters of JSON however many pods remain: the report names the
first pods and counts them all, `DrainReport.as_dict`):

* `drained`: no pod remains;
* `ceased`: pods remain but every one is proven gone (only with `accept_ceased`);
* `progress`: the remaining set or a node state differs from the one the worker last showed (`known_fingerprint`,
  the report's `fingerprint`): the worker refreshes its wait reason and defers again. The kwargs carry only that
  fingerprint (64 characters), never the pods, so they stay the same size across any number of re-deferrals.
  Not before `quiet_until` (`triggers.base`): a change inside the quiet period is logged, and sent when the
  period ends if it still stands;
* `running`: the TrainJob is no longer held (only with `stop_when_running`: a release that waits learns that
  someone else admitted it, and returns that execution);
* `timeout` (`deadline` passed) and `error` (see `triggers.base`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, ClassVar

from airflow_provider_dispatch.dispatch.nodes import NodeRead, node_state
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.vocabulary import NODE, POD, TRAINJOB
from airflow_provider_dispatch.hooks.checks import DrainCheck, drain_check
from airflow_provider_dispatch.triggers.base import DispatchTrigger
from airflow_provider_dispatch.triggers.hub import SharedConnection
from airflow_provider_dispatch.triggers.watch import Changes


def remaining_summary(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`[{pod, node, node_state}, ...]` of the pods a `DrainReport.as_dict()` names (the first ones by name, all of
    them when few remain), sorted: the sensor's XCom view. `remaining_count` and `node_states` count them all."""
    pods = report.get("remaining") or []
    summary = [
        {"pod": str(pod.get("name")), "node": pod.get("node"), "node_state": pod.get("node_state")}
        for pod in pods
        if isinstance(pod, Mapping)
    ]
    return sorted(summary, key=lambda entry: (str(entry["pod"]), str(entry["node"])))


class PodsDrainedTrigger(DispatchTrigger):
    """Wait until no pod of TrainJob `namespace/name` remains (or all remaining ceased, with `accept_ceased`).

    :param accept_ceased: also end (`ceased`) when every remaining pod is proven gone; False waits for
        `drained` (a release needs the pod objects gone, not only their processes).
    :param known_fingerprint: the `fingerprint` of the report the worker last showed; a check whose remaining set
        (pods, their nodes, the nodes' states) differs yields `progress`. None: the first check sets it, and only
        later changes count.
    :param report_progress: yield `progress` on changes (else only the final outcomes).
    :param stop_when_running: end with `running` when the TrainJob is no longer held.

    Other parameters: `DispatchTrigger`.
    """

    outcomes: ClassVar[tuple[str, ...]] = ("drained", "ceased", "progress", "running")

    def __init__(
        self,
        namespace: str,
        name: str,
        *,
        accept_ceased: bool = True,
        known_fingerprint: str | None = None,
        report_progress: bool = True,
        stop_when_running: bool = False,
        **common: Any,
    ) -> None:
        super().__init__(namespace, name, **common)
        self.accept_ceased = accept_ceased
        self.known_fingerprint = known_fingerprint
        self.report_progress = report_progress
        self.stop_when_running = stop_when_running
        # What the last check learnt, so that watch events can be judged: whose pods, which nodes in which state.
        self._selection: Selection | None = None
        self._node_states: dict[str, str] = {}

    def own_kwargs(self) -> dict[str, Any]:
        return {
            "accept_ceased": self.accept_ceased,
            "known_fingerprint": self.known_fingerprint,
            "report_progress": self.report_progress,
            "stop_when_running": self.stop_when_running,
        }

    # --- what wakes it -------------------------------------------------------------------------------------

    def pod_matters(self, kind: str, pod: Mapping[str, Any]) -> bool:
        """A pod event matters when the pod is this object's (either selection); before the first check, any."""
        return self._selection is None or self._selection.matches(pod)

    def node_matters(self, kind: str, node: Mapping[str, Any]) -> bool:
        """A node event matters when the node holds a remaining pod and its state (DESIGN §7), or how long it has
        been Ready, changed (`NodeState.change_key`)."""
        metadata = node.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if not isinstance(name, str) or name not in self._node_states:
            return False
        state = node_state(name, NodeRead.GONE if kind == "DELETED" else node)
        return state.change_key != self._node_states[name]

    # --- the decision --------------------------------------------------------------------------------------

    def decide(self, check: DrainCheck, known: str | None) -> dict[str, Any] | None:
        """The event payload for this check, or None to keep waiting. The report decides; this only routes.

        `known` is the fingerprint of the remaining set last shown (None: nothing shown yet)."""
        report = check.report
        status: str | None = None
        if self.stop_when_running and not check.held:
            status = "running"
        elif report.drained:
            status = "drained"
        elif self.accept_ceased and report.ceased:
            status = "ceased"
        elif self.changed(check, known) and self.quiet_left() <= 0:
            status = "progress"
        return None if status is None else {"status": status, **check.as_dict()}

    def changed(self, check: DrainCheck, known: str | None) -> bool:
        """The remaining set differs from the one last shown (progress, when it is reported)."""
        return self.report_progress and known is not None and check.report.fingerprint != known

    def trainjob_matters(self, kind: str, trainjob: Mapping[str, Any]) -> bool:
        metadata = trainjob.get("metadata")
        return isinstance(metadata, Mapping) and metadata.get("name") == self.name

    async def wait(self, shared: SharedConnection) -> dict[str, Any]:
        changes = Changes()
        known = self.known_fingerprint
        held_back: str | None = None  # the change last logged as held back by the quiet period
        async with contextlib.AsyncExitStack() as watches:
            await watches.enter_async_context(
                shared.watching(POD, self.namespace, self.pod_matters, changes, f"pods in {self.namespace}")
            )
            await watches.enter_async_context(shared.watching(NODE, None, self.node_matters, changes, "nodes"))
            if self.stop_when_running:  # a release elsewhere shows on the TrainJob before any pod exists
                await watches.enter_async_context(
                    shared.watching(
                        TRAINJOB, self.namespace, self.trainjob_matters, changes, f"trainjobs in {self.namespace}"
                    )
                )
            while True:
                seen = changes.version  # taken before the read: a change during it wakes the next wait
                check = await self.checked(shared, lambda: drain_check(self.ref, shared.adapter.operations))
                self._selection = check.selection
                self._node_states = {p.node.name: p.node.change_key for p in check.report.remaining if p.node.name}
                payload = self.decide(check, known)
                if payload is not None:
                    return payload
                if known is None:
                    known = check.report.fingerprint
                wait = self.next_wait()
                if wait <= 0:
                    return {"status": "timeout", **check.as_dict()}
                if self.changed(check, known):  # held back by the quiet period after the deferral
                    quiet = self.quiet_left()
                    if check.report.fingerprint != held_back:
                        held_back = check.report.fingerprint
                        self.log.info(
                            "dispatch: TrainJob %s: the remaining pods changed (%s); the task hears of it in %.0fs, "
                            "when the quiet period after its deferral is over",
                            self.ref,
                            check.report.headline,
                            quiet,
                        )
                    wait = min(wait, quiet)
                self.log.info(
                    "%s (dispatch: TrainJob %s; the trigger waits for a pod or node change, full re-check in %.0fs)",
                    check.report.headline,
                    self.ref,
                    wait,
                )
                reason = await changes.wait(seen, wait)
                self.log.info("dispatch: re-checking TrainJob %s (%s)", self.ref, reason or "periodic re-check")


__all__ = ["PodsDrainedTrigger", "remaining_summary"]
