"""The world a schedule runs in: the simulated cluster, dispatch TrainJobs, callers, and the rules that act.

The model's actors:

* dispatch callers (`callers.py`): four writers (sync and async adapters; one reads the pods as one full list
  page by page, one pins per-selector lists page by page), a read-only adapter, and an impatient writer whose
  short read timeout meets the `hang` fault;
* the operator, who follows the documented procedure (DESIGN §4, k8s-apis §5.4-§5.5): a node is tainted
  `out-of-service` or its Node object deleted only once its machine is powered off; a taint put on a Ready
  node by mistake is allowed (dispatch must not take it for proof), but such a node is then not allowed to
  fail without being powered off first. Precondition P, kept by every rule of the invariant run: a node that
  is not Ready and carries the taint has its machine off, and a deleted Node's machine is off;
* the machines: freeze, lose (partition), not-ready, power off, recover (reboot), processes completing or
  failing;
* a hostile user who rewrites runtime patches of held TrainJobs, and deletes and recreates a TrainJob under
  the same name (a namesake whose old pods may linger);
* the API: faults (500, 429, 504, 409, 410, dropped connections, hangs past the client's timeout) on one
  request of one caller, and answers lost after the write was applied;
* slow controllers (`delay`): the next request of one kind of one controller (the Job controller's pod
  creations, Trainer's server-side apply of the JobSet, JobSet's Job creations and updates, status writes, the
  kubelet's, the scheduler's bindings, the garbage collector's deletions) is held in the API server
  (`lab.apiserver.delays`) and released a few steps later, or answered 504 unapplied once 60 s of lab time passed;
* third parties: a person who removes labels from a pod (the usual way to take one out of its controller;
  `detach` also removes the Job's own selector labels, which makes the Job controller release the pod), who
  force-deletes pods (grace 0) of an object dispatch has held, who suspends a running TrainJob with a plain
  patch, and who resumes what they suspended (only once nothing of it runs, and only if dispatch has not acted
  on it since);
* long partitions (`partition`): a node lost long enough for taint eviction (300 s toleration) and the Job
  controller's replacement (hazard H1);
* Kueue mode (profile `kueue`): odd-numbered TrainJobs carry the queue-name label, Kueue admits them through
  dispatch's admission check controller, which crashes and restarts (`crash_admission_controller`), and
  Kueue preempts them (`preempt`);
* time: `advance` moves lab time, the healthy kubelets heartbeating all along.

The runtime (profile `runtime`): `safe` sets `podReplacementPolicy: Failed` on every replicated job's Job
template and, where the JobSet has a failure policy with restarts, `restartStrategy: BlockingRecreate` (what
dispatch's runtime policy asks for, DESIGN §3.7); `upstream` sets neither: the negative control of hazards H1 and
H2. Each world draws one or two replicated jobs and whether the JobSet restarts failed Jobs (with `backoffLimit:
0`, so that a failing process fails its Job and the JobSet restarts). One world in four draws
`restartPolicy: Never` (`restart_policy`; the story `replaced-after-its-back-off` always does): a failed process
is then replaced by a new pod after the Job controller's back-off, not restarted in place.

The negative control's hostile rules break P: taint a running machine's node (frozen, partitioned or NotReady),
or delete the Node of a running machine. The recorder must then see an overlap: that is what the promise
depends on.

After every step the lab is settled and the invariants (`invariants.py`) are checked; `converge()` ends a
schedule by releasing every held request, fencing every failed node as the operator would, and requires every
live TrainJob to be admitted exactly once more, within bounded attempts with lab time passing between them (a
release may be refused, retryably, while a hold settles): nothing is lost.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import kubernetes
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import ForbiddenError
from airflow_provider_dispatch_lab.apiserver.delays import DelayRule
from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.client import ApiStatusError
from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.nodes import workload
from airflow_provider_dispatch_lab.simulated.nodes.kubelet import MachineUnavailable
from airflow_provider_dispatch_lab.truth.overlap import ProcessRecord

from . import invariants
from .callers import Callers, Outcome, PlannedCall
from .harness import (
    ADMISSION_CONTROLLER,
    CALLERS,
    HOSTILE,
    ReliabilityLab,
    WriteBarrier,
    is_trainjob_put,
    lose_the_answer,
    user_name,
)
from .kueue_mode import NAMESPACE, KueueMode
from .schedule import READER, Step

Obj = dict[str, Any]
RUNTIME = "rt"
#: the runtime with upstream's defaults (`podReplacementPolicy` and `restartStrategy` unset) that the last TrainJob
#: of a world runs on when its parameters say `unsafe_object`: the runtime policy must refuse it, and with that
#: check removed (the mutation gate) partitions and restarts give two processes of one rank
UNSAFE_RUNTIME = "rt-upstream"
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE = "rel-zone"
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
CALLER_KINDS = ("sync", "async", "sync", "async", "sync", "sync")
CALLER_OPTIONS: dict[str, dict[str, Any]] = {
    "caller-2": {"pod_read": "full", "page_size": 1},
    "caller-3": {"pod_read": "pinned", "page_size": 1},
    "caller-4": {"read_only": True},
    "caller-5": {"request_timeout": (2.0, 0.25)},
}
FAULT_TARGETS = {
    "trainjobs:get": ({"get"}, {"trainjobs"}),
    "jobsets:get": ({"get"}, {"jobsets"}),
    "runtimes:get": ({"get"}, {"clustertrainingruntimes"}),
    "pods:list": ({"list"}, {"pods"}),
    "nodes:get": ({"get"}, {"nodes"}),
    "trainjobs:update": ({"update"}, {"trainjobs"}),
    "any": (set(), set()),
}
HANG_SECONDS = 0.6
ON = ("ready", "not-ready", "frozen", "lost")
#: a delay target: (User-Agent prefix, verbs, resources, subresource: "" main resource, None either)
DELAY_TARGETS: dict[str, tuple[str, frozenset[str], frozenset[str], str | None]] = {
    "job:create-pods": ("dispatch-lab/job-controller", frozenset({"create"}), frozenset({"pods"}), ""),
    "job:delete-pods": ("dispatch-lab/job-controller", frozenset({"delete"}), frozenset({"pods"}), ""),
    "job:patch-pods": ("dispatch-lab/job-controller", frozenset({"patch"}), frozenset({"pods"}), ""),
    "job:status": ("dispatch-lab/job-controller", frozenset({"update", "patch"}), frozenset({"jobs"}), "status"),
    "jobset:create-jobs": ("dispatch-lab/jobset-controller", frozenset({"create"}), frozenset({"jobs"}), ""),
    "jobset:update-jobs": ("dispatch-lab/jobset-controller", frozenset({"update"}), frozenset({"jobs"}), ""),
    "jobset:delete-jobs": ("dispatch-lab/jobset-controller", frozenset({"delete"}), frozenset({"jobs"}), ""),
    "jobset:status": ("dispatch-lab/jobset-controller", frozenset({"update"}), frozenset({"jobsets"}), "status"),
    "trainer:apply": ("dispatch-lab/trainer-controller", frozenset({"patch"}), frozenset({"jobsets"}), ""),
    "trainer:status": ("dispatch-lab/trainer-controller", frozenset({"patch"}), frozenset({"trainjobs"}), "status"),
    "trainer:apply-paused": ("dispatch-lab/trainer-controller", frozenset({"patch"}), frozenset({"jobsets"}), ""),
    "kubelet:status": ("kubelet", frozenset({"patch", "update"}), frozenset({"pods"}), "status"),
    "scheduler:bind": ("default-scheduler", frozenset({"create"}), frozenset({"pods"}), "binding"),
    "gc:delete": ("dispatch-lab/garbage-collector", frozenset({"delete"}), frozenset(), None),
    "kueue:trainjob": ("kueue-job-controller", frozenset({"update", "patch"}), frozenset({"trainjobs"}), ""),
    "kueue:workload-status": ("kueue", frozenset({"update", "patch"}), frozenset({"workloads"}), "status"),
    "admission-controller:trainjob": ("", frozenset({"update"}), frozenset({"trainjobs"}), ""),
}
#: targets whose request is late before it reaches the API server (its controller was paused after it built the
#: request: `lab.apiserver.delays`, `before_the_server`), so no request timeout ends it
PAUSED_TARGETS = frozenset({"trainer:apply-paused"})
WRITES = frozenset({"create", "update", "patch", "delete"})
#: the controllers a `stall` holds the writes of (schedule.STALL_CHOICES)
STALLS: dict[str, tuple[str, ...]] = {
    "trainer": ("trainer-controller",),
    "jobset": ("jobset-controller",),
    "job": ("job-controller",),
    "trainer+jobset": ("trainer-controller", "jobset-controller"),
    "jobset+job": ("jobset-controller", "job-controller"),
    "all": ("trainer-controller", "jobset-controller", "job-controller"),
}
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
SELECTOR_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
#: the labels a person removes to take a pod out of its controller, by variant (schedule.RELABEL_VARIANTS)
RELABEL_KEYS: dict[str, tuple[str, ...]] = {
    "dispatch": (v.LABEL_JOB_ID, v.LABEL_SUBMISSION, v.POD_LABEL_ADMISSION),
    "jobset": (v.LABEL_JOBSET_NAME,),
    "all": (v.LABEL_JOBSET_NAME, v.LABEL_JOB_ID, v.LABEL_SUBMISSION, v.POD_LABEL_ADMISSION, *JOB_NAME_LABELS),
    "detach": (
        v.LABEL_JOBSET_NAME,
        v.LABEL_JOB_ID,
        v.LABEL_SUBMISSION,
        v.POD_LABEL_ADMISSION,
        *JOB_NAME_LABELS,
        *SELECTOR_LABELS,
    ),
}


@dataclass
class ObjectModel:
    index: int
    name: str
    job_id: str
    num_nodes: int
    submission: int = 1
    exists: bool = False
    uid: str | None = None
    suspended: bool | None = None
    admission: str | None = None
    finished: str | None = None
    forged: bool = False
    held_at: str | None = None
    """A when a dispatch hold of this instance last returned (None: not since the last admission)."""
    third_party_suspended: bool = False
    """A third party suspended it while it ran, and dispatch has not acted on it since."""
    queue: str | None = None
    """Kueue mode: the LocalQueue it is submitted to."""
    runtime: str = RUNTIME
    """The ClusterTrainingRuntime it runs: the world's, or `UNSAFE_RUNTIME`."""

    @property
    def ref(self) -> str:
        return f"{NAMESPACE}/{self.name}"

    def manifest(self) -> Obj:
        body = manifests.trainjob(
            self.name,
            job_id=self.job_id,
            submission=str(self.submission),
            num_nodes=self.num_nodes,
            runtime=self.runtime,
        )
        body["metadata"]["namespace"] = NAMESPACE
        body["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
        if self.queue is not None:
            body["metadata"]["labels"][v.LABEL_KUEUE_QUEUE_NAME] = self.queue
        return body


@dataclass
class NodeModel:
    name: str
    machine: str = "ready"
    taint: str | None = None
    mistaken: bool = False
    deleted: bool = False


@dataclass
class PendingDelay:
    """A `delay` step's rule: it holds the next matching request (if one comes within `armed` steps); the held
    request is released `steps` steps after it was caught (unless the request timeout answered it first)."""

    rule: DelayRule
    target: str
    steps: int
    armed: int = 8
    """Steps the rule waits for a matching request before it is dropped."""
    stall: bool = False
    """A stall holds every matching request from the start for `steps` steps (it does not wait for one)."""


@dataclass
class World:
    rlab: ReliabilityLab
    profile_nodes: int
    objects_count: int
    params: dict[str, Any]
    stats: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    nodes: list[NodeModel] = field(default_factory=list)
    objects: list[ObjectModel] = field(default_factory=list)
    runtime: str = "safe"
    kueue: KueueMode | None = None
    accept_risks: bool = False
    """The callers accept both runtime risks (DESIGN §3.7): only the negative controls of hazards H1 and H2,
    which must show what dispatch admits on upstream's defaults when a platform team accepts them."""
    pending: list[PendingDelay] = field(default_factory=list)
    focus: ProcessRecord | None = None
    """The process a story is about (`rule_focus`); the story's steps with `focus=True` act on its pod or node."""
    _checked_writes: int = 0
    _checked_admissions: int = 0
    _callers: Callers | None = None

    # --- set-up ------------------------------------------------------------------------------------------

    def setup(self) -> World:
        api = self.rlab.api()
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.hostile = kubernetes.client.CustomObjectsApi(self.rlab.api(HOSTILE))
        self.hostile_core = kubernetes.client.CoreV1Api(self.rlab.api(HOSTILE))
        self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        self.custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", self.runtime_manifest())
        unsafe = bool(self.params.get("unsafe_object", False)) and self.objects_count >= 2
        if unsafe:
            # upstream's defaults; a story may keep one of the two safe settings (`unsafe_risk`), so that only the
            # other risk's check stands between the runtime and an admission
            risk = str(self.params.get("unsafe_risk", "both"))
            upstream = self.runtime_manifest(
                UNSAFE_RUNTIME,
                safe=False,
                keep_replacement=risk == "jobset-restart",
                keep_restart=risk == "pod-replacement",
            )
            self.custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", upstream)
        for _ in range(self.profile_nodes):
            self._add_node()
        for index in range(self.objects_count):
            letter = "abcdefgh"[index]
            self.objects.append(ObjectModel(index, f"tj-{letter}", f"job-{letter}", self.params["num_nodes"][index]))
        if unsafe:
            self.objects[-1].runtime = UNSAFE_RUNTIME
        if self.kueue is not None:
            self.kueue.setup(self)
        options = CALLER_OPTIONS
        if self.accept_risks:
            # the negative control of hazards H1 and H2: a platform team that accepted both runtime risks
            # (DESIGN §3.7), so that dispatch admits on upstream's defaults and the hazards show
            accepted = {"accepted_risks": ("pod-replacement", "jobset-restart")}
            options = {caller: {**CALLER_OPTIONS.get(caller, {}), **accepted} for caller in CALLERS}
        self._callers = Callers(self.rlab, CALLER_KINDS, options)
        self.rlab.settle()
        return self

    def runtime_manifest(
        self,
        name: str = RUNTIME,
        *,
        safe: bool | None = None,
        keep_replacement: bool = False,
        keep_restart: bool = False,
    ) -> Obj:
        """The world's ClusterTrainingRuntime (module docstring): one or two replicated jobs, a failure policy
        with restarts or none, and the Job settings of the profile's runtime (`safe` or `upstream`), or of
        `safe` when given; an unsafe one keeps `podReplacementPolicy: Failed` (`keep_replacement`) or
        `restartStrategy: BlockingRecreate` (`keep_restart`) when told."""
        safe = self.runtime == "safe" if safe is None else safe
        runtime = manifests.cluster_training_runtime(
            name, grace_seconds=self.params["grace_seconds"], pod_replacement_policy=None
        )
        spec = runtime["spec"]["template"]["spec"]
        if int(self.params.get("replicated_jobs", 1)) == 2:
            launcher = copy.deepcopy(spec["replicatedJobs"][0])
            launcher["name"] = "launcher"
            launcher["template"].pop("metadata", None)  # not the trainer step: one pod, whatever numNodes says
            spec["replicatedJobs"].append(launcher)
        restarts = bool(self.params.get("failure_policy", False))
        for job in spec["replicatedJobs"]:
            job_spec = job["template"]["spec"]
            if safe or keep_replacement:
                job_spec["podReplacementPolicy"] = "Failed"
            if restarts:
                job_spec["backoffLimit"] = 0  # a failing process fails its Job: the JobSet restarts
            if self.params.get("restart_policy") == "Never":
                # a failed pod is replaced by a new one after the Job's back-off (`backoffLimit` 6 by default)
                # instead of restarting its container in place (JobSet's webhook defaults `OnFailure`)
                job_spec["template"]["spec"]["restartPolicy"] = "Never"
            job_spec["template"].setdefault("metadata", {})["annotations"] = {
                workload.TERMINATION_SECONDS: str(self.params["termination_seconds"])
            }
        if restarts:
            policy: Obj = {"maxRestarts": 3}
            if safe or keep_restart:
                policy["restartStrategy"] = "BlockingRecreate"
            spec["failurePolicy"] = policy
        return runtime

    def close(self) -> None:
        if self._callers is not None:
            self._callers.close()
        if self.kueue is not None:
            self.kueue.close()

    @property
    def callers(self) -> Callers:
        assert self._callers is not None
        return self._callers

    def _add_node(self) -> NodeModel:
        node = NodeModel(f"n{len(self.nodes) + 1}")
        self.rlab.sc.add_node(node.name, labels={ZONE_LABEL: ZONE})
        self.nodes.append(node)
        return node

    # --- one step ------------------------------------------------------------------------------------------

    def apply(self, step: Step) -> list[str]:
        """Carry out one step, settle the lab, and return the invariants' violations (empty: all held)."""
        rule = getattr(self, f"rule_{step.rule}")
        outcomes: list[Outcome] = []
        before = len(self.violations)  # a rule may find a violation of its own (a retry that wrote again)
        released = self._tick_delays()
        if self.kueue is not None:
            self.kueue.tick(self)
        focus = step.get("focus")
        if isinstance(focus, tuple):  # a story's first step about one pod names it (stories._look)
            self.look(*focus)
        done = False if focus and self.focus is None else rule(step, outcomes)
        self.stats[f"drawn {step.rule}"] += 1
        self.stats["steps"] += 1
        self.stats["steps skipped" if done is False else f"rule {step.rule}"] += 1
        self.rlab.settle()
        self.refresh()
        self._note(outcomes)
        found = self.check(outcomes)
        self.log.extend(f"  released the held request {r}" for r in released)
        self.log.append(f"{step}{' (skipped)' if done is False else ''}")
        self.log.extend(f"    {o.describe()}" for o in outcomes)
        self.violations.extend(f"after {step}: {problem}" for problem in found)
        return self.violations[before:]

    def _note(self, outcomes: Iterable[Outcome]) -> None:
        """What the third parties' preconditions need to know of dispatch's operations."""
        by_ref = {o.ref: o for o in self.objects}
        for outcome in outcomes:
            obj = by_ref.get(outcome.target)
            if obj is None or outcome.operation not in ("hold", "release", "open"):
                continue
            obj.third_party_suspended = False  # dispatch acted on it: a third party's resume would bypass it
            if outcome.operation == "hold" and outcome.error is None and outcome.execution is not None:
                obj.held_at = str(outcome.execution.admission)

    def _tick_delays(self) -> list[str]:
        """Before each step: a `delay` rule that caught its request counts down, and at zero the request is
        released (unless the request timeout answered it meanwhile); a rule that caught nothing within
        `ARMED_STEPS` steps is dropped. Returns what was released."""
        released: list[str] = []
        delays = self.rlab.delays
        for pending in list(self.pending):
            if pending.rule.caught == 0 and not pending.stall:
                pending.armed -= 1
                if pending.armed <= 0:
                    self.pending.remove(pending)
                    self.rlab.lab.call(lambda rule=pending.rule: delays.remove(rule))
                    self.stats[f"delay {pending.target} caught nothing"] += 1
                continue
            pending.steps -= 1
            if pending.steps > 0:
                continue
            self.pending.remove(pending)

            def release(rule: DelayRule = pending.rule) -> tuple[list[str], int]:
                delays.remove(rule)
                held = [r for r in delays.held if r.rule is rule]
                delays.release(rule)
                timed_out = sum(1 for r in delays.requests if r.rule is rule and r.outcome == "timed out")
                return [r.describe() for r in held if r.outcome == "released"], timed_out

            done, timed_out = self.rlab.lab.call(release)
            self.stats[f"delay {pending.target} released"] += len(done)
            self.stats[f"delay {pending.target} timed out"] += timed_out
            released += done
        if released:
            self.rlab.settle()
        return released

    def refresh(self) -> None:
        for obj in self.objects:
            try:
                live = self.custom.get_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", obj.name)
            except ApiException as error:
                if error.status != 404:
                    raise
                obj.exists, obj.uid, obj.suspended, obj.admission, obj.finished = False, None, None, None, None
                continue
            obj.exists = True
            if obj.uid != live["metadata"]["uid"]:
                obj.held_at, obj.third_party_suspended = None, False  # a namesake: nothing of the old one holds
            obj.uid = live["metadata"]["uid"]
            obj.suspended = live["spec"].get("suspend")
            admission = (live["metadata"].get("annotations") or {}).get(v.ANNOTATION_ADMISSION)
            if admission != obj.admission:
                obj.held_at = None  # a new execution: no dispatch hold of it yet
            obj.admission = admission
            conditions = (live.get("status") or {}).get("conditions") or []
            done = [c["type"] for c in conditions if c.get("type") in ("Complete", "Failed") and c["status"] == "True"]
            obj.finished = done[0] if done else None

    # --- the invariants -------------------------------------------------------------------------------------

    def processes(self) -> list[ProcessRecord]:
        recorder = self.rlab.sc.recorder
        return self.rlab.lab.call(lambda: [copy.copy(r) for r in recorder.records])

    def check(self, outcomes: Iterable[Outcome] = ()) -> list[str]:
        book = self.rlab.book
        found: list[str] = []
        queued_refs = {o.ref for o in self.objects if o.queue is not None}
        for outcome in outcomes:
            outcome.calls = self.rlab.journal.between(outcome.start, outcome.end, outcome.caller)
            found += invariants.outcome_violations(outcome, book.writes, kueue=outcome.target in queued_refs)
            self._count(outcome)
        found += invariants.unchecked_admissions(outcomes, book.writes)
        writes = list(book.writes)
        queued = [(NAMESPACE, o.name) for o in self.objects if o.queue is not None]
        found += invariants.admission_number_violations(writes, self._checked_writes, queued)
        self._checked_writes = len(writes)
        live = {(NAMESPACE, o.name): o.admission for o in self.objects if o.exists}
        found += invariants.admissions_count_violations(writes, live)
        for obj in self.objects:
            found += [o.describe() for o in self.rlab.sc.overlaps(NAMESPACE, obj.name)]
            found += [o.describe() for o in self.rlab.sc.rank_overlaps(NAMESPACE, obj.name)]
            found += [o.describe() for o in self.rlab.sc.attempt_overlaps(NAMESPACE, obj.name)]
        attributed = invariants.attribute(self.processes(), book.pods, writes)
        found += invariants.overlaps_by_admission(attributed)
        found += invariants.early_admissions(attributed, writes[self._checked_admissions :])
        self._checked_admissions = len(writes)
        found += invariants.rank_overlaps(attributed)
        found += invariants.attempt_overlaps(attributed)
        found += invariants.unadmitted_pods(attributed)
        found += invariants.label_mismatches(attributed, [o.name for o in self.objects if o.forged])
        found += [
            f"the read-only caller wrote: {c.describe()}"
            for c in self.rlab.journal.calls
            if c.user == CALLERS[READER] and c.writes
        ]
        found += [f"lab task {name} crashed: {error!r}" for name, error in self.rlab.crashes()]
        return found

    def _count(self, outcome: Outcome) -> None:
        self.stats[f"{outcome.operation} {outcome.label}"] += 1
        if outcome.conflicts_retried:
            self.stats[f"{outcome.operation} conflicts retried"] += outcome.conflicts_retried
        applied = invariants.applied_by(outcome, self.rlab.book.writes)
        if applied and outcome.error is not None:
            self.stats["admissions applied with the answer lost"] += 1

    # --- dispatch callers ---------------------------------------------------------------------------------

    def _obj(self, step: Step) -> ObjectModel:
        return self.objects[int(step.get("obj", 0)) % len(self.objects)]

    def _invoke(self, caller: int, operation: str, obj: ObjectModel, outcomes: list[Outcome]) -> Outcome:
        who = self.callers[caller]
        if operation == "open":
            outcome = who.invoke(self.rlab, "open", obj.manifest(), target=obj.ref)
        elif operation == "find":
            outcome = who.invoke(self.rlab, "find", NAMESPACE, obj.job_id, target=obj.ref)
        else:
            outcome = who.invoke(self.rlab, operation, obj.ref)
        outcomes.append(outcome)
        return outcome

    def rule_open(self, step: Step, outcomes: list[Outcome]) -> bool:
        self._invoke(int(step.get("caller")), "open", self._obj(step), outcomes)
        return True

    def rule_hold(self, step: Step, outcomes: list[Outcome]) -> bool:
        self._invoke(int(step.get("caller")), "hold", self._obj(step), outcomes)
        return True

    def _release_together(self, obj: ObjectModel, callers: Iterable[int], race: bool) -> list[Outcome]:
        chosen = [self.callers[i] for i in callers]
        planned: list[PlannedCall] = [(c, "release", (obj.ref,), {}) for c in chosen]
        if not race or len(chosen) < 2:
            return self.callers.at_once(planned)
        barrier = WriteBarrier(self.rlab.lab, len(chosen))
        names = {c.name for c in chosen}
        with self.rlab.hooked(barrier.hook, lambda request: is_trainjob_put(request) and user_name(request) in names):
            return self.callers.at_once(planned, on_done=barrier.finished)

    def rule_release(self, step: Step, outcomes: list[Outcome]) -> bool:
        obj = self._obj(step)
        outcomes += self._release_together(obj, step.get("callers"), bool(step.get("race")))
        return True

    def rule_hold_then_release(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Hold, then release at once, the controllers still reacting to the hold (no settling between)."""
        obj = self._obj(step)
        self._invoke(int(step.get("caller")), "hold", obj, outcomes)
        outcomes += self._release_together(obj, step.get("callers"), race=False)
        return True

    def rule_release_lost(self, step: Step, outcomes: list[Outcome]) -> bool:
        """The admitting write is applied and its answer lost; the caller retries."""
        obj = self._obj(step)
        caller = self.callers[int(step.get("caller"))]

        def mine(request: Any) -> bool:
            return is_trainjob_put(request) and user_name(request) == caller.name and request.path.endswith(obj.name)

        with self.rlab.hooked(lose_the_answer, mine):
            first = caller.invoke(self.rlab, "release", obj.ref)
        outcomes.append(first)
        self.rlab.settle()
        first.calls = self.rlab.journal.between(first.start, first.end, caller.name)
        retry = caller.invoke(self.rlab, "release", obj.ref)
        outcomes.append(retry)
        if invariants.applied_by(first, self.rlab.book.writes):
            self.stats["retries after a lost answer"] += 1
            retry.calls = self.rlab.journal.between(retry.start, retry.end, caller.name)
            applied = invariants.applied_by(first, self.rlab.book.writes)[0]
            if retry.execution is None or str(retry.execution.admission) != applied.new_admission:
                self.violations.append(f"after {step}: the retry after a lost answer got {retry.describe()}")
            if any(c.writes for c in retry.calls):
                self.violations.append(f"after {step}: the retry after a lost answer wrote again")
        return True

    def rule_fault(self, step: Step, outcomes: list[Outcome]) -> bool:
        """One fault on the next matching request of one caller, then that caller runs one operation."""
        obj = self._obj(step)
        caller = int(step.get("caller"))
        kind = str(step.get("kind"))
        verbs, resources = FAULT_TARGETS[str(step.get("target"))]
        rule = FaultRule(
            kind,  # type: ignore[arg-type]
            verbs=frozenset(verbs),
            resources=frozenset(resources),
            count=1,
            hang_seconds=HANG_SECONDS,
        )
        injector = FaultInjector(seed=0, rules=[rule])
        name = CALLERS[caller]
        operation = str(step.get("operation"))
        with self.rlab.hooked(injector.middleware, lambda request: user_name(request) == name):
            outcome = self._invoke(caller, operation, obj, outcomes)
        if not injector.log:
            return True
        self.stats[f"fault {kind} fired"] += 1
        if outcome.family == "refused":  # a refusal that a fault caused would be a misclassification
            self.rlab.settle()
            again = self._invoke(caller, operation, obj, outcomes)
            if type(again.error) is not type(outcome.error):
                self.violations.append(
                    f"after {step}: a {kind} fault gave {outcome.describe()}, but without it: {again.describe()}"
                )
        return True

    def rule_read(self, step: Step, outcomes: list[Outcome]) -> bool:
        obj = self._obj(step)
        operation = str(step.get("operation"))
        outcome = self._invoke(READER, operation, obj, outcomes)
        outcome.calls = self.rlab.journal.between(outcome.start, outcome.end, outcome.caller)
        if operation in ("release", "hold") and (not isinstance(outcome.error, ForbiddenError) or outcome.calls):
            self.violations.append(f"after {step}: the read-only adapter did not refuse first: {outcome.describe()}")
        return True

    # --- time and machines ----------------------------------------------------------------------------------

    def rule_advance(self, step: Step, outcomes: list[Outcome]) -> bool:
        self.rlab.sc.advance(float(step.get("seconds")))
        return True

    def _node(self, step: Step) -> NodeModel:
        """Node `node` (an index, modulo the nodes there are), or with `host=i` the node that runs object i's
        first process (of replicated job `rjob`, when given) (for directed schedules, which cannot know where the
        scheduler put a pod), or with `focus` the node of the story's process (`rule_focus`)."""
        if step.get("focus") and self.focus is not None:
            focused = [n for n in self.nodes if n.name == self.focus.node]
            if focused:
                return focused[0]
        host = step.get("host")
        if host is not None:
            running = self._running(self.objects[int(host) % len(self.objects)], step.get("rjob"))
            by_name = {n.name: n for n in self.nodes}
            if running and running[0].node in by_name:
                return by_name[running[0].node]
        return self.nodes[int(step.get("node", 0)) % len(self.nodes)]

    def _may_fail(self, node: NodeModel) -> bool:
        """P: a node carrying the out-of-service taint must not go silent with its machine on."""
        return not node.deleted and node.taint is None and node.machine in ON

    def _set_machine(self, node: NodeModel, state: str) -> None:
        self.rlab.sc.set_state(node.name, state)
        node.machine = state
        if state == "powered-off":
            node.mistaken = False  # a taint put on by mistake is now true: the machine is off

    def _machine_fails(self, step: Step, state: str) -> bool:
        """The node's machine goes silent in `state` (frozen, lost, not-ready), where P lets it fail."""
        node = self._node(step)
        if not self._may_fail(node) or node.machine == state:
            return False
        self._set_machine(node, state)
        return True

    def _machine_switches(self, step: Step, state: str) -> bool:
        """The node's machine is switched to `state` (ready: rebooted; powered-off), whatever it was doing."""
        node = self._node(step)
        if node.deleted or node.machine == state:
            return False
        self._set_machine(node, state)
        return True

    def rule_freeze(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._machine_fails(step, "frozen")

    def rule_lose(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._machine_fails(step, "lost")

    def rule_not_ready(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._machine_fails(step, "not-ready")

    def rule_recover(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._machine_switches(step, "ready")

    def rule_power_off(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._machine_switches(step, "powered-off")

    def _fence(self, node: NodeModel, effect: str) -> None:
        """The operator's procedure: confirm the machine is off (power it off), then taint (k8s-apis §5.4)."""
        if node.machine != "powered-off":
            self._set_machine(node, "powered-off")
        self.rlab.sc.taint_out_of_service(node.name, effect)
        node.taint, node.mistaken = effect, False

    def rule_fence(self, step: Step, outcomes: list[Outcome]) -> bool:
        node = self._node(step)
        if node.deleted:
            return False
        self._fence(node, str(step.get("effect")))
        return True

    def rule_delete_node(self, step: Step, outcomes: list[Outcome]) -> bool:
        """The operator deletes a Node object once its machine is off (k8s-apis §5.5)."""
        node = self._node(step)
        if node.deleted:
            return False
        if node.machine != "powered-off":
            self._set_machine(node, "powered-off")
        self.rlab.sc.delete_node(node.name)
        node.deleted = True
        return True

    def rule_add_node(self, step: Step, outcomes: list[Outcome]) -> bool:
        self._add_node()
        return True

    def rule_untaint(self, step: Step, outcomes: list[Outcome]) -> bool:
        node = self._node(step)
        if node.deleted or node.taint is None:
            return False
        self.rlab.sc.untaint(node.name, v.TAINT_OUT_OF_SERVICE)
        node.taint, node.mistaken = None, False
        return True

    def rule_mistaken_taint(self, step: Step, outcomes: list[Outcome]) -> bool:
        """A taint on a Ready node: a mistake dispatch must not take for proof (DESIGN §4)."""
        node = self._node(step)
        if node.deleted or node.taint is not None or node.machine != "ready":
            return False
        self.rlab.sc.taint_out_of_service(node.name, str(step.get("effect")))
        node.taint, node.mistaken = str(step.get("effect")), True
        return True

    def rule_hostile_taint(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Breaks P: the taint on a node whose machine still runs (frozen, partitioned or NotReady)."""
        node = self._node(step)
        if node.deleted or node.taint is not None or node.machine not in ("frozen", "lost", "not-ready"):
            return False
        self.rlab.sc.taint_out_of_service(node.name, str(step.get("effect")))
        node.taint = str(step.get("effect"))
        self.stats["hostile taints"] += 1
        return True

    def rule_hostile_delete_node(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Breaks P: the Node object of a machine that still runs is deleted."""
        node = self._node(step)
        if node.deleted or node.machine not in ON:
            return False
        self.rlab.sc.delete_node(node.name)
        node.deleted = True
        self.stats["hostile node deletions"] += 1
        return True

    def _running(self, obj: ObjectModel, rjob: str | None = None) -> list[ProcessRecord]:
        running = [
            p
            for p in self.processes()
            if p.trainjob == obj.name and p.running and (rjob is None or p.created.replicated_job == rjob)
        ]
        return sorted(running, key=lambda p: (p.pod.rsplit("-", 1)[0], p.serial))

    def _exit(self, step: Step, code: int) -> bool:
        running = self._running(self._obj(step), step.get("rjob"))
        if not running:
            return False
        process = running[int(step.get("pick", 0)) % len(running)]
        try:
            if code == 0:
                self.rlab.sc.complete(NAMESPACE, process.pod)
            else:
                self.rlab.sc.fail(NAMESPACE, process.pod, code)
        except (MachineUnavailable, LookupError):
            return False
        return True

    def rule_complete(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._exit(step, 0)

    def rule_fail(self, step: Step, outcomes: list[Outcome]) -> bool:
        return self._exit(step, 1)

    # --- the hostile user -----------------------------------------------------------------------------------

    def _hostile_read(self, obj: ObjectModel) -> Obj | None:
        """The TrainJob as the hostile user reads it to replace it (a copy without its status), or None where
        the read fails: the user then gives up this step."""
        try:
            live = self.hostile.get_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", obj.name)
        except ApiException:
            return None
        body: Obj = copy.deepcopy(live)
        body.pop("status", None)
        return body

    def rule_rewrite_patch(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Rewrite runtime patches of a held TrainJob by hand, as any user with update rights could."""
        obj = self._obj(step)
        if not obj.exists or obj.suspended is not True:
            return False
        variant = str(step.get("variant"))
        body = self._hostile_read(obj)
        if body is None:
            return False
        patches: list[Obj] = body["spec"].setdefault("runtimePatches", [])
        ours = [p for p in patches if p.get("manager") == v.RUNTIME_PATCH_MANAGER]
        if variant == "alter-dispatch" and ours:
            for labels in _patch_labels(ours[0]):
                labels[v.LABEL_JOB_ID] = "forged"
                labels[v.POD_LABEL_ADMISSION] = "999"
        elif variant == "rename-dispatch" and ours:
            ours[0]["manager"] = "example.com/renamed"
            ours[0].pop("time", None)
        elif variant == "drop-dispatch" and ours:
            patches.remove(ours[0])
        elif variant == "foreign-benign":
            patches.append(_foreign_patch("example.com/team", {"example.com/team": "ml"}))
        elif variant == "foreign-forges-labels":
            forged = {v.LABEL_JOB_ID: "forged", v.LABEL_SUBMISSION: "9", v.POD_LABEL_ADMISSION: "999"}
            patches.append(_foreign_patch("example.com/forger", forged))
        else:
            return False
        try:
            self.hostile.replace_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", obj.name, body)
        except ApiException as error:
            self.stats[f"patch rewrite refused {error.status}"] += 1
            return True
        self.stats[f"patch rewrite {variant}"] += 1
        if variant == "foreign-forges-labels":
            obj.forged = True
        return True

    def _remove_identity_claims(self, obj: ObjectModel) -> bool:
        """Drop every runtime patch but dispatch's that sets an identity label; True when one was dropped."""
        body = self._hostile_read(obj)
        if body is None:
            return False
        patches: list[Obj] = body["spec"].get("runtimePatches") or []
        kept = [
            patch
            for patch in patches
            if patch.get("manager") == v.RUNTIME_PATCH_MANAGER
            or not any(set(labels) & set(v.POD_LABELS) for labels in _patch_labels(copy.deepcopy(patch)))
        ]
        if len(kept) == len(patches):
            return False
        body["spec"]["runtimePatches"] = kept
        try:
            self.hostile.replace_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", obj.name, body)
        except ApiException:
            return False
        self.rlab.settle()
        return True

    def rule_reopen(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Delete the TrainJob (its pods may linger); the next open creates a namesake, a new submission."""
        obj = self._obj(step)
        if not obj.exists:
            return False
        try:
            self.custom.delete_namespaced_custom_object(*TRAINER, NAMESPACE, "trainjobs", obj.name)
        except ApiException as error:
            if error.status != 404:
                raise
        obj.submission += 1  # `forged` stays: the old instance's pods keep their forged labels
        return True

    # --- the misbehaving cluster: slow controllers, third parties, long partitions -------------------------------

    def rule_delay(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Hold the next request of one kind of one controller in the API server; release it `steps` steps
        later, unless 60 s of lab time pass first (then it is answered 504 and not applied: `lab.apiserver.delays`).
        A target of `PAUSED_TARGETS` is held before the server instead, with no deadline."""
        target = str(step.get("target"))
        agent, verbs, resources, subresource = DELAY_TARGETS[target]
        if target.startswith(("kueue", "admission-controller")) and self.kueue is None:
            return False
        user = ADMISSION_CONTROLLER if target == "admission-controller:trainjob" else None
        rule = DelayRule(
            agent,
            verbs,
            resources,
            subresource,
            namespace=NAMESPACE,
            count=1,
            user=user,
            before_the_server=target in PAUSED_TARGETS,
        )
        self.rlab.lab.call(lambda: self.rlab.delays.add(rule))
        self.pending.append(PendingDelay(rule, target, max(int(step.get("steps")), 1)))
        self.stats[f"delay {target} armed"] += 1
        return True

    def rule_stall(self, step: Step, outcomes: list[Outcome]) -> bool:
        """The workload controllers' writes queue in the API server for a while (API Priority and Fairness
        queueing their flow, a slow webhook): every write of the chosen controllers in the namespace is held
        and released `steps` steps later, or answered 504 unapplied after 60 s of lab time (`lab.apiserver.delays`).
        dispatch meanwhile sees what they last wrote."""
        controllers = STALLS[str(step.get("controllers"))]
        steps = max(int(step.get("steps")), 1)
        for controller in controllers:
            agent = f"dispatch-lab/{controller}"
            rule = DelayRule(agent, WRITES, frozenset(), None, namespace=NAMESPACE, count=None)
            self.rlab.lab.call(lambda rule=rule: self.rlab.delays.add(rule))
            self.pending.append(PendingDelay(rule, f"stall {controller}", steps, armed=0, stall=True))
        self.stats[f"stall {step.get('controllers')}"] += 1
        return True

    def _pods(self, obj: ObjectModel) -> list[Obj]:
        """The pods in the API that were created for `obj`'s name (by the ledger: their labels may be gone)."""
        created = self.rlab.book.pods
        listed = self.core.list_namespaced_pod(NAMESPACE).items
        pods = [
            p
            for p in (self.core.api_client.sanitize_for_serialization(item) for item in listed)
            if (c := created.get(p["metadata"]["uid"])) is not None and c.trainjob == obj.name
        ]
        return sorted(pods, key=lambda p: str(p["metadata"]["name"]))

    def _focused(self, step: Step, pods: list[Obj]) -> list[Obj]:
        """`pods`, or with `focus` those on the node of the story's process (`rule_focus`): a person who deals
        with a node's trouble deals with every pod of the TrainJob there (`kubectl ... --field-selector
        spec.nodeName=...`)."""
        if not step.get("focus"):
            return pods
        node = self.focus.node if self.focus is not None else None
        return [p for p in pods if (p.get("spec") or {}).get("nodeName") == node]

    def _chosen(self, step: Step, pods: list[Obj]) -> list[Obj]:
        """The pods a person acts on: with `focus` every one of `pods`, else the one `pick` names."""
        if step.get("focus") or not pods:
            return pods
        return [pods[int(step.get("pick", 0)) % len(pods)]]

    def look(self, obj: int, pick: int, rjob: str | None = None, newest: bool = False) -> bool:
        """The process a story is about: a running one of object `obj` (of replicated job `rjob`, when given),
        with `newest` the one that started last (a pod that appeared after the hold stands out to a person);
        the story's steps with `focus` act on it (its pod, its node), as a person acts on the pod they look at
        (stories.py). None when nothing runs: those steps are then skipped."""
        running = [p for p in self._running(self.objects[obj % len(self.objects)], rjob) if p.pod]
        if newest and running:
            running = [max(running, key=lambda p: (p.start, p.serial))]
        self.focus = running[pick % len(running)] if running else None
        return self.focus is not None

    def rule_focus(self, step: Step, outcomes: list[Outcome]) -> bool:
        """No cluster action: `look` at a running process of the object (saved schedules name it so)."""
        return self.look(int(step.get("obj", 0)), int(step.get("pick", 0)), step.get("rjob"), bool(step.get("newest")))

    def rule_relabel(self, step: Step, outcomes: list[Outcome]) -> bool:
        """A person removes labels from one of the object's pods (to take it out of its controller and look at
        it). `detach` also removes the Job's selector labels, so the Job controller releases the pod; a person
        does that to a pod the Job already deletes, of a held TrainJob (on a running pod the Job would start a
        replacement beside it at once: a second process of that rank by the person's own doing, which no
        admission check can stop)."""
        obj = self._obj(step)
        variant = str(step.get("variant"))
        pods = self._pods(obj)
        if variant == "detach":
            pods = [p for p in pods if p["metadata"].get("deletionTimestamp") and obj.suspended is True]
        pods = self._focused(step, pods)
        if not pods:
            return False

        def remove(pod: Obj) -> None:
            present = [key for key in RELABEL_KEYS[variant] if key in (pod["metadata"].get("labels") or {})]
            patch = {"metadata": {"labels": dict.fromkeys(present)}}
            self.hostile_core.patch_namespaced_pod(pod["metadata"]["name"], NAMESPACE, patch)

        labelled = [
            p for p in self._chosen(step, pods) if set(RELABEL_KEYS[variant]) & set(p["metadata"].get("labels") or {})
        ]
        done = _on_each(labelled, remove)
        self.stats[f"relabel {variant}"] += done
        return done > 0

    def rule_force_delete(self, step: Step, outcomes: list[Outcome]) -> bool:
        """A person force-deletes one of the object's pods (grace 0), after dispatch held the object's current
        execution: force-deleting a pod that no hold has seen is outside the promise (docs/reliability.md)."""
        return self._force_delete(step, stuck=False)

    def rule_force_delete_stuck(self, step: Step, outcomes: list[Outcome]) -> bool:
        """The usual reason to force-delete: a pod stuck Terminating on a node that went silent (frozen or cut
        off) and (`seen`) that the API shows not Ready, deleted by a person after dispatch held the object's
        current execution."""
        return self._force_delete(step, stuck=True)

    def _force_delete(self, step: Step, *, stuck: bool) -> bool:
        obj = self._obj(step)
        if not obj.exists or obj.suspended is not True or obj.held_at is None or obj.held_at != obj.admission:
            return False
        pods = self._pods(obj)
        if stuck:
            # silent, and with `seen`, seen so: the node controller has marked it not Ready (a force deletion on a
            # node the API still shows Ready is outside the promise: docs/reliability.md, what a person can still
            # do). The generator draws `seen` always; schedules saved before it existed replay without it
            seen = bool(step.get("seen"))
            shown_ready = {n.metadata.name for n in self.core.list_node().items if _is_ready(n)} if seen else set()
            silent = {
                n.name
                for n in self.nodes
                if n.machine in ("frozen", "lost") and not n.deleted and n.name not in shown_ready
            }
            pods = [
                p
                for p in pods
                if p["metadata"].get("deletionTimestamp") and (p.get("spec") or {}).get("nodeName") in silent
            ]
        pods = self._focused(step, pods)

        def delete(pod: Obj) -> None:
            self.hostile_core.delete_namespaced_pod(pod["metadata"]["name"], NAMESPACE, grace_period_seconds=0)

        done = _on_each(self._chosen(step, pods), delete)
        self.stats["force deletions (stuck pods)" if stuck else "force deletions"] += done
        return done > 0

    def rule_crafted_name(self, step: Step, outcomes: list[Outcome]) -> bool:
        """A caller is given a crafted name (a DAG's templated value, a user's input): dispatch must refuse it
        before any request is sent, so that it never becomes another selector or path (DESIGN §3.3)."""
        caller = int(step.get("caller"))
        operation = str(step.get("operation"))
        value = CRAFTED_NAMES[int(step.get("pick", 0)) % len(CRAFTED_NAMES)]
        who = self.callers[caller]
        if operation == "find":
            value = CRAFTED_JOB_IDS[int(step.get("pick", 0)) % len(CRAFTED_JOB_IDS)]
            outcome = who.invoke(self.rlab, "find", NAMESPACE, value, target=f"{NAMESPACE}/*")
        else:
            outcome = who.invoke(self.rlab, operation, value)
        outcomes.append(outcome)
        outcome.calls = self.rlab.journal.between(outcome.start, outcome.end, outcome.caller)
        if outcome.calls or outcome.error is None:
            sent = "; ".join(c.describe() for c in outcome.calls[:3])
            self.violations.append(
                f"after {step}: the crafted name {value!r} was not refused before any request: "
                f"{outcome.describe()} {sent}"
            )
        self.stats["crafted names refused"] += not outcome.calls and outcome.error is not None
        return True

    def rule_failure_recovery(self, step: Step, outcomes: list[Outcome]) -> bool:
        """Kueue's failure recovery, first step (kubernetes-sigs/kueue v0.19, `pkg/controller/failurerecovery/
        pod_termination_controller.go`; alpha, so the lab does not run it): a pod Terminating for a minute on a
        node with the `unreachable` taint is marked Failed with condition `KueueFailureRecovery`, without proof
        that its containers stopped. Upstream acts on pods annotated `kueue.x-k8s.io/safe-to-forcefully-delete`,
        which dispatch refuses in runtimes; here a person annotated the pod by hand. (Its second step, the
        force deletion, is the `force_delete` rule.) The step lets lab time pass, up to two minutes, until a
        Terminating pod of the object on a silent machine qualifies (the taint comes 50 s after the node went
        silent, the controller a minute after the deletion)."""
        obj = self._obj(step)
        silent = {n.name for n in self.nodes if n.machine in ("frozen", "lost") and not n.deleted}
        waited = 0
        while True:
            unreachable = {n.metadata.name for n in self.core.list_node().items if _has_taint(n, UNREACHABLE_TAINT)}
            now = self.rlab.now()
            terminating = [
                p
                for p in self._focused(step, self._pods(obj))
                if p["metadata"].get("deletionTimestamp")
                and (p.get("spec") or {}).get("nodeName") in silent | unreachable
                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
            eligible = [
                p
                for p in terminating
                if parse_timestamp(str(p["metadata"]["deletionTimestamp"])) + 60 <= now
                and p["spec"]["nodeName"] in unreachable
            ]
            if eligible or not terminating or waited >= 120:
                break
            self._advance(10)
            waited += 10
        if not eligible:
            return waited > 0
        condition = {
            "type": v.CONDITION_KUEUE_FAILURE_RECOVERY,
            "status": "True",
            "reason": "KueueForcefullyDeleted",
            "message": "Pod forcefully terminated after 60s grace period due to unreachable node",
        }
        body = {"status": {"phase": "Failed", "conditions": [condition]}}

        def mark(pod: Obj) -> None:
            self.core.patch_namespaced_pod_status(pod["metadata"]["name"], NAMESPACE, body)

        done = _on_each(
            self._chosen(step, eligible), mark
        )  # upstream marks every eligible pod: a story, all of a node's
        self.stats["pods marked Failed by failure recovery"] += done
        return done > 0

    def rule_slow_stop(self, step: Step, outcomes: list[Outcome]) -> bool:
        """One running process will take this long to stop after SIGTERM (a checkpoint to flush; beyond the
        grace period the kubelet kills it): the pods of one execution then stop at different times."""
        running = [p for p in self._running(self._obj(step)) if p.pod]
        if step.get("focus"):  # every process on the story's node (one checkpoint volume, say)
            chosen = [p for p in running if self.focus is not None and p.node == self.focus.node]
        else:
            chosen = running[int(step.get("pick", 0)) % len(running) :][:1] if running else []
        done = False
        for process in chosen:
            try:
                self.rlab.sc.set_termination_seconds(NAMESPACE, process.pod, float(step.get("seconds")))
            except ApiStatusError as error:  # the pod object is gone (its process runs on behind a partition)
                if error.code != 404:
                    raise
                continue
            self.stats["slow stops"] += 1
            done = True
        return done

    def _third_party_patch_suspend(self, obj: ObjectModel, suspend: bool) -> bool:
        """A person's plain patch of spec.suspend (not dispatch's); False when the TrainJob is gone meanwhile."""
        try:
            self.hostile.patch_namespaced_custom_object(
                *TRAINER, NAMESPACE, "trainjobs", obj.name, {"spec": {"suspend": suspend}}
            )
        except ApiException as error:
            if error.status != 404:
                raise
            return False
        obj.third_party_suspended = suspend
        return True

    def rule_third_party_suspend(self, step: Step, outcomes: list[Outcome]) -> bool:
        """A person suspends a running TrainJob with a plain patch of spec.suspend, outside dispatch."""
        obj = self._obj(step)
        if not obj.exists or obj.suspended is not False or obj.queue is not None:
            return False
        if not self._third_party_patch_suspend(obj, True):
            return False
        self.stats["third-party suspensions"] += 1
        return True

    def rule_third_party_resume(self, step: Step, outcomes: list[Outcome]) -> bool:
        """The person resumes what they suspended, once nothing of the TrainJob runs (they checked) and only if
        dispatch has not acted on it since (or their resume would bypass dispatch's hold)."""
        obj = self._obj(step)
        if not obj.third_party_suspended or obj.suspended is not True or self._running(obj):
            return False
        if not self._third_party_patch_suspend(obj, False):
            return False
        self.stats["third-party resumptions"] += 1
        return True

    def rule_partition(self, step: Step, outcomes: list[Outcome]) -> bool:
        """A node is cut off (its machine runs on) long enough for taint eviction (the 300 s toleration of the
        `unreachable` taint) and the Job controller's replacement (hazard H1)."""
        node = self._node(step)
        if not self._may_fail(node) or node.machine == "lost":
            return False
        self._set_machine(node, "lost")
        self.rlab.sc.advance(float(step.get("seconds")))
        return True

    def rule_crash_admission_controller(self, step: Step, outcomes: list[Outcome]) -> bool:
        if self.kueue is None:
            return False
        return self.kueue.crash(self, int(step.get("steps")))

    def rule_preempt(self, step: Step, outcomes: list[Outcome]) -> bool:
        if self.kueue is None:
            return False
        return self.kueue.preempt(self, self._obj(step))

    # --- the end: nothing lost --------------------------------------------------------------------------------

    def converge(self, attempts: int = 20) -> list[str]:
        """Release every held request, fence every failed node as the operator would, then every live TrainJob
        must be admitted once more (Kueue mode: by Kueue, through the admission check)."""
        self.rlab.hooks.clear()
        self.pending.clear()
        released = self.rlab.lab.call(self.rlab.delays.clear)
        self.stats["held requests released"] += released
        if self.kueue is not None:
            self.kueue.recover(self)
        for node in self.nodes:
            if node.deleted:
                continue
            if node.machine != "ready" and node.taint is None:
                self._fence(node, "NoExecute")
            elif node.mistaken:
                self.rlab.sc.untaint(node.name, v.TAINT_OUT_OF_SERVICE)
                node.taint, node.mistaken = None, False
        self.rlab.settle()
        self._advance(90)
        self.refresh()
        found: list[str] = []
        outcomes: list[Outcome] = []
        for obj in self.objects:
            if not obj.exists or obj.finished:
                continue
            if obj.queue is not None and self.kueue is not None:
                found += self.kueue.converge_one(self, obj, outcomes, attempts)
            else:
                found += self._converge_one(obj, outcomes, attempts)
        found += self.check(outcomes)
        self.violations.extend(f"at the end: {problem}" for problem in found)
        self.log.append("converge")
        self.log.extend(f"    {o.describe()}" for o in outcomes)
        return found

    def _advance(self, seconds: float) -> None:
        self.rlab.sc.advance(seconds)
        self.rlab.settle()

    def hold_until_accepted(self, obj: ObjectModel, outcomes: list[Outcome], attempts: int) -> None:
        """The convergence's first step, in either mode: hold `obj` until a hold is accepted, with 5 s of lab time
        between tries, at most `attempts` tries; every try's outcome goes into `outcomes`."""
        for _ in range(attempts):
            hold = self._invoke(0, "hold", obj, outcomes)
            self.rlab.settle()
            if hold.error is None:
                break
            self._advance(5)

    def _converge_one(self, obj: ObjectModel, outcomes: list[Outcome], attempts: int) -> list[str]:
        self.hold_until_accepted(obj, outcomes, attempts)
        self._advance(HOLD_SETTLING_SECONDS)
        self.refresh()
        before = invariants._number(obj.admission)
        last: Outcome | None = None
        for _ in range(attempts):
            last = self._invoke(0, "release", obj, outcomes)
            self.rlab.settle()
            self.refresh()
            if last.error is None:
                self.stats["converged"] += 1
                if before is None or last.execution is None or last.execution.admission != before + 1:
                    return [f"{obj.ref}: the final release gave {last.describe()} after A={before}"]
                return []
            if last.family == "refused":
                if obj.finished:
                    self.stats["converged (finished)"] += 1
                    return []
                if IDENTITY_CLAIM in str(last.error) and self._remove_identity_claims(obj):
                    # dispatch refuses a foreign patch that sets the identity labels (it would make pods claim
                    # another execution); the documented remedy is to remove that patch, as the user does here
                    self.stats["refused (foreign identity labels), patch removed"] += 1
                    continue
                unsafe = self.runtime != "safe" or obj.runtime == UNSAFE_RUNTIME
                if unsafe and any(word in str(last.error) for word in RUNTIME_POLICY_WORDS):
                    # the runtime policy (DESIGN §3.7) refuses the upstream defaults: the right answer here
                    self.stats["converged (refused: unsafe runtime)"] += 1
                    return []
                return [f"{obj.ref}: the final release was refused: {last.describe()}"]
            self._advance(10)
        return [
            f"{obj.ref}: not admitted again after {attempts} releases with 10 s of lab time between them (nothing "
            f"may be lost); the last: {last and last.describe()}"
        ]


UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
#: names a caller may be handed that are not one token of their grammar (a selector or a path would change)
CRAFTED_NAMES = (
    "rel/tj-a,tj-b",
    "rel/tj-a=x",
    "rel/tj-a!=x",
    "rel/TJ-A",
    "rel/tj-a\n",
    "rel/tj-a?watch=true",
    "rel/tj-a%2Ftj-b",
    "rel/-tj-a",
    "rel,x/tj-a",
    "rel/tj-a/status",
)
#: job ids that are not label values (a label value may have capitals and dots: those are valid)
CRAFTED_JOB_IDS = ("job-a,x", "job a", "job-a\n", "-job-a", "job=a", "job-a!", "", "x" * 64)


def _on_each(pods: Iterable[Obj], act: Callable[[Obj], None]) -> int:
    """`act` on each pod, as a person would one after the other; a pod gone meanwhile (404) is passed over.
    Returns how many it acted on."""
    done = 0
    for pod in pods:
        try:
            act(pod)
        except ApiException as error:
            if error.status != 404:
                raise
            continue
        done += 1
    return done


def _is_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def _has_taint(node: Any, key: str) -> bool:
    return any(t.key == key for t in (node.spec.taints or []))


IDENTITY_CLAIM = "only dispatch's own runtime patch may set them"
"""The words of dispatch's refusal of a foreign runtime patch that sets the identity labels."""
RUNTIME_POLICY_WORDS = ("podReplacementPolicy", "restartStrategy")
"""What a refusal by the runtime policy names (the field to change)."""
HOLD_SETTLING_SECONDS = 95.0
"""Lab time converge lets pass after its hold before it releases: release may refuse, retryably, until 90 s of
server time after the hold was recorded (DESIGN §3's fresh evidence); the release attempts then continue with
10 s between them."""


def _patch_labels(patch: Obj) -> Iterable[dict[str, str]]:
    jobs = (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")
    for job in jobs or []:
        template = ((job.get("template") or {}).get("spec") or {}).get("template") or {}
        yield template.setdefault("metadata", {}).setdefault("labels", {})


def _foreign_patch(manager: str, labels: dict[str, str]) -> Obj:
    pod_template = {"metadata": {"labels": dict(labels)}}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_template}}}]}
            }
        },
    }
