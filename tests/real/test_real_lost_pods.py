"""Issue 26 on the real control plane (the lab versions: tests/reliability/test_lost_pods.py): the pod fence on the
real kube-apiserver, case 1 and case 2 with the real Job controller, case 3 with real garbage collection, finding 4
with the real PodGC, and finding 5 with a second API server replica's clock, with the overlap recorder as the
judge.

What the real tier stages differently, and why:

* case 1's slow binding is a pod the scheduler cannot place (its node cordoned) made placeable later, and the
  Job controller's deletion comes late because kube-controller-manager is paused (SIGSTOP) across the hold;
* case 2's creation in flight across the hold is held by an admission webhook of the test's own, not inside the
  API server (the real one cannot hold a request; the lab's does, `lab.apiserver.delays`): a validating webhook
  on loopback (interposed.py `HeldCreations`) for the pod creations of kube-controller-manager's user in the
  test's namespace, which the real API server waits on for up to the webhook's `timeoutSeconds` (30 s, the most
  it allows), so the creation is let go well within that. It is the creation of execution 1's pod, held from the
  open across the hold (the lab's is execution 2's, after a release: the same rule, one settle fewer), and the
  Job controller's deletion comes late because kube-controller-manager is paused across the hold, as in case 1;
* cases 1 and 2 run without the pod fence (the lab runs each with and without it): the fence has a test of its
  own here, and without it the record alone must keep the pod blocking;
* case 3's exact window (Trainer reporting the namesake Suspended before its JobSet exists, while the
  predecessor's Job lives) needs Trainer's apply to fail twice: staged here is the same wait with an orphaned Job
  (the predecessor's JobSet deleted with `propagationPolicy: Orphan`);
* finding 5's second replica is a reverse proxy on loopback in front of the one kube-apiserver (interposed.py
  `ClockAheadReplica`) that forwards everything unchanged except the `Date` of its answers to `GET /version`
  (what dispatch reads as the API server's time), `AHEAD` = 8 s later; the hold goes to the API server, the
  release through the proxy. The lab's replica runs 45 s ahead of the 90 s settle; here 8 s of the tier's 12 s
  (`steps.SETTLE`), so that by the fast clock the settle passes while a creation held as in case 2 is in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, Status
from airflow_provider_dispatch.dispatch.errors import HoldSettlingError, PodsRemainError, SuspensionNotObservedError
from airflow_provider_dispatch.dispatch.fence import POLICY_NAME
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.cluster import component_user
from airflow_provider_dispatch_lab.scenario.pod_fence import install_pod_fence, remove_pod_fence

from .interposed import TIMEOUT_SECONDS, ClockAheadReplica, HeldCreations
from .steps import DRAINED, OBSERVED, SETTLE, SETTLED, TRAINER, Either, RealSteps, make_adapter, pod_selector, until

pytestmark = pytest.mark.slow
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


@pytest.fixture
async def writer(real_cluster: RealCluster, steps: RealSteps) -> AsyncIterator[Either]:
    either = await make_adapter("async", real_cluster.kubeconfig("writer", steps.namespace))
    yield either
    await either.close()


@pytest.fixture
def fenced(real_admin: kubernetes.client.ApiClient) -> Iterator[None]:
    """dispatch's pod fence, installed as its administrator would; removed after (it is cluster-scoped, and
    other real-tier tests force-delete pods on purpose)."""
    install_pod_fence(real_admin)
    try:
        yield
    finally:
        remove_pod_fence(real_admin)


@pytest.fixture
def held_creations(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, steps: RealSteps, tmp_path: Path
) -> Iterator[HeldCreations]:
    """A webhook that the real API server calls for each pod creation of the Job controller in the test's
    namespace (interposed.py; kube-controller-manager runs with `--use-service-account-credentials=false`, so
    its controllers act as its own user, and the Job controller is the one of them that creates pods), allowing
    each at once until the test says `hold()`. Its registration is removed after (JobSet's, Trainer's and
    Kueue's webhooks stay as they are), before its server stops."""
    with HeldCreations(tmp_path / "webhook-pki") as webhook:
        name = webhook.install(real_cluster, real_admin, steps.namespace, component_user("kube-controller-manager"))
        try:
            yield webhook
        finally:
            HeldCreations.uninstall(real_admin, name)


@contextmanager
def paused(cluster: RealCluster, program: str) -> Iterator[None]:
    """The program's process stopped (SIGSTOP) until the block ends: its controllers act on nothing meanwhile."""
    pid = cluster.pid(program)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def _running(steps: RealSteps, writer: Either, name: str, **runtime: Any) -> tuple[str, str, str]:
    steps.node("a")
    body = steps.manifest(name, steps.runtime(**runtime))
    assert await until("open", lambda: writer.call("open", body)) == Execution(name, "1", 1)
    (pod,) = steps.running_pods(name, 1, admission=1)
    return pod.metadata.name, pod.metadata.uid, pod.spec.node_name


async def _opened_with_its_creation_held(
    steps: RealSteps, writer: Either, webhook: HeldCreations, name: str
) -> dict[str, Any]:
    """The TrainJob opened (execution 1) while the webhook holds the Job controller's creations: returns the
    admission request of its pod's creation, held in the API server, a pod of admission 1."""
    steps.node("a")
    webhook.hold()
    body = steps.manifest(name, steps.runtime())
    assert await until("open", lambda: writer.call("open", body)) == Execution(name, "1", 1)
    (creation, *more) = steps.wait(
        "the Job controller's pod creation held at the webhook", lambda: webhook.requests() or None
    )
    assert more == [], more
    labels = creation["object"]["metadata"]["labels"]
    assert (labels[v.LABEL_JOBSET_NAME], labels[v.POD_LABEL_ADMISSION]) == (name, "1")
    assert steps.pods(name) == []
    return creation


def _watch_from(steps: RealSteps, trainjob: str) -> str:
    """The resourceVersion to watch the TrainJob's pods from: what a list of them now saw."""
    return str(
        steps.core.list_namespaced_pod(steps.namespace, label_selector=pod_selector(trainjob)).metadata.resource_version
    )


def _created_since(steps: RealSteps, trainjob: str, resource_version: str, timeout: int = 30) -> Any:
    """The first pod of the TrainJob created after `resource_version`, from a watch (it may be deleted the moment
    after, before a list would see it)."""
    watch = kubernetes.watch.Watch()
    for event in watch.stream(
        steps.core.list_namespaced_pod,
        steps.namespace,
        label_selector=pod_selector(trainjob),
        resource_version=resource_version,
        timeout_seconds=timeout,
    ):
        if event["type"] == "ADDED":
            watch.stop()
            return event["object"]
    raise AssertionError(f"no pod of {trainjob} was created within {timeout} s")


def _pod_exists(steps: RealSteps, pod: str) -> bool:
    return pod in [p.metadata.name for p in steps.core.list_namespaced_pod(steps.namespace).items]


async def _kept_force_deleted_then_fenced(
    steps: RealSteps, writer: Either, name: str, where: tuple[str, str, str], *, admission: int
) -> None:
    """Cases 1 and 2 from the loss of the pod's node on: the Job controller's deletion of the pod (`where`: name,
    uid, node) lands and the node shows `Ready=Unknown`; the refused release keeps the pod under its lost node in
    the record; a person force-deletes it; the next release still refuses, naming it on its `Ready=Unknown` node,
    while its process runs; once the node is fenced, execution `admission` is admitted, with no overlap."""
    pod, uid, node = where
    ref = f"{steps.namespace}/{name}"
    steps.wait(
        "the Job controller deletes the pod",
        lambda: steps.core.read_namespaced_pod(pod, steps.namespace).metadata.deletion_timestamp or None,
    )
    steps.wait_ready(node, "Unknown")
    with pytest.raises(PodsRemainError):
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    grown = json.loads(steps.trainjob(name)["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS])
    assert grown["nodes"] == {node: [pod]}
    assert grown.get("unscheduled", []) == []

    steps.core.delete_namespaced_pod(pod, steps.namespace, grace_period_seconds=0)  # kubectl delete --force
    steps.wait("the pod object gone", lambda: not _pod_exists(steps, pod) or None)
    with pytest.raises(PodsRemainError) as blocked:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert f"{pod} on {node} (Ready=Unknown" in str(blocked.value)
    assert steps.process_runs(uid)
    assert steps.overlaps(name) == []

    steps.node("b")
    steps.fence(node)
    admitted = await until("release", lambda: writer.call("release", ref), retry=DRAINED)
    assert admitted == Execution(name, "1", admission)
    steps.running_pods(name, 1, admission=admission)
    assert steps.overlaps(name) == []


async def test_the_pod_fence_refuses_a_force_deletion_and_lets_podgc_through(
    steps: RealSteps, writer: Either, fenced: None
) -> None:
    """On the real kube-apiserver: a person's force deletion of the Terminating pod on a lost node is refused,
    naming the pod, its node and the way out; once the node is fenced, the real PodGC marks the pod Failed and
    deletes it with grace 0, which the fence lets through, and release admits. Open and each admission recorded
    the fence, and the admission verified it."""
    name = "fenced"
    ref = f"{steps.namespace}/{name}"
    pod, uid, node = await _running(steps, writer, name)
    recorded = json.loads(steps.trainjob(name)["metadata"]["annotations"][v.ANNOTATION_POD_FENCE])
    assert recorded["admission"] == 1
    steps.set_state(node, "lost")
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    steps.wait_ready(node, "Unknown")
    with pytest.raises(PodsRemainError):
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)

    with pytest.raises(ApiException) as refused:
        steps.core.delete_namespaced_pod(pod, steps.namespace, grace_period_seconds=0)  # kubectl delete --force
    assert refused.value.status == 403
    body = str(refused.value.body)
    assert f"ValidatingAdmissionPolicy '{POLICY_NAME}' with binding '{POLICY_NAME}' denied request" in body
    assert f"pod {pod} of a dispatch TrainJob may still run on node {node}" in body
    assert _pod_exists(steps, pod)
    # nor may it be evicted with grace 0, nor taken out of its Job by its labels while it may run
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": steps.namespace}}
    with pytest.raises(ApiException) as evicted:
        steps.core.create_namespaced_pod_eviction(
            pod, steps.namespace, {**eviction, "deleteOptions": {"gracePeriodSeconds": 0}}
        )
    assert evicted.value.status == 403
    assert "an eviction with grace period 0" in str(evicted.value.body)
    with pytest.raises(ApiException) as relabelled:
        steps.core.patch_namespaced_pod(pod, steps.namespace, {"metadata": {"labels": {v.LABEL_JOBSET_NAME: None}}})
    assert relabelled.value.status == 403
    assert f"pod {pod} of a dispatch TrainJob has not finished" in str(relabelled.value.body)
    assert steps.process_runs(uid)

    steps.node("b")
    steps.fence(node)
    steps.wait("PodGC removes the pod of the fenced node", lambda: not _pod_exists(steps, pod) or None, timeout=90)
    admitted = await until("release", lambda: writer.call("release", ref), retry=DRAINED)
    assert admitted == Execution(name, "1", 2)
    assert admitted.fence_note == ""
    steps.running_pods(name, 1, admission=2)
    assert steps.overlaps(name) == []


async def test_case_1_a_pod_recorded_without_a_node_is_kept_under_its_node(
    real_cluster: RealCluster, steps: RealSteps, writer: Either
) -> None:
    """Execution 2's pod cannot be placed (its node cordoned) when dispatch holds it, so the hold records it
    without a node; kube-controller-manager is paused, so the Job controller deletes nothing yet. The node is
    uncordoned: the real scheduler binds the pod, the machine runs it, and is then lost. The Job controller's
    graceful deletion comes after, and the release that is refused lists the pod on its node and keeps it so. A
    person force-deletes it (no fence here): release still refuses, by the record, until the node is fenced."""
    name = "unbound"
    ref = f"{steps.namespace}/{name}"
    _, _, node = await _running(steps, writer, name)
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    steps.core.patch_node(node, {"spec": {"unschedulable": True}})
    assert await until("release", lambda: writer.call("release", ref), retry=DRAINED) == Execution(name, "1", 2)
    (pending,) = steps.wait(
        "execution 2's pod waiting for a node",
        lambda: [p for p in steps.pods(name) if p.status.phase == "Pending" and not p.spec.node_name] or None,
    )
    pod = pending.metadata.name
    with paused(real_cluster, "kube-controller-manager"):
        assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 2)
        record = json.loads(steps.trainjob(name)["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS])
        assert record["unscheduled"] == [pod]
        # uncordoned; the node lifecycle controller, paused with the rest, would also drop the taint it added for
        # the cordon (`TaintNodesByCondition`): done here in its place
        live = steps.core.read_node(node)
        taints = [t for t in steps.api.sanitize_for_serialization(live.spec.taints or []) if t["key"] != UNSCHEDULABLE]
        steps.core.patch_node(node, {"spec": {"unschedulable": False, "taints": taints or None}})
        (bound,) = steps.running_pods(name, 1, admission=2)
        uid = bound.metadata.uid
        steps.set_state(node, "lost")
    await _kept_force_deleted_then_fenced(steps, writer, name, (pod, uid, node), admission=3)


async def test_case_3_a_namesake_waits_for_the_job_its_predecessor_left(
    real_cluster: RealCluster, steps: RealSteps, writer: Either
) -> None:
    """The predecessor's JobSet is deleted with its Jobs orphaned, then the TrainJob: its Job lives on, owned by
    nothing, its pod running. The namesake is refused, naming that Job, until it is gone, and then settles."""
    name = "namesake"
    _, uid, _ = await _running(steps, writer, name)
    steps.custom.delete_namespaced_custom_object(
        v.JOBSET.group, v.JOBSET.version, steps.namespace, "jobsets", name, propagation_policy="Orphan"
    )
    batch = kubernetes.client.BatchV1Api(steps.api)
    (job,) = steps.wait(
        "the Job orphaned",
        lambda: (
            [j for j in batch.list_namespaced_job(steps.namespace).items if not j.metadata.owner_references] or None
        ),
    )
    steps.custom.delete_namespaced_custom_object(*TRAINER, steps.namespace, "trainjobs", name)
    steps.wait(
        "the TrainJob gone",
        lambda: not steps.custom.list_namespaced_custom_object(*TRAINER, steps.namespace, "trainjobs")["items"] or None,
    )
    body = steps.manifest(name, steps.runtime())
    body["metadata"]["labels"][v.LABEL_SUBMISSION] = "2"

    async def refused_for_the_job() -> str:
        try:
            await writer.call("open", body)
        except SuspensionNotObservedError as error:
            if "was left by a deleted TrainJob of the same name" in str(error):
                return str(error)
            raise
        raise AssertionError("the namesake was admitted beside its predecessor's Job")

    refusal = await until("the namesake refused for the Job", refused_for_the_job, retry=OBSERVED)
    assert f"Job {job.metadata.name}" in refusal
    assert steps.process_runs(uid)

    batch.delete_namespaced_job(job.metadata.name, steps.namespace, propagation_policy="Background")
    admitted = await until("open", lambda: writer.call("open", body), retry=DRAINED, within=90)
    assert admitted == Execution(name, "2", 1)
    assert not steps.process_runs(uid)
    steps.running_pods(name, 1, admission=1)
    assert steps.overlaps(name) == []


async def test_finding_4_a_node_deleted_while_its_machine_runs(steps: RealSteps, writer: Either) -> None:
    """The process takes 100 s to stop after SIGTERM (grace 100 s); the hold deletes its pod, and a person
    deletes the Node of the machine, which runs on. The real PodGC force-deletes the orphaned pod after its 40 s
    quarantine (and up to 40 s more: a pass every 20 s starts the quarantine and another ends it), while the
    machine still stops the process. release refuses: the Node's deletion is proof only the grace plus 60 s and
    the skew bound after a release first found it gone with no pod left on it. (Before issue 26 it admitted as
    soon as PodGC had deleted the pod.)"""
    name = "deleted-node"
    ref = f"{steps.namespace}/{name}"
    pod, uid, node = await _running(steps, writer, name, termination=100.0, grace=100)
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    with pytest.raises(PodsRemainError):
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    steps.core.delete_node(node)
    with pytest.raises(PodsRemainError) as gone:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert f"on {node} (gone" in str(gone.value)
    steps.wait("PodGC deletes the orphaned pod", lambda: not _pod_exists(steps, pod) or None, timeout=90)
    assert steps.process_runs(uid), "the process stopped before PodGC deleted its pod: nothing to test"
    with pytest.raises(PodsRemainError) as refused:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert f"{pod} on {node} (gone, not yet proof)" in str(refused.value)
    steps.node("b")
    admitted = await until("release", lambda: writer.call("release", ref), retry=DRAINED, within=240)
    assert admitted == Execution(name, "1", 2)
    assert not steps.process_runs(uid)
    assert steps.overlaps(name) == []


async def test_case_2_a_pod_created_after_the_record_is_kept_under_its_node(
    real_cluster: RealCluster, steps: RealSteps, writer: Either, held_creations: HeldCreations
) -> None:
    """The Job controller's creation of execution 1's pod is held at an admission webhook in the real API server
    when dispatch holds the TrainJob, so the hold's record names no pod; kube-controller-manager is paused across
    the hold, so the Job controller deletes nothing yet. The creation is let go: the pod is created, the real
    scheduler binds it, the machine runs it, and is then lost. The Job controller's graceful deletion comes after;
    the release that is refused lists the pod on its node and keeps it so in the record (`fencing.grown`). A
    person force-deletes it (no fence here): release still refuses, by the record, until the node is fenced."""
    name = "in-flight"
    ref = f"{steps.namespace}/{name}"
    await _opened_with_its_creation_held(steps, writer, held_creations, name)
    with paused(real_cluster, "kube-controller-manager"):
        assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
        record = json.loads(steps.trainjob(name)["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS])
        assert (record["admission"], record["nodes"], record.get("unscheduled", [])) == (1, {}, [])
        assert held_creations.let_go() < TIMEOUT_SECONDS, "the API server gave up on the held creation first"
        (created,) = steps.running_pods(name, 1, admission=1)
        pod, uid, node = created.metadata.name, created.metadata.uid, created.spec.node_name
        steps.set_state(node, "lost")
    await _kept_force_deleted_then_fenced(steps, writer, name, (pod, uid, node), admission=2)


def _settled(status: Status) -> bool:
    """What a release needs of the hold: observed and settled, and no pod left."""
    return status.hold_observed and status.drained


AHEAD = 8.0
"""How far the second replica's clock runs ahead: less than `SETTLE`, so that by its clock the settle passes
while, by the API server's, a creation held since before the hold is still in flight."""


async def test_finding_5_a_replica_whose_clock_runs_ahead_does_not_end_the_settle_early(
    real_cluster: RealCluster, steps: RealSteps, writer: Either, held_creations: HeldCreations
) -> None:
    """The Job controller's creation of execution 1's pod is held at an admission webhook across the hold. The
    release reaches the API server through a second replica whose clock runs `AHEAD` s ahead (interposed.py):
    by that clock the settle has passed while the creation is still in flight, and an adapter without the bound
    (`clock_skew_seconds` 0) reads the hold as observed, nothing remaining: its release would admit execution 2
    beside a creation of execution 1. With the bound (`clock_skew_seconds` = `AHEAD`), release is refused
    (HoldSettlingError); the creation lands under the held execution and is deleted by the Job controller; the
    release admits once the settle has passed by the API server's clock, and only execution 2's pod runs."""
    name = "clock-ahead"
    ref = f"{steps.namespace}/{name}"
    await _opened_with_its_creation_held(steps, writer, held_creations, name)
    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    with ClockAheadReplica(real_cluster, AHEAD) as replica:
        kubeconfig = replica.kubeconfig("writer", steps.namespace)
        bounded = await make_adapter("async", kubeconfig, clock_skew_seconds=AHEAD)
        unbounded = await make_adapter("async", kubeconfig, clock_skew_seconds=0.0)
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + SETTLE + 30
            while not _settled(await unbounded.call("inspect", ref)):
                assert loop.time() < deadline, "the hold never settled by the fast clock without the bound"
                await asyncio.sleep(0.3)  # a poll interval: the next inspect reads the cluster again
            with pytest.raises(HoldSettlingError) as refused:
                await bounded.call("release", ref)
            assert held_creations.requests(), "the creation was not in flight"
            assert steps.pods(name) == []
            assert f"plus {AHEAD:g} s for the API servers' clocks" in str(refused.value)
            assert replica.version_answers > 0

            watched = _watch_from(steps, name)
            assert held_creations.let_go() < TIMEOUT_SECONDS, "the API server gave up on the held creation first"
            landed = _created_since(steps, name, watched)
            assert landed.metadata.labels[v.POD_LABEL_ADMISSION] == "1"
            admitted = await until("release", lambda: bounded.call("release", ref), retry=DRAINED, within=SETTLE + 60)
            assert admitted == Execution(name, "1", 2)
        finally:
            await bounded.close()
            await unbounded.close()
    steps.running_pods(name, 1, admission=2)
    assert steps.overlaps(name) == []
