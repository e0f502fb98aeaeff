"""Issue 26: evidence that cannot lose a pod (docs/decisions/pod-fence.md), on the whole simulated cluster with
the overlap recorder as the judge. The ways the issue found to run two processes of one rank at once, each inside
the promise as it was stated, each with faults the model already draws:

1. a pod recorded by the hold while it had no node (the scheduler's binding slow), bound after the record, its
   node lost, the Job controller's graceful deletion, then a person's force deletion;
2. a pod created after the hold's record (the Job controller's creation in flight across the hold), listed by a
   check, its node lost, then force-deleted;
3. a namesake of a TrainJob deleted while it ran, opened while the garbage collector's deletion of the
   predecessor's Job is slow: the predecessor's Job creates a replacement after the namesake's admission;
4. a Node deleted while its machine runs, taken as proof once PodGC removed the pod;
5. a release whose `GET /version` reaches an API server replica whose clock runs ahead.

Each admitted beside a running process (or, for 5, under the wrong admission label) on the code before the
issue. Cases 1 and 2 run twice: with the pod fence installed, the force deletion is refused by the API server;
without it, the record that the refused release extended (`fencing.grown`: the pod under its node) keeps the pod
blocking after its object is gone. Either way the release admits only once the node is fenced.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from aiohttp import web
from dispatch_lab.middleware import Handler
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch import DispatchAdapter
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import HoldSettlingError, PodsRemainError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.fence import POLICY_NAME
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch_lab.apiserver.delays import DelayRule
from airflow_provider_dispatch_lab.apiserver.server import CLOCK_OFFSET_KEY

from .harness import CALLERS, HOSTILE
from .one_pod import core, do, hold, one_pod_world, only_process, overlaps, release, require
from .schedule import Step
from .world import NAMESPACE, World

SETTLE = Step.of("advance", seconds=DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS + 5)


@pytest.fixture(params=[False, True], ids=["record", "pod-fence"])
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    yield from one_pod_world(8, 30, fenced=bool(request.param))


def _fenced(world: World) -> bool:
    policies = kubernetes.client.AdmissionregistrationV1Api(world.rlab.api()).list_validating_admission_policy()
    return any(p.metadata.name == POLICY_NAME for p in policies.items)


def _hold_back(world: World, agent: str, verb: str, subresource: str = "") -> DelayRule:
    """The next `verb` of pods by the client `agent` is held in the API server (lab.apiserver.delays)."""
    rule = DelayRule(agent, frozenset({verb}), frozenset({"pods"}), subresource, namespace=NAMESPACE, count=1)
    world.rlab.lab.call(lambda: world.rlab.delays.add(rule))
    return rule


def _hold_back_writes(world: World, agent: str, verb: str, resource: str, count: int) -> DelayRule:
    rule = DelayRule(agent, frozenset({verb}), frozenset({resource}), "", namespace=NAMESPACE, count=count)
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


def _pods(world: World) -> list[Any]:
    return list(core(world).list_namespaced_pod(NAMESPACE).items)


def _lost_and_deleted(world: World, deletion: DelayRule) -> tuple[str, str]:
    """The one process of the held execution runs; its node is lost; the Job controller's graceful deletion (held
    until now) lands; the hold settles; a release is refused, naming the pod. Returns (pod, node)."""
    do(world, Step.of("advance", seconds=2))
    pod, node = only_process(world)
    do(world, Step.of("lose", host=0))
    require(_let_through(world, deletion) == 1, "the Job controller's deletion was not held")
    do(world, SETTLE)
    blocked = release(world)
    require(isinstance(blocked.error, PodsRemainError), f"not blocked by the Terminating pod: {blocked.describe()}")
    require(pod in str(blocked.error), str(blocked.error))
    return pod, node


def _force_delete(world: World, pod: str, node: str) -> None:
    """A person force-deletes the stuck pod (`kubectl delete pod --force --grace-period=0`). With the pod fence
    the API server refuses, naming the pod, its node and the way out; without it the object goes."""

    def delete() -> None:
        core(world, HOSTILE).delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)

    if not _fenced(world):
        delete()
        world.rlab.settle()
        require(pod not in [p.metadata.name for p in _pods(world)], "the force-deleted pod is still listed")
        return
    with pytest.raises(ApiException) as refused:
        delete()
    body = str(refused.value.body)
    assert refused.value.status == 403
    assert f"ValidatingAdmissionPolicy '{POLICY_NAME}'" in body
    assert f"pod {pod} of a dispatch TrainJob may still run on node {node}" in body
    assert f"kubectl taint node {node} {v.TAINT_OUT_OF_SERVICE}" in body
    world.rlab.settle()
    assert pod in [p.metadata.name for p in _pods(world)]


def _held_until_fenced(world: World, pod: str, node: str) -> None:
    """After the force deletion: release refuses, naming the pod and its lost node, and admits once the node is
    fenced (powered off, then tainted out-of-service); the recorder sees no overlap."""
    after = release(world)
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert isinstance(after.error, PodsRemainError), f"admitted beside the process on the lost node: {after.describe()}"
    assert f"{pod} on {node} (Ready=Unknown" in str(after.error)
    world.rlab.sc.power_off(node)
    world.rlab.sc.taint_out_of_service(node, "NoExecute")
    do(world, Step.of("advance", seconds=45))  # PodGC removes the fenced node's Terminating pods
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert world.rlab.sc.rank_overlaps(NAMESPACE, world.objects[0].name) == []


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
    running, node = _lost_and_deleted(world, deletion)
    require(running == pod, f"{running} runs, not {pod}")
    _force_delete(world, pod, node)
    _held_until_fenced(world, pod, node)


def test_case_2_a_pod_created_after_the_record_listed_then_force_deleted(world: World) -> None:
    do(world, Step.of("hold", obj=0, caller=0), SETTLE)
    creation = _hold_back(world, "dispatch-lab/job-controller", "create")
    started = release(world)
    require(started.execution is not None and started.execution.admission == 2, started.describe())
    require(all(p.metadata.deletion_timestamp for p in _pods(world)), "a pod of execution 2 was created")
    deletion = _hold_back(world, "dispatch-lab/job-controller", "delete")
    held = hold(world)
    require(held.error is None, held.describe())
    require(_let_through(world, creation) == 1, "the creation was not held")
    pod, node = _lost_and_deleted(world, deletion)
    _force_delete(world, pod, node)
    _held_until_fenced(world, pod, node)


@pytest.fixture
def never_world() -> Iterator[World]:
    """`restartPolicy: Never`: a failed process is replaced by a new pod after the Job controller's back-off
    (10 s), not restarted in place."""
    yield from one_pod_world(8, 30, restart_policy="Never")


def test_case_3_a_namesake_admitted_while_the_predecessors_job_lives(never_world: World) -> None:
    """The TrainJob is deleted while its pod runs; the garbage collector's deletion of its Job is slow (held 60 s,
    three times); the namesake opens at once, and Trainer's apply of its JobSet fails twice (504), so it has no
    JobSet while Trainer reports it Suspended. The predecessor's process fails: its pod no longer blocks, but its
    Job, alive, will replace it after its back-off. The namesake must wait for that Job, read, not assumed."""
    world = never_world
    pod, _ = only_process(world)
    _hold_back_writes(world, "dispatch-lab/garbage-collector", "delete", "jobs", 3)
    _hold_back_writes(world, "dispatch-lab/trainer-controller", "patch", "jobsets", 2)
    do(world, Step.of("reopen", obj=0))
    opened = world._invoke(0, "open", world.objects[0], [])
    world.rlab.settle()
    world.refresh()
    require(opened.execution is None, f"the namesake was admitted at once: {opened.describe()}")
    do(world, Step.of("advance", seconds=61))
    world.rlab.sc.fail(NAMESPACE, pod)
    world.rlab.settle()
    early = release(world)
    assert early.execution is None, f"admitted while the predecessor's Job lives: {early.describe()}"
    assert "was left by a deleted TrainJob of the same name" in str(early.error)
    admitted = None
    for _ in range(60):  # the Job replaces the failed pod, the garbage collector deletes the Job, the namesake
        do(world, Step.of("advance", seconds=5))  # settles from when its predecessor's last Job was found gone
        attempt = release(world)
        if attempt.execution is not None:
            admitted = attempt
            break
    assert admitted is not None
    assert admitted.execution is not None
    assert admitted.execution.admission == 1
    for _ in range(6):
        do(world, Step.of("advance", seconds=5))
    assert world.rlab.sc.rank_overlaps(NAMESPACE, world.objects[0].name) == []


@pytest.fixture
def slow_world() -> Iterator[World]:
    """The process takes 200 s to stop after SIGTERM and may (grace 300 s)."""
    yield from one_pod_world(200, 300)


def test_finding_4_a_deleted_node_whose_machine_runs_is_not_proof_at_once(slow_world: World) -> None:
    """`kubectl delete node` on a node that was Ready a moment ago, its machine on and connected: PodGC
    force-deletes the orphaned pod after its 40 s quarantine, while the kubelet is still stopping the process
    (200 s after SIGTERM). The release's check records when it first found the Node gone with no pod listed on
    it, and the deletion is proof only the pod's grace plus 60 s and the skew bound later."""
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
    assert isinstance(after.error, PodsRemainError), f"admitted beside the deleted node's process: {after.describe()}"
    assert f"{pod} on {node} (gone, not yet proof)" in str(after.error)
    admitted = None
    for _ in range(12):
        do(world, Step.of("advance", seconds=40))
        attempt = release(world)
        if attempt.execution is not None:
            admitted = attempt
            break
    assert admitted is not None, "never admitted after the deleted node's wait"
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []


def _fast_replica(world: World, seconds: float) -> None:
    """Behind a load balancer, the callers' `GET /version` reaches an API server replica whose clock runs
    `seconds` ahead (lab.apiserver.server `CLOCK_OFFSET_KEY`)."""

    async def ahead(request: web.Request, handler: Handler) -> web.StreamResponse:
        request[CLOCK_OFFSET_KEY] = seconds
        return await handler(request)

    world.rlab.hooks.add(ahead, lambda request: request.path == "/version")


@pytest.fixture
def plain_world() -> Iterator[World]:
    yield from one_pod_world(8, 30)


def test_finding_5_a_replica_whose_clock_runs_ahead_does_not_end_the_settle_early(plain_world: World) -> None:
    """A pod creation of the Job controller in flight across a quick hold (held 58 s in the API server, within its
    60 s request timeout); the release's `GET /version` reaches a replica 45 s ahead. Allowed for (the operators'
    and adapters' `clock_skew_seconds`, here 45), the settle is not taken for over: the release is refused, the
    creation lands under the held execution, and the next release admits after the settle. (Before the bound, the
    release 57 s after the hold admitted A=3, and the creation landed as a pod labelled A=2 under admission 3.)"""
    world = plain_world
    do(world, Step.of("hold", obj=0, caller=0), SETTLE)
    creation = _hold_back(world, "dispatch-lab/job-controller", "create")
    started = release(world)
    require(started.execution is not None and started.execution.admission == 2, started.describe())
    held = hold(world)
    require(held.error is None, held.describe())
    _fast_replica(world, 45.0)
    adapter = DispatchAdapter.from_kubeconfig(world.rlab.kubeconfig(CALLERS[0]), clock_skew_seconds=45.0)
    try:
        do(world, Step.of("advance", seconds=57))
        with pytest.raises(HoldSettlingError):
            adapter.release(world.objects[0].ref)
        do(world, Step.of("advance", seconds=1))
        require(_let_through(world, creation) == 1, "the creation was not held to the end")
        do(world, Step.of("advance", seconds=5))
        assert world.check() == []
        do(world, Step.of("advance", seconds=DEFAULT_SETTLE_SECONDS))
        admitted = adapter.release(world.objects[0].ref)
        assert admitted.admission == 3
        do(world, Step.of("advance", seconds=5))
        assert world.check() == []
    finally:
        adapter.close()
