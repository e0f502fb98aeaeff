"""Plain mode on the real control plane: the seed's scenario, the lost-node drill, and the adapters' operations
through both clients (`kubernetes` and `kubernetes_asyncio`), judged by the machines' overlap recorder.

The lab versions: tests/dispatch_lab/test_seed_scenario.py (the seed's scenario in API terms), the lost-node drill
(example_dags/lost_node_drill.py, `dispatch demo`), tests/dispatch_lab/test_release.py, test_refusals.py and
test_policy.py. Here nothing is written by hand in a controller's place: Trainer, JobSet, the Job controller, the
scheduler, the node lifecycle and taint eviction controllers and PodGC are the real ones (docs/fidelity.md).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import kubernetes
import pytest
from api_answers import expect_answer

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, State
from airflow_provider_dispatch.dispatch.errors import (
    ForbiddenError,
    HoldSettlingError,
    InvalidNameError,
    NotFoundError,
    NotManagedError,
    PodsRemainError,
    SpecRejectedError,
)
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.scenario import manifests

from .steps import DRAINED, SETTLED, TRAINER, Either, RealSteps, make_adapter, until

pytestmark = pytest.mark.slow


@pytest.fixture
async def adapters(real_cluster: RealCluster, steps: RealSteps) -> AsyncIterator[list[Either]]:
    made: list[Either] = []
    yield made
    for either in made:
        await either.close()


async def _adapter(
    adapters: list[Either],
    cluster: RealCluster,
    steps: RealSteps,
    kind: str,
    identity: str = "writer",
    **options: object,
) -> Either:
    either = await make_adapter(kind, cluster.kubeconfig(identity, steps.namespace), **options)
    adapters.append(either)
    return either


def _unchanged(steps: RealSteps, name: str, execution: Execution) -> None:
    """dispatch wrote nothing: the TrainJob is still held at `execution`'s A (Trainer writes its status, so its
    resourceVersion is not the measure on a real cluster)."""
    live = steps.trainjob(name)
    assert live["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == str(execution.admission)
    assert live["spec"]["suspend"] is True


async def _lost_node_restart(
    steps: RealSteps, adapter: Either, name: str, *, machine_state: str
) -> tuple[Execution, str, list[str]]:
    """Open a TrainJob of two pods, take the machine under one of them away (`lost`: its kubelet silent, `frozen`:
    the whole machine stopped in time; either way its process runs on), hold, and check that release refuses while
    that pod may run, through the node's Ready=True and Ready=Unknown. Returns the first execution, the node and
    the remaining pod's name and uid."""
    for suffix in ("a", "b", "c"):
        steps.node(suffix)
    runtime = steps.runtime()
    ref = f"{steps.namespace}/{name}"
    first = await until("open", lambda: adapter.call("open", steps.manifest(name, runtime, num_nodes=2)))
    assert first == Execution(name, "1", 1)
    pods = steps.running_pods(name, 2, admission=1)
    stuck = pods[0]
    node = stuck.spec.node_name
    steps.set_state(node, machine_state)

    assert await until("hold", lambda: adapter.call("hold", ref)) == first
    # The healthy node's kubelet confirms its pod's end within the grace period; the other pod stays Terminating.
    steps.wait(
        "only the pod on the silent node remains",
        lambda: [p.metadata.name for p in steps.pods(name)] == [stuck.metadata.name] or None,
    )
    with pytest.raises(PodsRemainError) as early:
        await until("release", lambda: adapter.call("release", ref), retry=SETTLED)
    assert [p.name for p in early.value.remaining] == [stuck.metadata.name]
    assert not early.value.ceased
    assert early.value.retryable

    steps.wait_ready(node, "Unknown")  # the real node lifecycle controller: 20 s without a heartbeat
    with pytest.raises(PodsRemainError) as refused:
        await adapter.call("release", ref)
    assert f"{stuck.metadata.name} on {node} (Ready=Unknown)" in str(refused.value)
    assert not refused.value.ceased
    assert not await adapter.call("ceased", ref)
    _unchanged(steps, name, first)
    assert steps.process_runs(stuck.metadata.uid), "the silent machine's process stopped by itself"
    return first, node, [stuck.metadata.name, stuck.metadata.uid]


async def _fence_and_readmit(
    steps: RealSteps, adapter: Either, name: str, node: str, stuck: list[str], *, fenced: bool = False
) -> Execution:
    """The operator powers the machine off and taints it out-of-service; the real PodGC force-deletes the pod;
    release admits execution 2, whose pods run on the other nodes; the recorder saw no overlap."""
    ref = f"{steps.namespace}/{name}"
    if not fenced:
        steps.fence(node)
    assert await adapter.call("ceased", ref)
    refusals: list[PodsRemainError] = []

    async def release() -> Execution:
        try:
            result: Execution = await adapter.call("release", ref)
        except PodsRemainError as error:
            refusals.append(error)
            raise
        return result

    second = await until(
        "release after PodGC",
        release,
        retry=DRAINED,
        within=90,
    )
    assert second == Execution(name, "1", 2)
    assert all(r.ceased for r in refusals), [str(r) for r in refusals]  # only ceased pods waited for PodGC
    new = steps.running_pods(name, 2, admission=2)
    assert node not in {p.spec.node_name for p in new}
    assert steps.overlaps(name) == []
    assert steps.admissions(name) == ["1", "2"]
    processes = steps.processes(name)
    old = [p for p in processes if p.labels.get(v.POD_LABEL_ADMISSION) == "1"]
    fresh = [p for p in processes if p.labels.get(v.POD_LABEL_ADMISSION) == "2"]
    assert stuck[1] in {p.pod_uid for p in old}
    assert all(p.stop is not None for p in old)
    assert max(p.stop for p in old if p.stop is not None) <= min(p.start for p in fresh)
    return second


async def test_the_seed_scenario_on_real_controllers(
    real_cluster: RealCluster, steps: RealSteps, adapters: list[Either]
) -> None:
    """never-two-executions.txt on the real cluster: a lost node's pod stays Terminating, release refuses until
    the operator powers the machine off and taints it out-of-service and the real PodGC removes the pod; then one
    write admits execution 2 and the recorder sees no overlap."""
    adapter = await _adapter(adapters, real_cluster, steps, "sync")
    _, node, stuck = await _lost_node_restart(steps, adapter, "seed", machine_state="lost")
    await _fence_and_readmit(steps, adapter, "seed", node, stuck)


async def test_the_lost_node_drill_on_real_controllers(
    real_cluster: RealCluster, steps: RealSteps, adapters: list[Either]
) -> None:
    """The drill's steps (example_dags/lost_node_drill.py) through the async adapter, with a frozen machine: the
    status and the wait reasons name the pod and its node's state at each stage."""
    adapter = await _adapter(adapters, real_cluster, steps, "async")
    _, node, stuck = await _lost_node_restart(steps, adapter, "drill", machine_state="frozen")
    ref = f"{steps.namespace}/drill"
    status = await adapter.call("inspect", ref)
    assert status.state is State.WAITING
    assert f"{stuck[0]} on {node} (Ready=Unknown)" in status.detail
    steps.fence(node)
    report = await adapter.call("remaining_pods", ref)
    if report.remaining:  # PodGC may already have removed it
        assert [(p.name, p.node.label, p.ceased) for p in report.remaining] == [
            (stuck[0], "Ready=Unknown, out-of-service", True)
        ]
    await _fence_and_readmit(steps, adapter, "drill", node, stuck, fenced=True)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_the_adapters_operations(
    real_cluster: RealCluster, steps: RealSteps, adapters: list[Either], kind: str
) -> None:
    """open, release, hold, inspect, find, remaining_pods, ceased and the refusals, on real controllers."""
    writer = await _adapter(adapters, real_cluster, steps, kind)
    reader = await _adapter(adapters, real_cluster, steps, kind, "reader", read_only=True)
    no_nodes = await _adapter(adapters, real_cluster, steps, kind, "no-nodes", read_only=True)
    steps.node("a")
    runtime = steps.runtime()
    ref = f"{steps.namespace}/ops"
    body = steps.manifest("ops", runtime)

    first = await until("open", lambda: writer.call("open", body))
    assert first == Execution("ops", "1", 1)
    assert await writer.call("open", body) == first  # a retried open continues: no second admission
    assert await writer.call("release", ref) == first  # running: its execution, nothing written
    (pod,) = steps.running_pods("ops", 1, admission=1)
    assert steps.admissions("ops") == ["1"]
    status = await reader.call("inspect", ref)
    assert (status.state, status.execution) == (State.RUNNING, first)
    assert (await reader.call("find", steps.namespace, "ops")).ref == ref
    with pytest.raises(ForbiddenError, match=f"{steps.namespace}/ops: this dispatch adapter is read-only"):
        await reader.call("hold", ref)

    assert await until("hold", lambda: writer.call("hold", ref)) == first
    held = steps.trainjob("ops")
    assert held["spec"]["suspend"] is True
    recorded = held["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS]
    assert pod.metadata.uid in recorded  # the hold's record of execution 1's pods, by uid
    steps.wait("the pod's end confirmed by its kubelet", lambda: not steps.pods("ops") or None)
    with pytest.raises(HoldSettlingError) as settling:
        # dispatch started execution 1 moments ago: the hold must settle (once Trainer has observed it)
        await until("release before the settle", lambda: writer.call("release", ref))
    assert settling.value.retryable
    assert 0 < settling.value.seconds_left <= 12
    assert "settles until" in str(settling.value)
    assert await writer.call("ceased", ref)  # nothing remains, and the recorded pod's node is Ready
    # An identity that may not read Nodes cannot see the recorded pod's node as Ready: fencing keeps waiting.
    assert not await no_nodes.call("ceased", ref)
    node = pod.spec.node_name
    assert f"on {node} (not readable)" in (await no_nodes.call("inspect", ref)).detail
    assert (await reader.call("remaining_pods", ref)).remaining == ()
    _unchanged(steps, "ops", first)

    second = await until(
        "release after the settle",
        lambda: writer.call("release", ref),
        retry=SETTLED,
    )
    assert second == Execution("ops", "1", 2)
    steps.running_pods("ops", 1, admission=2)
    assert steps.overlaps("ops") == []
    assert steps.admissions("ops") == ["1", "2"]

    # refusals, before anything is written
    with pytest.raises(InvalidNameError):
        await writer.call("release", f"{steps.namespace}/a,b")
    with pytest.raises(NotFoundError, match=f"TrainJob {steps.namespace}/ghost was not found"):
        await writer.call("release", f"{steps.namespace}/ghost")
    foreign = manifests.trainjob("foreign", runtime=runtime, num_nodes=1, suspend=True)
    foreign["metadata"]["labels"] = {}
    steps.custom.create_namespaced_custom_object(*TRAINER, steps.namespace, "trainjobs", foreign)
    for operation in ("release", "hold", "inspect"):
        with pytest.raises(NotManagedError, match=re.escape("lacks the label dispatch.phpboyscout.uk/job-id")):
            await writer.call(operation, f"{steps.namespace}/foreign")
    unsafe = steps.runtime(pod_replacement_policy=None)
    with pytest.raises(SpecRejectedError, match="pod-replacement") as refused:
        await writer.call("open", steps.manifest("unsafe", unsafe))
    assert "refused before anything is written" in refused.value.message
    with pytest.raises(kubernetes.client.ApiException) as absent:
        steps.trainjob("unsafe")
    expect_answer(absent.value, 404)
