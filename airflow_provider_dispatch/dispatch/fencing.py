"""The hold's record of an execution's pods: fencing on nodes and on pod identities (anchors §8.1).

A listing of pods by label cannot see two kinds of pod that may still run:

* a pod whose object was deleted while its process runs on: a force deletion (`kubectl delete pod --force
  --grace-period=0`), Kueue's failure recovery deleting what it marked Failed (k8s-apis §4.7), a third-party
  cleaner. On a lost node that process is exactly the one the rule is for (anchors §0.5);
* a pod whose labels were edited away (the usual way to take a pod out of its controller to debug it): neither
  label selection sees it, and the Job controller, whose selector no longer matches, releases it (drops its
  ownerReference, `controller_ref_manager.go` `ReleasePod`), so nothing will ever delete it.

Where dispatch's pod fence is installed (fence.py), the API server refuses the deletions and label edits that
would do either to a pod of a dispatch TrainJob while it may run, so the pod object stays until it is proven
stopped. The record below is what protects where it is not, and what the fence cannot: a Node deleted while its
machine runs, and a namesake's predecessor (docs/decisions/pod-fence.md).

So dispatch records, once per hold of execution A, which of its pods were not finished, with their uids and
nodes (`dispatch.phpboyscout.uk/execution-pods`, tagged with A), from a selection a label edit cannot defeat
(`selection.Lineage`: the labels, the controller ownerReference, or the immutable name the Job controller gave
the pod). The plain-mode hold writes it in the same conditional write that suspends; a writer that finds the
object held without a record for A (suspended by someone else, or by Kueue) writes it before anything else,
and until then nothing is admitted. The record also carries when it was written (`since`, the API server's
time) and, when dispatch itself started the execution, when that was (`started`): evidence.py needs both.

The record is a log that only grows (`grown`). A snapshot written once per hold loses every pod that moves after
it: bound after the record, created after it by a write in flight, listed by a check and then force-deleted. So
each writer's check (release, the Kueue admission check) adds to it, in one conditional write before it
refuses, what it saw that the record does not keep: each pod that may run and that the record does not name
under its node (with its uid, its grace, and its node's Ready transition when the node is new to the record);
each Node it found deleted, with the API server's time (`gone`: finding 4); for a never-admitted object, whether
a deleted TrainJob of its name left Jobs, and when none was left (`leftovers`, `cleared`: evidence.py). Checks
that may not write (inspect, the sensors and triggers) judge by the record as it is.

Every later drain check compares the record with what its label selections list:

* a recorded pod that is still listed is judged as always (blocking.py);
* a recorded pod that is not listed is looked up by name (`lookups`): if a pod of that name and the recorded
  uid exists, its labels were edited, and it is judged as a listed pod (it blocks while it may run);
* otherwise its object is gone, and it blocks until its node confirms that its containers stopped: the node is
  ceased (out-of-service and not Ready, PodGC's own test: nodes.py), gone (deleted: DESIGN §4; a deletion counts
  only once the pods' grace plus `RETURN_MARGIN_SECONDS` and the clock skew bound have passed since a writer's
  check first found it with no pod that may run listed on it, `judged_nodes`: a machine that still runs stops
  its pods only after their objects are deleted, by PodGC 40 to 80 s after the Node, and then within their
  grace), `Ready=True`
  throughout since the record (its Ready condition's `lastTransitionTime` is the one the record kept: the
  kubelet never left, so it saw each deletion as it happened), or `Ready=True` again and its kubelet has
  reported so for longer than the pod's grace period plus `RETURN_MARGIN_SECONDS`, by the kubelet's own clock
  (`NodeState.ready_for`). A live kubelet kills the containers of a pod that left the API,
  but only once it learns of it, and with the grace it last knew: a node that was unreachable when the pod was
  force-deleted relists its pods when it comes back, sees the pod gone (`pkg/kubelet/config` sends a remove,
  `kubelet.go` `HandlePodRemoves` / `deletePod`) and kills it with the pod's `terminationGracePeriodSeconds`,
  the deletion's own grace never having reached it (k8s-apis §5.2). So `Ready=True` alone is not the end: the
  process may run for the grace period after the node returns (the promise issue's "force-deleted, then the
  node returned"). The record keeps, per node, the longest grace of its pods (`grace`) and, for a node Ready
  when it was written, that Ready condition's transition time (`ready`, read with the pods: one GET per node).
  A recorded pod that had no node (`unscheduled`) may have been bound after the record, and a binding is
  written to the pod alone: once its object is gone nothing says where it ran. It is judged on the node under
  which a later check found it, when one did; otherwise it counts as gone (a pod deleted while unscheduled is
  removed at once and runs nothing, but one bound, run and force-deleted between two checks is not seen:
  outside the promise without the fence).

Decisions and their limits:

* The record names the pods of execution A only; an admission raises A, so a record of an earlier execution
  is never consulted (the admission write also drops it).
* A pod whose object vanished normally (the kubelet confirmed its end) and whose node then stopped reporting is
  indistinguishable, by listing, from a force-deleted one: it blocks too, until its node is Ready, ceased or
  gone. That is the price of closing the gap, paid only when a node of the previous execution is unhealthy.
* `RETURN_MARGIN_SECONDS` (60 s) covers the time between the kubelet's first Ready report after it returns and
  its relist of pods: both wait for the connection, the relist at most the reflector's back-off after it (0.8 s
  doubling to 30 s, jittered up to 60 s: `client-go/tools/cache/reflector.go`). Measured on the real kubelet
  (v1.36.3, docs/fidelity.md "The returned node, measured"): after partitions of 60 s and 180 s and a frozen
  machine, it stopped the containers of pods deleted meanwhile at most 3.1 s after its Ready report.
  Because the heartbeat moves once per report, a node that returned is
  trusted about 5 minutes after it did, on a real kubelet's defaults. A node that was not Ready when the record
  was written, or a record written by an earlier version (no `ready`), waits the same way once Ready.
* A node whose partition was shorter than the node lifecycle controller's grace (50 s) never shows Ready=False
  or Unknown: its Ready condition keeps the old transition time, so a pod force-deleted during such a partition
  looks confirmed at once. Force deletion of a pod on a node that looks Ready stays outside the promise
  (docs/promise.md).
* A reader that may not read Nodes never sees a vanished pod's node as Ready, so after a hold it waits until
  it is granted `get` on nodes (the explanation says so).
* What the record cannot see it cannot keep: without the fence, a pod force-deleted before the record was
  written, or created after it (a write in flight, evidence.py) or bound after it and then force-deleted or
  relabelled before any writer's check listed it. A sensor or a trigger lists pods without writing: what only it
  saw is not kept (the release operator's trigger wakes its worker on every change of the remaining pods, and
  the worker's release is a writer's check).
* Size: a record keeps at most `MAX_RECORDED_NAMES` pods by name and uid (annotations share 256 KiB per
  object); beyond, it keeps the nodes with no names, and a recorded node without names blocks, while it is
  unhealthy, unless a listed pod of the object on it already does; a relabelled pod among those is not seen.
* A record written by an earlier version of dispatch has no uids (a pod of the recorded name counts), no time
  (it counts as settled) and no grace (Kubernetes' default, `DEFAULT_GRACE_SECONDS`, counts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from airflow_provider_dispatch.dispatch.blocking import (
    Blocking,
    RemainingPod,
    blocking,
    node_name_of,
    nodes_to_read,
    remaining_pods,
)
from airflow_provider_dispatch.dispatch.errors import NotManagedError
from airflow_provider_dispatch.dispatch.nodes import (
    DEFAULT_CLOCK_SKEW_SECONDS,
    DEFAULT_GRACE_SECONDS,
    NodeLookup,
    NodeRead,
    NodeState,
    confirming_seconds,
    node_state,
    unconfirmed,
)
from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_EXECUTION_PODS,
    annotations_of,
    name_of,
    parse_time,
    uid_of,
)
from airflow_provider_dispatch.dispatch.vocabulary import (
    field as field_of,
)

#: pods kept by name and uid in one record; beyond, only the nodes are kept (module docstring)
MAX_RECORDED_NAMES: Final = 600
#: the name shown for the pods of a recorded node whose names were not kept
UNNAMED: Final = "(unnamed pods of the execution)"
_TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


def format_time(moment: datetime) -> str:
    return moment.strftime(_TIME_FORMAT)


def _seconds(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def grace_of(pod: Mapping[str, Any]) -> int:
    """The longest a kubelet may let the pod's containers run once it acts on its deletion: the spec's grace (the
    API's default when unset), or the deletion's when longer (the kubelet may know either: module docstring)."""
    spec = field_of(pod, "spec", "terminationGracePeriodSeconds")
    deletion = field_of(pod, "metadata", "deletionGracePeriodSeconds")
    return max(spec if _seconds(spec) else DEFAULT_GRACE_SECONDS, deletion if _seconds(deletion) else 0)


@dataclass(frozen=True)
class ExecutionPods:
    """What the record of execution `admission` holds: per node, the names of its pods that were not finished
    (empty: not kept) and the longest grace among them, their uids, the pods not scheduled yet, when it was
    written and when the execution started (module docstring)."""

    admission: int
    nodes: Mapping[str, tuple[str, ...]]
    uids: Mapping[str, str] = field(default_factory=dict)
    unscheduled: tuple[str, ...] = ()
    since: datetime | None = None
    started: datetime | None = None
    #: per node, the longest grace of its recorded pods (`grace_of`); a node not in it counts the default
    grace: Mapping[str, int] = field(default_factory=dict)
    #: per node Ready when the record was written, its Ready condition's `lastTransitionTime` then
    ready: Mapping[str, str] = field(default_factory=dict)
    #: per node whose Node object a check found deleted, when a writer's check first did (the API server's time)
    gone: Mapping[str, datetime] = field(default_factory=dict)
    #: never-admitted object (A = 0): something of a deleted TrainJob of the same name was found (evidence.py)
    leftovers: bool = False
    #: with `leftovers`: when a writer's check first found none of the predecessor's Jobs left (evidence.py)
    cleared: datetime | None = None

    def grace_on(self, node: str) -> int:
        return self.grace.get(node, DEFAULT_GRACE_SECONDS)

    @property
    def names(self) -> tuple[str, ...]:
        """Every pod the record names, scheduled or not."""
        return (*(name for names in self.nodes.values() for name in names), *self.unscheduled)

    def node_of(self, name: str) -> str | None:
        for node, names in self.nodes.items():
            if name in names:
                return node
        return None

    def to_annotation(self) -> str:
        body: dict[str, Any] = {
            "admission": self.admission,
            "nodes": {node: list(names) for node, names in self.nodes.items()},
        }
        if self.uids:
            body["uids"] = dict(self.uids)
        if self.unscheduled:
            body["unscheduled"] = list(self.unscheduled)
        if self.since is not None:
            body["since"] = format_time(self.since)
        if self.started is not None:
            body["started"] = format_time(self.started)
        if self.grace:
            body["grace"] = dict(self.grace)
        if self.ready:
            body["ready"] = dict(self.ready)
        if self.gone:
            body["gone"] = {node: format_time(at) for node, at in self.gone.items()}
        if self.leftovers:
            body["leftovers"] = True
        if self.cleared is not None:
            body["cleared"] = format_time(self.cleared)
        return json.dumps(body, sort_keys=True, separators=(",", ":"))


def record(
    admission: int,
    pods: Iterable[Mapping[str, Any]],
    *,
    since: datetime | None = None,
    started: datetime | None = None,
    nodes: Mapping[str, NodeLookup] | None = None,
    leftovers: bool = False,
) -> ExecutionPods:
    """The record of the `pods` (a lineage selection) that block (not finished), by node, with their uids and
    grace, and for each of their `nodes` (as read for the record) that is Ready, since when. A node found deleted
    gets no time here (`since` was read before the Nodes): the first writer's check gives it one (`grown`).
    `leftovers`: a namesake's predecessor left Jobs (evidence.py); pods it left make it true too."""
    by_node: dict[str, list[str]] = {}
    unscheduled: list[str] = []
    uids: dict[str, str] = {}
    grace: dict[str, int] = {}
    for pod in pods:
        if blocking(pod) is None:
            continue
        name = name_of(pod)
        node = node_name_of(pod)
        (unscheduled if node is None else by_node.setdefault(node, [])).append(name)
        if node is not None:
            grace[node] = max(grace.get(node, 0), grace_of(pod))
        uid = uid_of(pod)
        if uid is not None:
            uids[name] = uid
    total = sum(len(names) for names in by_node.values()) + len(unscheduled)
    keep = total <= MAX_RECORDED_NAMES
    return ExecutionPods(
        admission,
        {node: tuple(sorted(names)) if keep else () for node, names in sorted(by_node.items())},
        uids=dict(sorted(uids.items())) if keep else {},
        unscheduled=tuple(sorted(unscheduled)) if keep else (),
        since=since,
        started=started,
        grace=dict(sorted(grace.items())),
        ready={
            node: since_ready
            for node in sorted(by_node)
            if (since_ready := node_state(node, (nodes or {}).get(node)).ready_since) is not None
        },
        leftovers=admission == 0 and (leftovers or total > 0),
        cleared=None if leftovers else since if admission == 0 and total > 0 else None,
    )


def _malformed(ref: str, why: str) -> NotManagedError:
    return NotManagedError(
        f"TrainJob {ref} carries a malformed {ANNOTATION_EXECUTION_PODS} annotation ({why}). dispatch writes it "
        "when it holds the TrainJob, to remember the pods and nodes of the previous execution; nothing else "
        "should. Confirm that no pod of the previous execution still runs, then remove the annotation.",
        ref=ref,
    )


def _string_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def recorded(trainjob: Mapping[str, Any], admission: int, ref: str) -> ExecutionPods | None:
    """The hold's record for execution `admission`, or None (no record, or one of another execution)."""
    raw = annotations_of(trainjob).get(ANNOTATION_EXECUTION_PODS)
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        raise _malformed(ref, "not JSON") from None
    if not isinstance(body, dict) or not isinstance(body.get("admission"), int) or isinstance(body["admission"], bool):
        raise _malformed(ref, "no integer admission")
    nodes = body.get("nodes")
    if not isinstance(nodes, dict) or not all(isinstance(node, str) and _string_list(n) for node, n in nodes.items()):
        raise _malformed(ref, "nodes is not a map of node names to lists of pod names")
    uids = body.get("uids", {})
    if not isinstance(uids, dict) or not all(isinstance(k, str) and isinstance(u, str) for k, u in uids.items()):
        raise _malformed(ref, "uids is not a map of pod names to uids")
    unscheduled = body.get("unscheduled", [])
    if not _string_list(unscheduled):
        raise _malformed(ref, "unscheduled is not a list of pod names")
    grace = body.get("grace", {})
    if not isinstance(grace, dict) or not all(isinstance(k, str) and _seconds(g) for k, g in grace.items()):
        raise _malformed(ref, "grace is not a map of node names to whole seconds")
    ready = body.get("ready", {})
    if not isinstance(ready, dict) or not all(isinstance(k, str) and isinstance(t, str) for k, t in ready.items()):
        raise _malformed(ref, "ready is not a map of node names to times")
    times = {key: parse_time(body.get(key)) for key in ("since", "started", "cleared")}
    if any(body.get(key) is not None and moment is None for key, moment in times.items()):
        raise _malformed(ref, "since, started or cleared is not an RFC 3339 time")
    gone_raw = body.get("gone", {})
    gone = {k: parse_time(t) for k, t in gone_raw.items()} if isinstance(gone_raw, dict) else None
    if gone is None or not all(isinstance(k, str) and t is not None for k, t in gone.items()):
        raise _malformed(ref, "gone is not a map of node names to times")
    leftovers = body.get("leftovers", False)
    if not isinstance(leftovers, bool):
        raise _malformed(ref, "leftovers is not a boolean")
    if body["admission"] != admission:
        return None
    return ExecutionPods(
        body["admission"],
        {node: tuple(names) for node, names in nodes.items()},
        uids=dict(uids),
        unscheduled=tuple(unscheduled),
        since=times["since"],
        started=times["started"],
        grace=dict(grace),
        ready=dict(ready),
        gone={k: t for k, t in gone.items() if t is not None},
        leftovers=leftovers,
        cleared=times["cleared"],
    )


def _names_kept(execution_pods: ExecutionPods) -> bool:
    return all(execution_pods.nodes.values())


def grown(
    execution_pods: ExecutionPods,
    *,
    pods: Iterable[Mapping[str, Any]] = (),
    nodes: Mapping[str, NodeLookup] | None = None,
    now: datetime | None = None,
    predecessors: bool | None = None,
) -> ExecutionPods:
    """The record with what a writer's check saw that it does not keep yet (the record is a log that only grows;
    docs/decisions/pod-fence.md): each of `pods` (as listed, relabelled ones found by lookup included) that may
    run and is not named under its node, with its uid and grace, and its node's Ready transition when the node is
    new to the record; each of `nodes` read as deleted, with `now` when the record has no time for it yet (the
    API server's time read after the Nodes, so that the Node was deleted by then); and for a never-admitted
    object, `predecessors` (whether a Job a deleted namesake left was found: it sets `leftovers` and clears
    `cleared`; once none is, `cleared` is `now`, read after that list). Equal to the record when there is nothing
    new, so that the caller writes only when it must."""
    lookups = nodes or {}
    keep = _names_kept(execution_pods)
    by_node = {node: list(names) for node, names in execution_pods.nodes.items()}
    unscheduled = list(execution_pods.unscheduled)
    uids, grace, ready = dict(execution_pods.uids), dict(execution_pods.grace), dict(execution_pods.ready)
    for pod in pods:
        if blocking(pod) is None:
            continue
        name, node = name_of(pod), node_name_of(pod)
        if node is None:
            if keep and name not in execution_pods.names and name not in unscheduled:
                unscheduled.append(name)
                if (uid := uid_of(pod)) is not None:
                    uids[name] = uid
            continue
        known = by_node.get(node)
        if known is not None and (name in known or not keep):
            continue
        if known is None:
            since_ready = node_state(node, lookups.get(node)).ready_since
            if since_ready is not None:
                ready[node] = since_ready
        by_node.setdefault(node, [])
        if keep:
            by_node[node].append(name)
            unscheduled = [n for n in unscheduled if n != name]
            if (uid := uid_of(pod)) is not None:
                uids[name] = uid
        grace[node] = max(grace.get(node, 0), grace_of(pod))
    if keep and sum(len(n) for n in by_node.values()) + len(unscheduled) > MAX_RECORDED_NAMES:
        by_node = {node: [] for node in by_node}
        unscheduled, uids = [], {}
    gone = dict(execution_pods.gone)
    if now is not None:
        still_listed = nodes_of_pods_that_may_run(pods)
        for node, lookup in lookups.items():
            if lookup is not NodeRead.GONE or node not in by_node:
                continue
            if node in still_listed:
                gone.pop(node, None)  # its kubelet may not have heard of a deletion yet: the clock starts later
            elif node not in gone:
                gone[node] = now
    leftovers, cleared = execution_pods.leftovers, execution_pods.cleared
    if execution_pods.admission == 0 and predecessors is not None:
        if predecessors:
            leftovers, cleared = True, None
        elif leftovers and cleared is None:
            cleared = now
    return ExecutionPods(
        execution_pods.admission,
        {node: tuple(sorted(names)) for node, names in sorted(by_node.items())},
        uids=dict(sorted(uids.items())),
        unscheduled=tuple(sorted(unscheduled)),
        since=execution_pods.since,
        started=execution_pods.started,
        grace=dict(sorted(grace.items())),
        ready=dict(sorted(ready.items())),
        gone=dict(sorted(gone.items())),
        leftovers=leftovers,
        cleared=cleared,
    )


def nodes_of_pods_that_may_run(pods: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The nodes that `pods` (as a check listed them) that may still run are bound to. On such a node, if its
    Node is deleted, the deletion proves nothing yet: a machine that still runs runs the pod until its object is
    deleted (by the Job controller, or by PodGC, whose orphan pass comes 40 to 80 s after the Node's deletion:
    a pass every 20 s, a 40 s quarantine, `pkg/controller/podgc/gc_controller.go` v1.36.3) and then for its
    grace. So the deletion's clock (`ExecutionPods.gone`) starts only at a check that lists none there."""
    return frozenset(node for pod in pods if blocking(pod) is not None and (node := node_name_of(pod)) is not None)


def deletion_proof_at(first_seen: datetime, grace_seconds: int, clock_skew_seconds: float) -> datetime:
    """When a Node first found deleted at `first_seen` becomes proof that its pods (of that grace) stopped: the
    returned-node rule's wait (grace plus `RETURN_MARGIN_SECONDS`), plus the bound on the skew between the API
    server replicas whose clocks wrote the two times (evidence.py)."""
    return first_seen + timedelta(seconds=confirming_seconds(grace_seconds) + clock_skew_seconds)


def judged_nodes(
    nodes: Mapping[str, NodeLookup],
    execution_pods: ExecutionPods | None,
    now: datetime | None,
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
    pods: Iterable[Mapping[str, Any]] = (),
) -> dict[str, NodeLookup]:
    """`nodes` as read, with each deleted Node taken as proof only once `deletion_proof_at` has passed on the API
    server's clock since the record first found it deleted with no pod that may run listed on it; before, when a
    pod of `pods` (this check's) that may run is bound to it (`nodes_of_pods_that_may_run`), or when the record
    has no time for it (only a writer's check writes one), it is `NodeRead.DELETED_RECENTLY`, never ceased
    (nodes.py, finding 4)."""
    result = dict(nodes)
    occupied = nodes_of_pods_that_may_run(pods)
    for node, lookup in nodes.items():
        if lookup is not NodeRead.GONE:
            continue
        recorded = execution_pods.gone.get(node) if execution_pods is not None else None
        first = None if node in occupied else recorded  # a pod that may run is listed there: not started yet
        grace = execution_pods.grace_on(node) if execution_pods is not None else DEFAULT_GRACE_SECONDS
        if first is None or now is None or now < deletion_proof_at(first, grace, clock_skew_seconds):
            result[node] = NodeRead.DELETED_RECENTLY
    return result


def missing_names(execution_pods: ExecutionPods | None, listed: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The recorded pods the label selections did not list: each is looked up by name (`lookups`)."""
    if execution_pods is None:
        return ()
    names = {name_of(pod) for pod in listed}
    return tuple(name for name in execution_pods.names if name not in names)


def is_recorded_pod(execution_pods: ExecutionPods, name: str, found: Mapping[str, Any] | None) -> bool:
    """A pod found under a recorded name is the recorded one: same uid (any uid when none was recorded)."""
    if found is None or name_of(found) != name:
        return False
    wanted = execution_pods.uids.get(name)
    return wanted is None or uid_of(found) == wanted


def relabelled_pods(
    execution_pods: ExecutionPods | None, lookups: Mapping[str, Mapping[str, Any] | None]
) -> list[Mapping[str, Any]]:
    """The recorded pods the label selections missed that still exist: their labels were edited."""
    if execution_pods is None:
        return []
    return [pod for name, pod in lookups.items() if pod is not None and is_recorded_pod(execution_pods, name, pod)]


def vanished_pods(
    execution_pods: ExecutionPods | None,
    namespace: str,
    listed: Iterable[Mapping[str, Any]],
    remaining: Iterable[RemainingPod],
    nodes: Mapping[str, NodeLookup],
    lookups: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> tuple[RemainingPod, ...]:
    """The recorded pods whose objects are gone and whose node did not confirm their end: they remain.

    `listed` are the object's pods as read now (selected, and relabelled ones found by `lookups`);
    `remaining` those of them that block (blocking.py); `nodes` what was read of the recorded nodes (one not in
    it reads as not readable: never confirmed). `lookups` maps a recorded name that was not listed to the pod
    found under it, or None when there is none; a name not looked up counts as gone.
    """
    if execution_pods is None:
        return ()
    found = lookups or {}
    names = {name_of(pod) for pod in listed}
    blocked_nodes = {pod.node.name for pod in remaining}
    result: list[RemainingPod] = []
    for node, recorded_names in execution_pods.nodes.items():
        state = node_state(node, nodes.get(node))
        if not unconfirmed(state, execution_pods.grace_on(node), execution_pods.ready.get(node)):
            continue
        if not recorded_names:
            if node not in blocked_nodes:
                result.append(_vanished(UNNAMED, namespace, state, execution_pods.grace_on(node)))
            continue
        result.extend(
            _vanished(name, namespace, state, execution_pods.grace_on(node))
            for name in recorded_names
            if name not in names and not is_recorded_pod(execution_pods, name, found.get(name))
        )
    return tuple(result)


def _vanished(name: str, namespace: str, state: NodeState, grace_seconds: int) -> RemainingPod:
    return RemainingPod(
        name=name,
        namespace=namespace,
        uid=None,
        phase="deleted",
        node=state,
        blocking=Blocking.VANISHED,
        deletion_grace_period_seconds=grace_seconds,
    )


def nodes_to_check(pods: Iterable[Mapping[str, Any]], execution_pods: ExecutionPods | None) -> tuple[str, ...]:
    """The Nodes a drain check reads: those of the pods that may block (listed or found by lookup), then the
    recorded nodes where a recorded pod is not among them (or whose names were not kept): only there can a
    vanished pod hide."""
    listed = list(pods)
    seen = dict.fromkeys(nodes_to_read(listed))
    if execution_pods is not None:
        names = {name_of(pod) for pod in listed}
        for node, recorded_names in execution_pods.nodes.items():
            if not recorded_names or any(name not in names for name in recorded_names):
                seen.setdefault(node, None)
    return tuple(seen)


def blocking_pods(
    selected: Iterable[Mapping[str, Any]],
    nodes: Mapping[str, NodeLookup],
    execution_pods: ExecutionPods | None,
    namespace: str,
    lookups: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> tuple[RemainingPod, ...]:
    """Everything that blocks an admission: the selected pods that remain (blocking.py), the recorded pods whose
    labels were edited and that remain, then the recorded pods that vanished on a node that did not confirm
    their end. The one place the three are joined."""
    listed = list(selected)
    relabelled = relabelled_pods(execution_pods, lookups or {})
    remaining = remaining_pods(listed, nodes) + remaining_pods(relabelled, nodes, relabelled=True)
    return remaining + vanished_pods(execution_pods, namespace, listed + relabelled, remaining, nodes, lookups)
