"""Issue 7 item 2, plain mode: a fault at every API call the adapters make, one call and one fault at a time.

For each program (release that admits, reading the pods page by page both ways; release blocked by a pod on a
lost node; hold; open; inspect; ceased) and each adapter, the program first runs fault-free and the journal
lists its calls. Then, for each call index and each fault (500, 429, 504, a hang past the client's read timeout,
a dropped connection, 409, 410, and an answer lost after the request was applied), the same program runs on a
fresh copy of the state with exactly that fault at exactly that call, and:

* no admission without a full check: if the ledger shows an admission, the caller's requests before it hold the
  complete check (invariants.full_check_problems);
* errors classified correctly: the outcome is the fault-free one (the fault was absorbed: a 410 on a pinned
  list falls back to the full list, aiohttp re-sends a dropped idempotent request) or a retryable
  UnreachableError; never a refusal, and an admission whose answer was lost is reported as possibly applied;
* nothing lost: with the fault gone, retrying converges to the fault-free end state, with exactly one
  admission (or none, where the fault-free run admits none).

A run whose fault never fired because the impatient client (READ_TIMEOUT) gave up on an earlier call by itself,
a pause of this process rather than a fault, tested nothing: it is run again (VOID_ATTEMPTS in all).

The state is built through the API as the real controllers leave it (tests/dispatch_lab/cluster.py), without
the simulated controllers: the programs' calls are the subject here, not the cluster's reactions.
"""

from __future__ import annotations

import gc
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, Status
from airflow_provider_dispatch.dispatch.errors import ConflictError
from airflow_provider_dispatch_lab.scenario import manifests

from . import invariants
from .callers import Callers, Outcome
from .figures import report
from .harness import FaultAt, ReliabilityLab, TrainJobWrite

KINDS = ("500", "429", "504", "hang", "drop", "409", "410", "lost")
READ_TIMEOUT = 0.25
HANG_SECONDS = 0.6
#: a run whose fault never fired because the impatient client timed out earlier on its own is run again, this
#: many times in all; a program whose calls really changed still reports "never came"
VOID_ATTEMPTS = 3
#: caller-0 sync and caller-1 async read the pods pinned per selector; caller-2 and caller-3 as one full list
KIND_OF = {"caller-0": "sync", "caller-1": "async", "caller-2": "sync", "caller-3": "async"}
POD_READ = {"caller-0": "pinned", "caller-1": "pinned", "caller-2": "full", "caller-3": "full"}


@pytest.fixture(scope="module")
def rlab() -> Iterator[ReliabilityLab]:
    # The impatient adapters give up after READ_TIMEOUT (0.25 s). A full garbage collection of this process's
    # heap (Airflow and all the suite imported before this module) holds every thread, the in-process lab's
    # too, for about as long on a 2-core machine (150 to 250 ms for Airflow's imports alone,
    # docs/performance.md section 3), which would turn a call with no fault into a timeout. So what exists now
    # is frozen out of the collector for the module (gc.freeze); what the matrix allocates is still collected.
    gc.collect()
    gc.freeze()
    try:
        with ReliabilityLab(controllers=()) as running:
            yield running
    finally:
        gc.unfreeze()


def _callers(rlab: ReliabilityLab, read_timeout: float) -> Callers:
    options = {
        name: {"pod_read": POD_READ[name], "page_size": 1, "request_timeout": (5.0, read_timeout)} for name in KIND_OF
    }
    return Callers(rlab, [KIND_OF[name] for name in sorted(KIND_OF)], options)


@dataclass
class Pair:
    """The same identities twice: impatient adapters (a short read timeout, so that a hang is a timeout) for
    the runs with a fault, patient ones for the fault-free reference runs and the retries."""

    faulted: Callers
    patient: Callers


@pytest.fixture(scope="module")
def callers(rlab: ReliabilityLab) -> Iterator[Pair]:
    pair = Pair(_callers(rlab, READ_TIMEOUT), _callers(rlab, 30.0))
    yield pair
    pair.faulted.close()
    pair.patient.close()


# --- the programs, each with the state it starts from --------------------------------------------------------


@dataclass(frozen=True)
class Program:
    name: str
    operation: str
    build: Callable[[Cluster], tuple[Any, ...]]
    admits: bool = False
    #: what would let a retry converge, as the cluster's controllers would do it (open: Trainer observes)
    unblock: Callable[[Cluster], None] = lambda cluster: None
    settled: Callable[[Outcome], bool] = lambda outcome: outcome.error is None


def _admittable(cluster: Cluster) -> tuple[Any, ...]:
    """Held after execution 1, drained: two finished pods that both selections match (two pages each)."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    for index in range(2):
        cluster.pod("ft-7", node=node, execution=execution, phase="Succeeded", name=f"done-{index}")
    return (f"{cluster.namespace}/ft-7",)


def _blocked(cluster: Cluster) -> tuple[Any, ...]:
    """Held after execution 1, whose pods stay Terminating on a lost node, with a finished one beside them."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution, _ = cluster.held_after_execution("ft-7", runtime=runtime, admission=1, pods_on=[node, node])
    cluster.pod("ft-7", node=node, execution=execution, phase="Succeeded", name="done-0")
    cluster.lose_node(node)
    return (f"{cluster.namespace}/ft-7",)


def _running(cluster: Cluster) -> tuple[Any, ...]:
    runtime = cluster.runtime()
    execution = Execution("ft-7", "1", 3)
    cluster.trainjob(
        "ft-7",
        runtime=runtime,
        admission=3,
        suspend=False,
        runtime_patches=[cluster.dispatch_patch(runtime, execution)],
    )
    cluster.trainer_observes("ft-7", suspended=False)
    return (f"{cluster.namespace}/ft-7",)


def _manifest(cluster: Cluster) -> tuple[Any, ...]:
    runtime = cluster.runtime()
    body = manifests.trainjob("ft-7", runtime=runtime)
    body["metadata"]["namespace"] = cluster.namespace
    return (body,)


def _trainer_observes_if_created(cluster: Cluster) -> None:
    names = [
        t["metadata"]["name"]
        for t in cluster.custom.list_namespaced_custom_object(
            v.TRAINJOB.group, v.TRAINJOB.version, cluster.namespace, v.TRAINJOB.plural
        )["items"]
    ]
    if "ft-7" in names:
        cluster.trainer_observes("ft-7")


PROGRAMS = [
    Program("release admits", "release", _admittable, admits=True),
    Program("release blocked", "release", _blocked, settled=lambda o: type(o.error).__name__ == "PodsRemainError"),
    Program("hold", "hold", _running),
    Program("open", "open", _manifest, admits=True, unblock=_trainer_observes_if_created),
    Program("inspect", "inspect", _blocked),
    Program("ceased", "ceased", _blocked),
]


# --- one injection ---------------------------------------------------------------------------------------------


@dataclass
class Injection:
    index: int
    kind: str
    fired_on: str
    problems: list[str]


@dataclass
class Run:
    cluster: Cluster
    args: tuple[Any, ...]
    outcome: Outcome


def _run(rlab: ReliabilityLab, callers: Pair, program: Program, caller: str, fault: FaultAt | None) -> Run:
    """The program on a fresh copy of its state (a namespace of its own), with `fault` if given."""
    cluster = Cluster(rlab.api(), "")
    cluster.namespace = f"f-{uuid.uuid4().hex[:10]}"
    cluster.core.create_namespace({"metadata": {"name": cluster.namespace}})
    args = program.build(cluster)
    if fault is None:
        outcome = _invoke(rlab, callers.patient, program, caller, cluster, args)
    else:
        with rlab.hooked(fault.hook, fault.when):
            outcome = _invoke(rlab, callers.faulted, program, caller, cluster, args)
    return Run(cluster, args, outcome)


def _invoke(
    rlab: ReliabilityLab, callers: Callers, program: Program, caller: str, cluster: Cluster, args: tuple[Any, ...]
) -> Outcome:
    who = next(c for c in callers.callers if c.name == caller)
    outcome = who.invoke(rlab, program.operation, *args, target=f"{cluster.namespace}/ft-7")
    outcome.calls = rlab.journal.between(outcome.start, outcome.end, caller)
    return outcome


def _admissions(rlab: ReliabilityLab, cluster: Cluster) -> list[TrainJobWrite]:
    return [w for w in rlab.book.writes if w.admitted and w.namespace == cluster.namespace]


def _essence(outcome: Outcome) -> object:
    """What must not change when a fault is absorbed: the error class, or the answer (for a status: its state,
    cessation and the remaining pods with their node states; its resourceVersion may differ)."""
    if outcome.error is not None:
        return type(outcome.error).__name__
    result = outcome.result
    if isinstance(result, Status):  # pod and node names differ from copy to copy: their states do not
        return (result.state, result.cause, result.ceased, sorted(p.node.label for p in result.remaining))
    return result


def _problems(
    rlab: ReliabilityLab, callers: Pair, program: Program, caller: str, run: Run, reference: Outcome, fault: FaultAt
) -> list[str]:
    outcome = run.outcome
    problems: list[str] = []
    if not fault.fired_on:
        calls = ", ".join(f"{c.method} {c.path} {c.status}" for c in outcome.calls)
        problems.append(f"call {fault.index} never came: {outcome.describe()}; the calls: {calls}")
    admissions = _admissions(rlab, run.cluster)
    for write in admissions:
        put = next((c for c in outcome.calls if c.serial == write.serial), None)
        if put is None:
            problems.append(f"an admission outside the caller's requests: {write.describe()}")
        else:
            problems += invariants.full_check_problems(outcome.calls, put, write.name)
    if _essence(outcome) != _essence(reference) and outcome.family != "unreachable":
        problems.append(f"misclassified: {outcome.describe()} (fault-free: {reference.describe()})")
    if admissions and outcome.error is not None:
        text = str(outcome.error)
        lost = "may or may not have been applied" in text or isinstance(outcome.error, ConflictError)
        if outcome.family != "unreachable" or not lost:
            problems.append(f"admitted, but the caller was told {outcome.describe()}")
    if len(admissions) > 1:
        problems.append(f"{len(admissions)} admissions")
    # nothing lost: without the fault, retrying reaches the fault-free end
    last = outcome
    for _ in range(4):
        if program.settled(last):
            break
        program.unblock(run.cluster)
        last = _invoke(rlab, callers.patient, program, caller, run.cluster, run.args)
    if not program.settled(last):
        problems.append(f"a retry without the fault did not converge: {last.describe()}")
    elif _essence(last) != _essence(reference) and program.operation != "open":
        problems.append(f"the retry ended differently: {last.describe()} (fault-free: {reference.describe()})")
    expected = 1 if program.admits else 0
    if len(_admissions(rlab, run.cluster)) != expected:
        problems.append(f"{len(_admissions(rlab, run.cluster))} admissions in the end, expected {expected}")
    return problems


def _matrix(rlab: ReliabilityLab, callers: Pair, program: Program, caller: str) -> tuple[Outcome, list[Injection]]:
    reference = _run(rlab, callers, program, caller, None).outcome
    done: list[Injection] = []
    for index, call in enumerate(reference.calls):
        for kind in KINDS:
            if kind == "lost" and not call.writes:
                continue  # an answer lost after a read is a dropped connection: "drop" covers it
            for _attempt in range(VOID_ATTEMPTS):
                fault = FaultAt(caller, index, kind, hang_seconds=HANG_SECONDS)
                run = _run(rlab, callers, program, caller, fault)
                if fault.fired_on or run.outcome.family != "unreachable":
                    break
                # Void: the impatient client gave up on an earlier, unfaulted call (a pause of this process
                # longer than READ_TIMEOUT) before the fault's call came. That run tested nothing; run it again.
            problems = _problems(rlab, callers, program, caller, run, reference, fault)
            done.append(Injection(index, kind, fault.fired_on, problems))
    return reference, done


#: every program through both clients; the full pod read (one namespace list, page by page) where it decides
COMBINATIONS = [
    *((program, caller) for program in PROGRAMS for caller in ("caller-0", "caller-1")),
    (PROGRAMS[0], "caller-2"),
    (PROGRAMS[0], "caller-3"),
    (PROGRAMS[1], "caller-2"),
]


@pytest.mark.parametrize(
    ("program", "caller"), COMBINATIONS, ids=[f"{p.name}-{c}-{KIND_OF[c]}-{POD_READ[c]}" for p, c in COMBINATIONS]
)
def test_a_fault_at_every_call(rlab: ReliabilityLab, callers: Pair, program: Program, caller: str) -> None:
    reference, injections = _matrix(rlab, callers, program, caller)
    assert program.settled(reference) or program.operation == "open", reference.describe()
    calls = len(reference.calls)
    assert calls >= 2
    failed = [i for i in injections if i.problems]
    report(
        f"fault matrix: {program.name} by {caller} ({KIND_OF[caller]}, {POD_READ[caller]} pod read): "
        f"{calls} calls, {len(injections)} injections ({', '.join(KINDS)}), {len(failed)} with problems"
    )
    assert not failed, "\n".join(
        f"call {i.index} ({i.fired_on}) with {i.kind}: {'; '.join(i.problems)}" for i in failed[:15]
    )
