"""Issue 26: evidence that cannot lose a pod. The three ways the issue found to run two processes of one rank at
once, each inside the promise as it was stated, each with faults the model already draws, on the whole simulated
cluster with the overlap recorder as the judge:

1. a pod recorded by the hold while it had no node (the scheduler's binding slow), bound after the record, its
   node lost, the Job controller's graceful deletion, then a person's force deletion;
2. a pod created after the hold's record (the Job controller's creation in flight across the hold), listed by a
   check, its node lost, then force-deleted;
3. a namesake of a TrainJob deleted while it ran, opened while the garbage collector's deletion of the
   predecessor's Job is slow: the predecessor's Job creates a replacement after the namesake's admission.

Each test asserts that release refuses while the process may run, and that the recorder saw no overlap.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiohttp import web

from airflow_provider_dispatch.dispatch.errors import PodsRemainError
from airflow_provider_dispatch.lab.apiserver.delays import DelayRule
from airflow_provider_dispatch.lab.apiserver.server import CLOCK_OFFSET_KEY

from .harness import ReliabilityLab
from dispatch_lab.middleware import Handler
from .one_pod import RUNNING, core, do, hold, one_pod_world, only_process, overlaps, release, require
from .schedule import Step
from .world import NAMESPACE, World

SETTLE = Step.of("advance", seconds=95)


@pytest.fixture
def world() -> Iterator[World]:
    """One TrainJob of one pod on three nodes, running its first execution; a process stops 8 s after SIGTERM."""
    yield from one_pod_world(8, 30)


def _hold_back(world: World, agent: str, verb: str, subresource: str = "") -> DelayRule:
    """The next `verb` of pods by the client `agent` is held in the API server (lab.apiserver.delays)."""
    rule = DelayRule(agent, frozenset({verb}), frozenset({"pods"}), subresource, namespace=NAMESPACE, count=1)
    world.rlab.lab.call(lambda: world.rlab.delays.add(rule))
    return rule


def _let_through(world: World, rule: DelayRule) -> int:
    delays = world.rlab.delays

    def release_it() -> int:
        delays.remove(rule)
        return delays.release(rule)

    released = world.rlab.lab.call(release_it)
    world.rlab.settle()
    return released


def _pods(world: World) -> list[object]:
    return list(core(world).list_namespaced_pod(NAMESPACE).items)


def test_case_1_a_pod_recorded_without_a_node_then_bound_and_force_deleted(world: World) -> None:
    do(world, Step.of("hold", obj=0, caller=0), SETTLE)
    bind = _hold_back(world, "default-scheduler", "create", "binding")
    started = release(world)
    require(started.execution is not None and started.execution.admission == 2, started.describe())
    unbound = [p for p in _pods(world) if not p.spec.node_name and not p.metadata.deletion_timestamp]
    require(len(unbound) == 1, f"no pod waiting for its binding: {unbound}")
    pod = unbound[0].metadata.name
    deletion = _hold_back(world, "dispatch-lab/job-controller", "delete")
    held = hold(world)
    require(held.error is None, held.describe())
    require(_let_through(world, bind) == 1, "the binding was not held")
    do(world, Step.of("advance", seconds=2))
    running, node = only_process(world)
    require(running == pod, f"{running} runs, not {pod}")
    do(world, Step.of("lose", host=0))
    require(_let_through(world, deletion) == 1, "the Job controller's deletion was not held")
    do(world, SETTLE)
    blocked = release(world)
    require(isinstance(blocked.error, PodsRemainError), f"not blocked by the Terminating pod: {blocked.describe()}")
    core(world).delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)  # kubectl delete --force
    world.rlab.settle()
    after = release(world)
    do(world, Step.of("advance", seconds=5))
    assert after.execution is None, f"admitted beside the process on the lost node: {after.describe()}"
    assert overlaps(world) == []


def test_case_2_a_pod_created_after_the_record_listed_then_force_deleted(world: World) -> None:
    do(world, Step.of("hold", obj=0, caller=0), SETTLE)
    creation = _hold_back(world, "dispatch-lab/job-controller", "create")
    started = release(world)
    require(started.execution is not None and started.execution.admission == 2, started.describe())
    require(_pods(world) == [] or all(p.metadata.deletion_timestamp for p in _pods(world)), "a pod was created")
    deletion = _hold_back(world, "dispatch-lab/job-controller", "delete")
    held = hold(world)
    require(held.error is None, held.describe())
    require(_let_through(world, creation) == 1, "the creation was not held")
    do(world, Step.of("advance", seconds=2))
    pod, node = only_process(world)
    do(world, Step.of("lose", host=0))
    require(_let_through(world, deletion) == 1, "the Job controller's deletion was not held")
    do(world, SETTLE)
    blocked = release(world)
    require(isinstance(blocked.error, PodsRemainError), f"not blocked by the Terminating pod: {blocked.describe()}")
    require(pod in str(blocked.error), str(blocked.error))
    core(world).delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)  # kubectl delete --force
    world.rlab.settle()
    after = release(world)
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert after.execution is None, f"admitted beside the process on the lost node: {after.describe()}"


@pytest.fixture
def never_world() -> Iterator[World]:
    """As `world`, with `restartPolicy: Never`: a failed process is replaced by a new pod after the Job
    controller's back-off (10 s), not restarted in place."""
    with ReliabilityLab() as rlab:
        built = World(
            rlab,
            3,
            1,
            {"num_nodes": (1,), "termination_seconds": 8, "grace_seconds": 30, "restart_policy": "Never"},
        )
        built.setup()
        try:
            for step in RUNNING:
                built.apply(step)
            require(built.objects[0].admission == "1", f"the first execution did not start: {built.log}")
            yield built
        finally:
            built.close()


def _hold_back_writes(world: World, agent: str, verb: str, resource: str, count: int) -> DelayRule:
    rule = DelayRule(agent, frozenset({verb}), frozenset({resource}), "", namespace=NAMESPACE, count=count)
    world.rlab.lab.call(lambda: world.rlab.delays.add(rule))
    return rule


def test_case_3_a_namesake_admitted_while_the_predecessors_job_lives(never_world: World) -> None:
    world = never_world
    pod, node = only_process(world)
    _hold_back_writes(world, "dispatch-lab/garbage-collector", "delete", "jobs", 3)
    _hold_back_writes(world, "dispatch-lab/trainer-controller", "patch", "jobsets", 2)
    do(world, Step.of("reopen", obj=0))
    world.rlab.settle()
    opened = world._invoke(0, "open", world.objects[0], [])
    world.rlab.settle()
    world.refresh()
    require(opened.execution is None, f"the namesake was admitted at once: {opened.describe()}")
    do(world, Step.of("advance", seconds=61))
    world.rlab.sc.fail(NAMESPACE, pod)
    world.rlab.settle()
    admitted = release(world)
    for _ in range(40):  # the predecessor's Job replaces the failed pod; the garbage collector deletes the Job
        do(world, Step.of("advance", seconds=5))
    assert world.rlab.sc.rank_overlaps(NAMESPACE, world.objects[0].name) == []
    assert admitted.execution is None, f"admitted while the predecessor's Job lives: {admitted.describe()}"


@pytest.fixture
def slow_world() -> Iterator[World]:
    """As `world`, but the process takes 200 s to stop after SIGTERM and may (grace 300 s)."""
    yield from one_pod_world(200, 300)


def test_finding_4_a_deleted_node_whose_machine_runs_is_not_proof_at_once(slow_world: World) -> None:
    """`kubectl delete node` on a node that was Ready a moment ago, its machine on and connected: PodGC
    force-deletes the orphaned pod after its 40 s quarantine, while the kubelet is still stopping the process
    (200 s after SIGTERM). A release then must not admit beside it."""
    world = slow_world
    pod, node = only_process(world)
    do(world, Step.of("hold", obj=0, caller=0), SETTLE)
    blocked = release(world)
    require(isinstance(blocked.error, PodsRemainError), f"not blocked by the stopping pod: {blocked.describe()}")
    core(world).delete_node(node)  # the machine stays on: Ready until a moment ago
    world.rlab.settle()
    do(world, Step.of("advance", seconds=30), Step.of("advance", seconds=30))  # PodGC: quarantine, GET, delete
    require(pod not in [p.metadata.name for p in _pods(world)], "PodGC did not delete the orphaned pod")
    after = release(world)
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert after.execution is None, f"admitted beside the process of the deleted node: {after.describe()}"


def _fast_replica(world: World, seconds: float) -> object:
    """Behind a load balancer, the callers' `GET /version` reaches an API server replica whose clock runs
    `seconds` ahead (lab.apiserver.server `CLOCK_OFFSET_KEY`)."""

    async def ahead(request: web.Request, handler: Handler) -> web.StreamResponse:
        request[CLOCK_OFFSET_KEY] = seconds
        return await handler(request)

    world.rlab.hooks.add(ahead, lambda request: request.path == "/version")
    return ahead


def test_finding_5_a_replica_whose_clock_runs_ahead_does_not_end_the_settle_early(world: World) -> None:
    """A pod creation of the Job controller in flight across a quick hold (held 55 s in the API server, within its
    60 s request timeout); the release's `GET /version` reaches a replica 45 s ahead: it must not take the settle
    for over, or the creation lands after the admission, a pod labelled A=2 running as execution 3's rank."""
    do(world, Step.of("hold", obj=0, caller=0), SETTLE)
    creation = _hold_back(world, "dispatch-lab/job-controller", "create")
    started = release(world)
    require(started.execution is not None and started.execution.admission == 2, started.describe())
    held = hold(world)
    require(held.error is None, held.describe())
    _fast_replica(world, 45.0)
    do(world, Step.of("advance", seconds=50))
    early = release(world)
    do(world, Step.of("advance", seconds=5))
    _let_through(world, creation)
    do(world, Step.of("advance", seconds=5))
    assert world.check() == []
    assert early.execution is None, f"admitted while a creation was in flight: {early.describe()}"
