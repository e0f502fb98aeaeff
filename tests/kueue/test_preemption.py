"""Kueue's own re-admission after a preemption while a node is frozen, with the controller and without it.

The upstream flaw (k8s-apis.md §4.6, anchors.md §0.1): Kueue evicts the preempted Workload, suspends the
TrainJob, and releases the quota as soon as no Job is *active*, while the pod on the frozen node still
terminates, for ever; it then reserves quota again and, with nothing to stop it, re-admits. With the controller
the check stays Pending naming that pod, the Workload holds its quota and is not admitted, until cessation is
proven (powered off and tainted out-of-service, PodGC deletes the pod); then A+1 and admission. Without it (the
control run) the overlap recorder shows two executions at once. The recorder tells executions apart by the
store's own count of admissions (lab/truth/overlap.py `AdmissionLedger`), not by dispatch's labels, so the same
assertion judges both runs.

Each test uses nodes of a zone of its own, 8 cpu each, and pods that take a whole node, so a new pod is never
placed beside the old one on the frozen machine.
"""

from __future__ import annotations

from airflow_provider_dispatch.dispatch import vocabulary as v

from .conftest import StartController
from .support import (
    Steps,
    admission_of,
    admitted,
    check_entry,
    condition,
    is_true,
    ready,
    waiting_message,
    waiting_only_for,
)


def test_preemption_beside_a_frozen_node_waits_for_cessation_and_never_overlaps(
    steps: Steps, start_controller: StartController
) -> None:
    for node in ("a", "b", "c"):
        steps.node(node)
    setup = steps.queues()
    [check] = setup.admission_checks
    start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)
    first = steps.running_pods(name)
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in first} == {"1"}
    stuck, frozen = first[0].metadata.name, first[0].spec.node_name
    steps.scenario.freeze(frozen)

    steps.kueue.preempt(steps.namespace, wl)
    held = steps.wait_workload(
        wl, lambda w: is_true(w, "QuotaReserved") and is_true(w, "Requeued") and waiting_message(check)(w)
    )
    assert condition(held, "Requeued")["reason"] == "Preempted"  # Kueue released and re-reserved by itself
    assert f"{stuck} on {frozen}" in check_entry(held, check)["message"]

    steps.scenario.advance(40)  # past the 30 s grace period: the healthy node's pod is gone, the frozen one's not
    waiting = steps.wait_workload(wl, waiting_only_for(check, stuck, frozen))
    assert is_true(waiting, "QuotaReserved")
    assert waiting["status"]["admission"]["clusterQueue"] == setup.cluster_queue  # the quota is held
    assert not admitted(waiting)
    trainjob = steps.trainjob(name)
    assert trainjob["spec"]["suspend"] is True
    assert admission_of(trainjob) == "1"
    assert steps.scenario.overlaps(steps.namespace, name) == []

    steps.scenario.power_off(frozen)  # the operator confirms the machine is off, then declares it
    steps.scenario.taint_out_of_service(frozen)
    steps.scenario.advance(60)  # the node goes NotReady; PodGC force-deletes its pods
    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert "as execution 2" in check_entry(done, check)["message"]
    second = steps.running_pods(name)
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in second} == {"2"}
    assert frozen not in {p.spec.node_name for p in second}

    assert steps.scenario.overlaps(steps.namespace, name) == []
    processes = steps.scenario.processes(steps.namespace, name)
    # the recorder counts admissions from the store, whoever made them; dispatch's A agrees with its count
    assert {(p.admission, p.execution.admission) for p in processes} == {(1, "1"), (2, "2")}
    old = [p for p in processes if p.admission == 1]
    new = [p for p in processes if p.admission == 2]
    assert old
    assert new
    assert all(p.stop is not None for p in old)
    assert max(p.stop for p in old if p.stop is not None) <= min(p.start for p in new)


def test_control_kueue_alone_readmits_beside_the_frozen_pod_and_two_executions_overlap(steps: Steps) -> None:
    for node in ("a", "b", "c"):
        steps.node(node)
    setup = steps.queues(check=False)
    name = steps.queued_trainjob(setup, steps.runtime(pod_replacement_policy=None))
    wl = steps.workload_name(name)
    first = steps.running_pods(name)
    frozen = first[0].spec.node_name
    steps.scenario.freeze(frozen)

    steps.kueue.preempt(steps.namespace, wl)
    steps.wait_workload(wl, lambda w: admitted(w) and is_true(w, "Requeued"))
    second = steps.running_pods(name)
    assert {p.metadata.uid for p in second}.isdisjoint({p.metadata.uid for p in first})

    overlaps = steps.scenario.overlaps(steps.namespace, name)
    assert overlaps, "Kueue alone re-admitted, yet the recorder saw no two executions at once"
    assert {(o.first.admission, o.second.admission) for o in overlaps} == {(1, 2)}
    assert frozen in {record.node for o in overlaps for record in (o.first, o.second)}
