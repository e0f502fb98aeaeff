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
* time: `advance` moves lab time, the healthy kubelets heartbeating all along.

The negative control's hostile rules break P: taint a running machine's node (frozen, partitioned or NotReady),
or delete the Node of a running machine. The recorder must then see an overlap: that is what the promise
depends on.

After every step the lab is settled and the invariants (`invariants.py`) are checked; `converge()` ends a
schedule by fencing every failed node as the operator would, and requires every live TrainJob to be admitted
exactly once more: nothing is lost.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import kubernetes
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import ForbiddenError
from airflow_provider_dispatch.lab import manifests
from airflow_provider_dispatch.lab.controllers import workload
from airflow_provider_dispatch.lab.controllers.kubelet import MachineUnavailable
from airflow_provider_dispatch.lab.faults import FaultInjector, FaultRule
from airflow_provider_dispatch.lab.overlap import ProcessRecord

from . import invariants
from .callers import Callers, Outcome, PlannedCall
from .harness import CALLERS, HOSTILE, ReliabilityLab, WriteBarrier, is_trainjob_put, lose_the_answer, user_of
from .schedule import READER, Step

Obj = dict[str, Any]
NAMESPACE = "rel"
RUNTIME = "rt"
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

    @property
    def ref(self) -> str:
        return f"{NAMESPACE}/{self.name}"

    def manifest(self) -> Obj:
        body = manifests.trainjob(
            self.name, job_id=self.job_id, submission=str(self.submission), num_nodes=self.num_nodes, runtime=RUNTIME
        )
        body["metadata"]["namespace"] = NAMESPACE
        body["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
        return body


@dataclass
class NodeModel:
    name: str
    machine: str = "ready"
    taint: str | None = None
    mistaken: bool = False
    deleted: bool = False


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
    _checked_writes: int = 0
    _callers: Callers | None = None

    # --- set-up ------------------------------------------------------------------------------------------

    def setup(self) -> World:
        api = self.rlab.api()
        self.core = kubernetes.client.CoreV1Api(api)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.hostile = kubernetes.client.CustomObjectsApi(self.rlab.api(HOSTILE))
        self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        runtime = manifests.cluster_training_runtime(RUNTIME, grace_seconds=self.params["grace_seconds"])
        template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        template.setdefault("metadata", {})["annotations"] = {
            workload.TERMINATION_SECONDS: str(self.params["termination_seconds"])
        }
        self.custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
        for _ in range(self.profile_nodes):
            self._add_node()
        for index in range(self.objects_count):
            letter = "abcdefgh"[index]
            self.objects.append(ObjectModel(index, f"tj-{letter}", f"job-{letter}", self.params["num_nodes"][index]))
        self._callers = Callers(self.rlab, CALLER_KINDS, CALLER_OPTIONS)
        self.rlab.settle()
        return self

    def close(self) -> None:
        if self._callers is not None:
            self._callers.close()

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
        done = rule(step, outcomes)
        self.stats["steps"] += 1
        self.stats["steps skipped" if done is False else f"rule {step.rule}"] += 1
        self.rlab.settle()
        self.refresh()
        found = self.check(outcomes)
        self.log.append(f"{step}{' (skipped)' if done is False else ''}")
        self.log.extend(f"    {o.describe()}" for o in outcomes)
        self.violations.extend(f"after {step}: {problem}" for problem in found)
        return self.violations[before:]

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
            obj.uid = live["metadata"]["uid"]
            obj.suspended = live["spec"].get("suspend")
            obj.admission = (live["metadata"].get("annotations") or {}).get(v.ANNOTATION_ADMISSION)
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
        for outcome in outcomes:
            outcome.calls = self.rlab.journal.between(outcome.start, outcome.end, outcome.caller)
            found += invariants.outcome_violations(outcome, book.writes)
            self._count(outcome)
        found += invariants.unchecked_admissions(outcomes, book.writes)
        new_writes = book.writes[self._checked_writes :]
        self._checked_writes = len(book.writes)
        found += invariants.admission_number_violations(new_writes)
        live = {(NAMESPACE, o.name): o.admission for o in self.objects if o.exists}
        found += invariants.admissions_count_violations(book.writes, live)
        for obj in self.objects:
            found += [o.describe() for o in self.rlab.sc.overlaps(NAMESPACE, obj.name)]
        attributed = invariants.attribute(self.processes(), book.pods, book.writes)
        found += invariants.overlaps_by_admission(attributed)
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
        with self.rlab.hooked(barrier.hook, lambda request: is_trainjob_put(request) and user_of(request) in names):
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
            return is_trainjob_put(request) and user_of(request) == caller.name and request.path.endswith(obj.name)

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
        with self.rlab.hooked(injector.middleware, lambda request: user_of(request) == name):
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
        first process (for directed schedules, which cannot know where the scheduler put a pod)."""
        host = step.get("host")
        if host is not None:
            running = self._running(self.objects[int(host) % len(self.objects)])
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

    def _running(self, obj: ObjectModel) -> list[ProcessRecord]:
        running = [p for p in self.processes() if p.trainjob == obj.name and p.running]
        return sorted(running, key=lambda p: (p.pod.rsplit("-", 1)[0], p.serial))

    def _exit(self, step: Step, code: int) -> bool:
        running = self._running(self._obj(step))
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

    # --- the end: nothing lost --------------------------------------------------------------------------------

    def converge(self, attempts: int = 15) -> list[str]:
        """Fence every failed node as the operator would, then every live TrainJob must be admitted once more."""
        self.rlab.hooks.clear()
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
            found += self._converge_one(obj, outcomes, attempts)
        found += self.check(outcomes)
        self.violations.extend(f"at the end: {problem}" for problem in found)
        self.log.append("converge")
        self.log.extend(f"    {o.describe()}" for o in outcomes)
        return found

    def _advance(self, seconds: float) -> None:
        self.rlab.sc.advance(seconds)
        self.rlab.settle()

    def _converge_one(self, obj: ObjectModel, outcomes: list[Outcome], attempts: int) -> list[str]:
        for _ in range(attempts):
            hold = self._invoke(0, "hold", obj, outcomes)
            self.rlab.settle()
            if hold.error is None:
                break
            self._advance(5)
        self._advance(60)
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
                return [f"{obj.ref}: the final release was refused: {last.describe()}"]
            self._advance(10)
        return [
            f"{obj.ref}: not admitted again after {attempts} attempts (nothing may be lost): {last and last.describe()}"
        ]


IDENTITY_CLAIM = "only dispatch's own runtime patch may set them"
"""The words of dispatch's refusal of a foreign runtime patch that sets the identity labels."""


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
