"""The controller end to end in the lab: a queued TrainJob is checked, A is raised once, the check is set Ready,
and Kueue admits it; TrainJobs dispatch does not manage; a refusal; the AdmissionCheck's Active condition.

Kueue's side is the lab's Kueue (lab/simulated/kueue/), Trainer, JobSet, Jobs, scheduler and kubelets the
lab's cluster; the expected behaviour is DESIGN §6 and k8s-apis.md §4.4-§4.5.
"""

from __future__ import annotations

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.kueue.controller import FIELD_MANAGER
from airflow_provider_dispatch.kueue.workloads import admission_key

from .conftest import StartController
from .support import (
    ControllerTraffic,
    Steps,
    admission_of,
    admitted,
    check_entry,
    condition,
    is_true,
    pending_with,
    ready,
)


def test_a_queued_trainjob_gets_a_raised_once_then_ready_then_admitted(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)

    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert check_entry(done, check)["message"] == (
        f"no pod of the previous execution remains: TrainJob {steps.namespace}/{name} is admitted as execution 1 "
        f"(job id {name}, submission 1)"
    )
    trainjob = steps.trainjob(name)
    assert admission_of(trainjob) == "1"
    assert trainjob["metadata"]["annotations"][v.ANNOTATION_ADMISSION_KEY] == admission_key(done)
    pods = steps.running_pods(name)
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in pods} == {"1"}
    assert {p.metadata.labels[v.LABEL_JOB_ID] for p in pods} == {name}

    raises = [c for c in traffic.trainjob_writes(steps.namespace, name) if c.status == 200]
    assert [c.method for c in raises] == ["PUT"]  # A raised exactly once
    status_path = v.WORKLOAD.path(steps.namespace, wl) + "/status"
    status_writes = [c for c in traffic.calls if c.path == status_path]
    # a 409 (the lab's Kueue wrote status between the controller's read and its write) writes nothing and is
    # retried on the new state; anything else failing, or a second successful write, is a fault
    assert {c.status for c in status_writes} <= {200, 409}
    entry_writes = [c for c in status_writes if c.status == 200]
    assert len(entry_writes) == 1
    assert entry_writes[0].method == "PATCH"
    assert entry_writes[0].query == {"fieldManager": FIELD_MANAGER, "force": "true"}
    # A first, then Ready: Kueue cannot admit an execution whose A is not on the TrainJob yet
    assert traffic.calls.index(raises[0]) < traffic.calls.index(entry_writes[0])
    assert traffic.forbidden() == []


def test_a_trainjob_dispatch_does_not_manage_is_let_through_with_the_reason(
    steps: Steps, start_controller: StartController, traffic: ControllerTraffic
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    start_controller(check)
    from airflow_provider_dispatch_lab.scenario import manifests

    name = "plain-" + steps.namespace
    body = manifests.trainjob(name, queue=setup.local_queue, runtime=steps.runtime(), num_nodes=2, suspend=False)
    for key in (v.LABEL_JOB_ID, v.LABEL_SUBMISSION):
        del body["metadata"]["labels"][key]
    steps.create_trainjob(body)
    wl = steps.workload_name(name)

    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert check_entry(done, check)["message"].startswith(
        f"TrainJob {steps.namespace}/{name} is not a dispatch object (it has neither {v.LABEL_JOB_ID} nor "
    )
    assert v.ANNOTATION_ADMISSION not in (steps.trainjob(name)["metadata"].get("annotations") or {})
    assert traffic.trainjob_writes(steps.namespace, name) == []
    steps.running_pods(name)


def test_a_dispatch_trainjob_with_a_broken_annotation_waits_pending_until_it_is_fixed(
    steps: Steps, start_controller: StartController
) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    start_controller(check)
    name = steps.queued_trainjob(setup, steps.runtime(), annotations={v.ANNOTATION_ADMISSION: "seven"})
    wl = steps.workload_name(name)

    refused = steps.wait_workload(wl, pending_with(check, f"dispatch cannot admit TrainJob {steps.namespace}/{name}"))
    assert "seven" in check_entry(refused, check)["message"]
    assert is_true(refused, "QuotaReserved")  # Pending, not Rejected: the Workload keeps its place and quota
    assert refused["spec"]["active"] is True
    assert not admitted(refused)
    assert steps.trainjob(name)["spec"]["suspend"] is True

    steps.update_trainjob_metadata(name, {v.ANNOTATION_ADMISSION: "3"})
    steps.scenario.advance(30)  # the refusal's backoff (at most 20 lab seconds here) passes
    done = steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
    assert "as execution 4" in check_entry(done, check)["message"]
    assert {p.metadata.labels[v.POD_LABEL_ADMISSION] for p in steps.running_pods(name)} == {"4"}


def test_the_admission_check_is_kept_active(steps: Steps, start_controller: StartController) -> None:
    setup = steps.queues()
    [check] = setup.admission_checks
    assert condition(steps.admission_check(check), "Active") is None  # nobody made it Active yet
    start_controller(check)

    active = steps.wait_admission_check(check, lambda ac: is_true(ac, "Active"))
    assert condition(active, "Active")["reason"] == "Active"
    managers = {m["manager"] for m in active["metadata"]["managedFields"] if m.get("subresource") == "status"}
    assert FIELD_MANAGER in managers

    steps.kueue.set_check_active(check, active=False, message="flipped by someone else")
    restored = steps.wait_admission_check(check, lambda ac: is_true(ac, "Active"))
    assert condition(restored, "Active")["message"] != "flipped by someone else"
    steps.wait_cluster_queue(setup.cluster_queue, lambda cq: is_true(cq, "Active"))
