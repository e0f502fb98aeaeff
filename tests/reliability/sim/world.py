"""The simulated cluster on one virtual clock: controllers, machines, people and dispatch callers, each a step.

Every step of a schedule is one action chosen by the seeded RNG among the actions enabled now (`World.actions`),
so the seed decides every interleaving: a controller's decision, the landing of one of its writes, a kubelet
starting a process, a dispatch caller's next request, a person's act, time passing. Each action has a label;
a schedule is its list of labels, which `World.replay` follows exactly (a label not enabled at its turn is
skipped), which is what shrinking needs.

Controllers decide from the store as it is now and send their writes; each write is in flight until a later
step lands it, and one that has not landed 60 s after it was sent is abandoned (the API server's request timeout,
`kube-apiserver --request-timeout`, as evidence.py assumes; the lab's `apiserver/delays.py` answers 504 then). A
controller reconciles one key at a time (client-go's workqueue: a key being processed is not handed out again),
so its next decision for a key waits until the writes of the previous one landed or were abandoned. That is how
the model reaches writes that land after a hold (a pod creation, a binding, a JobSet resume), a slow binding, a
slow garbage collector. Each controller follows the lab's simulated one, whose module docstring cites the
upstream source and version; only what dispatch's rule reads and what makes processes run is kept:

- Trainer (`lab/airflow_provider_dispatch_lab/simulated/workloads/trainer.py`, kubeflow/trainer v2.3.0
  `trainjob_controller.go`): builds the JobSet with the lab's own `trainer_build.build_jobset` and applies it when
  `should_apply`; writes the `Suspended` condition (`setSuspendedCondition`). An apply onto a JobSet another
  TrainJob controls (a deleted namesake's, still there) would give the JobSet two controller references, which the
  API server refuses (apimachinery `ValidateOwnerReferences`, "Only one reference can have Controller set to true"):
  nothing is applied until the garbage collector removed it (UNVERIFIED against a server-side apply of that shape).
- JobSet (`workloads/jobset.py`, kubernetes-sigs/jobset `jobset_controller.go`): creates the missing Jobs with
  `jobset_jobs.jobs_to_create`, suspends the active ones, resumes them (`resumeJob`: clears `status.startTime`,
  merges the pod template's labels and annotations, `suspend: false`). Failure policies, restarts and success are
  left out.
- The Job controller (`workloads/job.py`, `job_pods.py`, kubernetes v1.36.3 `job_controller.go`): Indexed Jobs
  with `podReplacementPolicy: Failed`; a terminating pod keeps its index; creates missing indexes with
  `job_pods.pod_from_template` (the tracking finalizer, the completion index), after the failure back-off (10 s
  doubling); on suspension removes the finalizer of each active pod and deletes it gracefully, then writes
  `Suspended=True`; on resume `Suspended=False` and `startTime`; removes the finalizer of terminal pods and of
  orphans (their Job gone). `backoffLimit` and Job failure are left out (a schedule fails far fewer pods).
- The scheduler (`nodes/scheduler.py`): binds a pending pod to a node that exists, is Ready and has no
  out-of-service taint, chosen by the RNG; the binding is in flight and is refused when it lands on a pod being
  deleted or already bound (`pkg/registry/core/pod/storage/storage.go` `setPodNodeAndMetadata`, UNVERIFIED
  version), so a slow binding may land after a hold's record.
- The kubelet (`nodes/kubelet.py`, kubernetes v1.36.3): on a machine that is on, starts one process for a pod
  bound to its node (the truth: the process runs from that step, whatever the API shows), reports Running; on a
  deletionTimestamp sends SIGTERM, the process stopping after its termination time or the grace (at least 2 s;
  each world draws both: `Config`); it acts on a pod change within its world's `kubelet_lag` (a watch that
  relists late), and sends a due heartbeat within 2 s;
  writes the terminal phase, then deletes with grace 0; kills a process whose pod vanished from the API
  (`HandlePodRemoves`); heartbeats Ready every 10 s (`nodeStatusUpdateFrequency`). A frozen machine (frozen or
  cut off: the same here) keeps its processes running and reports nothing; a powered-off machine's processes
  stop at that instant. Machines never come back here (the returned-node rule is left to the live model).
- Node lifecycle (`nodes/node_lifecycle.py`): Ready=Unknown 50 s after the last heartbeat
  (`nodeMonitorGracePeriod`). Lifecycle taints and zones are left out.
- PodGC (`nodes/podgc.py`): terminating pods on a node not Ready with the out-of-service taint, and pods bound to a
  Node that is gone: phase Failed, then DELETE grace 0. The orphans go at a pass (every 20 s, `gcCheckPeriod`)
  after the 40 s quarantine the first pass after the deletion starts (`gcOrphaned`, `nodeQueue.AddAfter`; the
  pass at its end or the next), so 40 to 80 s after the deletion (kubernetes v1.36.3 `gc_controller.go`), or
  later: PodGC's step, as every controller's, waits its turn. Taint eviction
  (`nodes/taint_eviction.py`) deletes, gracefully, pods on a node with a NoExecute out-of-service taint.
- The garbage collector (`workloads/garbage_collector.py`): deletes (Background) an object whose controller owner
  is gone; one dependent per step, at a low weight: it is slow.
- People: force-delete (grace 0) a pod of a TrainJob dispatch has held (a pod no hold has seen is outside the
  promise, docs/reliability.md); delete a running TrainJob without a hold and open a namesake; freeze or power off
  a machine; taint out-of-service or `kubectl delete node` a machine that is off (precondition P), or delete the
  Node of a machine that runs and hears the API (issue 26, finding 4) once every pod there that may run was
  listed bound by a writer's check (`_all_seen_on`); fail a process; ask for a hold or a release.
- dispatch callers: the real `hold`, `release` and `open` programs, one request per step.

The ground truth is the lab's own (`lab/airflow_provider_dispatch_lab/truth/overlap.py`): an `OverlapRecorder` with
an `AdmissionLedger` fed by the store's events; a violation is two processes of one rank at once (`rank_overlaps`),
two executions of one TrainJob at once (`overlaps`), or an admission whose A is not the previous one plus one.
"""

from __future__ import annotations

import copy
import inspect
import random
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch.dispatch import programs as p
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import DispatchError
from airflow_provider_dispatch_lab.apiserver.registry.resources import default_registry
from airflow_provider_dispatch_lab.kinds import JOB
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.objects import controller_reference
from airflow_provider_dispatch_lab.simulated.workloads import job_pods as jp
from airflow_provider_dispatch_lab.simulated.workloads import jobset_jobs as jj
from airflow_provider_dispatch_lab.simulated.workloads import trainer_build as tb
from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger, OverlapRecorder, ProcessRecord

from .store import MEMBERSHIP, Key, Memo, Obj, Store, stamp

#: an action or a write in flight: called with no arguments (the lambdas bind theirs as defaults)
Thunk = Callable[..., object]
NAMESPACE = "sim"
RUNTIME = "rt"
GRACE_SECONDS = 30
REQUEST_TIMEOUT = 60.0
HEARTBEAT_SECONDS = 10.0
MONITOR_GRACE = 50.0
QUARANTINE = 40.0
#: PodGC's pass period (`gcCheckPeriod`, `pkg/controller/podgc/gc_controller.go` v1.36.3)
PODGC_PERIOD = 20.0
#: how soon a kubelet that runs and hears the API acts on a pod change (its watch) and sends a due heartbeat
#: (UNVERIFIED as a bound: the watch delivers within a second on a healthy cluster; the lab's kubelet acts at once)
KUBELET_REACTION = 2.0
#: the rule's default clock skew bound (`nodes.DEFAULT_CLOCK_SKEW_SECONDS`), written out: the search also runs the
#: code before issue 26, which has neither that constant nor the programs' `clock_skew_seconds` (`_skew_option`)
RULE_DEFAULT_SKEW = 5.0
URGENT = ("kubelet-start:", "kubelet-term:", "kubelet-kill:", "kubelet:")
#: the time steps and their weights: mostly short, so that controllers act between them
TICKS = ((1.0, 0.2), (2.0, 0.15), (5.0, 0.15), (10.0, 0.1), (20.0, 0.05), (30.0, 0.03), (60.0, 0.02))

_JOB_SEMANTICS: Any = None


def _semantics() -> Any:
    global _JOB_SEMANTICS
    if _JOB_SEMANTICS is None:
        jobs = default_registry().by_path("batch", "v1", "jobs")
        assert jobs is not None
        _JOB_SEMANTICS = jobs.schema.strategic_list_semantics
    return _JOB_SEMANTICS


#: whether the programs take `clock_skew_seconds` (the code before issue 26 does not), read once per process
_PROGRAMS_TAKE_SKEW = "clock_skew_seconds" in inspect.signature(p.release).parameters


def _skew_option(seconds: float) -> dict[str, float]:
    """The programs' `clock_skew_seconds`, for code that has it (the code before issue 26 has not: it assumed one
    clock, so against it the worlds' skew is a fault it was not built for, finding 5)."""
    return {"clock_skew_seconds": seconds} if _PROGRAMS_TAKE_SKEW else {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _terminal(pod: Mapping[str, Any]) -> bool:
    return _phase(pod) in ("Succeeded", "Failed")


def _deleting(obj: Mapping[str, Any]) -> bool:
    return _meta(obj).get("deletionTimestamp") is not None


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if cond.get("type") == kind:
            found: Mapping[str, Any] = cond
            return found
    return None


def _set_condition(obj: Obj, kind: str, status: str, reason: str, at: str) -> None:
    conditions = obj.setdefault("status", {}).setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == kind:
            if cond.get("status") != status:
                cond.update(status=status, reason=reason, lastTransitionTime=at)
            return
    conditions.append({"type": kind, "status": status, "reason": reason, "lastTransitionTime": at})


@dataclass
class Flight:
    """A write a controller sent that has not landed yet."""

    sent: float
    what: str
    land: Thunk


@dataclass
class Machine:
    name: str
    state: str = "on"
    """on (kubelet and processes run), frozen (processes run, kubelet silent), off (nothing runs)."""
    heartbeat: float = 0.0
    """When the kubelet's last heartbeat landed (virtual seconds)."""
    node_deleted: bool = False


@dataclass
class Proc:
    record: ProcessRecord
    key: Key
    node: str
    grace: float
    stop_at: float | None = None
    failed: bool = False


@dataclass
class Caller:
    """One dispatch caller per TrainJob name, running one program at a time (its next request pending)."""

    name: str
    program: Generator[p.Request, p.Response, Any] | None = None
    pending: p.Request | None = None
    operation: str = ""


@dataclass
class Config:
    nodes: int = 3
    trainjobs: int = 1
    num_nodes: int = 1
    termination_seconds: float = 5.0
    """How long a process takes to stop after SIGTERM; the kubelet kills it at the grace (SIGKILL) if that is
    sooner: a value above the grace is a process that ignores SIGTERM (a training loop finishing a checkpoint)."""
    grace_seconds: int = GRACE_SECONDS
    """The runtime's `terminationGracePeriodSeconds`: the kubelet's SIGKILL after SIGTERM, and what the rule reads
    from each pod (`grace_of`) to time its node proofs."""
    kubelet_lag: float = KUBELET_REACTION
    """How late a kubelet that runs and hears the API may act on a pod change: its watch is a reflector, which
    after a dropped watch relists with a back-off of 0.8 s doubling to 30 s, jittered up to 60 s
    (`client-go/tools/cache/reflector.go`), the lag `RETURN_MARGIN_SECONDS` (60 s) is sized for."""
    skew: float = 2.0
    """The two API server replicas' clocks are -skew and +skew off (so they differ by 2 x skew)."""
    landing: float = 3.0
    """The weight of landing a write in flight against the other steps: lower is a slow API server (APF queueing,
    a slow webhook), whose writes stay in flight for tens of seconds, up to the 60 s request timeout."""

    @property
    def clock_skew_seconds(self) -> float:
        """The bound dispatch's callers are configured with (`clock_skew_seconds` of the programs, operators and
        adapters): the rule's default, 5 s, or the most two replicas can differ here when that is more, as an
        operator who knows the cluster's clocks differ more would set it."""
        return max(RULE_DEFAULT_SKEW, 2 * self.skew)


@dataclass(slots=True)
class Action:
    label: str
    weight: float
    run: Thunk


class World:
    """The cluster, the people and the callers; `step()` runs one action chosen by the RNG."""

    def __init__(self, seed: int, config: Config | None = None) -> None:
        self.rng = random.Random(seed)
        """Chooses the next action (not drawn in a replay, which follows its labels)."""
        self.env = random.Random(seed + 1_000_003)
        """What actions draw themselves (a binding's node, the replica that answers): the same in a replay of
        the same labels."""
        self.config = config or Config()
        self.clock = 0.0
        # the two replicas as far apart as the world's skew allows: the worst case of the bound dispatch assumes
        self.replicas = [-self.config.skew, self.config.skew]
        self.ledger = AdmissionLedger()
        self.recorder = OverlapRecorder(ledger=self.ledger)
        self.store = Store(now=lambda: self.clock, replica=self._replica, listener=self._observe)
        self.violations: list[str] = []
        self.story: list[str] = []
        self.labels: list[str] = []
        self.flights: dict[str, list[Flight]] = {}
        self.machines: dict[str, Machine] = {}
        self.procs: dict[str, Proc] = {}
        self.started: set[str] = set()
        self.callers: dict[str, Caller] = {}
        self.want: dict[str, str] = {}
        self.submission: dict[str, int] = {}
        self.absent_since: dict[str, float] = {}
        #: when PodGC's orphan pass deletes the pods of each deleted Node (`_podgc`), and the phase of its passes
        self.orphans_due: dict[str, float] = {}
        self.podgc_phase = self.env.uniform(0.0, PODGC_PERIOD)
        self.admitted: dict[str, int] = {}
        self.failures: dict[str, list[float]] = {}
        self.seen_by_dispatch: set[str] = set()
        self.urgent_since: dict[str, float] = {}
        self.upstream_overlaps = 0
        self._built: dict[tuple[str, str], Obj] = {}
        self.cases: list[str] = []
        #: store revisions (one global order) of pod creations, bindings and holds, for `classify`
        self.created_at: dict[str, int] = {}
        self.bound_at: dict[str, int] = {}
        self.holds: dict[str, list[int]] = {}
        self.memo = Memo(watch=lambda: (self.rng.getstate(), self.env.getstate()))
        self._setup()

    # --- set-up and truth ----------------------------------------------------------------------------------

    def _replica(self) -> float:
        return self.replicas[self.env.randrange(len(self.replicas))]

    def _setup(self) -> None:
        runtime = manifests.cluster_training_runtime(RUNTIME, grace_seconds=self.config.grace_seconds)
        job_spec = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        job_spec["template"]["spec"]["restartPolicy"] = "Never"
        self.store.create("clustertrainingruntimes", "", runtime, "admin")
        for index in range(self.config.nodes):
            name = f"node-{index}"
            node = manifests.node(name)
            ready = node["status"]["conditions"][0]
            ready.update(lastHeartbeatTime=stamp(0), lastTransitionTime=stamp(0))
            self.store.create("nodes", "", node, "kubelet")
            self.machines[name] = Machine(name)
        for index in range(self.config.trainjobs):
            name = f"tj-{'abcd'[index]}"
            self.callers[name] = Caller(name)
            self.want[name] = "run"
            self.submission[name] = 1

    def manifest(self, name: str) -> Obj:
        body = manifests.trainjob(
            name,
            job_id=f"job-{name}",
            submission=str(self.submission[name]),
            num_nodes=self.config.num_nodes,
            runtime=RUNTIME,
        )
        body["metadata"]["namespace"] = NAMESPACE
        return body

    def classify(self, first: ProcessRecord, second: ProcessRecord) -> str:
        """Which of issue 26's cases a violation is, by what happened to the first process's pod (for the report
        of time-to-find; the search itself knows no case): 3, the two pods are of two TrainJobs of one name (a
        namesake); else 1, the pod existed at a hold of its TrainJob and was bound after it; 2, it was created
        after a hold (in flight across it); "other" otherwise."""
        if first.execution.submission != second.execution.submission:
            return "case 3 (namesake)"
        uid = first.pod_uid
        created, bound = self.created_at.get(uid), self.bound_at.get(uid)
        holds = [at for at in self.holds.get(first.trainjob, []) if created is not None and at >= created]
        if created is not None and bound is not None and any(at <= bound for at in holds):
            return "case 1 (bound after the record)"
        earlier = [at for at in self.holds.get(first.trainjob, []) if created is not None and at < created]
        if earlier:
            return "case 2 (created after the record)"
        return "other"

    def _observe(self, event: Any) -> None:
        self.ledger.observe(event)
        if event.resource == "pods":
            uid = str(event.obj["metadata"]["uid"])
            if event.type == "ADDED":
                self.created_at[uid] = event.revision
                self._check_admission_label(event.obj)
            if (event.obj.get("spec") or {}).get("nodeName") and not ((event.old or {}).get("spec") or {}).get(
                "nodeName"
            ):
                self.bound_at.setdefault(uid, event.revision)
            return
        if event.type == "DELETED":
            return
        old = event.old or {}
        if (
            event.old is not None
            and old.get("spec", {}).get("suspend") is False
            and event.obj["spec"].get("suspend") is True
        ):
            self.holds.setdefault(event.key[2], []).append(event.revision)
        was_held = old.get("spec", {}).get("suspend") is not False if event.old is not None else True
        if was_held and event.obj.get("spec", {}).get("suspend") is False:
            uid = str(event.obj["metadata"]["uid"])
            text = (event.obj["metadata"].get("annotations") or {}).get(v.ANNOTATION_ADMISSION)
            expected = self.admitted.get(uid, 0) + 1
            if text != str(expected):
                self.violations.append(
                    f"TrainJob {event.key[2]} (uid {uid}) admitted with A={text}, not {expected}: A grows by one "
                    "per admission"
                )
            self.admitted[uid] = expected
            self.note(f"ADMITTED {event.key[2]} A={text}")

    def _check_admission_label(self, pod: Mapping[str, Any]) -> None:
        """A pod of the current TrainJob of its name (its submission label) is created with the A of that
        TrainJob's last admission: one created later from an earlier execution's template (a write in flight
        across a settle that ended too early, finding 5) runs as the wrong execution's rank (the live model's
        `invariants.label_mismatches`, judged when the pod is created)."""
        labels = _meta(pod).get("labels") or {}
        name = labels.get(v.LABEL_JOBSET_NAME)
        if name not in self.submission or labels.get(v.LABEL_SUBMISSION) != str(self.submission[name]):
            return
        trainjob = self.store.get(("trainjobs", NAMESPACE, name))
        admitted = self.admitted.get(str(trainjob["metadata"]["uid"]), 0) if trainjob is not None else 0
        label = labels.get(v.POD_LABEL_ADMISSION)
        if admitted and label != str(admitted):
            self.violations.append(
                f"{_meta(pod).get('name')}: label A={label!r} but created under admission A={admitted} "
                f"at t={self.clock:.1f}s"
            )

    def note(self, text: str) -> None:
        self.story.append(f"t={self.clock:7.1f}s  {text}")

    def _start_process(self, pod: Obj, node: str) -> None:
        metadata = pod["metadata"]
        uid = str(metadata["uid"])
        record = self.recorder.started(
            namespace=NAMESPACE,
            pod=str(metadata["name"]),
            pod_uid=uid,
            node=node,
            labels=metadata.get("labels") or {},
            at=self.clock,
            annotations=metadata.get("annotations") or {},
        )
        grace = float((pod.get("spec") or {}).get("terminationGracePeriodSeconds", self.config.grace_seconds))
        self.procs[uid] = Proc(record, ("pods", NAMESPACE, str(metadata["name"])), node, grace)
        self.started.add(uid)
        self.note(f"process of {metadata['name']} starts on {node} (A={record.execution.admission or '-'})")
        for other in self.recorder.processes(NAMESPACE, record.trainjob):
            if other is record or not other.running or other.pod_uid == uid:
                continue
            two = not other.same_execution(record) or other.execution != record.execution
            if other.rank == record.rank and record.rank[1:] != ("", "", "") and not two:
                # one execution, two pods of one rank: the Job controller replaced a pod PodGC force-deleted from a
                # Node deleted under a running machine (the rule's finding 4 is breaking precondition P): upstream's
                # hazard H1, not an admission of dispatch's; counted, not a violation of the promise
                self.upstream_overlaps += 1
            elif other.rank == record.rank and record.rank[1:] != ("", "", ""):
                self.cases.append(self.classify(other, record))
                self.violations.append(
                    f"two processes of rank {'/'.join(record.rank)}: {other.pod} on {other.node} (execution "
                    f"{other.admission}) and {record.pod} on {node} (execution {record.admission}) "
                    f"from t={self.clock:.1f}s"
                )
            elif not other.same_execution(record):
                self.cases.append(self.classify(other, record))
                self.violations.append(
                    f"two executions of {record.trainjob} at once: {other.pod} (execution {other.admission}) and "
                    f"{record.pod} (execution {record.admission}) from t={self.clock:.1f}s"
                )

    def _stop_process(self, proc: Proc, at: float, why: str) -> None:
        if proc.record.running:
            self.recorder.stopped(proc.record, max(at, proc.record.start))
            self.note(f"process of {proc.record.pod} stops ({why})")

    # --- time -------------------------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        target = self.clock + seconds
        due = sorted(
            (proc.stop_at, uid)
            for uid, proc in self.procs.items()
            if proc.stop_at is not None
            and proc.record.running
            and proc.stop_at <= target
            and self.machines[proc.node].state == "on"
        )
        for at, uid in due:
            self.clock = max(self.clock, at)
            self._stop_process(self.procs[uid], at, "after SIGTERM")
        self.clock = target

    # --- in-flight writes -------------------------------------------------------------------------------------

    def send(self, who: str, what: str, land: Thunk) -> None:
        self.flights.setdefault(who, []).append(Flight(self.clock, what, land))

    def _land(self, who: str) -> None:
        queue = self.flights[who]
        flight = queue.pop(0)
        if not queue:
            del self.flights[who]
        if self.clock - flight.sent > REQUEST_TIMEOUT:
            self.note(f"{who}: {flight.what} abandoned (sent at {flight.sent:.1f}s, request timeout)")
            return
        flight.land()

    def busy(self, who: str) -> bool:
        return who in self.flights

    # --- the actions --------------------------------------------------------------------------------------------

    def actions(self) -> list[Action]:
        found: list[Action] = []
        for who in sorted(self.flights):
            found.append(Action(f"land:{who}", self.config.landing, lambda who=who: self._land(who)))
        found += self._kept(self._trainer, ("trainjobs", "jobsets", "clustertrainingruntimes"), "trainer:")
        found += self._kept(self._jobset, ("jobsets", "jobs"), "jobset:")
        failures = tuple((job, tuple(times)) for job, times in self.failures.items())
        found += self._kept(self._job_controller, ("jobs", "pods"), "job:", failures, self.clock if failures else None)
        found += self._kept(self._scheduler, ("nodes", "pods"), "bind:")
        heartbeats = tuple(machine.heartbeat for machine in self.machines.values())
        found += self._kubelets() + self._kept(self._node_lifecycle, ("nodes",), "", self.clock, heartbeats)
        found += self._kept(self._podgc, ("nodes", "pods"), "", self.clock)  # its absent_since: a no-op on a hit
        found += self._kept(self._gc, ("jobsets", "jobs", "pods", MEMBERSHIP), "")
        found += self._callers() + self._people()
        # a kubelet that runs and hears the API acts within its world's `kubelet_lag` of a pod change, and sends a
        # due heartbeat within KUBELET_REACTION: time
        # does not pass beyond that while it has not (the other controllers may be slow: that is the fault model)
        urgent = [a.label for a in found if a.label.startswith(URGENT)]
        self.urgent_since = {label: self.urgent_since.get(label, self.clock) for label in urgent}
        deadline = min(
            (
                at + (KUBELET_REACTION if label.endswith(":heartbeat") else self.config.kubelet_lag)
                for label, at in self.urgent_since.items()
            ),
            default=None,
        )
        if deadline is None or deadline > self.clock:
            cap = None if deadline is None else deadline - self.clock
            found += self.memo.get("ticks", cap, lambda: self._ticks(cap))
        return found

    def _ticks(self, cap: float | None) -> list[Action]:
        found = []
        for seconds, weight in TICKS:
            step = seconds if cap is None else min(seconds, cap)
            found.append(Action(f"tick:{seconds:g}", weight, lambda s=step: self.advance(s)))
        return found

    def _kept(
        self, derive: Callable[[], list[Action]], reads: tuple[str, ...], busy: str, *extra: object
    ) -> list[Action]:
        """A controller's actions, derived again only when what it reads changed: the resources `reads`, its keys
        in flight (`busy`: their prefix) and `extra` (`store.Memo`; a controller kept so reads nothing else)."""
        flying = tuple(sorted(who for who in self.flights if who.startswith(busy))) if busy else ()
        key = (self.store.last_write(reads), flying, extra)
        kept: list[Action] = self.memo.get(derive.__name__, key, derive)
        return kept

    def step(self, label: str | None = None) -> str | None:
        """One action: the one labelled `label` (None if it is not enabled now), else one the RNG draws."""
        enabled = self.actions()
        if label is not None:
            chosen = next((a for a in enabled if a.label == label), None)
            if chosen is None:
                return None
        else:
            total = sum(a.weight for a in enabled)
            pick = self.rng.random() * total
            chosen = enabled[-1]
            for action in enabled:
                pick -= action.weight
                if pick <= 0:
                    chosen = action
                    break
        self.labels.append(chosen.label)
        chosen.run()
        return chosen.label

    # --- Trainer ----------------------------------------------------------------------------------------------

    def _trainer(self) -> list[Action]:
        found = []
        for tj in self.store.items("trainjobs", NAMESPACE):
            name = str(tj["metadata"]["name"])
            who = f"trainer:{name}"
            if self.busy(who) or _deleting(tj):
                continue
            writes: list[tuple[str, Thunk]] = []
            runtime = self.store.get(("clustertrainingruntimes", "", RUNTIME))
            jobset = self.store.get(("jobsets", NAMESPACE, name))
            if runtime is not None and tb.should_apply(tj, jobset) and not tb.is_finished(tj):
                # the same TrainJob and runtime build the same JobSet: built once per their resourceVersions
                built = (tj["metadata"]["resourceVersion"], runtime["metadata"]["resourceVersion"])
                desired = self._built.get(built)
                if desired is None:
                    desired = self._built[built] = tb.build_jobset(tj, runtime, _semantics())
                other = jobset is not None and _controller_uid(jobset) != tj["metadata"]["uid"]
                if not other and (jobset is None or self._differs(jobset, desired)):
                    writes.append(
                        (
                            f"apply JobSet {name} (suspend={desired['spec'].get('suspend')})",
                            lambda d=desired: self._apply_jobset(d),
                        )
                    )
            suspended = tj.get("spec", {}).get("suspend") is True
            cond = _condition(tj, v.CONDITION_SUSPENDED)
            if (suspended and (cond is None or cond.get("status") != "True")) or (
                not suspended and cond is not None and cond.get("status") == "True"
            ):
                writes.append(
                    (
                        f"Suspended={suspended} on TrainJob {name}",
                        lambda n=name, s=suspended: self._trainjob_suspended(n, s),
                    )
                )
            if writes:
                found.append(Action(who, 1.0, lambda who=who, writes=writes: self._send_all(who, writes)))
        return found

    def _send_all(self, who: str, writes: list[tuple[str, Thunk]]) -> None:
        for what, land in writes:
            self.send(who, what, land)

    @staticmethod
    def _differs(jobset: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
        mine = _meta(jobset)
        return (
            jobset.get("spec") != desired.get("spec")
            or (mine.get("labels") or {}) != (desired["metadata"].get("labels") or {})
            or (mine.get("annotations") or {}) != (desired["metadata"].get("annotations") or {})
        )

    def _apply_jobset(self, desired: Obj) -> None:
        key = ("jobsets", NAMESPACE, str(desired["metadata"]["name"]))
        existing = self.store.get(key)
        if existing is None:
            owner = self.store.get(("trainjobs", NAMESPACE, key[2]))
            if owner is None or owner["metadata"]["uid"] != desired["metadata"]["ownerReferences"][0]["uid"]:
                return  # its TrainJob is gone: the API server refuses nothing, but the GC would delete it at once
            self.store.create("jobsets", NAMESPACE, desired, "trainer")
            self.note(f"Trainer creates JobSet {key[2]} (suspend={desired['spec'].get('suspend')})")
            return
        if _controller_uid(existing) != desired["metadata"]["ownerReferences"][0]["uid"] or _deleting(existing):
            return

        def change(obj: Obj) -> None:
            obj["spec"] = copy.deepcopy(desired["spec"])
            obj["metadata"]["labels"] = dict(desired["metadata"].get("labels") or {})
            obj["metadata"]["annotations"] = dict(desired["metadata"].get("annotations") or {})

        self.store.mutate(key, change, "trainer")
        self.note(f"Trainer applies JobSet {key[2]} (suspend={desired['spec'].get('suspend')})")

    def _trainjob_suspended(self, name: str, suspended: bool) -> None:
        at = self.store.server_time()

        def change(obj: Obj) -> None:
            _set_condition(
                obj,
                v.CONDITION_SUSPENDED,
                "True" if suspended else "False",
                "Suspended" if suspended else "Resumed",
                at,
            )

        self.store.mutate(("trainjobs", NAMESPACE, name), change, "trainer", status=True)

    # --- JobSet -------------------------------------------------------------------------------------------------

    def _jobset(self) -> list[Action]:
        found = []
        jobs = self.store.items("jobs", NAMESPACE)
        for js in self.store.items("jobsets", NAMESPACE):
            name = str(js["metadata"]["name"])
            who = f"jobset:{name}"
            if self.busy(who) or _deleting(js):
                continue
            uid = js["metadata"]["uid"]
            children = [j for j in jobs if _controller_uid(j) == uid]
            writes: list[tuple[str, Thunk]] = []
            for job in jj.jobs_to_create(js, jj.classify(children, 0)):
                writes.append((f"create Job {job['metadata']['name']}", lambda job=job: self._create_job(job)))
            suspend = bool(js.get("spec", {}).get("suspend"))
            for job in children:
                if jj.finished_type(job) or bool(job.get("spec", {}).get("suspend")) == suspend:
                    continue
                if suspend:
                    writes.append(
                        (
                            f"suspend Job {job['metadata']['name']}",
                            lambda n=job["metadata"]["name"]: self._suspend_job(n),
                        )
                    )
                else:
                    rjob_name = str(_meta(job).get("labels", {}).get(jj.REPLICATED_JOB_NAME, ""))
                    index = int(_meta(job).get("labels", {}).get(jj.JOB_INDEX, "0"))
                    rjob = next((r for r in jj.replicated_jobs(js) if r.get("name") == rjob_name), None)
                    if rjob is None:
                        continue
                    template = jj.construct_job(js, rjob, index)["spec"]["template"].get("metadata") or {}
                    writes.append(
                        (
                            f"resume Job {job['metadata']['name']}",
                            lambda n=job["metadata"]["name"], t=template: self._resume_job(n, t),
                        )
                    )
            if writes:
                found.append(Action(who, 1.0, lambda who=who, writes=writes: self._send_all(who, writes)))
        return found

    def _create_job(self, job: Obj) -> None:
        owner_uid = job["metadata"]["ownerReferences"][0]["uid"]
        owner = self.store.get(("jobsets", NAMESPACE, str(job["metadata"]["ownerReferences"][0]["name"])))
        if owner is None or owner["metadata"]["uid"] != owner_uid:
            return  # the GC would delete it at once; keep the model small
        created = self.store.create("jobs", NAMESPACE, job, "jobset")
        if isinstance(created, dict):
            self.note(f"JobSet creates Job {job['metadata']['name']} (suspend={job['spec'].get('suspend')})")

    def _suspend_job(self, name: str) -> None:
        def change(obj: Obj) -> None:
            obj["spec"]["suspend"] = True

        if self.store.mutate(("jobs", NAMESPACE, name), change, "jobset"):
            self.note(f"JobSet suspends Job {name}")

    def _resume_job(self, name: str, template: Mapping[str, Any]) -> None:
        key = ("jobs", NAMESPACE, name)

        def clear(obj: Obj) -> None:
            obj.setdefault("status", {}).pop("startTime", None)

        def change(obj: Obj) -> None:
            meta = obj["spec"].setdefault("template", {}).setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **(template.get("labels") or {})}
            meta["annotations"] = {**(meta.get("annotations") or {}), **(template.get("annotations") or {})}
            obj["spec"]["suspend"] = False

        if self.store.mutate(key, clear, "jobset", status=True):
            self.store.mutate(key, change, "jobset")
            labels = template.get("labels") or {}
            self.note(f"JobSet resumes Job {name} (A={labels.get(v.POD_LABEL_ADMISSION, '-')})")

    # --- the Job controller -------------------------------------------------------------------------------------

    def _job_controller(self) -> list[Action]:
        found = []
        pods = self.store.items("pods", NAMESPACE)
        jobs = self.store.items("jobs", NAMESPACE)
        uids = {j["metadata"]["uid"] for j in jobs}
        for job in jobs:
            name = str(job["metadata"]["name"])
            who = f"job:{name}"
            if self.busy(who) or _deleting(job):
                continue
            mine = [pod for pod in pods if _controller_uid(pod) == job["metadata"]["uid"]]
            writes = self._job_writes(job, mine)
            if writes:
                found.append(Action(who, 1.0, lambda who=who, writes=writes: self._send_all(who, writes)))
        orphans = [
            pod
            for pod in pods
            if jp.TRACKING_FINALIZER in (_meta(pod).get("finalizers") or ()) and _controller_uid(pod) not in uids
        ]
        if orphans and not self.busy("job:orphans"):
            writes = [
                (f"release orphan {o['metadata']['name']}", lambda n=o["metadata"]["name"]: self._drop_finalizer(n))
                for o in orphans
            ]
            found.append(Action("job:orphans", 1.0, lambda writes=writes: self._send_all("job:orphans", writes)))
        return found

    def _job_writes(self, job: Obj, pods: list[Obj]) -> list[tuple[str, Thunk]]:
        name = str(job["metadata"]["name"])
        writes: list[tuple[str, Thunk]] = []
        for pod in pods:
            if _terminal(pod) and jp.TRACKING_FINALIZER in (_meta(pod).get("finalizers") or ()):
                failed = _phase(pod) == "Failed"
                writes.append(
                    (
                        f"count {pod['metadata']['name']}",
                        lambda n=pod["metadata"]["name"], j=name, f=failed: self._count(n, j, f),
                    )
                )
        suspended = bool(job.get("spec", {}).get("suspend"))
        cond = _condition(job, v.CONDITION_SUSPENDED)
        status = job.get("status") or {}
        if suspended:
            for pod in pods:
                if not _terminal(pod) and not _deleting(pod):
                    writes.append(
                        (
                            f"delete {pod['metadata']['name']} (suspended)",
                            lambda n=pod["metadata"]["name"]: self._delete_for_suspend(n),
                        )
                    )
            if cond is None or cond.get("status") != "True":
                writes.append((f"Suspended=True on Job {name}", lambda: self._job_suspended(name, True)))
            return writes
        if (cond is not None and cond.get("status") == "True") or status.get("startTime") is None:
            writes.append((f"resumed/startTime on Job {name}", lambda: self._job_suspended(name, False)))
        completions = int(job.get("spec", {}).get("completions") or 1)
        taken = {i for pod in pods if not _terminal(pod) and (i := jp.completion_index(pod)) is not None}
        failures = self.failures.get(name, [])
        if failures:
            wait = min(10.0 * 2 ** (len(failures) - 1), 600.0)
            if self.clock < failures[-1] + wait:
                return writes
        owner = controller_reference(job, JOB)
        for index in range(completions):
            if index not in taken:
                pod = jp.pod_from_template(job, owner, index)
                writes.append((f"create pod of {name} index {index}", lambda pod=pod: self._create_pod(pod)))
        return writes

    def _count(self, pod_name: str, job_name: str, failed: bool) -> None:
        if self._drop_finalizer(pod_name) and failed:
            self.failures.setdefault(job_name, []).append(self.clock)

    def _drop_finalizer(self, pod_name: str) -> bool:
        def change(obj: Obj) -> None:
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"].get("finalizers") or () if f != jp.TRACKING_FINALIZER
            ]

        return self.store.mutate(("pods", NAMESPACE, pod_name), change, "job-controller")

    def _delete_for_suspend(self, pod_name: str) -> None:
        if self._drop_finalizer(pod_name):
            self.store.delete(("pods", NAMESPACE, pod_name), "job-controller")
            self.note(f"Job controller deletes {pod_name} (its Job is suspended)")

    def _job_suspended(self, name: str, suspended: bool) -> None:
        at = self.store.server_time()

        def change(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            if suspended:
                _set_condition(obj, v.CONDITION_SUSPENDED, "True", "JobSuspended", at)
            else:
                cond = _condition(obj, v.CONDITION_SUSPENDED)
                if cond is not None and cond.get("status") == "True":
                    _set_condition(obj, v.CONDITION_SUSPENDED, "False", "JobResumed", at)
                status.setdefault("startTime", at)
                if status.get("startTime") is None:
                    status["startTime"] = at

        self.store.mutate(("jobs", NAMESPACE, name), change, "job-controller", status=True)

    def _create_pod(self, pod: Obj) -> None:
        owner = pod["metadata"]["ownerReferences"][0]
        job = self.store.get(("jobs", NAMESPACE, str(owner["name"])))
        if job is None or job["metadata"]["uid"] != owner["uid"]:
            return
        pod = copy.deepcopy(pod)
        pod.setdefault("status", {})["phase"] = "Pending"
        created = self.store.create("pods", NAMESPACE, pod, "job-controller")
        if isinstance(created, dict):
            labels = created["metadata"].get("labels") or {}
            self.note(
                f"Job controller creates pod {created['metadata']['name']} (A={labels.get(v.POD_LABEL_ADMISSION, '-')})"
            )

    # --- the scheduler -------------------------------------------------------------------------------------------

    def _schedulable_nodes(self) -> list[str]:
        names = []
        for node in self.store.items("nodes"):
            ready = _condition(node, "Ready")
            taints = (node.get("spec") or {}).get("taints") or ()
            if (
                ready is not None
                and ready.get("status") == "True"
                and not any(t.get("key") == v.TAINT_OUT_OF_SERVICE for t in taints)
            ):
                names.append(str(node["metadata"]["name"]))
        return sorted(names)

    def _scheduler(self) -> list[Action]:
        found: list[Action] = []
        nodes = self._schedulable_nodes()
        if not nodes:
            return found
        for pod in self.store.items("pods", NAMESPACE):
            name = str(pod["metadata"]["name"])
            who = f"bind:{name}"
            if self.busy(who) or _deleting(pod) or _terminal(pod) or (pod.get("spec") or {}).get("nodeName"):
                continue
            found.append(
                Action(who, 1.0, lambda who=who, name=name, nodes=nodes: self._decide_binding(who, name, nodes))
            )
        return found

    def _decide_binding(self, who: str, pod_name: str, nodes: list[str]) -> None:
        node = nodes[self.env.randrange(len(nodes))]
        self.send(who, f"bind {pod_name} to {node}", lambda: self._bind(pod_name, node))

    def _bind(self, pod_name: str, node: str) -> None:
        key = ("pods", NAMESPACE, pod_name)
        pod = self.store.get(key)
        if pod is None or _deleting(pod) or (pod.get("spec") or {}).get("nodeName"):
            return

        def change(obj: Obj) -> None:
            obj.setdefault("spec", {})["nodeName"] = node

        self.store.mutate(key, change, "default-scheduler")
        self.note(f"scheduler binds {pod_name} to {node}")

    # --- kubelets, node lifecycle, PodGC, taint eviction ---------------------------------------------------------

    def _kubelets(self) -> list[Action]:
        found = []
        pods = self.store.items("pods", NAMESPACE)
        by_node: dict[str, list[Obj]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                by_node.setdefault(str(node), []).append(pod)
        live = {str(pod["metadata"]["uid"]) for pod in pods}
        for name, machine in self.machines.items():
            if machine.state != "on":
                continue
            who = f"kubelet:{name}"
            writes: list[tuple[str, Thunk]] = []
            if (
                not machine.node_deleted
                and self.clock - machine.heartbeat >= HEARTBEAT_SECONDS
                and not self.busy(f"heartbeat:{name}")
            ):
                found.append(Action(f"kubelet:{name}:heartbeat", 1.0, lambda m=machine: self._send_heartbeat(m)))
            for pod in by_node.get(name, ()):
                uid = str(pod["metadata"]["uid"])
                pod_name = str(pod["metadata"]["name"])
                proc = self.procs.get(uid)
                if proc is None and uid not in self.started and not _deleting(pod) and not _terminal(pod):
                    found.append(
                        Action(f"kubelet-start:{pod_name}", 1.0, lambda pod=pod, n=name: self._kubelet_start(pod, n))
                    )
                elif proc is not None and proc.record.running and _deleting(pod) and proc.stop_at is None:
                    found.append(Action(f"kubelet-term:{pod_name}", 1.0, lambda proc=proc: self._sigterm(proc)))
                elif (
                    (proc is None or not proc.record.running)
                    and not _terminal(pod)
                    and (_deleting(pod) or (proc is not None and proc.failed))
                ):
                    writes.append((f"{pod_name} Failed", lambda n=pod_name: self._pod_failed(n, "kubelet")))
                elif _terminal(pod) and _deleting(pod) and _meta(pod).get("deletionGracePeriodSeconds") != 0:
                    writes.append(
                        (
                            f"confirm deletion of {pod_name}",
                            lambda n=pod_name: self.store.delete(("pods", NAMESPACE, n), "kubelet", 0),
                        )
                    )
            for uid, proc in self.procs.items():
                if proc.node == name and proc.record.running and uid not in live and proc.stop_at is None:
                    found.append(Action(f"kubelet-kill:{proc.record.pod}", 1.0, lambda proc=proc: self._sigterm(proc)))
            if writes and not self.busy(who):
                found.append(Action(who, 1.0, lambda who=who, writes=writes: self._send_all(who, writes)))
        return found

    def _send_heartbeat(self, machine: Machine) -> None:
        self.send(f"heartbeat:{machine.name}", f"heartbeat {machine.name}", lambda: self._heartbeat(machine))

    def _heartbeat(self, machine: Machine) -> None:
        if machine.state != "on":
            return
        at = stamp(self.clock)

        def change(obj: Obj) -> None:
            ready = _condition(obj, "Ready")
            if ready is None or ready.get("status") != "True":
                _set_condition(obj, "Ready", "True", "KubeletReady", at)
            ready = _condition(obj, "Ready")
            assert ready is not None
            ready["lastHeartbeatTime"] = at  # type: ignore[index]

        if self.store.mutate(("nodes", "", machine.name), change, "kubelet", status=True):
            machine.heartbeat = self.clock

    def _kubelet_start(self, pod: Obj, node: str) -> None:
        self._start_process(pod, node)
        pod_name = str(pod["metadata"]["name"])

        def change(obj: Obj) -> None:
            if not _terminal(obj):
                obj.setdefault("status", {})["phase"] = "Running"

        self.send(
            f"kubelet:{node}",
            f"{pod_name} Running",
            lambda: self.store.mutate(("pods", NAMESPACE, pod_name), change, "kubelet", status=True),
        )

    def _sigterm(self, proc: Proc) -> None:
        pod = self.store.get(proc.key)
        grace = proc.grace
        if pod is not None and _meta(pod).get("deletionGracePeriodSeconds") is not None:
            grace = float(_meta(pod)["deletionGracePeriodSeconds"])
        proc.stop_at = self.clock + min(self.config.termination_seconds, max(grace, 2.0))
        self.note(f"kubelet sends SIGTERM to {proc.record.pod}")

    def _pod_failed(self, pod_name: str, manager: str) -> None:
        def change(obj: Obj) -> None:
            if not _terminal(obj):
                obj.setdefault("status", {})["phase"] = "Failed"

        self.store.mutate(("pods", NAMESPACE, pod_name), change, manager, status=True)

    def _node_lifecycle(self) -> list[Action]:
        found = []
        for name, machine in self.machines.items():
            node = self.store.get(("nodes", "", name))
            if node is None:
                continue
            ready = _condition(node, "Ready")
            if ready is not None and ready.get("status") == "True" and self.clock - machine.heartbeat > MONITOR_GRACE:
                found.append(Action(f"node-lifecycle:{name}", 1.0, lambda n=name: self._node_unknown(n)))
        return found

    def _node_unknown(self, name: str) -> None:
        at = self.store.server_time()

        def change(obj: Obj) -> None:
            _set_condition(obj, "Ready", "Unknown", "NodeStatusUnknown", at)

        self.store.mutate(("nodes", "", name), change, "node-controller", status=True)
        self.note(f"node lifecycle: {name} Ready=Unknown")

    def _podgc(self) -> list[Action]:
        found = []
        nodes = {str(n["metadata"]["name"]): n for n in self.store.items("nodes")}
        for name in self.machines:
            if name in nodes:
                self.absent_since.pop(name, None)
                self.orphans_due.pop(name, None)
            elif name not in self.absent_since:
                self.absent_since[name] = self.clock
                # PodGC's orphan pass runs every 20 s: the first after the deletion queues the node for 40 s, and
                # the pass that finds it ready deletes (that one, or the next if the queue had not moved it yet)
                first_pass = self.clock + (self.podgc_phase - self.clock) % PODGC_PERIOD
                self.orphans_due[name] = first_pass + QUARANTINE + self.env.choice((0.0, PODGC_PERIOD))
        for pod in self.store.items("pods", NAMESPACE):
            node_name = str((pod.get("spec") or {}).get("nodeName") or "")
            if not node_name:
                continue
            pod_name = str(pod["metadata"]["name"])
            node = nodes.get(node_name)
            if node is not None:
                ready = _condition(node, "Ready")
                taints = (node.get("spec") or {}).get("taints") or ()
                tainted = any(t.get("key") == v.TAINT_OUT_OF_SERVICE for t in taints)
                if not tainted:
                    continue
                if _deleting(pod) and (ready is None or ready.get("status") != "True"):
                    found.append(Action(f"podgc:{pod_name}", 1.0, lambda n=pod_name: self._podgc_delete(n)))
                elif not _deleting(pod) and not _terminal(pod):
                    found.append(
                        Action(
                            f"taint-eviction:{pod_name}",
                            1.0,
                            lambda n=pod_name: self.store.delete(("pods", NAMESPACE, n), "taint-eviction"),
                        )
                    )
            elif self.clock >= self.orphans_due.get(node_name, float("inf")):
                found.append(Action(f"podgc:{pod_name}", 1.0, lambda n=pod_name: self._podgc_delete(n)))
        return found

    def _podgc_delete(self, pod_name: str) -> None:
        self._pod_failed(pod_name, "pod-garbage-collector")
        self.store.delete(("pods", NAMESPACE, pod_name), "pod-garbage-collector", 0)
        self.note(f"PodGC force-deletes {pod_name}")

    def _gc(self) -> list[Action]:
        found = []
        uids = {str(o["metadata"]["uid"]) for o in self.store.objects.values()}
        for resource in ("jobsets", "jobs", "pods"):
            for obj in self.store.items(resource, NAMESPACE):
                owner = _controller_uid(obj)
                if owner is not None and owner not in uids and not _deleting(obj):
                    name = str(obj["metadata"]["name"])
                    found.append(
                        Action(f"gc:{resource}/{name}", 0.15, lambda r=resource, n=name: self._gc_delete(r, n))
                    )
        return found

    def _gc_delete(self, resource: str, name: str) -> None:
        self.store.delete((resource, NAMESPACE, name), "generic-garbage-collector")
        self.note(f"garbage collector deletes {resource} {name} (its owner is gone)")

    # --- dispatch callers ----------------------------------------------------------------------------------------

    def _callers(self) -> list[Action]:
        found = []
        for name, caller in self.callers.items():
            if caller.program is not None:
                found.append(Action(f"call:{name}", 2.0, lambda c=caller: self._answer(c)))
                continue
            tj = self.store.get(("trainjobs", NAMESPACE, name))
            want = self.want[name]
            if tj is None and want == "run":
                found.append(Action(f"open:{name}", 0.5, lambda c=caller: self._begin(c, "open")))
            elif tj is not None and not _deleting(tj):
                held = tj.get("spec", {}).get("suspend") is True
                if want == "run" and held:
                    found.append(Action(f"release:{name}", 0.5, lambda c=caller: self._begin(c, "release")))
                elif want == "hold" and not held:
                    found.append(Action(f"hold:{name}", 0.5, lambda c=caller: self._begin(c, "hold")))
        return found

    def _begin(self, caller: Caller, operation: str) -> None:
        ref = f"{NAMESPACE}/{caller.name}"
        program: Generator[p.Request, p.Response, Any]
        skew = _skew_option(self.config.clock_skew_seconds)
        if operation == "open":
            program = p.open(self.manifest(caller.name), **skew)
        elif operation == "release":
            program = p.release(ref, **skew)
        else:
            program = p.hold(ref, **skew)
        caller.operation = operation
        caller.program = program
        self.note(f"dispatch {operation} {caller.name} starts")
        self._advance_program(caller, None)

    def _answer(self, caller: Caller) -> None:
        assert caller.pending is not None
        response = self.store.respond(caller.pending)
        if isinstance(response, Mapping):
            for item in [response, *(response.get("items") or ())]:
                ours = ((item.get("metadata") or {}).get("labels") or {}).get(v.LABEL_JOBSET_NAME) == caller.name
                if (
                    ours
                    and (item.get("spec") or {}).get("containers") is not None
                    and (item.get("spec") or {}).get("nodeName")
                ):
                    # a check of its own TrainJob's saw it bound (the namespace-wide lineage read of another
                    # TrainJob's hold sees it too, but records nothing about it)
                    self.seen_by_dispatch.add(str((item.get("metadata") or {}).get("uid")))
        self._advance_program(caller, response)

    def _advance_program(self, caller: Caller, response: p.Response | None) -> None:
        assert caller.program is not None
        try:
            caller.pending = next(caller.program) if response is None else caller.program.send(response)
        except StopIteration as stop:
            self.note(
                f"dispatch {caller.operation} {caller.name} returns {getattr(stop.value, 'admission', stop.value)}"
            )
            caller.program, caller.pending = None, None
        except DispatchError as error:
            self.note(f"dispatch {caller.operation} {caller.name} refused: {type(error).__name__}: {str(error)[:160]}")
            caller.program, caller.pending = None, None

    # --- people --------------------------------------------------------------------------------------------------

    def _people(self) -> list[Action]:
        found: list[Action] = []
        for name in self.callers:
            other = "hold" if self.want[name] == "run" else "run"
            found.append(Action(f"want:{name}:{other}", 0.05, lambda n=name, o=other: self._set_want(n, o)))
            tj = self.store.get(("trainjobs", NAMESPACE, name))
            if tj is not None and not _deleting(tj) and tj.get("spec", {}).get("suspend") is False:
                found.append(Action(f"delete-trainjob:{name}", 0.01, lambda n=name: self._delete_trainjob(n)))
            if tj is not None and tj.get("spec", {}).get("suspend") is True:
                for pod in self.store.items("pods", NAMESPACE):
                    if self._stuck(pod, name):
                        pod_name = str(pod["metadata"]["name"])
                        found.append(Action(f"force-delete:{pod_name}", 0.3, lambda n=pod_name: self._force_delete(n)))
        for name, machine in self.machines.items():
            if machine.state == "on" and not machine.node_deleted:
                found.append(Action(f"freeze:{name}", 0.006, lambda m=machine: self._machine(m, "frozen")))
            if machine.state != "off":
                weight = 0.02 if machine.state == "frozen" else 0.002
                found.append(Action(f"power-off:{name}", weight, lambda m=machine: self._machine(m, "off")))
            node = self.store.get(("nodes", "", name))
            if node is not None and (machine.state == "off" or (machine.state == "on" and self._all_seen_on(name))):
                found.append(
                    Action(
                        f"delete-node:{name}",
                        0.004 if machine.state == "off" else 0.02,
                        lambda m=machine: self._delete_node(m),
                    )
                )
            if (
                node is not None
                and machine.state == "off"
                and not any(
                    t.get("key") == v.TAINT_OUT_OF_SERVICE for t in (node.get("spec") or {}).get("taints") or ()
                )
            ):
                found.append(Action(f"taint:{name}", 0.02, lambda n=name: self._taint(n)))
        for proc in self.procs.values():
            if proc.record.running and proc.stop_at is None and self.machines[proc.node].state == "on":
                found.append(Action(f"fail:{proc.record.pod}", 0.01, lambda proc=proc: self._fail(proc)))
        return found

    def _all_seen_on(self, node_name: str) -> bool:
        """Every pod bound to this node that may run was listed bound by a dispatch writer's check: only then may
        a person delete the Node of a machine that runs (finding 4). PodGC then force-deletes the pods that remain
        there (it writes `Failed` first, so the pod fence lets it through), and a pod no check had listed bound
        vanishes unseen: outside the promise, fence or not (docs/reliability.md, "What stays outside")."""
        for pod in self.store.items("pods", NAMESPACE):
            on_it = (pod.get("spec") or {}).get("nodeName") == node_name and not _terminal(pod)
            if on_it and str(pod["metadata"]["uid"]) not in self.seen_by_dispatch:
                return False
        return True

    def _stuck(self, pod: Mapping[str, Any], name: str) -> bool:
        """The pod a person force-deletes (the model's `force_delete_stuck`): one of the held TrainJob's, stuck
        Terminating on a silent (frozen) machine whose node the API shows not Ready, that a dispatch writer's check
        has listed bound to its node. A pod force-deleted before that (before the hold, or bound or created after the
        record and force-deleted before any writer's check listed it) is outside the promise without the pod fence
        (docs/reliability.md, "Without the fence, these too"); the fence is not modelled here."""
        if (_meta(pod).get("labels") or {}).get(v.LABEL_JOBSET_NAME) != name or not _deleting(pod):
            return False
        if str(pod["metadata"]["uid"]) not in self.seen_by_dispatch:
            return False
        node_name = str((pod.get("spec") or {}).get("nodeName") or "")
        node = self.store.get(("nodes", "", node_name))
        ready = _condition(node, "Ready") if node is not None else None
        silent = node_name in self.machines and self.machines[node_name].state == "frozen"
        return silent and node is not None and (ready is None or ready.get("status") != "True")

    def _set_want(self, name: str, want: str) -> None:
        self.want[name] = want
        self.note(f"a person asks to {'hold' if want == 'hold' else 'run'} {name}")

    def _delete_trainjob(self, name: str) -> None:
        self.store.delete(("trainjobs", NAMESPACE, name), "person")
        self.submission[name] += 1
        self.note(f"a person deletes TrainJob {name} without a hold")

    def _force_delete(self, pod_name: str) -> None:
        self.store.delete(("pods", NAMESPACE, pod_name), "person", 0)
        self.note(f"a person force-deletes pod {pod_name}")

    def _machine(self, machine: Machine, state: str) -> None:
        machine.state = state
        if state == "off":
            for proc in self.procs.values():
                if proc.node == machine.name:
                    self._stop_process(proc, self.clock, "machine powered off")
        self.note(f"machine {machine.name} {'freezes' if state == 'frozen' else 'is powered off'}")

    def _delete_node(self, machine: Machine) -> None:
        self.store.delete(("nodes", "", machine.name), "person")
        machine.node_deleted = True
        self.note(f"a person deletes Node {machine.name} (machine {machine.state})")

    def _taint(self, name: str) -> None:
        def change(obj: Obj) -> None:
            taints = obj.setdefault("spec", {}).setdefault("taints", [])
            taints.append({"key": v.TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"})

        self.store.mutate(("nodes", "", name), change, "person")
        self.note(f"a person taints {name} out-of-service (its machine is off)")

    def _fail(self, proc: Proc) -> None:
        proc.failed = True
        self._stop_process(proc, self.clock, "exits with failure")
