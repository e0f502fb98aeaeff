"""What keeps a TrainJob from finishing: the explanation of a wait for `Complete` or `Failed` (issue 17).

A TrainJob finishes when Trainer writes `Complete` or `Failed`, which it does once its JobSet's Jobs finish.
Some states keep it short of either for as long as nobody acts, and a wait for the outcome must name them, in
the drain check's words (`explain`) and with its remedies:

* pods on a node that is not Ready (a lost or frozen machine): Terminating or not, their kubelet cannot confirm
  that they stopped, so the Job neither counts them failed nor replaces them; the remedy is the drain check's,
  the taint command once the machine's shutdown is confirmed (`explain.remedy`, `explain.unblock_hints`);
* pods Terminating where the node cannot be read (no proof either way) or is already proven gone (PodGC's turn);
* pods Pending, and why, from their conditions (`PodScheduled=False` and its reason: `Unschedulable`,
  `SchedulingGated`) or their containers' waiting reasons (`ImagePullBackOff`, `CreateContainerConfigError`, ...);
* the TrainJob suspended: held by dispatch, or, under Kueue, its Workload not admitted (no quota reserved, an
  admission check not Ready), deactivated or evicted.

Pure: the inputs are what the sensor, the trigger and `dispatch status` read (the TrainJob, the pods of its
execution, their Nodes, the Workload under Kueue); the only clock is `now`, for Terminating pods' deadlines.
`Unfinished.text(limit)` is the explanation within a payload's limit (`payloads.fit`): the first line is short
and complete (what blocks, where, the remedy), the details follow on their own lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import Any, Final

from airflow_provider_dispatch.dispatch import reasons
from airflow_provider_dispatch.dispatch.assessment import Mode, State, Status, admission_checks, is_held, managed
from airflow_provider_dispatch.dispatch.blocking import RemainingPod, node_name_of, remaining_pods
from airflow_provider_dispatch.dispatch.explain import unblock_hints, urgent
from airflow_provider_dispatch.dispatch.nodes import NodeLookup, Presence, Readiness
from airflow_provider_dispatch.dispatch.payloads import (
    HEADLINE_ROOM,
    NAMES_ROOM,
    and_more,
    attention,
    cut,
    fingerprint,
    fit,
)
from airflow_provider_dispatch.dispatch.reasons import Remedy, WaitReason, compose
from airflow_provider_dispatch.dispatch.vocabulary import condition, field, name_of, object_list

#: the pod condition the scheduler writes (`PodScheduled=False` with `Unschedulable` or `SchedulingGated`)
CONDITION_POD_SCHEDULED: Final = "PodScheduled"
#: the Workload conditions Kueue writes (k8s-apis §4.2)
CONDITION_QUOTA_RESERVED: Final = "QuotaReserved"
CONDITION_EVICTED: Final = "Evicted"
#: a waiting reason that is only the kubelet at work, not a problem
STARTING: Final = frozenset({"ContainerCreating", "PodInitializing"})
#: at most this much of a message quoted from the API (a scheduler's or Kueue's): the rest is in `kubectl describe`
QUOTE_ROOM: Final = 300

#: what to do about pods Pending for a reason: the first line's short remedy, then the line below it (`Remedy`)
_PENDING_REMEDIES: Final = {
    "Unschedulable": Remedy(
        "Add capacity or relax their requests or placement",
        note="Add capacity that fits them, or relax their requests, node selector, affinity or tolerations "
        "(the scheduler's message below says what is short).",
        runbook=reasons.OUTCOME_WAITS,
    ),
    "SchedulingGated": Remedy(
        "Find the controller that holds their scheduling gates",
        note="See which gates they carry (kubectl get pod -o yaml) and which controller removes them.",
        runbook=reasons.OUTCOME_WAITS,
    ),
    "ErrImagePull": Remedy("Fix the image name or the pull secret", runbook=reasons.OUTCOME_WAITS),
    "ImagePullBackOff": Remedy("Fix the image name or the pull secret", runbook=reasons.OUTCOME_WAITS),
    "InvalidImageName": Remedy("Fix the image name", runbook=reasons.OUTCOME_WAITS),
    "CreateContainerConfigError": Remedy(
        "Create the ConfigMap or Secret they reference",
        note="Or fix the reference in the runtime or the TrainJob.",
        needs="create configmaps or secrets in its namespace",
        runbook=reasons.OUTCOME_WAITS,
    ),
    "CreateContainerError": Remedy("Fix their command, mounts or security settings", runbook=reasons.OUTCOME_WAITS),
}
_STARTING: Final = ("starting", "not scheduled yet")
#: the urgency of pods that are only starting: nobody has to act on them, so their changes are no progress
STARTING_URGENCY: Final = 9


@dataclass(frozen=True)
class Blocker:
    """One thing that keeps the TrainJob from finishing: a short headline (what to do, or what is awaited, and its
    subject), the lines that say how (`reasons.Remedy.how`), the details, and the `{pod, node, node_state}`
    entries that say whether it changed (`payloads.fingerprint`)."""

    headline: str
    how: tuple[str, ...]
    details: tuple[str, ...]
    entries: tuple[tuple[str, str, str], ...]
    #: lower first (`payloads.attention` for nodes; the TrainJob's own state first of all; pods starting last)
    urgency: int


@dataclass(frozen=True)
class Unfinished:
    """Why a TrainJob that has not finished is still running (or not running at all)."""

    ref: str
    admission: int
    blockers: tuple[Blocker, ...]
    #: the execution's pods that have not finished, by phase (`Pending`, `Running`, ...), and how many Terminate
    phases: tuple[tuple[str, int], ...]
    terminating: int
    #: the node of each unfinished pod and its state (`NodeState.label`): what a node watch compares (as many as
    #: there are nodes, so never in a payload)
    node_states: tuple[tuple[str, str], ...]

    @property
    def first_line(self) -> str:
        """Short and complete: the most urgent blocker's headline, or that the training runs and nothing blocks."""
        if not self.blockers:
            return f"Waiting for the training to finish; nothing blocks it ({self.phases_text})"
        return self.blockers[0].headline

    @property
    def how(self) -> tuple[str, ...]:
        """The lines below the first: the most urgent blocker's how, and how many more things block."""
        if not self.blockers:
            return ()
        more = len(self.blockers) - 1
        noun = "thing blocks" if more == 1 else "things block"
        return (*self.blockers[0].how, *((f"{more:,} more {noun} it: see below.",) if more else ()))

    @property
    def phases_text(self) -> str:
        """`pods: 2 Running`, or that none runs."""
        if not self.phases:
            return "no pod running or pending"
        return "pods: " + ", ".join(f"{count:,} {phase}" for phase, count in self.phases)

    @property
    def pods_line(self) -> str:
        if not self.phases:
            return "none of its pods is running or pending"
        counts = ", ".join(f"{count:,} {phase}" for phase, count in self.phases)
        deleting = f", {self.terminating:,} of them Terminating" if self.terminating else ""
        return f"pods of execution {self.admission} not finished: {counts}{deleting}"

    @property
    def detail_lines(self) -> tuple[str, ...]:
        """What follows the first line and its how: the other blockers' headlines and how, every detail, the
        pods by phase."""
        lines = [line for blocker in self.blockers[1:] for line in (blocker.headline, *blocker.how)]
        lines += [detail for blocker in self.blockers for detail in blocker.details]
        if self.blockers:
            lines.append(self.pods_line)
        return tuple(lines)

    def reason(self, *about: str, limit: int | None = None) -> WaitReason:
        """The explanation as a wait reason (`reasons.compose`): the first line, its how, `about` (who waits),
        then the details; with `limit`, the details are the leading lines that fit in what is left of it."""
        details = "\n".join(self.detail_lines)
        if limit is not None:
            head = len(compose(self.first_line, self.how, about).text(None))
            lines = self.detail_lines
            details = fit(lines, len(lines), limit - head - 1, separator="\n", more=_left_out)[0]
        return compose(self.first_line, self.how, about, details)

    def text(self, limit: int | None = None) -> str:
        """The first line, its how, then the other headlines, the details and the pods, one per line; with
        `limit`, the leading lines that fit in `limit` characters (`payloads.fit`) and a note of how many were
        left out."""
        return self.reason(limit=limit).text(limit)

    @cached_property
    def fingerprint(self) -> str:
        """Equal exactly when the same things block in the same way: what counts as progress for a trigger.

        Pods that are only starting (`STARTING_URGENCY`: nothing to do) are left out: their start is the commonest
        change of a training just opened, changes no decision and asks nothing of anyone, and a task woken for it
        right after its deferral meets Airflow's stale executor event (apache/airflow#72716). The trigger logs it."""
        entries = (
            {"pod": pod, "node": node, "node_state": state}
            for blocker in self.blockers
            if blocker.urgency < STARTING_URGENCY
            for pod, node, state in blocker.entries
        )
        return fingerprint(entries)

    def as_dict(self, limit: int) -> dict[str, Any]:
        """JSON for the trigger's event and the sensor: the first line, its how, the rest (`detail`) within what
        `limit` leaves, the fingerprint."""
        reason = self.reason(limit=limit)
        return {
            "headline": reason.first,
            "how": list(reason.how),
            "detail": reason.details,
            "blockers": len(self.blockers),
            "fingerprint": self.fingerprint,
        }


def _left_out(count: int) -> str:
    return f"({count:,} more lines left out)"


# --- pods --------------------------------------------------------------------------------------------------


def _stuck(pod: RemainingPod) -> bool:
    """On a node that is not Ready (whatever else), or Terminating where cessation cannot be proven or already is:
    what the drain check would explain. A pod on a Ready node, or never scheduled, is the kubelet's or the
    scheduler's to move on."""
    node = pod.node
    if node.presence is Presence.UNSCHEDULED:
        return False
    if node.presence is Presence.NOT_READABLE:
        return pod.terminating
    if node.presence in (Presence.GONE, Presence.DELETED_RECENTLY):
        return True
    return node.ready is not Readiness.TRUE


def _node_blockers(pods: Sequence[RemainingPod], now: datetime | None) -> list[Blocker]:
    groups: dict[str, list[RemainingPod]] = {}
    for pod in pods:
        groups.setdefault(pod.node.name or "", []).append(pod)
    blockers = []
    for members in groups.values():
        node = members[0].node
        lost = not node.ceased  # ceased: PodGC's turn, the headline says it all
        first, how = urgent(members)
        blockers.append(
            Blocker(
                headline=first,
                how=how,
                details=unblock_hints(members, now=now) if lost else (),
                entries=tuple((p.name, node.name or "", node.label) for p in members),
                urgency=attention(node),
            )
        )
    return blockers


def pending_reason(pod: Mapping[str, Any]) -> tuple[str, str]:
    """Why a Pending pod is pending, and the message that says more: the scheduler's `PodScheduled=False`
    (reason `Unschedulable`, `SchedulingGated`), else the first container waiting for a reason other than being
    created, else `starting` (bound, containers being created) or `not scheduled yet`."""
    scheduled = condition(pod, CONDITION_POD_SCHEDULED)
    if scheduled is not None and scheduled.get("status") == "False":
        return str(scheduled.get("reason") or "Unschedulable"), str(scheduled.get("message") or "")
    statuses = [*object_list(pod, "status", "initContainerStatuses"), *object_list(pod, "status", "containerStatuses")]
    for status in statuses:
        waiting = field(status, "state", "waiting")
        if isinstance(waiting, Mapping) and waiting.get("reason") and waiting.get("reason") not in STARTING:
            return str(waiting["reason"]), str(waiting.get("message") or "")
    return ("starting" if node_name_of(pod) else "not scheduled yet"), ""


def _pending_blockers(pods: Sequence[Mapping[str, Any]]) -> list[Blocker]:
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for pod in sorted(pods, key=name_of):
        reason, message = pending_reason(pod)
        by_reason.setdefault(reason, []).append((name_of(pod), message))
    blockers = []
    for reason, members in by_reason.items():
        names = [name for name, _ in members]
        noun = "pod " if len(names) == 1 else "pods "
        listed = noun + fit(names, len(names), NAMES_ROOM, more=and_more)[0]
        count = f"{len(names):,} pod" if len(names) == 1 else f"{len(names):,} pods"
        starting = reason in _STARTING
        if starting:
            remedy = Remedy(
                f"Waiting for {count} to start ({reason})",
                note="Nothing to do yet: the scheduler and the kubelet are at work.",
            )
            first = remedy.action
        else:
            fallback = Remedy("See their events (kubectl describe pod)", runbook=reasons.OUTCOME_WAITS)
            remedy = _PENDING_REMEDIES.get(reason, fallback)
            first = f"{remedy.action}: {count} Pending ({reason})"
        quoted = [(name, cut(message, QUOTE_ROOM)) for name, message in members if message]
        blockers.append(
            Blocker(
                headline=cut(first, HEADLINE_ROOM),
                how=remedy.how,
                details=(f"{listed} Pending ({reason})", *_split_details(quoted, reason)),
                entries=tuple((name, "", f"Pending: {reason}") for name in names),
                urgency=STARTING_URGENCY if starting else 7,
            )
        )
    return blockers


def _split_details(quoted: Sequence[tuple[str, str]], reason: str) -> tuple[str, ...]:
    """One line per distinct message (pods of a gang usually share it): `<pods>: <reason>: <message>`."""
    by_message: dict[str, list[str]] = {}
    for name, message in quoted:
        by_message.setdefault(message, []).append(name)
    lines = []
    for message, names in by_message.items():
        noun = "pod " if len(names) == 1 else "pods "
        lines.append(f"{noun}{fit(names, len(names), NAMES_ROOM, more=and_more)[0]}: {reason}: {message}")
    return tuple(lines)


# --- the TrainJob and its Workload -----------------------------------------------------------------------------


def _true(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    entry = condition(obj, kind)
    return entry if entry is not None and entry.get("status") == "True" else None


def _said(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return ""
    reason, message = str(entry.get("reason") or ""), cut(str(entry.get("message") or ""), QUOTE_ROOM)
    return ": ".join(part for part in (reason, message) if part)


def _workload_blocker(ref: str, trainjob: Mapping[str, Any], workload: Mapping[str, Any] | None) -> Blocker | None:
    """Under Kueue: the Workload evicted, deactivated, not admitted, or waiting for an admission check."""
    held = is_held(trainjob)
    if workload is None:
        if not held:
            return None
        return _trainjob_blocker(
            Remedy(
                "Check that its LocalQueue exists and Kueue runs: the TrainJob has no Kueue Workload yet",
                note="Kueue creates a Workload for a TrainJob with the kueue.x-k8s.io/queue-name label, then admits "
                "it.",
                runbook=reasons.OUTCOME_WAITS,
            ),
            f"TrainJob {ref} is suspended and has no Kueue Workload yet",
            kind="no workload",
        )
    name = name_of(workload)
    evicted = _true(workload, CONDITION_EVICTED)
    if evicted is not None:
        return _trainjob_blocker(
            Remedy(
                f"Waiting for Kueue to admit Workload {name} again: it was evicted "
                f"({evicted.get('reason') or 'no reason given'})",
                note="Kueue suspends the TrainJob and queues it again; it runs again once admitted.",
                runbook=reasons.OUTCOME_WAITS,
            ),
            f"Workload {name} Evicted: {_said(evicted)}",
            kind=f"evicted {evicted.get('reason')}",
        )
    if not held:
        return None
    if field(workload, "spec", "active") is False:
        return _trainjob_blocker(
            Remedy(
                f"Release the TrainJob: its Workload {name} is deactivated (held by dispatch)",
                note="dispatch holds a TrainJob under Kueue by deactivating its Workload (spec.active=false).",
                runbook=reasons.OUTCOME_WAITS,
            ),
            kind="deactivated",
        )
    quota = condition(workload, CONDITION_QUOTA_RESERVED)
    if quota is None:
        return _trainjob_blocker(
            Remedy(
                f"Waiting for Kueue to consider Workload {name} (queued, no QuotaReserved yet)",
                note="It usually does within seconds; if not, check that Kueue runs and its ClusterQueue is active.",
                runbook=reasons.OUTCOME_WAITS,
            ),
            f"Workload {name} has no QuotaReserved condition yet",
            kind="not considered",
        )
    if quota.get("status") != "True":
        return _trainjob_blocker(
            Remedy(
                f"Free or add quota in its ClusterQueue: Workload {name} has no quota reserved",
                note="Kueue's message below says what is short.",
                needs="update clusterqueues",
                runbook=reasons.OUTCOME_WAITS,
            ),
            f"Workload {name} QuotaReserved=False: {_said(quota) or 'Kueue has not considered it yet'}",
            kind=f"no quota {_said(quota)[:80]}",
        )
    pending = [check for check in admission_checks(workload) if check.state != "Ready"]
    if pending:
        first = pending[0]
        said = first.message.splitlines()[0] if first.message.strip() else ""
        return _trainjob_blocker(
            Remedy(
                said or f"Waiting for admission check {first.name} of Workload {name} ({first.state})",
                note=f"Workload {name} waits for admission check {first.name} ({first.state}).",
            ),
            *(check.line for check in pending),
            kind=f"check {first.name} {first.state}",
        )
    return _trainjob_blocker(
        Remedy(f"Waiting for Kueue to unsuspend the TrainJob: Workload {name} is admitted"),
        kind="admitted",
    )


def _trainjob_blocker(remedy: Remedy, *details: str, kind: str) -> Blocker:
    return Blocker(
        headline=cut(remedy.action, HEADLINE_ROOM),
        how=remedy.how,
        details=tuple(details),
        entries=(("", "", kind),),
        urgency=-1,
    )


def explain_unfinished(
    trainjob: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, NodeLookup],
    *,
    workload: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Unfinished:
    """Why TrainJob `trainjob` has not finished. `pods` are its execution's pods (already selected), `nodes`
    what was read of their nodes (`programs.read_nodes`: a node not in it reads as not readable), `workload` its
    Kueue Workload (None in plain mode, or when Kueue has not made one)."""
    obj = managed(trainjob)
    ref = str(obj.ref)
    pods = list(pods)
    unfinished = remaining_pods(pods, nodes)
    blockers: list[Blocker] = []
    if obj.mode is Mode.KUEUE:
        found = _workload_blocker(ref, trainjob, workload)
        blockers += [found] if found is not None else []
    elif is_held(trainjob):
        blockers.append(
            _trainjob_blocker(
                Remedy(
                    "Release the TrainJob to run it: it is held (suspended) and runs nothing",
                    note="dispatch holds a TrainJob with spec.suspend=true: its pods are deleted and none is created "
                    "until a release admits the next execution (TrainJobReleaseOperator).",
                    runbook=reasons.OUTCOME_WAITS,
                ),
                f"TrainJob {ref} is suspended (held)",
                kind="held",
            )
        )
    stuck = [pod for pod in unfinished if _stuck(pod)]
    stuck_names = {pod.name for pod in stuck}
    blockers += _node_blockers(stuck, now)
    pending = [pod for pod in pods if field(pod, "status", "phase") == "Pending" and name_of(pod) not in stuck_names]
    blockers += _pending_blockers(pending)
    blockers.sort(key=lambda blocker: blocker.urgency)  # stable: the order within one urgency stays
    phases: dict[str, int] = {}
    for pod in unfinished:
        phases[pod.phase] = phases.get(pod.phase, 0) + 1
    node_states = {pod.node.name: pod.node.label for pod in unfinished if pod.node.name}
    return Unfinished(
        ref=ref,
        admission=obj.admission,
        blockers=tuple(blockers),
        phases=tuple(sorted(phases.items())),
        terminating=sum(1 for pod in unfinished if pod.terminating),
        node_states=tuple(sorted(node_states.items())),
    )


def with_unfinished(
    status: Status,
    trainjob: Mapping[str, Any],
    pods: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, NodeLookup],
    *,
    workload: Mapping[str, Any] | None = None,
    now: datetime | None = None,
) -> Status:
    """`status` (`assessment.assess`) with, for a running TrainJob, what keeps it from finishing put first in its
    detail, in full (`dispatch status` prints every line), as every wait reason says what to do first
    (`dispatch.reasons`); other states are returned as they are. `pods` are the pods the drain check read
    (selected again here)."""
    if status.state is not State.RUNNING:
        return status
    why = explain_unfinished(trainjob, managed(trainjob).selection.select(pods), nodes, workload=workload, now=now)
    return replace(status, detail=why.reason(*status.detail.splitlines()).text(None))


__all__ = ["Blocker", "Unfinished", "explain_unfinished", "pending_reason", "with_unfinished"]
