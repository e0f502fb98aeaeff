"""The restart chain under faults, in real Airflow: N chains on a scheduler, triggerer and LocalExecutor (issue 25).

    python tests/benchmarks/restart_soak.py [--chains 20] [--parallel 10] [--seed 25] [--speed 10]
        [--json out.json] [--markdown out.md] [--keep DIR]

What it runs. A lab (TLS, RBAC, every controller of a training cluster and the fencing agent: `soak_lab`) and a
real Airflow 3 deployment against it (`deployment.airflow_stack`: api-server, scheduler with the LocalExecutor,
dag-processor, triggerer, each its own process). Each chain is a manual run (no logical date) of the example DAG
`nightly_restarts` (`TrainJobRestartOperator`, `per_run=True`, `max_restarts=3`) as written, but for its id
(`restart_soak`), no schedule, and `retries=6` for the tries the faults cost (`soak_dag_file`), in a namespace and
on a runtime of its own, two pods per submission. The chain's story (`ChainPlan`) is told through the lab only, never
through the task: submissions 1 to f fail (their ranks exit 3 after `RUN_SECONDS_LAB`, or at once when the
task has just deferred: a fast failure), submission f+1 completes; in some chains a node under submission 1 is
lost first (frozen, then fenced by the lab's fencing agent after 300 lab seconds: its pod blocks the chain until
then, as in a cluster whose remediation agent powers a lost machine off). Those chains run on nodes of their
own (`LOSSY_POOL`), so a node they lose holds no other kind of chain's pods; two of them can still share one,
and a submission failed that way is counted as an extra failure, which the chain restarts like any other.

The faults. Each chain meets one or two, at a stage of one of its submissions (`FAULTS`):

* `kill-worker` at `open` (its create of the TrainJob), `hold` (its hold of the failed one) or `drain` (its drain
  check): the lab holds that request of the task's worker (`RequestDelays`, before the server: a paused
  client), the soak SIGKILLs the task's process (its pid as Airflow records it; only a process descended from
  this soak's scheduler is ever signalled), and then lets the dead worker's request through: a write of a try that
  no longer runs lands late, as a zombie's would;
* `clear` at those stages, and at `outcome` (the task deferred while a submission runs): the UI's Clear, through
  the REST API;
* `restart-triggerer` at `outcome`: the triggerer process stopped and started again (it re-creates every trigger
  from its kwargs);
* `fail-clear` at `outcome` and `drain`: the task marked failed (the UI's Mark as failed, through the REST API: no
  retry follows, the DAG run fails, a submission goes on in the cluster with no task watching it), then, once the
  run shows failed, the task cleared: a failed chain resumed by Clear.

The chain's deferrals are mostly at `outcome`; a TrainJob fails only once its pods are gone (the Job controller's
terminal condition waits for them), so `hold` and `drain` run in one worker run after the outcome, and the soak
catches the worker there by holding its request.

What it reports, per chain and in total: the task's end state (red: anything but success), its tries, those that
ran the chain and those that resumed it from the cluster (their logs say what the cluster showed), its deferrals
and the stale-executor races met (the scheduler's "finished with state success, but the task instance's state
attribute is ..." for a try whose worker last deferred; a try the soak killed is reported the same way by the
LocalExecutor, and is not counted), whether the chain is what the cluster shows (its XCom `restarts` and return
value name the same TrainJobs, submissions, admissions and outcomes as the cluster, which shows every submission
but the last Failed and the last Complete, each admitted once), and whether two executions ever ran at once (the
lab's overlap recorder, within each TrainJob and across the chain's submissions).

tests/browser/test_restart_operator_triggerer.py runs a few chains of it in the suite (`run_chains` on that
module's lab and deployment).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import kubernetes

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # run as a script: make `benchmarks`, `deployment` importable

from deployment.airflow_rest import AirflowApiError, AirflowRest
from deployment.airflow_stack import AirflowStack
from deployment.processes import POLL_INTERVAL, Service, wait_until

from airflow_provider_dispatch.dispatch.restarts import run_key
from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_ADMISSION,
    CLUSTER_TRAINING_RUNTIME,
    CONDITION_COMPLETE,
    CONDITION_FAILED,
    LABEL_JOBSET_NAME,
    LABEL_SUBMISSION,
    TAINT_OUT_OF_SERVICE,
    TRAINJOB,
)
from airflow_provider_dispatch.hooks.dispatch import WORKER_USER_AGENT
from airflow_provider_dispatch_lab.apiserver.delays import DelayRule, RequestDelays
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import drill, manifests
from airflow_provider_dispatch_lab.scenario.presets import ClusterShape, cluster_controllers, provision
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FENCE_AFTER_SECONDS
from airflow_provider_dispatch_lab.simulated.nodes.workload import (
    EXIT_CODE_BY_SUBMISSION,
    EXIT_NOW,
    RUN_SECONDS,
)
from benchmarks.harness.report import describe_machine, machine, markdown_table

T = TypeVar("T")
Obj = dict[str, Any]

ROOT: Final = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS: Final = ROOT / "example_dags"
#: the example DAG the soak runs, as written but for these: its id, no schedule (the soak's runs are manual, with
#: no logical date), and the retries its faults cost (each killed worker costs a try, besides those Airflow itself
#: fails on a loaded machine)
SOAK_SOURCE: Final = EXAMPLE_DAGS / "nightly_restarts.py"
SOAK_CHANGES: Final = (
    ('"nightly_restarts",', '"restart_soak",'),
    ('schedule="0 2 * * *",', "schedule=None,"),
    ("retries=3,", "retries=6,"),
    ("retry_delay=timedelta(minutes=1),", "retry_delay=timedelta(seconds=5),"),
)
TASK_ID: Final = "train"


@dataclass(frozen=True)
class SoakDag:
    """The DAG a chain is a run of, and whether it gives each run its own chain (`per_run`)."""

    dag_id: str
    dag_file: str
    per_run: bool


#: the example DAG as a user runs it (retries=3; each chain named by the soak)
EXAMPLE_DAG: Final = SoakDag("restart_operator", "restart_operator.py", per_run=False)
#: the example `nightly_restarts` (per_run) as the soak runs it (`soak_dag_file`)
SOAK_DAG: Final = SoakDag("restart_soak", "restart_soak.py", per_run=True)


def soak_dag_file(folder: Path) -> Path:
    """Write the soak's DAG into `folder`: `SOAK_SOURCE` with `SOAK_CHANGES` (each found exactly once, so that an
    example that changed fails here rather than soaking something else)."""
    text = SOAK_SOURCE.read_text()
    for old, new in SOAK_CHANGES:
        if text.count(old) != 1:
            raise AssertionError(f"{SOAK_SOURCE.name} should say {old!r} exactly once, to run it as the soak's DAG")
        text = text.replace(old, new)
    path = folder / SOAK_DAG.dag_file
    path.write_text(text)
    return path


#: the example DAG's defaults the soak relies on (its retries absorb a killed worker and a race)
MAX_RESTARTS: Final = 3
#: the faults, as (kind, stage): every stage of the chain meets every fault that can reach it
FAULTS: Final = (
    ("kill-worker", "open"),
    ("clear", "outcome"),
    ("kill-worker", "hold"),
    ("restart-triggerer", "outcome"),
    ("clear", "open"),
    ("kill-worker", "drain"),
    ("clear", "hold"),
    ("clear", "drain"),
    ("fail-clear", "outcome"),
    ("fail-clear", "drain"),
)
#: what the scheduler logs when the stale executor event of a deferral fails the resumed try (apache/airflow#72716)
STALE_EVENT: Final = "finished with state success, but the task instance's state attribute is"
#: how long each submission trains, lab seconds (20 wall seconds at the default speed), as a training runs a while
#: after its task started to wait for it; a chain with faults at an outcome trains longer, for them to land first
RUN_SECONDS_LAB: Final = 200
RUN_SECONDS_WITH_OUTCOME_FAULTS: Final = 600
#: bounds (wall seconds) that only fail the soak: a chain's whole run, and one step of its story
CHAIN_BOUND: Final = 1800.0
STEP_BOUND: Final = 600.0
#: Airflow's concurrency for the soak: every chain's run and task at once (the defaults, 16, would queue some)
SETTINGS: Final = {
    "AIRFLOW__CORE__MAX_ACTIVE_RUNS_PER_DAG": "64",
    "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "64",
}


@dataclass(frozen=True)
class Fault:
    kind: str
    stage: str
    submission: int


@dataclass(frozen=True)
class ChainPlan:
    """One chain's story: `failures` submissions fail before one completes; `lost_node`: a node under submission 1
    is lost and fenced; `fast_failure`: submission 1 fails as soon as the task waits for it; the faults it meets."""

    index: int
    namespace: str
    name: str
    failures: int
    lost_node: bool
    fast_failure: bool
    faults: tuple[Fault, ...]

    @property
    def submissions(self) -> int:
        return self.failures + 1

    def faults_at(self, stage: str, submission: int) -> list[Fault]:
        return [f for f in self.faults if (f.stage, f.submission) == (stage, submission)]


def plans(chains: int, seed: int, prefix: str = "soak") -> list[ChainPlan]:
    """The chains' stories, each fault of `FAULTS` in turn (every one at least once from 8 chains on); every
    fourth chain loses a node, every fifth fails fast. Deterministic for a seed."""
    rng = random.Random(seed)
    cycle = itertools.cycle(FAULTS)
    run = uuid.uuid4().hex[:4]
    found = []
    for index in range(chains):
        failures = 1 + index % 2
        count = 2 if index % 3 == 2 else 1
        faults = []
        for kind, stage in itertools.islice(cycle, count):
            # open: of a restart (after a failure) or of the first submission; the others: of a failed submission
            last = failures + 1 if stage in ("open", "outcome") else failures
            first = 2 if stage == "open" and rng.random() < 0.6 else 1
            faults.append(Fault(kind, stage, rng.randint(min(first, last), last)))
        found.append(
            ChainPlan(
                index=index,
                namespace=f"{prefix}-{run}-{index}",
                name=f"chain{index}",
                failures=failures,
                lost_node=index % 4 == 3,
                fast_failure=index % 5 == 1,
                faults=tuple(sorted(faults, key=lambda f: (f.submission, _STAGE_ORDER[f.stage]))),
            )
        )
    return found


_STAGE_ORDER: Final = {"open": 0, "outcome": 1, "hold": 2, "drain": 3}


# --- the lab -------------------------------------------------------------------------------------------------


@dataclass
class SoakLab:
    """The lab the soak drives: its handles, its admin client, the requests it holds, kubeconfigs per identity."""

    lab: Lab
    scenario: Scenario
    delays: RequestDelays
    kubeconfigs: dict[str, Path]
    api: kubernetes.client.ApiClient

    def admin(self) -> kubernetes.client.ApiClient:
        """A client of its own for a caller that closes it (the browser test's `DrillLab.admin`)."""
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfigs["admin"]))


#: the label and taint of the nodes the lost-node chains run on, so that a node they lose holds no other chain's pods
LOSSY_POOL: Final = "dispatch-soak/pool"
LOSSY_TAINT: Final = {"key": LOSSY_POOL, "value": "lossy", "effect": "NoSchedule"}


@contextlib.contextmanager
def soak_lab(speed: float = 10.0, nodes: int = 6, lossy: int = 3) -> Iterator[SoakLab]:
    """The lab with every controller of a training cluster (no Kueue) and its fencing agent, TLS and RBAC,
    `nodes` nodes and the default runtime, `lossy` more nodes (labelled and tainted `LOSSY_POOL`) for the chains
    that lose one, and a `RequestDelays` the soak holds the task's requests with."""
    delays = RequestDelays()
    with Lab(
        speed=speed, rbac=True, tls=True, controllers=cluster_controllers(kueue=False), middlewares=(delays.middleware,)
    ) as lab:
        delays.clock = lab.clock
        provisioned = lab.run(lambda: provision(lab.inner, ClusterShape(nodes=nodes)))
        lab.run(provisioned.close)
        kubeconfigs = {"admin": lab.kubeconfig(), "writer": lab.kubeconfig_for("writer")}
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfigs["admin"]))
        try:
            with Scenario(lab) as scenario:
                for index in range(1, lossy + 1):
                    scenario.add_node(f"lossy-{index}", labels={LOSSY_POOL: "lossy"}, taints=[LOSSY_TAINT])
                yield SoakLab(lab, scenario, delays, kubeconfigs, api)
        finally:
            api.close()
        if lab.inner.crashes:
            raise AssertionError(f"lab tasks crashed: {lab.inner.crashes}")


def stack_connections(kubeconfigs: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """`kubernetes_default` as the lab's writer (what the chain runs as), `lab_admin` as its admin."""
    return {
        name: {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfigs[identity])}}
        for name, identity in (("kubernetes_default", "writer"), ("lab_admin", "admin"))
    }


# --- one chain -----------------------------------------------------------------------------------------------

#: how often a REST call the metadata database refused (sqlite under five processes answers "database is locked"
#: now and then: a 500) is made again, and the pause between two
REST_ATTEMPTS: Final = 6
REST_PAUSE: Final = 2.0


class SoakRest(AirflowRest):
    """The REST calls of the soak, each made again when the api-server answers 5xx or not at all. A run is
    triggered with a run id of the soak's own, so a trigger made again finds the run it made (409)."""

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> Any:
        for attempt in range(REST_ATTEMPTS):
            try:
                return super().call(method, path, body, **query)
            except AirflowApiError as error:
                if error.status < 500 or attempt == REST_ATTEMPTS - 1:
                    raise
            except OSError:
                if attempt == REST_ATTEMPTS - 1:
                    raise
            time.sleep(REST_PAUSE)
        raise AssertionError("unreachable")

    def try_logs(self, dag_id: str, run_id: str, task_id: str, tries: int) -> dict[int, str]:
        """The log of each try the task has (a try Airflow rescheduled while its worker started has none)."""
        found = {}
        for try_number in range(1, tries + 1):
            try:
                found[try_number] = self.log_text(dag_id, run_id, task_id, try_number)
            except AirflowApiError as error:
                if error.status != 404:
                    raise
        return found

    def trigger_once(self, dag_id: str, conf: dict[str, Any], run_id: str) -> str:
        try:
            return self.trigger(dag_id, conf, run_id)
        except AirflowApiError as error:
            if error.status != 409:
                raise
            return run_id  # made by an earlier attempt whose answer was lost


@dataclass
class Injected:
    kind: str
    stage: str
    submission: int
    try_number: int
    seconds: float


@dataclass
class ChainResult:
    plan: ChainPlan
    run_id: str = ""
    state: str = ""
    task_state: str = ""
    tries: int = 0
    #: the tries that ran the chain (a try rescheduled while its worker started did not), and those of them that
    #: found submissions in the cluster and went on from them
    started_tries: int = 0
    resumed_tries: int = 0
    deferrals: int = 0
    races: int = 0
    injected: list[Injected] = field(default_factory=list)
    #: faults at an outcome that came before the task deferred on it (none is injected then)
    missed: list[Fault] = field(default_factory=list)
    trainjobs: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    #: submissions that failed beyond the story's: on a node another chain lost (the chain restarted them too)
    extra_failures: int = 0
    double_admissions: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""

    @property
    def red(self) -> bool:
        return self.task_state != "success" or bool(self.error)


class Chain:
    """Runs one chain's story against the lab and the deployment, and checks what it left."""

    def __init__(self, plan: ChainPlan, soak: SoakLab, stack: AirflowStack, lock: threading.Lock, dag: SoakDag) -> None:
        self.plan = plan
        self.dag = dag
        self.base = plan.name  # with per_run: the name and the run's key, once the run exists
        self.soak = soak
        self.stack = stack
        self.rest = SoakRest(stack.base_url)
        self.triggerer_lock = lock
        self.result = ChainResult(plan)
        self.core = kubernetes.client.CoreV1Api(soak.api)
        self.custom = kubernetes.client.CustomObjectsApi(soak.api)
        self.runtime = f"rt-{plan.namespace}"
        self.frozen: str | None = None
        self.open_rules: list[tuple[Fault, DelayRule]] = []

    # --- what the chain is doing ------------------------------------------------------------------------------

    def ti(self) -> dict[str, Any]:
        return self.rest.task_instance(self.dag.dag_id, self.result.run_id, TASK_ID)

    def chain_state(self) -> dict[str, Any] | None:
        try:
            value = self.rest.xcom(self.dag.dag_id, self.result.run_id, TASK_ID, key="restarts")
        except AssertionError:  # not pushed yet (404)
            return None
        return value if isinstance(value, dict) else None

    def deferred_at(self, stage: str, submission: int) -> dict[str, Any] | None:
        ti = self.ti()
        if ti.get("state") != "deferred":
            return None
        state = self.chain_state() or {}
        history = state.get("history") or []
        return ti if state.get("stage") == stage and len(history) == submission else None

    def outcome_stage(self, submission: int) -> str | None:
        """ "at": the task waits (deferred) for submission k's outcome; "past": k has finished; None: neither yet."""
        if self.deferred_at("outcome", submission):
            return "at"
        return "past" if outcome_of(self.trainjob(submission) or {}) is not None else None

    def services(self) -> list[Service]:
        """The components a wait fails at once without; not the triggerer, which the soak itself restarts."""
        return [service for service in self.stack.services if service.name != "triggerer"]

    def wait(self, what: str, predicate: Callable[[], T | None], bound: float = STEP_BOUND) -> T:
        label = f"chain {self.plan.index} ({self.plan.namespace}): {what}"
        return wait_until(label, predicate, bound=bound, services=self.services())

    def trainjob(self, submission: int) -> Obj | None:
        try:
            found: Obj = self.custom.get_namespaced_custom_object(
                TRAINJOB.group, TRAINJOB.version, self.plan.namespace, TRAINJOB.plural, self.name(submission)
            )
        except kubernetes.client.ApiException as error:
            if error.status == 404:
                return None
            raise
        return found

    def name(self, submission: int) -> str:
        return f"{self.base}-{submission}"

    def running_pods(self, submission: int) -> list[tuple[str, str]] | None:
        """(pod, node) of the submission's pods once both run its execution 1."""
        selector = f"{LABEL_JOBSET_NAME}={self.name(submission)},dispatch.phpboyscout.uk/admission=1"
        pods = self.core.list_namespaced_pod(self.plan.namespace, label_selector=selector).items
        running = sorted((p.metadata.name, p.spec.node_name) for p in pods if p.status.phase == "Running")
        return running if len(running) == 2 else None

    # --- the story ----------------------------------------------------------------------------------------------

    def run(self) -> ChainResult:
        started = time.monotonic()
        try:
            self.setup()
            self.arm_open(1)
            conf = {
                "namespace": self.plan.namespace,
                "name": self.plan.name,
                "runtime": self.runtime,
                "num_nodes": 2,
                "max_restarts": MAX_RESTARTS,
            }
            self.result.run_id = self.rest.trigger_once(self.dag.dag_id, conf, f"soak__{self.plan.namespace}")
            if self.dag.per_run:  # a manual run without a logical date: the key is its run_after's and its id's
                run = self.rest.dag_run(self.dag.dag_id, self.result.run_id)
                key = run_key(
                    dag_id=self.dag.dag_id,
                    task_id=TASK_ID,
                    run_id=self.result.run_id,
                    date=datetime.fromisoformat(str(run["logical_date"] or run["run_after"])),
                )
                self.base = f"{self.plan.name}-{key}"
            self.inject_open(1)  # the faults at the first open, armed before the run was triggered
            for submission in range(1, self.plan.submissions + 1):
                self.tell(submission)
            self.result.state = self.wait("the run to end", self.run_ended, bound=CHAIN_BOUND)
            self.check()
        except Exception as error:  # a chain that cannot be told is red, with why; the others go on
            self.result.error = f"{type(error).__name__}: {error}"
            with contextlib.suppress(Exception):
                self.check()
        finally:
            self.recover_node()
            self.result.seconds = time.monotonic() - started
        return self.result

    def run_ended(self) -> str | None:
        state = str(self.rest.dag_run(self.dag.dag_id, self.result.run_id).get("state"))
        return state if state in ("success", "failed") else None

    def setup(self) -> None:
        self.core.create_namespace({"metadata": {"name": self.plan.namespace}})
        body = manifests.cluster_training_runtime(self.runtime, grace_seconds=300)
        job_spec = body["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        # every rank runs RUN_SECONDS lab seconds, then exits 3 in the failing submissions, 0 in the last
        failing = ",".join(f"{k}=3" for k in range(1, self.plan.failures + 1))
        outcome_faults = any(f.stage == "outcome" for f in self.plan.faults)
        run_seconds = RUN_SECONDS_WITH_OUTCOME_FAULTS if outcome_faults else RUN_SECONDS_LAB
        job_spec["template"]["metadata"] = {
            "annotations": {RUN_SECONDS: str(run_seconds), EXIT_CODE_BY_SUBMISSION: failing}
        }
        job_spec["backoffLimit"] = 0
        job_spec["template"]["spec"]["restartPolicy"] = "Never"
        if self.plan.lost_node:  # on the lossy nodes only, which no other kind of chain runs on
            job_spec["template"]["spec"]["nodeSelector"] = {LOSSY_POOL: "lossy"}
            job_spec["template"]["spec"]["tolerations"] = [{**LOSSY_TAINT, "operator": "Equal"}]
        coords = CLUSTER_TRAINING_RUNTIME
        self.custom.create_cluster_custom_object(coords.group, coords.version, coords.plural, body)

    def tell(self, submission: int) -> None:
        """Submission k of the story: it runs; the faults at its outcome; it ends (its ranks exit after `RUN_SECONDS`,
        or at once in a fast failure); the faults at its hold and drain, and at the open of the next."""
        pods = self.wait(f"both pods of submission {submission} running", lambda: self.running_pods(submission))
        if self.plan.lost_node and submission == 1:
            self.lose_node(pods[1][1])
        waiting = f"the task deferred on submission {submission}'s outcome, or its outcome"
        for fault in self.plan.faults_at("outcome", submission):
            if self.wait(waiting, lambda: self.outcome_stage(submission)) == "at":
                self.inject_while_deferred(fault)
            else:
                self.result.missed.append(fault)
        if submission > self.plan.failures:
            return  # it completes: its ranks exit 0 after RUN_SECONDS
        rules = [(f, self.arm(f)) for stage in ("hold", "drain") for f in self.plan.faults_at(stage, submission)]
        self.arm_open(submission + 1)
        # a fast failure: the training crashes as soon as the task waits for it, so its outcome comes within the
        # window in which Airflow's stale executor event of the deferral may still arrive (apache/airflow#72716)
        fast = self.plan.fast_failure and submission == 1
        if fast and self.wait(waiting, lambda: self.outcome_stage(submission)) == "at":
            self.exit_now([pod for pod, _ in pods], 3)
        for fault, rule in rules:
            self.inject_while_held(fault, rule)
        if self.frozen is not None:
            self.wait(f"submission {submission + 1} opened", lambda: self.trainjob(submission + 1))
            self.recover_node()
        self.inject_open(submission + 1)

    # --- faults ---------------------------------------------------------------------------------------------------

    def rule_for(self, stage: str) -> DelayRule:
        """The worker's request that shows it at `stage`: its create (open), its write of the failed TrainJob
        (hold: the outcome wait writes nothing, so the next write is the hold), its list of one TrainJob's pods
        (drain: the hold reads the whole namespace, the drain check by selector)."""
        verbs, resources, selected = {
            "open": ({"create"}, {"trainjobs"}, None),
            "hold": ({"update"}, {"trainjobs"}, None),
            "drain": ({"list"}, {"pods"}, True),
        }[stage]
        return DelayRule(
            WORKER_USER_AGENT,
            frozenset(verbs),
            frozenset(resources),
            namespace=self.plan.namespace,
            count=1,
            before_the_server=True,
            selected=selected,
        )

    def arm(self, fault: Fault) -> DelayRule:
        rule = self.rule_for(fault.stage)
        self.soak.lab.call(lambda: self.soak.delays.add(rule))
        return rule

    def arm_open(self, submission: int) -> None:
        self.open_rules = [(fault, self.arm(fault)) for fault in self.plan.faults_at("open", submission)]

    def inject_open(self, submission: int) -> None:
        for fault, rule in self.open_rules:
            if fault.submission == submission:
                self.inject_while_held(fault, rule)

    def held(self, rule: DelayRule) -> bool:
        return self.soak.lab.call(
            lambda: any(r.rule is rule and r.outcome == "held" for r in self.soak.delays.requests)
        )

    def inject_while_held(self, fault: Fault, rule: DelayRule) -> None:
        """The worker is held at the fault's request: kill it or clear the task, then let the request through."""
        self.wait(f"the worker held at {fault.stage} of submission {fault.submission}", lambda: self.held(rule))
        ti = self.wait("the task running", lambda: (found := self.ti()).get("state") == "running" and found)
        started = time.monotonic()
        if fault.kind == "kill-worker":
            self.kill_task_process(ti)
        elif fault.kind == "fail-clear":
            self.rest.mark_failed(self.dag.dag_id, self.result.run_id, TASK_ID)
        else:
            self.rest.clear(self.dag.dag_id, self.result.run_id, TASK_ID)
        try_number = int(ti["try_number"])
        self.wait(
            f"try {try_number} to end",
            lambda: (found := self.ti()).get("try_number") != try_number or found.get("state") != "running",
        )
        self.soak.lab.call(lambda: self.soak.delays.remove(rule))
        self.soak.lab.call(lambda: self.soak.delays.release(rule))  # the dead try's request lands late
        if fault.kind == "fail-clear":
            self.clear_failed_run()
        self.result.injected.append(
            Injected(fault.kind, fault.stage, fault.submission, try_number, time.monotonic() - started)
        )

    def inject_while_deferred(self, fault: Fault) -> None:
        ti = self.ti()
        started = time.monotonic()
        if fault.kind == "clear":
            self.rest.clear(self.dag.dag_id, self.result.run_id, TASK_ID)
        elif fault.kind == "fail-clear":
            self.rest.mark_failed(self.dag.dag_id, self.result.run_id, TASK_ID)
            self.clear_failed_run()
        else:
            with self.triggerer_lock:
                self.stack.restart("triggerer")
        self.result.injected.append(
            Injected(fault.kind, fault.stage, fault.submission, int(ti["try_number"]), time.monotonic() - started)
        )

    def clear_failed_run(self) -> None:
        """Once the DAG run shows failed (the task marked failed), Clear the task and the tasks after it (marked
        upstream_failed, as the example `restart_operator`'s report): a failed chain resumed."""
        self.wait(
            "the run failed",
            lambda: self.rest.dag_run(self.dag.dag_id, self.result.run_id).get("state") == "failed",
        )
        self.rest.clear(self.dag.dag_id, self.result.run_id, TASK_ID, downstream=True)

    def kill_task_process(self, ti: dict[str, Any]) -> None:
        """SIGKILL the task's process (its pid as Airflow recorded it), only if it descends from this soak's
        scheduler (the LocalExecutor runs each task in a child of one of its workers)."""
        pid = ti.get("pid")
        if not isinstance(pid, int):
            raise AssertionError(f"the running task has no pid: {ti}")
        scheduler = self.stack.service("scheduler").pid
        if scheduler not in ancestors(pid):
            raise AssertionError(f"pid {pid} does not descend from this soak's scheduler ({scheduler}): not killed")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    # --- the cluster's side ---------------------------------------------------------------------------------------

    def exit_now(self, pods: Sequence[str], code: int) -> None:
        for pod in pods:
            self.core.patch_namespaced_pod(
                pod, self.plan.namespace, {"metadata": {"annotations": {EXIT_NOW: str(code)}}}
            )

    def lose_node(self, node: str) -> None:
        """The machine under one pod of submission 1 freezes; the fencing agent powers it off and taints it
        out-of-service after 300 lab seconds (the runbook's step, done by a platform's remediation agent)."""
        drill.freeze_node(self.soak.api, node, fence_after_seconds=300)
        self.frozen = node

    def recover_node(self) -> None:
        node, self.frozen = self.frozen, None
        if node is None:
            return
        self.soak.scenario.recover(node)
        self.soak.scenario.wait_for_node(
            node,
            lambda n: (
                not any(t.get("key") == TAINT_OUT_OF_SERVICE for t in (n or {}).get("spec", {}).get("taints") or ())
            ),
            timeout=STEP_BOUND,
        )
        self.core.patch_node(node, {"metadata": {"annotations": {FENCE_AFTER_SECONDS: None}}})

    # --- what it left -------------------------------------------------------------------------------------------

    def check(self) -> None:
        result, plan, rest = self.result, self.plan, self.rest
        ti = self.ti()
        result.task_state = str(ti.get("state"))
        result.tries = int(ti.get("try_number") or 0)
        for try_number in range(1, result.tries + 1):
            log = self.try_log(try_number)
            # a try Airflow rescheduled while its worker started (its DAG file not parsed in time) never ran
            result.started_tries += "Restart chain " in log or "starts where try" in log
            result.resumed_tries += "the cluster shows submissions" in log
        result.races = self.races()
        result.deferrals = self.deferrals()
        listed = self.custom.list_namespaced_custom_object(
            TRAINJOB.group, TRAINJOB.version, plan.namespace, TRAINJOB.plural
        )
        cluster = {
            t["metadata"]["name"]: (
                int(t["metadata"]["labels"][LABEL_SUBMISSION]),
                int((t["metadata"].get("annotations") or {}).get(ANNOTATION_ADMISSION, 0)),
                outcome_of(t),
            )
            for t in listed["items"]
        }
        result.trainjobs = sorted(cluster)
        chain = self.chain_state() or {}
        reported = {
            str(h["trainjob"]).split("/", 1)[1]: (int(h["submission"]), h["admission"], h["outcome"])
            for h in chain.get("history") or []
        }
        if reported != cluster:
            result.mismatches.append(f"the chain's XCom shows {reported}, the cluster {cluster}")
        # the chain as the cluster shows it: its submissions in order, each run once, every one but the last failed
        submissions = sorted(cluster.values())
        shape = [(k, 1, "Failed") for k in range(1, len(submissions))] + [(len(submissions), 1, "Complete")]
        if submissions != shape:
            result.mismatches.append(f"the cluster shows {cluster}, not a chain that ended in one Complete")
        if self.name(1) not in cluster:
            result.mismatches.append(f"no TrainJob {self.name(1)} (the chain's names): {sorted(cluster)}")
        # more failures than the story made: a submission on a node another chain lost (frozen, then fenced)
        result.extra_failures = max(0, len(submissions) - plan.submissions)
        if len(submissions) < plan.submissions:
            result.mismatches.append(f"{len(submissions)} submissions, the story failed {plan.failures}")
        if result.task_state == "success":
            value = rest.xcom(self.dag.dag_id, result.run_id, TASK_ID)
            last = self.name(len(submissions))
            if value.get("trainjob") != f"{plan.namespace}/{last}" or value.get("restarts") != len(submissions) - 1:
                result.mismatches.append(f"the return value {value} is not the last submission's ({last})")
        ledger = self.soak.lab.inner.ledger
        for name in result.trainjobs:
            admissions = self.soak.lab.call(functools.partial(ledger.history, plan.namespace, name))
            if len(admissions) != 1:
                result.double_admissions.append(f"{name}: {[a.admission_annotation for a in admissions]}")
            for overlap in self.soak.scenario.overlaps(plan.namespace, name):
                result.overlaps.append(f"{name}: {overlap}")
        ordered = sorted(cluster, key=lambda n: cluster[n][0])
        for before, after in itertools.pairwise(ordered):
            ran = self.soak.scenario.processes(plan.namespace, before)
            then = self.soak.scenario.processes(plan.namespace, after)
            if ran and then and max(r.stop or float("inf") for r in ran) > min(r.start for r in then):
                result.overlaps.append(f"{after} started before every process of {before} stopped")

    def races(self) -> int:
        """The scheduler's failures of this run's task on a stale executor event of a deferral (apache/airflow#72716):
        a state mismatch whose workload last finished by deferring. (A workload the soak killed or Airflow stopped
        is also reported as a success by the LocalExecutor, and its mismatch is the soak's fault, not the race.)"""
        log = (self.stack.log_dir / "scheduler.log").read_text(errors="replace")
        run = self.result.run_id
        last_state: dict[str, str] = {}
        found = 0
        for line in log.splitlines():
            if "Workload finished" in line and "workload_id=" in line:
                workload = line.split("workload_id=", 1)[1].split()[0]
                last_state[workload] = line.split("final_state=", 1)[1].split()[0] if "final_state=" in line else ""
            elif STALE_EVENT in line and f"{self.dag.dag_id}.{TASK_ID} {run}" in line and "ti_id=" in line:
                workload = line.split("ti_id=", 1)[1].split(">", 1)[0].split()[0]
                found += last_state.get(workload) == "deferred"
        return found

    def deferrals(self) -> int:
        """How often the task deferred, over all its tries."""
        return sum(self.try_log(n).count("Pausing task as DEFERRED") for n in range(1, self.result.tries + 1))

    def try_log(self, try_number: int) -> str:
        """The task log of one try as the worker wrote it (the file the api-server serves)."""
        path = (
            self.stack.home
            / "logs"
            / f"dag_id={self.dag.dag_id}"
            / f"run_id={self.result.run_id}"
            / f"task_id={TASK_ID}"
            / f"attempt={try_number}.log"
        )
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def out_of_service(node: Obj | None) -> bool:
    return any(t.get("key") == TAINT_OUT_OF_SERVICE for t in (node or {}).get("spec", {}).get("taints") or ())


def outcome_of(trainjob: Obj) -> str | None:
    for condition in (trainjob.get("status") or {}).get("conditions") or ():
        if condition.get("type") in (CONDITION_COMPLETE, CONDITION_FAILED) and condition.get("status") == "True":
            return "Complete" if condition["type"] == CONDITION_COMPLETE else "Failed"
    return None


def ancestors(pid: int) -> list[int]:
    """The pids above `pid` (Linux /proc), nearest first."""
    found = []
    current = pid
    for _ in range(64):
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            break
        parent = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0)
        if parent <= 1:
            break
        found.append(parent)
        current = parent
    return found


# --- the soak ------------------------------------------------------------------------------------------------


def run_chains(
    soak: SoakLab, stack: AirflowStack, chain_plans: Sequence[ChainPlan], parallel: int, dag: SoakDag = EXAMPLE_DAG
) -> list[ChainResult]:
    """Run the chains as runs of `dag` (parsed by the deployment), at most `parallel` at once."""
    SoakRest(stack.base_url).unpause(dag.dag_id)
    lock = threading.Lock()
    results: dict[int, ChainResult] = {}
    pending = list(chain_plans)
    running: list[threading.Thread] = []

    def one(plan: ChainPlan) -> None:
        results[plan.index] = Chain(plan, soak, stack, lock, dag).run()

    while pending or running:
        running = [t for t in running if t.is_alive()]
        while pending and len(running) < parallel:
            thread = threading.Thread(target=one, args=(pending.pop(0),), name="soak-chain", daemon=True)
            thread.start()
            running.append(thread)
        time.sleep(POLL_INTERVAL)
    return [results[plan.index] for plan in chain_plans]


def summary(results: Sequence[ChainResult], seconds: float) -> dict[str, Any]:
    faults: dict[str, int] = {}
    for result in results:
        for fault in result.injected:
            key = f"{fault.kind} at {fault.stage}"
            faults[key] = faults.get(key, 0) + 1
    return {
        "chains": len(results),
        "lost_nodes": sum(1 for r in results if r.plan.lost_node),
        "submissions": sum(len(r.trainjobs) for r in results),
        "restarts": sum(max(len(r.trainjobs) - 1, 0) for r in results),
        "extra_failures": sum(r.extra_failures for r in results),
        "faults": dict(sorted(faults.items())),
        "faults_planned": sum(len(r.plan.faults) for r in results),
        "faults_total": sum(faults.values()),
        "faults_missed": sum(len(r.missed) for r in results),
        "red": sum(1 for r in results if r.red),
        "tries": sum(r.tries for r in results),
        "resumed_tries": sum(r.resumed_tries for r in results),
        "deferrals": sum(r.deferrals for r in results),
        "races": sum(r.races for r in results),
        "mismatches": sum(len(r.mismatches) for r in results),
        "double_admissions": sum(len(r.double_admissions) for r in results),
        "overlaps": sum(len(r.overlaps) for r in results),
        "wall_seconds": round(seconds, 1),
    }


def run(chains: int, parallel: int, seed: int, speed: float, keep: Path | None = None) -> dict[str, Any]:
    started = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix="dispatch-soak-airflow-"))
    logs = (keep or home) / "airflow-logs"
    dags = home / "dags"  # the soak's DAG beside what the example DAGs share
    dags.mkdir(parents=True)
    shutil.copy(EXAMPLE_DAGS / "dispatch_examples.py", dags)
    soak_dag_file(dags)
    with soak_lab(speed=speed) as soak:
        stack = AirflowStack.create(home, logs, dags, stack_connections(soak.kubeconfigs), SETTINGS)
        try:
            stack.migrate()
            stack.start()
            stack.wait_ready()
            stack.wait_for_dag(SOAK_DAG.dag_id, SOAK_DAG.dag_file)
            results = run_chains(soak, stack, plans(chains, seed), parallel, SOAK_DAG)
        finally:
            stack.stop()
            if keep is not None and (home / "logs").is_dir():
                shutil.copytree(home / "logs", keep / "airflow-logs" / "tasks", dirs_exist_ok=True)
            shutil.rmtree(home, ignore_errors=True)
    return {
        "machine": machine(),
        "config": {"chains": chains, "parallel": parallel, "seed": seed, "speed": speed, "dag": SOAK_DAG.dag_id},
        "summary": summary(results, time.monotonic() - started),
        "chains": [{**asdict(r), "red": r.red} for r in results],
    }


def render_markdown(results: dict[str, Any]) -> str:
    total = results["summary"]
    rows = [
        (
            str(c["plan"]["index"]),
            f"{c['plan']['failures']}"
            + (" + lost node" if c["plan"]["lost_node"] else "")
            + (", fast" if c["plan"]["fast_failure"] else ""),
            ", ".join(f"{f['kind']} at {f['stage']} {f['submission']}" for f in c["injected"]) or "none",
            c["task_state"] or "-",
            str(c["tries"]),
            str(c["resumed_tries"]),
            str(c["races"]),
            str(len(c["mismatches"]) + len(c["double_admissions"]) + len(c["overlaps"])),
            f"{c['seconds']:.0f}",
        )
        for c in results["chains"]
    ]
    table = markdown_table(
        ["chain", "failures", "faults", "task", "tries", "resumed", "races", "wrong", "seconds"], rows
    )
    faults = ", ".join(f"{kind}: {count}" for kind, count in total["faults"].items())
    return "\n".join(
        [
            f"# Restart soak: {total['chains']} chains ({describe_machine(results['machine'])})",
            "",
            f"Faults injected ({total['faults_total']} of {total['faults_planned']} planned): {faults} (an outcome's "
            f"that came before the task deferred on it: {total['faults_missed']}). "
            f"Lost nodes: {total['lost_nodes']}.",
            f"Red tasks: {total['red']}. Tries: {total['tries']}, resumed from the cluster: {total['resumed_tries']}. "
            f"Deferrals: {total['deferrals']}; stale-executor races met: {total['races']}.",
            f"Submissions failed beyond the stories (on a node another chain lost): {total['extra_failures']}. "
            f"Mismatches between the cluster and the chains: {total['mismatches']}; TrainJobs admitted twice: "
            f"{total['double_admissions']}; executions at once: {total['overlaps']}. "
            f"Wall time {total['wall_seconds']:.0f} s.",
            "",
            table,
            "",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chains", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--keep", type=Path, help="keep the Airflow logs here")
    args = parser.parse_args(argv)
    results = run(args.chains, args.parallel, args.seed, args.speed, args.keep)
    text = render_markdown(results)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    if args.markdown:
        args.markdown.write_text(text)
    total = results["summary"]
    return 1 if total["red"] or total["mismatches"] or total["double_admissions"] or total["overlaps"] else 0


if __name__ == "__main__":
    sys.exit(main())
