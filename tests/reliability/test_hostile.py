"""Issue 7 item 4, plain mode: the hostile environments of anchors.md §6, on the whole simulated cluster, with
the overlap recorder as the judge. What dispatch does in each, and why, is in docs/reliability.md.

* a pod force-deleted while its node is lost: the pod object vanishes, its process runs on behind the
  partition. No listing of pods can see it, but the hold recorded it with its node (node fencing, anchors
  §8.1; dispatch/fencing.py): release stays refused until the node is fenced, then admits once;
* a Node object deleted while its kubelet is merely frozen: PodGC removes the pods, dispatch takes the deleted
  Node as proof (k8s-apis §5.5: a judgement, not an API guarantee). With the machine powered off first, as the
  procedure says, nothing overlaps; with it frozen, the recorder shows what the judgement costs;
* Kueue failure recovery marking pods Failed on an unreachable node: the pods still block, until the node is
  proven ceased; and a runtime that opts pods into it is refused before anything is created;
* an out-of-service taint on a Ready node: not proof; PodGC leaves the pods alone; release is refused until
  the kubelet confirms the pods' end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import PodsRemainError, SpecRejectedError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS, confirming_seconds

from .one_pod import core, do, one_pod_world, only_process, overlaps, release, require
from .schedule import Step
from .world import NAMESPACE, TRAINER, World

#: long enough for the node lifecycle controller to find a silent node Ready=Unknown (50 s grace, 5 s period)
SILENCE = [Step.of("advance", seconds=60), Step.of("advance", seconds=30)]


@pytest.fixture
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """One TrainJob of one pod on a three-node cluster, running its first execution."""
    yield from one_pod_world(getattr(request, "param", 8), 30)


# --- a pod force-deleted while its node is lost --------------------------------------------------------------


def test_a_pod_force_deleted_on_a_lost_node_still_blocks(world: World) -> None:
    """The hold recorded the pod and its node (fencing.py); once the object is force-deleted no listing sees it,
    but the record does: release stays refused, naming the pod and the lost node, until the machine is fenced
    (powered off, then tainted out-of-service); then it admits execution 2 and nothing overlaps."""
    pod, node = only_process(world)
    do(world, Step.of("lose", host=0), Step.of("hold", obj=0, caller=0), *SILENCE)
    blocked = release(world)
    require(isinstance(blocked.error, PodsRemainError), f"not blocked by the Terminating pod: {blocked.describe()}")
    require(f"{pod} on {node} (Ready=Unknown" in str(blocked.error), str(blocked.error))

    core(world).delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)  # kubectl delete --force
    world.rlab.settle()
    do(world, Step.of("advance", seconds=1))
    require(pod not in [p.metadata.name for p in core(world).list_namespaced_pod(NAMESPACE).items], "pod still there")
    require(any(r.pod == pod and r.running for r in world.processes()), "the partitioned process stopped")

    after = release(world)
    do(world, Step.of("advance", seconds=5))
    assert isinstance(after.error, PodsRemainError), f"admitted beside a process it cannot see: {after.describe()}"
    assert f"{pod} on {node} (Ready=Unknown)" in str(after.error)
    assert "deleted from the API" in str(after.error)
    assert not after.error.ceased
    assert overlaps(world) == []

    do(world, Step.of("fence", host=0, effect="NoExecute"), Step.of("advance", seconds=5))
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert world.violations == []


# --- a Node object deleted while its kubelet is merely frozen -------------------------------------------------


@pytest.mark.parametrize("machine", ["powered-off", "frozen"])
def test_a_deleted_node_is_taken_as_proof_of_its_machines_end(world: World, machine: str) -> None:
    """Deleted means ceased (DESIGN §4), but not on a single 404 (issue 26, finding 4): only once the pod's grace
    plus the returned-node margin and the skew bound have passed since a writer's check first found the Node gone
    with no pod that may run listed on it (fencing.py `judged_nodes`). PodGC agrees that it is gone: after its
    40 s quarantine and a live GET it force-deletes the orphaned pods (k8s-apis §5.5). Right when the machine is
    off; when it is merely frozen (it cannot hear the deletion), the old process runs on beside the new execution,
    and the recorder shows the cost of the judgement (docs/reliability.md: outside the promise)."""
    pod, node = only_process(world)
    do(world, Step.of("freeze", host=0), Step.of("hold", obj=0, caller=0), *SILENCE)
    blocked = release(world)
    assert isinstance(blocked.error, PodsRemainError), blocked.describe()
    assert not blocked.error.ceased

    if machine == "powered-off":
        world.rlab.sc.power_off(node)
    core(world).delete_node(node)
    world.rlab.settle()
    still = release(world)  # a writer's check: it records when it found the Node gone
    assert isinstance(still.error, PodsRemainError), still.describe()
    assert not still.error.ceased
    assert f"{pod} on {node} (gone, not yet proof)" in str(still.error)

    do(world, Step.of("advance", seconds=50))  # PodGC: quarantine, GET, Failed + DeletionByPodGC, delete
    # the pod's object is gone: this check is the first that lists no pod on the deleted Node, and the wait starts
    # from it (a machine that runs stops the pod only once its object is deleted)
    waiting = release(world)
    assert isinstance(waiting.error, PodsRemainError), waiting.describe()
    assert f"{pod} on {node} (gone, not yet proof)" in str(waiting.error)
    do(world, Step.of("advance", seconds=confirming_seconds(30) + DEFAULT_CLOCK_SKEW_SECONDS + 1))
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    seen = overlaps(world)
    if machine == "powered-off":
        assert seen == []
        assert world.violations == []
    else:
        assert seen, "the frozen machine's process runs beside execution 2"
        assert {(o.first.execution.admission, o.second.execution.admission) for o in seen} == {("1", "2")}


# --- Kueue failure recovery: Failed without proof --------------------------------------------------------------


def test_pods_kueue_failure_recovery_marked_failed_block_until_the_node_is_ceased(world: World) -> None:
    """What Kueue's pod termination controller does first (k8s-apis §4.7) on a Terminating pod of an
    unreachable node, done here as it would: phase Failed and the condition KueueFailureRecovery. The process
    may run on behind the partition, so the pod still blocks; once the operator fences the node, it does not."""
    pod, node = only_process(world)
    do(world, Step.of("lose", host=0), Step.of("hold", obj=0, caller=0))
    do(world, Step.of("advance", seconds=60), Step.of("advance", seconds=40))
    taints = {t.key for t in (core(world).read_node(node).spec.taints or [])}
    require("node.kubernetes.io/unreachable" in taints, f"no unreachable taint yet: {taints}")
    condition = {
        "type": v.CONDITION_KUEUE_FAILURE_RECOVERY,
        "status": "True",
        "reason": "KueueForcefullyDeleted",
        "message": "Pod forcefully terminated after 60s grace period due to unreachable node",
    }
    core(world).patch_namespaced_pod_status(pod, NAMESPACE, {"status": {"phase": "Failed", "conditions": [condition]}})
    world.rlab.settle()

    blocked = release(world)
    assert isinstance(blocked.error, PodsRemainError), blocked.describe()
    (remaining,) = blocked.error.remaining
    assert (remaining.name, remaining.phase) == (pod, "Failed")
    assert remaining.blocking.value == "marked Failed by Kueue failure recovery without proof of cessation"

    do(world, Step.of("fence", host=0, effect="NoSchedule"))  # the machine off, then the taint
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert world.violations == []


def test_a_runtime_that_opts_pods_into_failure_recovery_is_refused(world: World) -> None:
    """The second half of Kueue's failure recovery force-deletes the pod: then it is the force-deletion case
    above, which no listing can see. So dispatch refuses runtimes whose pods carry the opt-in annotation."""
    custom = kubernetes.client.CustomObjectsApi(world.rlab.api())
    runtime = custom.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", "rt")
    runtime["metadata"] = {"name": "rt-recovery"}
    template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["metadata"]["annotations"][v.ANNOTATION_SAFE_TO_FORCEFULLY_DELETE] = "true"
    custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
    manifest: dict[str, Any] = world.objects[0].manifest()
    manifest["metadata"]["name"] = "tj-recovery"
    manifest["spec"]["runtimeRef"]["name"] = "rt-recovery"
    revision = world.rlab.revision()
    outcome = world.callers[0].invoke(world.rlab, "open", manifest, target=f"{NAMESPACE}/tj-recovery")
    assert isinstance(outcome.error, SpecRejectedError), outcome.describe()
    assert v.ANNOTATION_SAFE_TO_FORCEFULLY_DELETE in str(outcome.error)
    assert world.rlab.revision() == revision


# --- a taint on a Ready node --------------------------------------------------------------------------------


@pytest.mark.parametrize("world", [25], indirect=True)
def test_an_out_of_service_taint_on_a_ready_node_is_not_proof(world: World) -> None:
    """The process takes 25 s to stop after SIGTERM. The taint goes on its Ready node meanwhile: PodGC leaves
    the pod (the node is Ready), `ceased` says no, release is refused until the kubelet confirms the end."""
    pod, node = only_process(world)
    do(world, Step.of("hold", obj=0, caller=0))
    world.rlab.sc.taint_out_of_service(node, "NoExecute")
    world.rlab.settle()
    do(world, Step.of("advance", seconds=21))  # a PodGC pass has run; the process still stops
    require(any(r.pod == pod and r.running for r in world.processes()), "the process stopped early")
    names = [p.metadata.name for p in core(world).list_namespaced_pod(NAMESPACE).items]
    assert pod in names, "PodGC must not force-delete on a Ready node"
    ceased = world.callers[4].invoke(world.rlab, "ceased", world.objects[0].ref)
    assert ceased.result is False, ceased.describe()
    blocked = release(world)
    assert isinstance(blocked.error, PodsRemainError), blocked.describe()
    assert f"{pod} on {node} (Ready=True, out-of-service)" in str(blocked.error)

    # the process has stopped and the kubelet confirmed; the hold settles 90 s and the skew bound after it
    # (dispatch/evidence.py)
    do(world, Step.of("advance", seconds=DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS))
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert world.violations == []
