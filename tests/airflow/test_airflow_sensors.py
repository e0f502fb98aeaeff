"""The sensors through `dag.test()` against the lab: poke, reschedule and deferrable; wait reasons; timeouts.

`dag.test()` runs a deferred sensor's trigger inline, in the test's thread; an `Actor` thread changes the
cluster once the probe shows the sensor (or its trigger) has checked, and reads the wait reason from the
metadata database while the sensor is still waiting.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from airflow_lab import Actor, AirflowLab, RunDag, Seen, find_wait_reasons, node_reads
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import payloads
from airflow_provider_dispatch.dispatch import vocabulary as v

pytestmark = pytest.mark.airflow


def kubelet_confirms(cluster: Cluster, pod: str) -> None:
    cluster.core.delete_namespaced_pod(pod, cluster.namespace, grace_period_seconds=0)


def held_with_pods(cluster: Cluster, count: int = 1, *, lost: bool = False) -> tuple[str, list[str]]:
    node = cluster.node("n1")
    if lost:
        cluster.lose_node(node)
    _, pods = cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=2, pods_on=[node] * count)
    return node, pods


def test_a_poke_timeout_says_cessation_was_not_proven(
    cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    node, (pod,) = held_with_pods(cluster, lost=True)
    result = run_dag("dispatch_drained_poke_timeout", namespace=cluster.namespace, name="ft-7")
    out = capfd.readouterr().out
    assert (result.task_state("drained"), result.try_number("drained")) == ("failed", 1)
    assert f"Cessation was NOT proven for TrainJob {cluster.namespace}/ft-7" in out
    assert f"remaining pods: {pod} on {node} (Ready=Unknown)" in out
    assert f"kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in out
    # the wait reason in the UI: the rendered field and the XCom, as the last poke left them
    rendered = result.rendered("drained")["wait_reason"]
    assert rendered == result.xcom("drained", key="wait_reason")
    # what to do first, and its subject: the node, its state, the pods on it; then the command, the permission it
    # needs and the runbook section, then what the sensor waits for, then the details
    lines = rendered.splitlines()
    assert lines[0] == f"Confirm {node} is powered off, then taint it out-of-service (Ready=Unknown)"
    assert len(lines[0]) <= payloads.GLANCE
    assert lines[1] == f"kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert lines[2].startswith("Needs permission to patch nodes. ")
    assert lines[2].endswith(" Runbook: docs/runbook.md#confirm-the-shutdown")
    assert (
        lines[3]
        == f"Waiting until the pods of TrainJob {cluster.namespace}/ft-7 (execution 2) are gone or proven stopped."
    )
    assert lines[4] == f"remaining pods: {pod} on {node} (Ready=Unknown)"
    # the full reason once (it never changed), then its first line on every other poke
    assert out.count(rendered) == 1
    assert out.count(lines[0]) >= 3


def test_soft_fail_skips_on_timeout(cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]) -> None:
    held_with_pods(cluster)
    result = run_dag("dispatch_drained_soft_fail", namespace=cluster.namespace, name="ft-7")
    assert result.task_state("drained") == "skipped"
    assert "Cessation was NOT proven" in capfd.readouterr().out


@pytest.mark.parametrize("dag_id", ["dispatch_drained_poke", "dispatch_drained_reschedule"])
def test_poke_and_reschedule_succeed_once_drained(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, dag_id: str
) -> None:
    node, (pod,) = held_with_pods(cluster)
    mark = airflow_lab.probe.mark()

    def pods_go() -> None:
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=False) >= 1, mark)
        kubelet_confirms(cluster, pod)

    actor = Actor(pods_go).start()
    result = run_dag(dag_id, namespace=cluster.namespace, name="ft-7")
    actor.join()
    assert (result.task_state("drained"), result.try_number("drained")) == ("success", 1)
    outcome = result.xcom("drained")
    assert (outcome["outcome"], outcome["remaining"], outcome["ref"]) == ("drained", [], f"{cluster.namespace}/ft-7")
    assert outcome["execution"] == {"job_id": "ft-7", "submission": "1", "admission": 2}
    assert result.rendered("drained")["wait_reason"] == f"Drained: no pod of TrainJob {cluster.namespace}/ft-7 remains"
    assert [s for s in airflow_lab.probe.since(mark) if s.writes] == []


def test_ceased_pods_end_the_wait_and_the_xcom_says_so(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag
) -> None:
    node, (pod,) = held_with_pods(cluster, lost=True)
    mark = airflow_lab.probe.mark()

    def operator_confirms_shutdown() -> None:
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=False) >= 1, mark)
        cluster.taint_out_of_service(node)

    actor = Actor(operator_confirms_shutdown).start()
    result = run_dag("dispatch_drained_poke", namespace=cluster.namespace, name="ft-7")
    actor.join()
    outcome = result.xcom("drained")
    assert outcome["outcome"] == "ceased"
    assert outcome["remaining"] == [{"pod": pod, "node": node, "node_state": "Ready=Unknown, out-of-service"}]
    assert result.rendered("drained")["wait_reason"].startswith("Ceased: every remaining pod")


def test_deferred_the_wait_reason_is_visible_and_refreshed_on_progress(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag
) -> None:
    """Two pods: the sensor defers; while deferred the rendered field and the XCom name both. One pod goes: the
    trigger reports progress, the sensor refreshes the wait reason and defers again; the other goes: drained."""
    node, (first, second) = held_with_pods(cluster, count=2)
    mark = airflow_lab.probe.mark()
    seen_reasons: list[dict[str, str]] = []

    def story() -> None:
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=True) >= 1, mark)
        seen_reasons.append(find_wait_reasons("dispatch_drained_deferrable", "drained", cluster.namespace))
        kubelet_confirms(cluster, first)
        # the first trigger's re-check (progress), then the second trigger's first check
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=True) >= 3, mark)
        seen_reasons.append(find_wait_reasons("dispatch_drained_deferrable", "drained", cluster.namespace))
        kubelet_confirms(cluster, second)

    actor = Actor(story).start()
    result = run_dag("dispatch_drained_deferrable", namespace=cluster.namespace, name="ft-7")
    actor.join()
    assert (result.task_state("drained"), result.try_number("drained")) == ("success", 1)
    assert result.xcom("drained")["outcome"] == "drained"

    while_deferred, after_progress = seen_reasons
    for reason in (while_deferred["rendered"], while_deferred["xcom"]):
        assert f"{first} on {node} (Ready=True)" in reason
        assert f"{second} on {node} (Ready=True)" in reason
    for reason in (after_progress["rendered"], after_progress["xcom"]):
        assert first not in reason
        assert f"{second} on {node} (Ready=True)" in reason
    seen = airflow_lab.probe.since(mark)
    assert len([s for s in seen if s.is_watch_of("pods", cluster.namespace) and s.by_trigger]) == 2  # 2 deferrals
    assert [s for s in seen if s.writes] == []


def test_the_outcome_sensor_reports_the_outcome(airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag) -> None:
    cluster.trainjob("ft-7", runtime=cluster.runtime(), admission=2, suspend=False)
    mark = airflow_lab.probe.mark()

    def trainer_finishes() -> None:
        trigger_read = lambda seen: any(s.by_trigger and s.path.endswith("/trainjobs/ft-7") for s in seen)  # noqa: E731
        airflow_lab.probe.wait_for(trigger_read, mark)
        cluster.trainer_finishes("ft-7", "Failed")

    actor = Actor(trainer_finishes).start()
    result = run_dag("dispatch_outcome_deferrable", namespace=cluster.namespace, name="ft-7")
    actor.join()
    outcome = result.xcom("outcome")
    assert (outcome["outcome"], outcome["reason"], outcome["admission"]) == ("Failed", "FailedJobs", 2)
    assert outcome["execution"] == {"job_id": "ft-7", "submission": "1", "admission": 2}
    assert result.task_state("outcome") == "success"  # a Failed TrainJob is an outcome, not a sensor failure


def test_deferred_the_outcome_sensor_names_what_keeps_the_trainjob_from_finishing(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag
) -> None:
    """Execution 2 runs; its pod's node is lost and the pod Terminating there, so Trainer cannot write Failed. The
    deferred sensor's wait reason (rendered field and XCom) names the pod, the node, its state and the remedy on
    its first line; the operator fences the node, the trigger reports progress and the reason follows; then
    Trainer writes Failed and the sensor succeeds with that outcome."""
    node = cluster.node("n1")
    execution = cluster.running_execution("ft-7", runtime=cluster.runtime(), admission=2)
    pod = cluster.pod("ft-7", node=node, execution=execution)
    cluster.job_controller_deletes(pod)
    cluster.lose_node(node)
    mark = airflow_lab.probe.mark()
    seen_reasons: list[dict[str, str]] = []

    def story() -> None:
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=True) >= 1, mark)
        seen_reasons.append(find_wait_reasons("dispatch_outcome_deferrable", "outcome", cluster.namespace))
        cluster.taint_out_of_service(node)
        # the first trigger's re-check (progress), then the second trigger's first check
        airflow_lab.probe.wait_for(lambda seen: node_reads(seen, node, by_trigger=True) >= 3, mark)
        seen_reasons.append(find_wait_reasons("dispatch_outcome_deferrable", "outcome", cluster.namespace))
        cluster.trainer_finishes("ft-7", "Failed")

    actor = Actor(story).start()
    result = run_dag("dispatch_outcome_deferrable", namespace=cluster.namespace, name="ft-7")
    actor.join()
    assert (result.task_state("outcome"), result.xcom("outcome")["outcome"]) == ("success", "Failed")

    lost, fenced = seen_reasons
    about = (
        f"TrainJob {cluster.namespace}/ft-7 runs execution 2; waiting for its current execution to finish (Complete "
        "or Failed)."
    )
    for reason in (lost["rendered"], lost["xcom"]):
        lines = reason.splitlines()
        # what to do first, and its subject (the node), then the command; whose outcome is awaited comes after
        assert lines[0] == f"Confirm {node} is powered off, then taint it out-of-service (Ready=Unknown)"
        assert lines[1] == f"kubectl taint node {node} {v.TAINT_OUT_OF_SERVICE}=nodeshutdown:NoExecute"
        assert lines[3] == about
        assert f"Node {node} is not Ready (Ready=Unknown)" in lines[4]
        assert len(reason) <= payloads.WAIT_REASON_LIMIT
    for reason in (fenced["rendered"], fenced["xcom"]):
        lines = reason.splitlines()
        assert lines[0] == f"Waiting for PodGC to delete 1 pod on {node}: it is proven stopped"
        assert about in lines
    assert [s for s in airflow_lab.probe.since(mark) if s.writes] == []


def test_the_outcome_sensor_refuses_a_superseded_admission(
    cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster.trainjob("ft-7", runtime=cluster.runtime(), admission=3, suspend=False)
    result = run_dag("dispatch_outcome_pinned_deferrable", namespace=cluster.namespace, name="ft-7", admission=2)
    assert (result.task_state("outcome"), result.try_number("outcome")) == ("failed", 1)
    assert "runs execution 3 now" in capfd.readouterr().out


def test_deferred_with_hundreds_of_pods_every_payload_stays_bounded_across_re_deferrals(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag
) -> None:
    """240 pods on 60 nodes (one lost, one Ready=False, one fenced, the rest Ready=True), going in three batches
    and then all: the sensor re-defers on each change. While deferred, the wait reason (rendered field and XCom)
    is within its limit and still gives the count, the first pods with their nodes and node states, and every
    node state; every trigger's kwargs stay the same small size however often it re-defers; every event and the
    final XCom stay within theirs."""
    nodes = cluster.nodes_in_states(60)
    _, pods = cluster.held_after_execution(
        "ft-7", runtime=cluster.runtime(), admission=2, pods_on=[nodes[i % len(nodes)] for i in range(240)]
    )
    lost = nodes[0]
    going = [pod for i, pod in enumerate(pods) if i % len(nodes) >= 3]  # the pods on Ready=True nodes
    batches = [going[:60], going[60:120], going[120:]]
    mark = airflow_lab.probe.mark()
    seen_reasons: list[dict[str, str]] = []

    def lost_node_read(times: int) -> Callable[[list[Seen]], bool]:
        return lambda seen: node_reads(seen, lost, by_trigger=True) >= times

    def story() -> None:
        airflow_lab.probe.wait_for(lost_node_read(1), mark)
        seen_reasons.append(find_wait_reasons("dispatch_drained_deferrable_measured", "drained", cluster.namespace))
        for batch in batches:
            before = node_reads(airflow_lab.probe.since(mark), lost, by_trigger=True)
            for pod in batch:
                kubelet_confirms(cluster, pod)
            # the trigger's re-check (progress), then the next deferral's trigger checks: a re-deferral happened
            airflow_lab.probe.wait_for(lost_node_read(before + 2), mark)
        # the lost and the Ready=False node come back (their kubelets report again) and confirm their pods' end:
        # a recorded pod gone from a node that still could not confirm it would block (dispatch/fencing.py)
        cluster.set_ready(nodes[0], "True")
        cluster.set_ready(nodes[1], "True")
        for pod in sorted(set(pods) - set(going)):
            kubelet_confirms(cluster, pod)

    actor = Actor(story).start()
    result = run_dag("dispatch_drained_deferrable_measured", namespace=cluster.namespace, name="ft-7")
    actor.join()
    assert (result.task_state("drained"), result.xcom("drained")["outcome"]) == ("success", "drained")

    (while_deferred,) = seen_reasons
    first_pods = sorted(pods)[:3]
    # the XCom first: Airflow itself cuts a rendered field beyond 4096 characters (losing what follows)
    for reason in (while_deferred["xcom"], while_deferred["rendered"]):
        assert len(reason) <= payloads.WAIT_REASON_LIMIT
        lines = reason.splitlines()
        first_line = lines[0]
        remaining_line = next(line for line in lines if line.startswith("remaining pods: "))
        census = lines[lines.index(remaining_line) + 1]
        # the most urgent node first, with its remedy, then its command
        assert first_line == f"Confirm {lost} is powered off, then taint it out-of-service (Ready=Unknown)"
        assert lines[1] == f"kubectl taint node {lost} {v.TAINT_OUT_OF_SERVICE}=nodeshutdown:NoExecute"
        assert f"{first_pods[0]} on " in remaining_line
        assert " more" in remaining_line
        assert census.startswith("240 pods on 60 nodes: Ready=Unknown (1 node: ")
        for state in ("Ready=Unknown", "Ready=False", "Ready=Unknown, out-of-service", "Ready=True (57 nodes)"):
            assert state in census
        assert f"kubectl taint node {lost} " in reason
    kwargs_sizes = result.xcom("drained", key="trigger_kwargs_sizes")
    event_sizes = result.xcom("drained", key="event_sizes")
    assert len(kwargs_sizes) >= 1 + len(batches)  # the first deferral, and at least one more per batch
    assert max(kwargs_sizes) <= payloads.TRIGGER_KWARGS_LIMIT
    assert max(kwargs_sizes) - min(kwargs_sizes) <= 8  # a fingerprint, whatever remains (the deadline's digits vary)
    assert len(event_sizes) == len(kwargs_sizes)
    assert max(event_sizes) <= payloads.TRIGGER_EVENT_LIMIT
