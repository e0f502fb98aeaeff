"""Bounded payloads: what dispatch hands to Airflow and to Kueue about the remaining pods, in a size that does not
grow with them.

A drain check can find tens of thousands of remaining pods on thousands of nodes (a large job held while a rack is
lost). Listed in full, one check's report was 263 KiB at 500 pods on 300 nodes and 22 MiB at 50,000 pods, and it
went everywhere: into the trigger's event and the task instance's `next_kwargs` in Airflow's database, into XComs,
rendered fields and log lines, into the trigger's kwargs (encrypted in the `trigger` table) and into a Workload's
status. Whatever the number of pods, every payload here still says:

* how many pods remain, and on how many nodes;
* the first pods by name, each with its node and the node's state;
* every distinct node state (there are at most nine: `Ready=True/False/Unknown`, each with or without
  `out-of-service`, `gone`, `not readable`, `not scheduled`), with how many nodes are in it and, when there are at
  most three, which (`census_line`: "312 pods on 300 nodes: Ready=Unknown (1 node: n-7), Ready=True (299 nodes)");
* in texts, what would unblock the first nodes, one node of each state first.

`fit` is the one function that shortens anything: every payload that could grow (the remaining-pods line, the
list of explanations, the pod names inside one explanation, the node names of a state, the JSON list of pods) is
cut by it, in the pure core, and the Airflow layer and the Kueue controller only pass the result on. The full
list stays where a person asks for it: `dispatch status` (`assessment.assess`) prints every pod and node.

The limits are the constants below, one per payload kind, each with the reason for its value; they count
characters of text, or of compact JSON (which is ASCII, so characters are bytes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch.dispatch.blocking import RemainingPod
from airflow_provider_dispatch.dispatch.nodes import NodeState, Presence, Readiness

#: The wait reason: `PodsDrainedSensor`'s (each poke's log line, the rendered field `wait_reason`, the XCom
#: `wait_reason`) and the release operator's (the `PodsRemainError` message it logs and raises). Airflow replaces
#: a rendered field longer than `[core] max_templated_field_length`, 4096 by default, with a cut copy prefixed
#: "Truncated. You can change this behaviour in ..." (`airflow/sdk/execution_time/task_runner.py`,
#: `_shared/template_rendering`), so at 4096 the Rendered Templates tab shows the reason whole, as written.
WAIT_REASON_LIMIT: Final = 4096
#: The trigger's event (`{"status": ..., **DrainCheck.as_dict()}`): the triggerer stores it in the metadata
#: database and the scheduler hands it to the worker as `next_kwargs`, once per `progress` event. 16 KiB holds the
#: detail (below 4 KiB), the census and a few dozen pods as JSON objects; a database row of that size is cheap.
TRIGGER_EVENT_LIMIT: Final = 16 * 1024
#: `PodsDrainedSensor`'s XCom on success (its return value): a subset of the event's report, so the same limit.
DRAIN_XCOM_LIMIT: Final = 16 * 1024
#: The trigger's kwargs: a deferral stores them (serialized, then Fernet-encrypted) in the `trigger` table and a
#: triggerer restart reads them back; every re-deferral writes them again. What they carry about the remaining
#: pods is a fixed-size fingerprint (`fingerprint`, 64 characters), so they stay a few hundred bytes plus the
#: connection's extras (a kubeconfig pasted inline into the connection is the connection's size, not the pods').
TRIGGER_KWARGS_LIMIT: Final = 4 * 1024
#: The API's own limit on a Workload's `status.admissionChecks[].message`: `maxLength: 32768` in Kueue's CRD
#: (`lab/crds/kueue/kueue.x-k8s.io_workloads.yaml`, `workload_types.go`); a longer message is refused (422).
KUEUE_MESSAGE_API_LIMIT: Final = 32768
#: The Kueue admission check message while pods remain: well within the API limit, because every reader of the
#: Workload (Kueue's controllers, `kubectl get workload -o yaml`, each informer's cache) carries it; 4 KiB names
#: the first few dozen pods and the census.
KUEUE_MESSAGE_LIMIT: Final = 4096

#: the room kept in a wait reason for the lines that say who waits ("Waiting until the pods of TrainJob
#: <namespace>/<name> (execution A) are gone or proven stopped.", the restart chain's submission), with a
#: 63-character namespace and a 253-character name; the lines with the command and the permission take the
#: rest of `HEADLINE_ROOM`'s neighbourhood, and `reasons.WaitReason.text` cuts the details to what is left
REASON_WORDS_ROOM: Final = 512
#: a wait reason's first line (`reasons.WaitReason.first`, `explain.headline`): what to do about the most urgent
#: node or what is awaited, and its subject. With names of ordinary length it is within `GLANCE`; this is the cut
#: for any names (a node name may have 253 characters, and the line names it once or twice)
HEADLINE_ROOM: Final = 768
#: the characters of a wait reason's first line that Airflow 3.3's UI shows whole, without scrolling sideways, in a
#: 1366x768 browser window with its default settings: neither the task log (`[api] default_wrap = False`) nor the
#: Rendered Templates tab (its highlighter's theme sets `white-space: pre`) wraps, and each shows about 98
#: characters of a line (the log's after its timestamp and level, with up to 999 lines; the tab's beside the
#: field names); Storage → XCom wraps (tests/browser measures all three). Every first line, with names of ordinary
#: length (a node like `gpu-node-017.internal`, a pod like `resnet-20261205-1-node-0-0-x7k2p`), is within it
#: (tests/dispatch/test_reasons.py); longer names make it longer, never cut: each first line puts the action and
#: its subject first, so what a longer name pushes past the edge is the end (a node state, a count)
GLANCE: Final = 96
#: the pod names a first line may name (`pod a, b and 3 more`): the rest are on the lines below
GLANCE_NAMES_ROOM: Final = 40
#: `DrainReport.detail`: what the wait reasons (below their headline), the event and the XCom quote
DETAIL_LIMIT: Final = WAIT_REASON_LIMIT - REASON_WORDS_ROOM - HEADLINE_ROOM
#: the event's fields around the report (status, ref, execution identity, held), and the spaces Airflow's JSON
#: encoding adds after each `,` and `:` of the compact report (about 7% of a report that lists pods)
EVENT_WORDS_ROOM: Final = 2048
#: `DrainReport.as_dict()`: the report as the event and the XCom carry it
REPORT_LIMIT: Final = TRIGGER_EVENT_LIMIT - EVENT_WORDS_ROOM
#: the first line of a detail (`remaining pods: ...`): short enough to read at a glance in a log
FIRST_LINE_ROOM: Final = 320
#: the pod names inside one explanation ("pods a, b and 4,997 more")
NAMES_ROOM: Final = 100
#: the node names of one state in the census, named when a state has at most `NAMED_NODES` nodes
NODE_NAMES_ROOM: Final = 160
NAMED_NODES: Final = 3


# --- the one cut -----------------------------------------------------------------------------------------------


def fit(
    items: Iterable[str],
    total: int,
    room: int,
    *,
    separator: str = ", ",
    more: Callable[[int], str] | None = None,
) -> tuple[str, int]:
    """The leading `items` joined by `separator`, as many as fit in `room` characters, and how many that was.

    `total` is how many items there are (`items` may be a lazy iterable; it is read only as far as needed, so a
    list of 50,000 costs what its first few cost). When they do not all fit, `more(left_out)` is added after the
    ones shown, and room is kept for it; without `more` nothing is added (the caller says the count elsewhere).
    Nothing is cut inside an item: an item that does not fit is left out whole.
    """
    taken: list[str] = []
    used = 0
    for item in items:
        used += len(item) + (len(separator) if taken else 0)
        if used > room:
            break
        taken.append(item)
    if len(taken) >= total:
        return separator.join(taken), len(taken)
    tail = more(total) if more is not None else ""  # the longest the note can be: it says at most `total`
    budget = room - len(tail) - len(separator)
    shown, used = 0, 0
    for item in taken:
        used += len(item) + (len(separator) if shown else 0)
        if used > budget:
            break
        shown += 1
    text = separator.join(taken[:shown])
    if more is not None:
        note = more(total - shown)
        text = f"{text}{separator}{note}" if shown else note
    return text, shown


def and_more(left_out: int) -> str:
    return f"and {left_out:,} more"


def cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: the words that fit, then `...` (a last guard for a message that quotes
    something of unknown length, such as an API error)."""
    if len(text) <= limit:
        return text
    words = text.split(" ")
    return fit(words, len(words), limit, separator=" ", more=lambda _: "...")[0]


# --- the census: every distinct node state -------------------------------------------------------------------


def attention(node: NodeState) -> int:
    """How soon a person should look at a node in this state (lower first): a lost node (Ready=Unknown) needs the
    taint command once its shutdown is confirmed, then Ready=False, a node dispatch may not read, a taint on a Ready
    node (a mistake); a ceased node (fenced, or deleted) is finished by PodGC, a pod never scheduled by its Job,
    and a Ready node's pods go by themselves."""
    if node.presence is Presence.NOT_READABLE:
        return 2
    if node.presence is Presence.UNSCHEDULED:
        return 5
    if node.ceased:
        return 4
    if node.ready is Readiness.TRUE:
        return 3 if node.out_of_service else 6
    return 1 if node.ready is Readiness.FALSE else 0


@dataclass(frozen=True)
class StateGroup:
    """The remaining pods whose nodes are in one state: how many nodes and pods, and the first nodes' names."""

    state: str
    attention: int
    nodes: int
    pods: int
    first_nodes: tuple[str, ...]

    @property
    def text(self) -> str:
        if self.nodes == 0:  # never scheduled: no node to count
            return f"{self.state} ({_count(self.pods, 'pod')})"
        if self.nodes > NAMED_NODES:
            return f"{self.state} ({_count(self.nodes, 'node')})"
        names, _ = fit(self.first_nodes, self.nodes, NODE_NAMES_ROOM, more=and_more)
        return f"{self.state} ({_count(self.nodes, 'node')}: {names})"

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "nodes": self.nodes, "pods": self.pods, "first_nodes": list(self.first_nodes)}


@dataclass(frozen=True)
class Census:
    """All remaining pods in constant size: the counts and every distinct node state, most urgent first."""

    pods: int
    nodes: int
    states: tuple[StateGroup, ...]

    @property
    def line(self) -> str:
        """`312 pods on 300 nodes: Ready=Unknown (1 node: n-7), Ready=True (299 nodes)`."""
        groups = ", ".join(group.text for group in self.states)
        return f"{_count(self.pods, 'pod')} on {_count(self.nodes, 'node')}: {groups}"


def census(pods: Iterable[RemainingPod]) -> Census:
    nodes_by_state: dict[str, dict[str, None]] = {}
    pods_by_state: dict[str, int] = {}
    rank: dict[str, int] = {}
    all_nodes: set[str] = set()
    count = 0
    for pod in pods:
        count += 1
        label = pod.node.label
        if label not in rank:
            rank[label] = attention(pod.node)
            nodes_by_state[label] = {}
            pods_by_state[label] = 0
        pods_by_state[label] += 1
        if pod.node.name:
            nodes_by_state[label].setdefault(pod.node.name, None)
            all_nodes.add(pod.node.name)
    groups = [
        StateGroup(
            state=label,
            attention=rank[label],
            nodes=len(nodes_by_state[label]),
            pods=pods_by_state[label],
            first_nodes=tuple(name for name, _ in zip(nodes_by_state[label], range(NAMED_NODES), strict=False)),
        )
        for label in rank
    ]
    groups.sort(key=lambda group: (group.attention, group.state))
    return Census(pods=count, nodes=len(all_nodes), states=tuple(groups))


# --- the fingerprint: the whole remaining set in 64 characters -------------------------------------------------


def summary_entry(pod: RemainingPod) -> dict[str, Any]:
    """`{pod, node, node_state}`: what a person sees of one pod, and what a change of counts as progress."""
    return {"pod": pod.name, "node": pod.node.name, "node_state": pod.node.label}


def fingerprint(entries: Iterable[Mapping[str, Any]]) -> str:
    """A digest of `{pod, node, node_state}` entries, whatever their order: equal exactly when the same pods remain
    on the same nodes in the same node states. A trigger compares it, instead of carrying the list in its kwargs."""
    canonical = sorted((str(e.get("pod")), str(e.get("node")), str(e.get("node_state"))) for e in entries)
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()


def remaining_fingerprint(pods: Iterable[RemainingPod]) -> str:
    return fingerprint(summary_entry(pod) for pod in pods)


# --- the report as JSON ----------------------------------------------------------------------------------------


def by_name(pods: Iterable[RemainingPod]) -> list[RemainingPod]:
    """The pods in the order payloads name them: by name (then node), whatever order the API listed them in."""
    return sorted(pods, key=lambda pod: (pod.name, pod.node.name or ""))


def json_size(value: Any) -> int:
    """Characters (= bytes: the encoding is ASCII) of `value` as compact JSON."""
    return len(json.dumps(value, separators=(",", ":")))


def listed_pods(pods: Sequence[RemainingPod], room: int, entry: Callable[[RemainingPod], Any]) -> list[Any]:
    """The first `pods` as JSON values (`entry`), as many as fit in `room` characters of a JSON list."""
    encoded = (json.dumps(entry(pod), separators=(",", ":")) for pod in pods)
    _, shown = fit(encoded, len(pods), room - 2, separator=",")  # 2: the list's brackets
    return [entry(pod) for pod in pods[:shown]]


def bounded_report_dict(base: Mapping[str, Any], pods: Sequence[RemainingPod], limit: int) -> dict[str, Any]:
    """`base` (a report's fields) with `remaining_count`, `node_states` and `fingerprint` added, and as many of
    the first pods by name (as `RemainingPod.as_dict()`) under `remaining` as fit in `limit` characters of JSON."""
    ordered = by_name(pods)
    whole = census(ordered)
    result: dict[str, Any] = {
        **base,
        "remaining": [],
        "remaining_count": whole.pods,
        "node_count": whole.nodes,
        "node_states": [group.as_dict() for group in whole.states],
        "fingerprint": remaining_fingerprint(ordered),
    }
    room = limit - json_size(result)
    result["remaining"] = listed_pods(ordered, room, RemainingPod.as_dict)
    return result


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


__all__ = [
    "DETAIL_LIMIT",
    "DRAIN_XCOM_LIMIT",
    "FIRST_LINE_ROOM",
    "GLANCE",
    "GLANCE_NAMES_ROOM",
    "HEADLINE_ROOM",
    "KUEUE_MESSAGE_API_LIMIT",
    "KUEUE_MESSAGE_LIMIT",
    "NAMES_ROOM",
    "REPORT_LIMIT",
    "TRIGGER_EVENT_LIMIT",
    "TRIGGER_KWARGS_LIMIT",
    "WAIT_REASON_LIMIT",
    "Census",
    "StateGroup",
    "and_more",
    "attention",
    "bounded_report_dict",
    "by_name",
    "census",
    "cut",
    "fingerprint",
    "fit",
    "json_size",
    "listed_pods",
    "remaining_fingerprint",
    "summary_entry",
]
