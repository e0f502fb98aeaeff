"""The TrainJob operators through `dag.test()` against the lab: XCom identity, retries, waiting, lost responses.

The test builds the cluster state as the admin; where the story needs the cluster to move while the task runs
(the pods going, Trainer observing a hold), an `Actor` thread does it once the lab's probe shows the task got
that far: never after a sleep.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from airflow_lab import Actor, AirflowLab, Handler, RunDag, Seen, node_reads
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch_lab.kinds import TRAINJOB
from airflow_provider_dispatch_lab.scenario import manifests

pytestmark = pytest.mark.airflow


def admission_of(cluster: Cluster, name: str = "ft-7") -> str:
    return str(cluster.trainjob_object(name)["metadata"]["annotations"][v.ANNOTATION_ADMISSION])


def worker_calls(seen: list[Seen], method: str, path_end: str) -> list[Seen]:
    return [s for s in seen if s.by_worker and s.phase == "done" and s.method == method and s.path.endswith(path_end)]


def trigger_read_node(node: str) -> Any:
    return lambda seen: any(s.by_trigger and s.phase == "done" and s.path.endswith(f"/nodes/{node}") for s in seen)


def kubelet_confirms(cluster: Cluster, pod: str) -> None:
    cluster.core.delete_namespaced_pod(pod, cluster.namespace, grace_period_seconds=0)


def test_hold_returns_the_current_execution_and_holds(cluster: Cluster, run_dag: RunDag) -> None:
    runtime = cluster.runtime()
    cluster.trainjob("ft-7", runtime=runtime, admission=3, suspend=False)
    result = run_dag("dispatch_hold", namespace=cluster.namespace, name="ft-7")
    assert result.state == "success"
    assert result.xcom("hold") == {"job_id": "ft-7", "submission": "1", "admission": 3}
    assert cluster.trainjob_object("ft-7")["spec"]["suspend"] is True


def test_release_returns_the_admitted_execution_identity(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag
) -> None:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=4)
    mark = airflow_lab.probe.mark()
    result = run_dag("dispatch_release_retry", namespace=cluster.namespace, name="ft-7")
    assert (result.state, result.try_number("release")) == ("success", 1)
    assert result.xcom("release") == {"job_id": "ft-7", "submission": "1", "admission": 5}
    assert admission_of(cluster) == "5"
    puts = worker_calls(airflow_lab.probe.since(mark), "PUT", "/trainjobs/ft-7")
    assert [s.status for s in puts] == [200]


def test_a_refusal_fails_without_retrying_and_writes_nothing(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster.trainjob("ft-7", runtime=cluster.runtime(), dispatch_labels=False)
    before = cluster.resource_version("ft-7")
    mark = airflow_lab.probe.mark()
    result = run_dag("dispatch_release_retry", namespace=cluster.namespace, name="ft-7")
    assert (result.task_state("release"), result.try_number("release")) == ("failed", 1)  # retries=2 unused
    assert "is not managed by dispatch" in capfd.readouterr().out
    assert cluster.resource_version("ft-7") == before
    assert [s for s in airflow_lab.probe.since(mark) if s.writes] == []


def test_retry_mode_raises_the_pods_remain_error_for_the_retries(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    node = cluster.node("n1", ready="Unknown")
    _, (pod,) = cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=2, pods_on=[node])
    mark = airflow_lab.probe.mark()
    result = run_dag("dispatch_release_retry", namespace=cluster.namespace, name="ft-7")
    assert (result.task_state("release"), result.try_number("release")) == ("failed", 3)  # every retry was used
    out = capfd.readouterr().out
    # what to do first, as every wait reason: the node, its state and the remedy, then the command, the permission
    # it needs and the runbook section; what it means for the TrainJob and the details follow on their own lines
    taint = f"kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    first = f"Confirm {node} is powered off, then taint it out-of-service (Ready=Unknown)\n{taint}\n"
    assert first in out, out[-3000:]
    assert "Never force-delete the pods. Runbook: docs/runbook.md#confirm-the-shutdown\n" in out
    assert (
        f"\nTrainJob {cluster.namespace}/ft-7 is not admitted: 1 pod of the previous execution remains, so it may "
        "still run. The hold stays in force.\n"
    ) in out
    assert f"\nremaining pods: {pod} on {node} (Ready=Unknown)\n" in out
    assert admission_of(cluster) == "2"
    assert [s for s in airflow_lab.probe.since(mark) if s.writes] == []


def test_a_lost_response_is_not_admitted_twice_across_retries(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    """Try 1's admitting write is applied, then the answer is lost and the TrainJob is held again right away
    (someone else's hold). Without the record, try 2 would find it held and admit execution 6; with the task
    state store it returns execution 5 and writes nothing."""
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=4)
    client = airflow_lab.lab.inner.context().client("test-someone-holds")
    lost: list[int] = []

    async def apply_then_lose(request: web.Request, handler: Handler) -> web.StreamResponse:
        if lost:
            return await handler(request)
        response = await handler(request)
        lost.append(response.status)
        await client.patch(TRAINJOB, cluster.namespace, "ft-7", {"spec": {"suspend": True}})
        if request.transport is not None:
            request.transport.abort()
        raise ConnectionResetError("the answer was lost (test)")

    airflow_lab.hooks.add(apply_then_lose, when=lambda r: r.method == "PUT" and r.path.endswith("/trainjobs/ft-7"))
    mark = airflow_lab.probe.mark()
    try:
        result = run_dag("dispatch_release_retry", namespace=cluster.namespace, name="ft-7")
    finally:
        airflow_lab.lab.run(client.close)
    assert lost == [200]  # the server applied try 1's write
    # try 2, or try 1 itself when urllib3 re-sent the PUT: its 409 is a conflict, retried inside the try, and
    # the retry consults the record first (issue 17 item 3)
    assert result.state == "success"
    assert result.try_number("release") in (1, 2)
    assert result.xcom("release") == {"job_id": "ft-7", "submission": "1", "admission": 5}
    live = cluster.trainjob_object("ft-7")
    assert (admission_of(cluster), live["spec"]["suspend"]) == ("5", True)
    out = capfd.readouterr().out
    assert (
        f"Noted in the task state store that this try admits execution 5 of TrainJob {cluster.namespace}/ft-7 (job "
        "id ft-7, submission 1)"
    ) in out
    assert "already reached admission 5" in out
    # what the try did, from what it knows: it wrote nothing (the write that admitted was the lost one)
    assert "admitted execution" not in out
    assert (
        f"TrainJob {cluster.namespace}/ft-7: returning execution 5; nothing written" in out
        or f"TrainJob {cluster.namespace}/ft-7 runs execution 5 after a conflict" in out
    )
    puts = worker_calls(airflow_lab.probe.since(mark), "PUT", "/trainjobs/ft-7")
    assert puts[0].status == "dropped"
    assert {s.status for s in puts[1:]} <= {409}  # urllib3 may repeat the PUT: conditional, it is refused


@pytest.mark.parametrize("dag_id", ["dispatch_release_wait_deferrable", "dispatch_release_wait_polling"])
def test_wait_mode_releases_once_the_pods_are_gone(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, dag_id: str, capfd: pytest.CaptureFixture[str]
) -> None:
    node = cluster.node("n1")
    _, (pod,) = cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=2, pods_on=[node])
    mark = airflow_lab.probe.mark()
    deferrable = dag_id.endswith("deferrable")

    def pods_go() -> None:
        if deferrable:  # the trigger's first check was answered: it waits on its watches
            airflow_lab.probe.wait_for(trigger_read_node(node), mark)
        else:  # the worker's first check found the pod
            airflow_lab.probe.wait_for(lambda seen: len(worker_calls(seen, "GET", f"/nodes/{node}")) >= 1, mark)
        assert admission_of(cluster) == "2"  # nothing was admitted while the pod remained
        kubelet_confirms(cluster, pod)

    actor = Actor(pods_go).start()
    result = run_dag(dag_id, namespace=cluster.namespace, name="ft-7")
    actor.join()
    assert (result.state, result.try_number("release")) == ("success", 1)
    assert result.xcom("release") == {"job_id": "ft-7", "submission": "1", "admission": 3}
    assert admission_of(cluster) == "3"
    out = capfd.readouterr().out
    # the wait reason, what is awaited first (the node's kubelet), then what it means and the details
    first = (
        f"Waiting for the kubelet of {node} to stop 1 pod (Ready=True)\nNothing to do: the kubelet confirms its end "
        f"within its grace period.\nTrainJob {cluster.namespace}/ft-7 is not admitted: 1 pod of the previous "
        "execution remains, so it may still run. The hold stays in force.\n"
    )
    assert first in out, out[-3000:]
    assert f"\nremaining pods: {pod} on {node} (Ready=True)\n" in out
    # what the release did, from its program's result
    assert f"TrainJob {cluster.namespace}/ft-7: admitted execution 3 " in out
    seen = airflow_lab.probe.since(mark)
    assert [s.status for s in worker_calls(seen, "PUT", "/trainjobs/ft-7")] == [200]
    assert [s for s in seen if s.writes and not s.by_worker] == []  # the trigger wrote nothing


def test_deferred_release_shows_each_progress_headline_first(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    """Two pods remain: the release defers. One goes: the trigger reports progress and the release shows its new
    wait reason, headline first (the pod that remains, its node, the node's state, the remedy) as the
    PodsRemainError message is, and defers again. The other goes: released."""
    node = cluster.node("n1")
    _, (first, second) = cluster.held_after_execution(
        "ft-7", runtime=cluster.runtime(), admission=2, pods_on=[node, node]
    )
    mark = airflow_lab.probe.mark()

    def pods_go() -> None:
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=True) >= 1, mark)
        kubelet_confirms(cluster, first)
        # the trigger's re-check (progress), then the next deferral's trigger checks
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=True) >= 3, mark)
        assert admission_of(cluster) == "2"  # nothing was admitted while a pod remained
        kubelet_confirms(cluster, second)

    actor = Actor(pods_go).start()
    result = run_dag("dispatch_release_wait_deferrable", namespace=cluster.namespace, name="ft-7")
    actor.join()
    out = capfd.readouterr().out
    assert (result.state, result.try_number("release")) == ("success", 1)
    assert admission_of(cluster) == "3"
    after_progress = (
        f"Waiting for the kubelet of {node} to stop 1 pod (Ready=True)\nNothing to do: the kubelet confirms its end "
        f"within its grace period.\nTrainJob {cluster.namespace}/ft-7 is not admitted: 1 pod of the previous "
        f"execution remains, so it may still run. The hold stays in force.\nremaining pods: {second} on {node} "
    )
    assert after_progress in out, out[-3000:]
    before = f"Waiting for the kubelet of {node} to stop 2 pods (Ready=True)\n"
    assert out.index(before) < out.index(after_progress)


def test_a_deferred_release_records_the_node_deletion_its_trigger_saw_and_admits_once_it_is_proof(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 26, finding 4, through the deferred release: the Node of the previous execution's pod is deleted while
    the release waits in the triggerer, and its pod object goes. A deletion is proof only a while after a writer's
    check first found it (fencing.py `judged_nodes`), and a trigger writes nothing: the trigger reports the change
    (progress), the worker's check records when it found the Node gone, and the release admits once the pod's
    grace plus the margin and the skew bound have passed. (Deferring again at once on progress, as the release did
    before, leaves the deletion unrecorded, and the release waits until its wait_timeout.)"""
    node = cluster.node("n1")
    _, (pod,) = cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=2, pods_on=[node])
    mark = airflow_lab.probe.mark()

    def node_goes() -> None:
        airflow_lab.probe.wait_for(trigger_read_node(node), mark)  # deferred: the trigger waits
        assert admission_of(cluster) == "2"
        cluster.delete_node(node)
        # PodGC's removal of a deleted node's pod, with grace 0 (no PodGC runs in this cluster): the recorded pod
        # vanished, and its node's deletion is all that can prove it stopped
        kubelet_confirms(cluster, pod)

    actor = Actor(node_goes).start()
    result = run_dag("dispatch_release_wait_deferrable_rechecking", namespace=cluster.namespace, name="ft-7")
    actor.join()
    out = capfd.readouterr().out
    assert (result.state, result.try_number("release")) == ("success", 1), out[-3000:]
    assert result.xcom("release") == {"job_id": "ft-7", "submission": "1", "admission": 3}
    assert f"Waiting until the deletion of node {node} is proof: 1 pod may still run there\n" in out, out[-3000:]
    seen = airflow_lab.probe.since(mark)
    # the worker's check recorded the deletion (one conditional write), then admitted (the other)
    assert [s.status for s in worker_calls(seen, "PUT", "/trainjobs/ft-7")] == [200, 200]
    assert [s for s in seen if s.writes and not s.by_worker] == []  # the trigger wrote nothing


def test_open_creates_held_waits_for_the_hold_to_be_observed_and_releases(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    runtime = cluster.runtime()
    manifest = manifests.trainjob("ft-9", runtime=runtime, suspend=None)
    manifest["metadata"]["namespace"] = cluster.namespace
    mark = airflow_lab.probe.mark()

    def trainer_observes() -> None:
        # the trainer observes only after the worker found the hold unobserved and tried again (409): the test
        # then always crosses the path where an attempt continues with the object an earlier one created
        airflow_lab.probe.wait_for(
            lambda seen: {201, 409} <= {s.status for s in worker_calls(seen, "POST", "/trainjobs")}, mark
        )
        created = cluster.trainjob_object("ft-9")
        assert created["spec"]["suspend"] is True  # open created it held
        cluster.trainer_observes("ft-9")
        cluster.jobset("ft-9")

    actor = Actor(trainer_observes).start()
    result = run_dag("dispatch_open", manifest=manifest)
    actor.join()
    assert result.state == "success"
    assert result.xcom("open") == {"job_id": "ft-9", "submission": "1", "admission": 1}
    live = cluster.trainjob_object("ft-9")
    assert (live["metadata"]["annotations"][v.ANNOTATION_ADMISSION], live["spec"]["suspend"]) == ("1", False)
    # the first attempt created it; each attempt after it found its own object (409) and continued with it
    first, *again = [s.status for s in worker_calls(airflow_lab.probe.since(mark), "POST", "/trainjobs")]
    assert (first, set(again)) == (201, {409})
    # a normal open's log reads as one: the record noted once (the second attempt notes the same expectation,
    # with the uid, at debug level), the wait for Trainer said as what is awaited, then what the open did
    out = capfd.readouterr().out
    ref = f"{cluster.namespace}/ft-9"
    noted = f"Noted in the task state store that this try admits execution 1 of TrainJob {ref} (job id ft-9, "
    assert out.count(noted) == 1, out[-3000:]
    waiting = f"Waiting for Trainer and JobSet to observe the hold of TrainJob {ref}, as after every create or hold"
    assert waiting in out
    assert f"TrainJob {ref}: admitted execution 1 " in out
