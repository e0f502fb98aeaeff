"""Cause texts and what would unblock them (DESIGN §7, anchors §8.6-8.7).

The explanation must let a person act without kubectl: it names each remaining pod and its node with the node
state, says why the pod still counts, what event would release it, and what the person can do. For a lost node
it gives the exact taint command, with the instruction to confirm power-off first and to remove the taint
afterwards. It never suggests deleting pods by force: that removes the pod object, not its processes, and
would defeat the rule (anchors §0.5).

Pure text: the only clock is the `now` parameter, used to say how far away a grace-period deadline is.

Two lengths. For a person at `dispatch status` (`assessment.assess`) every pod and every node is named. For
everything that is stored or sent (the drain report's detail, the wait reasons, the `PodsRemainError` message,
the Kueue admission check message) the texts are cut to their payload's limit by `payloads.fit` (`limit=`): the
first pods by name, the census of every node state when pods are left out, and the explanations of the first
nodes, one node of each state first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from airflow_provider_dispatch.dispatch import reasons
from airflow_provider_dispatch.dispatch.blocking import Blocking, RemainingPod
from airflow_provider_dispatch.dispatch.nodes import (
    DEFAULT_GRACE_SECONDS,
    NodeState,
    Presence,
    Readiness,
    confirming_seconds,
)
from airflow_provider_dispatch.dispatch.payloads import (
    FIRST_LINE_ROOM,
    GLANCE_NAMES_ROOM,
    HEADLINE_ROOM,
    KUEUE_MESSAGE_LIMIT,
    NAMES_ROOM,
    WAIT_REASON_LIMIT,
    and_more,
    attention,
    by_name,
    census,
    cut,
    fit,
)
from airflow_provider_dispatch.dispatch.reasons import Remedy, WaitReason, compose
from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE, TAINT_OUT_OF_SERVICE_VALUE, parse_time


def taint_command(node: str) -> str:
    """The command that declares a node's shutdown confirmed (non-graceful node shutdown, k8s-apis §5.4)."""
    return f"kubectl taint node {node} {TAINT_OUT_OF_SERVICE}={TAINT_OUT_OF_SERVICE_VALUE}:NoExecute"


def untaint_command(node: str) -> str:
    return f"kubectl taint node {node} {TAINT_OUT_OF_SERVICE}-"


def pod_on_node(pod: RemainingPod) -> str:
    """`<pod> on <node> (<node state>)`; a pod never scheduled reads `<pod> on no node (not scheduled)`."""
    if pod.node.presence is Presence.UNSCHEDULED:
        return f"{pod.name} on no node ({pod.node.label})"
    return f"{pod.name} on {pod.node.name} ({pod.node.label})"


REMAINING_HEAD = "remaining pods: "
#: the Kueue admission check message's line of remaining pods, below its first line and remedy
KUEUE_REMAINING_HEAD = "pods of the previous execution remain: "


def _remaining_line(pods: Sequence[RemainingPod], room: int | None) -> tuple[str, int]:
    """The remaining-pods line and how many pods it names (all, without `room`)."""
    items = (pod_on_node(p) for p in pods)
    if room is None:
        return REMAINING_HEAD + ", ".join(items), len(pods)
    listed, shown = fit(items, len(pods), room - len(REMAINING_HEAD), more=and_more)
    return REMAINING_HEAD + listed, shown


def remaining_line(pods: Sequence[RemainingPod], room: int | None = None) -> str:
    """`remaining pods: <pod> on <node> (<node state>), ...` (DESIGN §7); with `room`, the first pods that fit in
    `room` characters, then `and <N> more`."""
    return _remaining_line(pods, room)[0]


def kueue_waiting_message(pods: Sequence[RemainingPod], limit: int = KUEUE_MESSAGE_LIMIT) -> str:
    """The admission check message while pods remain (DESIGN §6), within `limit` characters, composed as every
    wait reason is (`reasons`): the remedy for the most urgent node first (`urgent`), its command, permission and
    runbook section, then `pods of the previous execution remain: <pod> on <node> (<node state>), ...`; when not
    all fit, the first pods by name, `and <N> more`, then the census of every node state."""
    first, how = urgent(pods)
    head = compose(first, how).text(None) + "\n" + KUEUE_REMAINING_HEAD
    ordered = by_name(pods)
    listed, shown = fit((pod_on_node(p) for p in ordered), len(ordered), limit - len(head))
    if shown == len(ordered):
        return head + listed
    tail = "; " + census(ordered).line
    listed, _ = fit((pod_on_node(p) for p in ordered), len(ordered), limit - len(head) - len(tail), more=and_more)
    return head + listed + tail


def admission_check_line(name: str, state: str, message: str) -> str:
    """`admission check <name> <state>: <message>` (DESIGN §7); without a message yet, it ends at the state."""
    return f"admission check {name} {state}: {message}" if message else f"admission check {name} {state}"


def _names(pods: Sequence[RemainingPod], room: int | None) -> str:
    """`pod a` / `pods a, b`; with `room`, the first names that fit, then `and <N> more`."""
    noun = "pod " if len(pods) == 1 else "pods "
    if room is None:
        return noun + ", ".join(p.name for p in pods)
    return noun + fit((p.name for p in pods), len(pods), room, more=and_more)[0]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _it(pods: Sequence[RemainingPod], one: str, many: str) -> str:
    return one if len(pods) == 1 else many


def _deadline_text(pods: Sequence[RemainingPod], now: datetime | None) -> str:
    """The latest deletionTimestamp of the pods: the apiserver sets it to deletion + grace (k8s-apis §5.2)."""
    stamps = [(p.deletion_timestamp, parse_time(p.deletion_timestamp)) for p in pods if p.deletion_timestamp]
    if not stamps:
        return ""
    known = [(raw, parsed) for raw, parsed in stamps if parsed is not None]
    if not known:
        return f": by {stamps[0][0]}"
    raw, latest = max(known, key=lambda item: item[1])
    if now is None:
        return f": by {raw}"
    seconds = int((latest - now).total_seconds())
    if seconds >= 0:
        return f": by {raw} (in {seconds}s)"
    return f": by {raw} ({-seconds}s ago, and the kubelet has not confirmed yet)"


def _lost_node(node: NodeState, pods: Sequence[RemainingPod], room: int | None) -> str:
    name = node.name or ""
    state = node.label if node.ready_reported else f"{node.label}, it has never reported a Ready condition"
    deleting = _it(pods, "the pod object would not stop its", "the pod objects would not stop their")
    return (
        f"Node {name} is not Ready ({state}): its kubelet cannot confirm that {_names(pods, room)} stopped, so "
        f"{_it(pods, 'it stays', 'they stay')} until the node is deleted or tainted out-of-service after its "
        f"shutdown is confirmed. First confirm that {name} is shut down (powered off), then run "
        f"`{taint_command(name)}`; remove the taint once the node is repaired or deleted "
        f"(`{untaint_command(name)}`). Deleting {deleting} processes."
    )


def _ready_node(node: NodeState, pods: Sequence[RemainingPod], now: datetime | None, room: int | None) -> list[str]:
    name = node.name or ""
    texts: list[str] = []
    if node.out_of_service:
        texts.append(
            f"Node {name} carries the {TAINT_OUT_OF_SERVICE} taint but is Ready=True: the taint is not proof "
            f"that {_names(pods, room)} stopped, since the node's kubelet is alive (PodGC ignores the taint on a "
            f"Ready node). If the node was tainted by mistake, remove the taint (`{untaint_command(name)}`)."
        )
    terminating = [p for p in pods if p.terminating]
    running = [p for p in pods if not p.terminating and not p.relabelled and p.blocking is not Blocking.VANISHED]
    if terminating:
        texts.append(
            f"{_cap(_names(terminating, room))} on node {name} (Ready=True) "
            f"{_it(terminating, 'is', 'are')} terminating: {_it(terminating, 'it goes', 'they go')} when the "
            f"kubelet confirms termination, at most the grace period{_deadline_text(terminating, now)}."
        )
    if running:
        texts.append(
            f"{_cap(_names(running, room))} on node {name} (Ready=True) {_it(running, 'is', 'are')} running "
            f"and not being deleted: {_it(running, 'it goes', 'they go')} when "
            f"{_it(running, 'it finishes', 'they finish')} or {_it(running, 'its', 'their')} controller "
            f"deletes {_it(running, 'it', 'them')} (the Job controller deletes the pods of a suspended Job: "
            "check that the TrainJob's Jobs are suspended)."
        )
    return texts


def _confirming(vanished: Sequence[RemainingPod]) -> tuple[int, float]:
    """The grace of pods deleted while their node was away, and how long the node must have reported Ready since
    it came back for its kubelet to have stopped them (fencing.py)."""
    # fencing gives each vanished pod its node's recorded grace, which may be 0 (`terminationGracePeriodSeconds: 0`)
    grace = max(
        DEFAULT_GRACE_SECONDS if p.deletion_grace_period_seconds is None else p.deletion_grace_period_seconds
        for p in vanished
    )
    return grace, confirming_seconds(grace)


def _returned_node(node: NodeState, vanished: Sequence[RemainingPod], room: int | None) -> str:
    """A recorded pod whose object is gone, on a node Ready for too short a time: had the node been away when the
    pod was deleted, its kubelet stops it only once it relists its pods, within the grace it knew (fencing.py)."""
    grace, needed = _confirming(vanished)
    since = "no heartbeat time yet" if node.ready_for is None else f"{int(node.ready_for)}s so far"
    return (
        f"{_cap(_names(vanished, room))} of the previous execution {_it(vanished, 'was', 'were')} deleted from "
        f"the API, and node {node.name} has been Ready only briefly ({since}, by its kubelet's own clock). A "
        f"node back from a partition stops a pod deleted while it was away only once its kubelet relists its "
        f"pods, within the pod's grace period ({grace}s), so {_it(vanished, 'it blocks', 'they block')} until "
        f"the kubelet has reported Ready for {int(needed)}s (a kubelet reports every 5 minutes while nothing "
        "changes). Nothing to do but wait."
    )


def _node_group(
    node: NodeState, pods: Sequence[RemainingPod], now: datetime | None, room: int | None = None
) -> list[str]:
    """What would unblock the pods on one node; `room` bounds each text's list of pod names."""
    texts: list[str] = []
    kueue_failed = [p for p in pods if p.blocking is Blocking.FAILED_WITHOUT_PROOF]
    if kueue_failed:
        texts.append(
            f"{_cap(_names(kueue_failed, room))} {_it(kueue_failed, 'was', 'were')} marked Failed by Kueue's "
            f"failure recovery without proof that {_it(kueue_failed, 'its', 'their')} containers stopped, so "
            f"{_it(kueue_failed, 'it blocks', 'they block')} until node {node.name} is ceased."
        )
    relabelled = [p for p in pods if p.relabelled]
    if relabelled:
        texts.append(
            f"{_cap(_names(relabelled, room))} no longer {_it(relabelled, 'carries', 'carry')} the labels of the "
            f"TrainJob's pods (someone edited them, which takes a pod out of its Job: its Job no longer deletes "
            f"{_it(relabelled, 'it', 'them')}); dispatch recorded {_it(relabelled, 'it', 'them')} by name when it "
            f"held the TrainJob, so {_it(relabelled, 'it blocks', 'they block')} while "
            f"{_it(relabelled, 'it exists', 'they exist')}. Delete {_it(relabelled, 'it', 'them')} (gracefully) "
            "once you no longer need it."
        )
    vanished = [p for p in pods if p.blocking is Blocking.VANISHED]
    if vanished and node.ready is Readiness.TRUE:
        texts.append(_returned_node(node, vanished, room))
    elif vanished:
        texts.append(
            f"{_cap(_names(vanished, room))} of the previous execution {_it(vanished, 'was', 'were')} deleted from "
            f"the API (a force deletion or a cleaner) while node {node.name} could not confirm that "
            f"{_it(vanished, 'it', 'they')} stopped; dispatch recorded {_it(vanished, 'it', 'them')} when it "
            f"held the TrainJob, so {_it(vanished, 'it blocks', 'they block')} until node {node.name} is "
            "Ready again, deleted, or out-of-service after its shutdown is confirmed."
        )
    name = node.name or ""
    if node.presence is Presence.UNSCHEDULED:
        texts.append(
            f"{_cap(_names(pods, room))} {_it(pods, 'was', 'were')} never scheduled: "
            f"{_it(pods, 'it runs', 'they run')} nothing, but could still be bound to a node, so "
            f"{_it(pods, 'it blocks', 'they block')} until deleted (the Job controller deletes the pods of a "
            f"suspended Job)."
        )
    elif node.presence is Presence.GONE:
        texts.append(
            f"Node {name} is gone: the processes of {_names(pods, room)} are proven gone (ceased); PodGC deletes "
            f"{_it(pods, 'the pod', 'the pods')} 40 to 80s after the Node's deletion, and then the release can "
            "proceed."
        )
    elif node.presence is Presence.DELETED_RECENTLY:
        texts.append(
            f"Node {name} was deleted, but a deletion is proof that its machine stopped only once the pods' grace "
            "period plus 60s (and the clock skew allowed) have passed since a release or the admission check first "
            f"found it gone with no pod left on it: a machine that still runs stops {_names(pods, room)} only after "
            f"PodGC deletes {_it(pods, 'the pod', 'the pods')}. Wait; if the machine is cut off or frozen rather "
            "than off, power it off first (a deleted Node is the operator's assertion that it is)."
        )
    elif node.presence is Presence.NOT_READABLE:
        listed = [p for p in pods if p.blocking is not Blocking.VANISHED]
        until = (
            f" Until then {_it(listed, 'the pod', 'the pods')} must go by {_it(listed, 'itself', 'themselves')}."
            if listed
            else ""
        )
        texts.append(
            f"Node {name} is not readable with these credentials, so cessation of {_names(pods, room)} cannot be "
            f"proven: grant get and list on nodes (a ClusterRole) to the identity dispatch uses.{until}"
        )
    elif node.ceased:
        texts.append(
            f"Node {name} is out-of-service and Ready={(node.ready or Readiness.UNKNOWN).value}: the "
            f"processes of {_names(pods, room)} are "
            f"proven gone (ceased); PodGC deletes {_it(pods, 'the pod', 'the pods')} within about 20s, and "
            f"then the release can proceed. Remove the taint once the node is repaired or deleted "
            f"(`{untaint_command(name)}`)."
        )
    elif node.ready is Readiness.TRUE:
        texts.extend(_ready_node(node, pods, now, room))
    else:
        texts.append(_lost_node(node, pods, room))
    return texts


def _by_node(pods: Sequence[RemainingPod]) -> list[tuple[NodeState, list[RemainingPod]]]:
    """The pods grouped by node (the ones never scheduled together), nodes in the order their first pod came."""
    groups: dict[str | None, list[RemainingPod]] = {}
    states: dict[str | None, NodeState] = {}
    for pod in pods:
        groups.setdefault(pod.node.name, []).append(pod)
        states.setdefault(pod.node.name, pod.node)
    return [(states[key], members) for key, members in groups.items()]


def unblock_hints(pods: Sequence[RemainingPod], *, now: datetime | None = None) -> tuple[str, ...]:
    """What would unblock the object, one text per node (and one for the pods never scheduled)."""
    return tuple(text for node, members in _by_node(pods) for text in _node_group(node, members, now))


def _most_urgent_first(
    groups: list[tuple[NodeState, list[RemainingPod]]],
) -> list[tuple[NodeState, list[RemainingPod]]]:
    """One node of each state first (most urgent state first, `payloads.attention`), then the others in order:
    when not every explanation fits, every state still gets its remedy."""
    heads: dict[str, int] = {}
    for index, (node, _) in enumerate(groups):
        heads.setdefault(node.label, index)
    ranked = sorted(heads.items(), key=lambda item: (attention(groups[item[1]][0]), item[0]))
    first = [index for _, index in ranked]
    chosen = set(first)
    return [groups[i] for i in first] + [group for i, group in enumerate(groups) if i not in chosen]


def _hints_within(pods: Sequence[RemainingPod], now: datetime | None, room: int, joiner: str) -> str:
    """The explanations of the first nodes that fit in `room` characters, each node's texts joined by `joiner`
    and the nodes too; a note says how many were left out and where they all are."""
    groups = _by_node(pods)

    def items(order: list[tuple[NodeState, list[RemainingPod]]]) -> Iterator[str]:
        return (joiner.join(_node_group(node, members, now, NAMES_ROOM)) for node, members in order)

    def more(left_out: int) -> str:
        noun = "explanation" if left_out == 1 else "explanations"
        return (
            f"({left_out:,} more {noun}, one per node, left out here: `dispatch status` shows every remaining pod "
            "and what would unblock it.)"
        )

    text, shown = fit(items(groups), len(groups), room, separator=joiner)
    if shown == len(groups):
        return text
    return fit(items(_most_urgent_first(groups)), len(groups), room, separator=joiner, more=more)[0]


def _count(pods: Sequence[RemainingPod]) -> str:
    return f"{len(pods):,} pod" if len(pods) == 1 else f"{len(pods):,} pods"


def remedy(node: NodeState, pods: Sequence[RemainingPod]) -> Remedy:
    """What a person does about `pods` on `node`, or what is awaited when there is nothing to do
    (`reasons.Remedy`): the first line of a wait reason leads with its `action` and its subject, the node (or
    the pods, when they are what to act on), and the lines below it give the exact command, the permission it
    needs and the runbook section. The texts of `unblock_hints` say the same at length, with the why."""
    name = node.name or ""
    count = _count(pods)
    if node.presence is Presence.UNSCHEDULED:
        return Remedy(
            f"Waiting for the Job controller to delete {count} {_it(pods, 'that was', 'that were')} never scheduled",
            note=f"Nothing to do: {_it(pods, 'it runs', 'they run')} nothing, and the Job controller deletes the "
            "pods of a suspended Job.",
        )
    if node.presence is Presence.GONE:
        return Remedy(
            f"Waiting for PodGC to delete {count} of deleted node {name}",
            note=f"Nothing to do: {_it(pods, 'its', 'their')} processes are proven gone; PodGC deletes "
            f"{_it(pods, 'it', 'them')} 40 to 80s after the Node's deletion.",
        )
    if node.presence is Presence.DELETED_RECENTLY:
        return Remedy(
            f"Waiting until the deletion of node {name} is proof: {count} may still run there",
            note=(
                "Nothing to do if its machine is off: a deleted Node proves that its machine stopped only once the "
                "pods' grace period plus 60s (and the clock skew allowed) have passed since it was first found gone "
                "with no pod left on it (PodGC deletes them 40 to 80s after the Node). If the machine may still run "
                "(cut off or frozen), power it off."
            ),
            runbook=reasons.DELETED_NODE,
        )
    if node.presence is Presence.NOT_READABLE:
        return Remedy(
            f"Let dispatch read node {name}: {count} on it cannot be proven stopped",
            note="Bind the dispatch-node-reader ClusterRole to the identity dispatch uses (docs/rbac.md); binding "
            "it needs permission to create clusterrolebindings.",
            runbook=reasons.NODE_NOT_READABLE,
        )
    if node.ceased:
        return Remedy(
            f"Waiting for PodGC to delete {count} on {name}: {_it(pods, 'it is', 'they are')} proven stopped",
            note=(
                f"Nothing to do now: PodGC deletes {_it(pods, 'it', 'them')} within about 20s. Once {name} is "
                "repaired or deleted, "
                f"remove the taint (needs permission to patch nodes): `{untaint_command(name)}`."
            ),
            runbook=reasons.REMOVE_THE_TAINT,
        )
    if node.ready is not Readiness.TRUE:
        return Remedy(
            f"Confirm {name} is powered off, then taint it out-of-service ({node.label})",
            commands=(taint_command(name),),
            needs="patch nodes",
            note=(
                f"If the machine is gone for good, deleting its Node (`kubectl delete node {name}`, which needs "
                "permission to delete nodes) also ends the wait. Never force-delete the pods."
            ),
            runbook=reasons.CONFIRM_SHUTDOWN,
        )
    if all(pod.blocking is Blocking.VANISHED for pod in pods):
        return Remedy(
            f"Waiting until {name} has been Ready {int(_confirming(pods)[1])}s: {count} deleted while away may still "
            "run",
            note=f"Nothing to do but wait: its kubelet stops {_it(pods, 'it', 'them')} once it relists its pods.",
            runbook=reasons.NEVER_FORCE_DELETE,
        )
    if node.out_of_service:
        return Remedy(
            f"Remove the out-of-service taint from {name}: it is Ready (a mistaken taint)",
            commands=(untaint_command(name),),
            needs="patch nodes",
            note="A live kubelet means the machine runs: the taint proves nothing, and PodGC ignores it too.",
            runbook=reasons.OUT_OF_SERVICE,
        )
    if all(pod.relabelled for pod in pods):
        names = _names(pods, GLANCE_NAMES_ROOM)
        return Remedy(
            f"Delete {names} once done with {_it(pods, 'it', 'them')}: {_it(pods, 'its', 'their')} labels were edited",
            commands=tuple(f"kubectl delete pod -n {pod.namespace} {pod.name}" for pod in pods[:3]),
            needs="delete pods",
            note="Delete gracefully (never with --force): its process must end before the next execution starts.",
            runbook=reasons.EDITED_LABELS,
        )
    if all(pod.terminating for pod in pods):
        return Remedy(
            f"Waiting for the kubelet of {name} to stop {count} (Ready=True)",
            note=f"Nothing to do: the kubelet confirms {_it(pods, 'its end within its', 'their end within their')} "
            "grace period.",
        )
    return Remedy(
        f"Check that the TrainJob's Jobs are suspended: {count} still running on {name}",
        note="The Job controller deletes the pods of a suspended Job; a Job not suspended yet means a controller "
        "has not acted on the hold (see Trainer's and JobSet's logs).",
        needs="list jobs",
        runbook=reasons.JOBS_NOT_SUSPENDED,
    )


def urgent(pods: Sequence[RemainingPod]) -> tuple[str, tuple[str, ...]]:
    """A wait reason's first line and the lines below it while `pods` remain: the remedy for the most urgent node
    (`payloads.attention`) and its subject, then its command, the permission it needs and the runbook section
    (`reasons.Remedy.how`), and how many pods remain elsewhere. The first line is within `payloads.GLANCE`
    characters with names of ordinary length, and always within `payloads.HEADLINE_ROOM`."""
    if not pods:
        return "", ()
    node, members = _most_urgent_first(_by_node(by_name(pods)))[0]
    found = remedy(node, members)
    others = len(pods) - len(members)
    nodes = len({pod.node.name for pod in pods if pod.node.name and pod.node.name != node.name})
    where = f"{nodes:,} other node" + ("" if nodes == 1 else "s") if nodes else "no node"
    elsewhere = (f"{others:,} more pod" + ("" if others == 1 else "s") + f" on {where}: see below.",) if others else ()
    return cut(found.action, HEADLINE_ROOM), (*found.how, *elsewhere)


def headline(pods: Sequence[RemainingPod]) -> str:
    """A wait reason's first line while `pods` remain (`urgent`)."""
    return urgent(pods)[0]


def remaining_detail(pods: Sequence[RemainingPod], *, now: datetime | None = None, limit: int | None = None) -> str:
    """The cause detail while pods remain: the remaining-pods line, then one line per hint.

    Without `limit` (`dispatch status`), every pod and node. With it (what is stored or sent), at most `limit`
    characters: the first pods by name on the first line (short: `payloads.FIRST_LINE_ROOM`), the census of every
    node state on the second when pods were left out, then the explanations that fit."""
    if limit is None:
        return "\n".join((remaining_line(pods), *unblock_hints(pods, now=now)))
    ordered = by_name(pods)
    first, shown = _remaining_line(ordered, FIRST_LINE_ROOM)
    lines = [first] if shown == len(ordered) else [first, census(ordered).line]
    head = "\n".join(lines)
    return head + "\n" + _hints_within(ordered, now, limit - len(head) - 1, "\n")


def not_admitted_line(ref: str, count: int) -> str:
    """What the release's wait means, below its first line and remedy: the `PodsRemainError` message and the
    release operator's wait reason on a trigger's event both say it."""
    pods = f"{count:,} pod" if count == 1 else f"{count:,} pods"
    remain = "remains" if count == 1 else "remain"
    return (
        f"TrainJob {ref} is not admitted: {pods} of the previous execution {remain}, so it may still run. The "
        "hold stays in force."
    )


def not_admitted_reason(first: str, how: Sequence[str], ref: str, count: int, detail: str) -> WaitReason:
    """The release's wait reason while pods remain: the first line and remedy (`urgent`), what it means
    (`not_admitted_line`), then the drain report's detail (`remaining_detail`)."""
    pods = f"{count:,} pod" if count == 1 else f"{count:,} pods"
    about = (not_admitted_line(ref, count),)
    return compose(first or f"Waiting for {pods} of the previous execution to go", how, about, detail)


def pods_remain_reason(
    ref: str, pods: Sequence[RemainingPod], *, now: datetime | None = None, limit: int = WAIT_REASON_LIMIT
) -> WaitReason:
    """The PodsRemainError's wait reason (DESIGN §5; the seed's ErrPodsRemain), within `limit` characters as
    text: what the release operator shows while it waits and raises with `on_pods_remaining="retry"`, and what
    `dispatch release` prints.

    Composed as every wait reason is (`reasons`): the remedy for the most urgent node first, its command,
    permission and runbook section (`urgent`), what the wait means (`not_admitted_line`), then the drain report's
    detail on its own lines (`remaining_detail`: the first pods by name, the census of every node state when pods
    are left out, what would unblock each node). The same explanation as the drain check's report, so the
    operator and the sensor say the same thing."""
    first, how = urgent(pods)
    reason = not_admitted_reason(first, how, ref, len(pods), "")
    if not pods:
        return reason
    detail = remaining_detail(pods, now=now, limit=limit - len(reason.text(None)) - 1)
    return compose(reason.first, reason.how, reason.about, detail)


def pods_remain_message(
    ref: str, pods: Sequence[RemainingPod], *, now: datetime | None = None, limit: int = WAIT_REASON_LIMIT
) -> str:
    """The PodsRemainError message: `pods_remain_reason` as text, at most `limit` characters."""
    return pods_remain_reason(ref, pods, now=now, limit=limit).text(limit)


def accepted_risks_line(risks: Sequence[str]) -> str:
    """What `dispatch status` shows when a platform team accepted runtime risks (policy.py)."""
    return (
        f"accepted runtime risks: {', '.join(risks)}: dispatch admitted this execution although its runtime lets "
        "a controller start a second process of one rank (see the runtime policy in the docs)"
    )
