"""Issue 15's adversarial cases on the real control plane (the lab versions: tests/reliability/test_misbehaving.py):
a pod relabelled after the hold and before it, and a TrainJob suspended outside dispatch whose Terminating pod on a
lost node is then force-deleted; and the upstream hazard the runtime policy closes (a pod replaced while it may
still run). The settle is in test_real_dispatch.py (`test_the_adapters_operations`).

Each asserts that release refuses while the process may run and admits once it has ended, and that the overlap
recorder saw no two executions at once. The Job controller that reacts to the relabelling, the node lifecycle
controller and the API server's force deletion are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import kubernetes
import pytest
from reliability.test_misbehaving import SELECTOR_LABELS

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodsRemainError
from airflow_provider_dispatch_lab.real import RealCluster

from .steps import DRAINED, SETTLED, TRAINER, Either, RealSteps, make_adapter, until

pytestmark = pytest.mark.slow


@pytest.fixture
async def writer(real_cluster: RealCluster, steps: RealSteps) -> AsyncIterator[Either]:
    either = await make_adapter("async", real_cluster.kubeconfig("writer", steps.namespace))
    yield either
    await either.close()


async def _running(steps: RealSteps, writer: Either, name: str, **runtime: object) -> tuple[str, str, str]:
    """One TrainJob of one pod on this test's one node, running execution 1: (pod, its uid, its node)."""
    steps.node("a")
    body = steps.manifest(name, steps.runtime(**runtime))  # type: ignore[arg-type]
    assert await until("open", lambda: writer.call("open", body)) == Execution(name, "1", 1)
    (pod,) = steps.running_pods(name, 1, admission=1)
    return pod.metadata.name, pod.metadata.uid, pod.spec.node_name


def _relabel(steps: RealSteps, pod: str) -> None:
    """A person takes the pod out of its controller: every selector label removed."""
    steps.core.patch_namespaced_pod(pod, steps.namespace, {"metadata": {"labels": dict.fromkeys(SELECTOR_LABELS)}})


def _record(steps: RealSteps, name: str) -> str:
    return str(steps.trainjob(name)["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS])


def _pod_exists(steps: RealSteps, pod: str) -> bool:
    return pod in [p.metadata.name for p in steps.core.list_namespaced_pod(steps.namespace).items]


async def test_a_pod_relabelled_after_the_hold_still_blocks_while_it_terminates(
    steps: RealSteps, writer: Either
) -> None:
    """The hold recorded the pod; once the hold has settled, a person removes its labels while it is Terminating
    on a Ready node (its process takes 25 s to stop). Release finds it by name and uid and waits for it."""
    name = "relabel-after"
    ref = f"{steps.namespace}/{name}"
    pod, uid, _ = await _running(steps, writer, name, termination=25.0, grace=120)
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    assert uid in _record(steps, name)
    with pytest.raises(PodsRemainError):  # Terminating, and the settle passes meanwhile
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert steps.process_runs(uid), "the pod's process stopped before the test could relabel it"
    _relabel(steps, pod)

    with pytest.raises(PodsRemainError) as blocked:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    (remaining,) = blocked.value.remaining
    assert (remaining.name, remaining.relabelled) == (pod, True)
    assert "no longer carries" in str(blocked.value)
    assert steps.overlaps(name) == []

    admitted = await until("release once the process ended", lambda: writer.call("release", ref), retry=DRAINED)
    assert admitted == Execution(name, "1", 2)
    assert not steps.process_runs(uid)
    steps.running_pods(name, 1, admission=2)
    assert steps.overlaps(name) == []


async def test_a_pod_relabelled_before_the_hold_is_recorded_by_its_name_and_blocks_until_it_is_gone(
    steps: RealSteps, writer: Either
) -> None:
    """The labels go while the pod runs: the real Job controller lets go of it and makes a replacement, which
    cannot be placed (the relabelled pod keeps the zone's one node). The hold's full read finds the relabelled pod
    by the name its Job gave it; release refuses while it exists, until the person deletes it."""
    name = "relabel-before"
    ref = f"{steps.namespace}/{name}"
    pod, uid, _ = await _running(steps, writer, name)
    _relabel(steps, pod)
    steps.wait(
        "the Job controller lets go of the relabelled pod",
        lambda: not steps.core.read_namespaced_pod(pod, steps.namespace).metadata.owner_references or None,
    )
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    assert uid in _record(steps, name)

    with pytest.raises(PodsRemainError) as blocked:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert [(p.name, p.relabelled) for p in blocked.value.remaining] == [(pod, True)]
    assert steps.process_runs(uid)
    assert steps.overlaps(name) == []

    steps.core.delete_namespaced_pod(pod, steps.namespace)  # the person is done debugging
    steps.wait("the relabelled pod gone", lambda: not _pod_exists(steps, pod) or None)
    admitted = await until("release", lambda: writer.call("release", ref), retry=DRAINED)
    assert admitted == Execution(name, "1", 2)
    assert not steps.process_runs(uid)
    steps.running_pods(name, 1, admission=2)
    assert steps.overlaps(name) == []
    assert steps.admissions(name) == ["1", "2"]


async def test_a_trainjob_suspended_outside_dispatch_is_recorded_by_the_hold_and_a_force_deletion_is_seen(
    steps: RealSteps, writer: Either
) -> None:
    """A plain patch suspends the TrainJob while its node is lost; dispatch's hold finds it held without a record
    of execution 1's pods and writes one. The Terminating pod on the lost node is then force-deleted: release still
    refuses, naming it, until the node is fenced."""
    name = "suspended"
    ref = f"{steps.namespace}/{name}"
    pod, uid, node = await _running(steps, writer, name)
    steps.set_state(node, "lost")
    steps.wait_ready(node, "Unknown")
    steps.custom.patch_namespaced_custom_object(
        *TRAINER, steps.namespace, "trainjobs", name, {"spec": {"suspend": True}}
    )
    steps.wait(
        "the Job controller marks the pod Terminating",
        lambda: steps.core.read_namespaced_pod(pod, steps.namespace).metadata.deletion_timestamp or None,
    )
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    record = json.loads(_record(steps, name))
    assert uid in json.dumps(record), f"the hold did not record the pod of the lost node: {record}"
    assert record["admission"] == 1

    steps.core.delete_namespaced_pod(pod, steps.namespace, grace_period_seconds=0)  # kubectl delete --force
    steps.wait("the pod object gone", lambda: not _pod_exists(steps, pod) or None)
    with pytest.raises(PodsRemainError) as blocked:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert f"{pod} on {node} (Ready=Unknown" in str(blocked.value)
    assert "deleted from the API" in str(blocked.value)
    assert steps.process_runs(uid), "the lost machine's process stopped by itself"
    assert steps.overlaps(name) == []

    steps.node("b")  # somewhere for execution 2 to run
    steps.fence(node)
    admitted = await until("release", lambda: writer.call("release", ref), retry=DRAINED)
    assert admitted == Execution(name, "1", 2)
    steps.running_pods(name, 1, admission=2)
    assert not steps.process_runs(uid)
    assert steps.overlaps(name) == []


def _slot(pod_name: str) -> str:
    """The rank a pod stands for: its name without the suffix the Job controller generated."""
    return pod_name.rsplit("-", 1)[0]


async def test_taint_eviction_and_pod_replacement_run_two_copies_of_one_rank_unless_the_policy_is_failed(
    real_cluster: RealCluster, steps: RealSteps
) -> None:
    """Hazard 5 of issue 15 on the real Job and taint eviction controllers: a node is lost, taint eviction deletes
    its pods once their toleration of `unreachable` ends (5 s here, 300 s by default), and they stay Terminating.
    Under upstream's default `podReplacementPolicy` (`TerminatingOrFailed`) the Job controller replaces the pod at
    once, on another node, while the old process still runs: two copies of one rank in one execution, which no
    re-admission check can stop (docs/promise.md, runtime policy). With `Failed`, as dispatch requires, it waits."""
    steps.node("a", cpu="16")  # both TrainJobs' pods go here first
    upstream = steps.runtime(pod_replacement_policy=None, unreachable_toleration=5)
    required = steps.runtime(unreachable_toleration=5)
    adapter = await make_adapter(
        "async", real_cluster.kubeconfig("writer", steps.namespace), accepted_risks=("pod-replacement",)
    )
    try:
        for name, runtime in (("upstream", upstream), ("failed", required)):
            await until("open", lambda: adapter.call("open", steps.manifest(name, runtime)))  # noqa: B023
        (old_upstream,) = steps.running_pods("upstream", 1, admission=1)
        (old_failed,) = steps.running_pods("failed", 1, admission=1)
    finally:
        await adapter.close()
    node = old_upstream.spec.node_name
    steps.node("b", cpu="16")  # where a replacement can go
    steps.set_state(node, "lost")

    # upstream's runtime: the Job controller replaces the evicted pod at once, beside the old process
    def replaced() -> Any:
        return next(
            (
                p
                for p in steps.pods("upstream")
                if p.metadata.uid != old_upstream.metadata.uid
                and p.status.phase == "Running"
                and p.metadata.deletion_timestamp is None
            ),
            None,
        )

    new_upstream = steps.wait("a replacement of the evicted pod running", replaced, timeout=90)
    assert _slot(new_upstream.metadata.name) == _slot(old_upstream.metadata.name)
    assert steps.process_runs(old_upstream.metadata.uid)
    copies = [p for p in steps.processes("upstream") if _slot(p.pod) == _slot(old_upstream.metadata.name)]
    assert len([p for p in copies if p.running]) == 2, "two copies of one rank run at once"

    # `Failed`: evicted by the same controllers at the same time, and not replaced while it may still run
    evicted = steps.core.read_namespaced_pod(old_failed.metadata.name, steps.namespace)
    assert evicted.metadata.deletion_timestamp is not None
    job = kubernetes.client.BatchV1Api(steps.api).read_namespaced_job("failed-node-0", steps.namespace)
    steps.wait(
        "the Job controller counts the evicted pod as terminating",
        lambda: (
            kubernetes.client.BatchV1Api(steps.api)
            .read_namespaced_job(job.metadata.name, steps.namespace)
            .status.terminating
            or None
        ),
    )
    assert [p.metadata.uid for p in steps.pods("failed")] == [old_failed.metadata.uid]
    assert steps.process_runs(old_failed.metadata.uid)
    assert len([p for p in steps.processes("failed") if p.running]) == 1
    steps.set_state(node, "powered-off")
