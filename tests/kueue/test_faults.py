"""API faults on the controller's own requests (seeded, `lab.apiserver.faults`): no admission without a complete check.

Each fault hits only the controller's identity, never Kueue's or the cluster's controllers: what is tested is
that a check the controller could not complete (the pod list failed, the write that raises A failed, the apply
of its entry failed, an answer was lost) never lets Kueue admit, never raises A twice, and that the controller
gets there once the API answers again.
"""

from __future__ import annotations

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch_lab.apiserver.faults import FaultRule

from .conftest import StartController
from .support import (
    ControllerTraffic,
    LoseAnswer,
    Steps,
    admission_of,
    admitted,
    check_entry,
    ready,
    waiting_only_for,
)


def applied_raises(traffic: ControllerTraffic, steps: Steps, name: str) -> list[object]:
    return [c.status for c in traffic.trainjob_writes(steps.namespace, name) if c.status != 409]


def test_failing_pod_lists_never_let_the_check_pass(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    injector = traffic.faults(FaultRule(kind="500", verbs=frozenset({"list"}), resources=frozenset({"pods"})))
    start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)
    steps.scenario.advance(30)  # several attempts, each refused by the failing list

    assert injector.log, "the controller never listed pods"
    still = steps.workload(wl)
    assert check_entry(still, check)["state"] == "Pending"
    assert not admitted(still)
    assert admission_of(steps.trainjob(name)) is None
    assert traffic.trainjob_writes(steps.namespace, name) == []

    steps.lab.call(lambda: setattr(traffic, "injector", None))
    steps.scenario.advance(60)  # the backoff after the last failure passes
    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert "as execution 1" in check_entry(done, check)["message"]


@pytest.mark.parametrize(
    ("kind", "verb", "resource", "subresource"),
    [
        ("500", "update", "trainjobs", None),
        ("429", "update", "trainjobs", None),
        ("409", "update", "trainjobs", None),
        ("500", "patch", "workloads", "status"),
        ("409", "patch", "workloads", "status"),
        ("drop", "patch", "workloads", "status"),
    ],
)
def test_failed_writes_are_retried_and_a_is_raised_once(
    steps: Steps,
    start_controller: StartController,
    traffic: ControllerTraffic,
    kind: str,
    verb: str,
    resource: str,
    subresource: str | None,
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    rule = FaultRule(
        kind=kind,  # type: ignore[arg-type]
        verbs=frozenset({verb}),
        resources=frozenset({resource}),
        subresource=subresource,
        namespace=steps.namespace,
        count=3,
    )
    injector = traffic.faults(rule)
    start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)

    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w), timeout=60)
    assert rule.fired == 3, injector.log
    assert "as execution 1" in check_entry(done, check)["message"]
    assert admission_of(steps.trainjob(name)) == "1"
    assert [c.status for c in traffic.trainjob_writes(steps.namespace, name) if c.status == 200] == [200]
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in steps.running_pods(name)} == {"1"}


def test_a_lost_answer_to_the_raise_of_a_is_not_raised_again(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    name = "tj-" + steps.namespace
    loss = LoseAnswer("PUT", v.TRAINJOB.path(steps.namespace, name))
    traffic.losses.append(loss)
    start_controller(check)
    steps.queued_trainjob(setup, steps.runtime(), name=name)
    wl = steps.workload_name(name)

    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert loss.applied.is_set()
    assert "as execution 1" in check_entry(done, check)["message"]
    assert admission_of(steps.trainjob(name)) == "1"
    writes = [c.status for c in traffic.trainjob_writes(steps.namespace, name)]
    assert writes.count("ConnectionResetError") == 1, writes  # applied once, its answer lost
    assert writes.count(200) == 0, writes  # and never sent again: the retry found the key on the TrainJob


def test_a_flaky_api_through_a_preemption_beside_a_frozen_node(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    for node in ("a", "b", "c"):
        steps.node(node)
    setup = steps.queues()
    [check] = setup.admission_checks
    start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)
    first = steps.running_pods(name)
    stuck, frozen = first[0].metadata.name, first[0].spec.node_name
    steps.scenario.freeze(frozen)

    flaky = [
        FaultRule(kind=kind, rate=0.08, namespace=steps.namespace)  # type: ignore[arg-type]
        for kind in ("500", "429", "drop")
    ]
    steps.lab.call(lambda: traffic.faults(*flaky, seed=11))
    steps.kueue.preempt(steps.namespace, wl)
    steps.scenario.advance(40)
    waiting = steps.wait_workload(wl, waiting_only_for(check, stuck, frozen))
    assert not admitted(waiting)

    steps.scenario.power_off(frozen)
    steps.scenario.taint_out_of_service(frozen)
    steps.scenario.advance(120)
    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert "as execution 2" in check_entry(done, check)["message"]
    assert sum(rule.fired for rule in flaky) > 0
    # one raise per admission: the faults' drops never reach the server, so every applied raise answered 200;
    # the other write is the record of execution 1's pods, written once Kueue had suspended it
    assert [c.status for c in traffic.trainjob_raises(steps.namespace, name)].count(200) == 2
    assert [c.status for c in traffic.trainjob_writes(steps.namespace, name)].count(200) == 3
    assert admission_of(steps.trainjob(name)) == "2"
    steps.running_pods(name)
    assert steps.scenario.overlaps(steps.namespace, name) == []
