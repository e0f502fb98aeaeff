"""The controller killed at each step of an admission and started again: A is raised exactly once per admission.

The steps are: the drain check, the write that raises A on the TrainJob, the apply that sets the check Ready.
A kill is a cancel of the controller where it stands (nothing of it runs afterwards, as after SIGKILL); the
request it was making is held at a gate on the lab's side and then dropped unapplied, so the kill lands
exactly before the step that request was. The restarted controller knows nothing but what is in the cluster.
"""

from __future__ import annotations

from airflow_provider_dispatch.dispatch import vocabulary as v

from .conftest import StartController
from .support import (
    ControllerTraffic,
    Gate,
    Steps,
    admission_of,
    admitted,
    check_entry,
    ready,
    workload_status_prefix,
)

TIMEOUT = 30.0


def applied_raises(traffic: ControllerTraffic, steps: Steps, name: str) -> int:
    return len([c for c in traffic.trainjob_raises(steps.namespace, name) if c.status == 200])


def test_killed_before_raising_a(steps: Steps, start_controller: StartController, traffic: ControllerTraffic) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    name = "tj-" + steps.namespace
    gate = Gate("PUT", v.TRAINJOB.path(steps.namespace, name))
    traffic.gates.append(gate)
    first = start_controller(check)
    steps.queued_trainjob(setup, steps.runtime(), name=name)
    assert gate.reached.wait(TIMEOUT), "the controller never tried to raise A"
    first.kill()
    first.open_gate(gate, forward=False)

    wl = steps.workload_name(name)
    assert admission_of(steps.trainjob(name)) is None
    assert not admitted(steps.workload(wl))
    assert check_entry(steps.workload(wl), check)["state"] == "Pending"

    start_controller(check)
    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert "as execution 1" in check_entry(done, check)["message"]
    assert admission_of(steps.trainjob(name)) == "1"
    assert applied_raises(traffic, steps, name) == 1
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in steps.running_pods(name)} == {"1"}


def test_killed_between_raising_a_and_setting_ready(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    gate = Gate("PATCH", workload_status_prefix(steps.namespace), "/status")
    traffic.gates.append(gate)
    first = start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    assert gate.reached.wait(TIMEOUT), "the controller never tried to set its check"
    first.kill()
    first.open_gate(gate, forward=False)

    wl = steps.workload_name(name)
    raised = steps.trainjob(name)
    assert admission_of(raised) == "1"  # A is raised, the check is not Ready: the crash window
    assert check_entry(steps.workload(wl), check)["state"] == "Pending"
    assert not admitted(steps.workload(wl))
    assert raised["spec"]["suspend"] is True

    start_controller(check)
    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert "as execution 1" in check_entry(done, check)["message"]
    assert admission_of(steps.trainjob(name)) == "1"
    assert applied_raises(traffic, steps, name) == 1  # the restarted controller found its key and raised nothing
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in steps.running_pods(name)} == {"1"}


def test_killed_after_ready_then_the_next_admission_raises_a_once_more(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    first = start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)
    steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    steps.running_pods(name)
    first.kill()

    start_controller(check)
    steps.scenario.advance(60)  # two resyncs of the restarted controller: the admitted Workload is left alone
    assert admission_of(steps.trainjob(name)) == "1"
    assert applied_raises(traffic, steps, name) == 1

    steps.kueue.preempt(steps.namespace, wl)  # a new admission: its pods go within their grace period
    steps.scenario.advance(40)
    done = steps.wait_workload(
        wl, lambda w: admitted(w) and "as execution 2" in str(check_entry(w, check).get("message"))
    )
    assert "as execution 2" in check_entry(done, check)["message"]
    assert applied_raises(traffic, steps, name) == 2  # exactly one raise per admission
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in steps.running_pods(name)} == {"2"}
    assert steps.scenario.overlaps(steps.namespace, name) == []
