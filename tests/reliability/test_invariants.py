"""The reliability checks themselves, on hand-made records: each must hold where the rule held and fail where it
was broken, or a passing model run would prove nothing (invariants.py)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import ConflictError, UnreachableError
from airflow_provider_dispatch_lab.truth.overlap import (
    COMPLETION_INDEX,
    JOB_INDEX,
    REPLICATED_JOB_NAME,
    RESTART_ATTEMPT,
    PodIdentity,
    ProcessRecord,
)

from . import invariants
from .callers import Outcome
from .harness import Call, PodCreated, TrainJobWrite

NS, NAME = "ns", "ft-7"
TJ = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs/{NAME}"
PODS = f"/api/v1/namespaces/{NS}/pods"
SEL_DISPATCH = f"{v.LABEL_JOB_ID}=ft-7,{v.LABEL_SUBMISSION}=1"
SEL_JOBSET = f"{v.LABEL_JOBSET_NAME}={NAME}"


def call(serial: int, method: str, path: str, status: int | str = 200, **extra: Any) -> Call:
    query = extra.pop("query", {})
    resource = extra.pop("resource", "")
    if not resource:
        resource = "pods" if path == PODS else v.TRAINJOB.resource if "trainjobs" in path else ""
    verb = {"GET": "list" if path == PODS else "get", "PUT": "update", "POST": "create"}[method]
    name = extra.pop("name", NAME if "trainjobs" in path else None)
    return Call(serial, "caller-0", method, path, query, verb, resource, name, status, **extra)


def get_trainjob(serial: int, rv: str = "10", status: int | str = 200) -> Call:
    return call(serial, "GET", TJ, status, answer_rv=rv)


def get_jobset(serial: int, status: int = 404) -> Call:
    return call(
        serial,
        "GET",
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets/{NAME}",
        status,
        resource=v.JOBSET.resource,
    )


def get_runtime(serial: int) -> Call:
    return call(
        serial,
        "GET",
        "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/rt",
        resource=v.CLUSTER_TRAINING_RUNTIME.resource,
        name="rt",
    )


def page(
    serial: int,
    selector: str | None,
    *,
    rv: str = "20",
    more: bool = False,
    cont: bool = False,
    pinned: str | None = None,
    status: int | str = 200,
) -> Call:
    query: dict[str, str] = {"limit": "1"}
    if selector:
        query["labelSelector"] = selector
    if pinned:
        query |= {"resourceVersion": pinned, "resourceVersionMatch": "Exact"}
    if cont:
        query = {"limit": "1", "continue": "token", **({"labelSelector": selector} if selector else {})}
    return call(serial, "GET", PODS, status, query=query, answer_rv=rv, answer_continue="next" if more else None)


def put(serial: int, rv: str = "10", status: int | str = 200) -> Call:
    return call(serial, "PUT", TJ, status, body_rv=rv)


HEAD = [get_trainjob(0), get_jobset(1), get_runtime(2)]
PINNED = [page(3, SEL_DISPATCH, more=True), page(4, SEL_DISPATCH, cont=True), page(5, SEL_JOBSET, pinned="20")]
FULL = [page(3, None, more=True), page(4, None, cont=True)]


@pytest.mark.parametrize(
    ("calls", "problem"),
    [
        pytest.param([*HEAD, *PINNED, put(9)], None, id="pinned read, both selections, every page"),
        pytest.param([*HEAD, *FULL, put(9)], None, id="full read, every page"),
        pytest.param([*HEAD, page(3, SEL_DISPATCH, status=410), *FULL, put(9)], None, id="410, then the full list"),
        pytest.param(
            [
                *HEAD,
                page(3, None, more=True),
                page(4, None, cont=True, status="dropped"),
                page(4, None, cont=True),
                put(9),
            ],
            None,
            id="a dropped page the client sent again",
        ),
        pytest.param([*HEAD, put(9)], "no complete read of the pods", id="no pod read"),
        pytest.param([*HEAD, page(3, None, more=True), put(9)], "no complete read", id="the last page is missing"),
        pytest.param(
            [*HEAD, page(3, SEL_DISPATCH), page(5, SEL_JOBSET, pinned="19"), put(9)],
            "no complete read",
            id="the second selection at another resourceVersion",
        ),
        pytest.param([*HEAD, page(3, SEL_DISPATCH), put(9)], "no complete read", id="one selection only"),
        pytest.param(
            [*HEAD, page(3, SEL_DISPATCH), page(5, "app=x", pinned="20"), put(9)],
            "no complete read",
            id="a selection that is not the jobset-name one",
        ),
        pytest.param(
            [get_trainjob(0, rv="9"), get_jobset(1), get_runtime(2), *FULL, put(9, rv="10")],
            "no successful read of TrainJob",
            id="the write is conditional on a version that was not checked",
        ),
        pytest.param([get_trainjob(0), get_runtime(2), *FULL, put(9)], "JobSet was not read", id="no JobSet read"),
        pytest.param([get_trainjob(0), get_jobset(1), *FULL, put(9)], "runtime was not read", id="no runtime read"),
        pytest.param(
            [*HEAD, *FULL, call(6, "GET", "/api/v1/nodes/n1", 500, resource="nodes", name="n1"), put(9)],
            "failed requests after the pod read",
            id="a node read that failed",
        ),
        pytest.param(
            [*HEAD, *FULL, call(6, "GET", "/api/v1/nodes/n1", 404, resource="nodes", name="n1"), put(9)],
            None,
            id="a node that is gone",
        ),
    ],
)
def test_full_check(calls: list[Call], problem: str | None) -> None:
    found = invariants.full_check_problems(calls, calls[-1], NAME)
    if problem is None:
        assert found == []
    else:
        assert any(problem in f for f in found), found


def write(
    revision: int,
    user: str,
    old: str | None,
    new: str | None,
    s_old: bool | None,
    s_new: bool | None,
    kind: str = "MODIFIED",
    serial: int = 9,
) -> TrainJobWrite:
    return TrainJobWrite(revision, kind, NS, NAME, "uid-1", user, serial, old, new, s_old, s_new, 0.0)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (write(1, "caller-0", None, None, None, True, kind="ADDED"), None),
        (write(1, "caller-0", None, "1", None, True, kind="ADDED"), "a new TrainJob carries A"),
        (write(2, "caller-0", None, "1", True, False), None),
        (write(2, "caller-0", "4", "5", True, False), None),
        (write(2, "caller-0", "4", "4", True, False), "raise A by exactly one"),
        (write(2, "caller-0", "4", "6", True, False), "raise A by exactly one"),
        (write(2, "caller-0", "4", "4", False, True), None),
        (write(2, "caller-0", "4", "5", False, False), "A changed in a write that did not admit"),
        (write(2, "lab-admin", "4", "4", True, True), None),
        (write(2, "lab-admin", "4", "4", True, False), "lifted by someone other than dispatch"),
        # a third party resumes what it suspended (the model lets it only once nothing runs): not an admission
        (write(2, "hostile", "4", "4", True, False), None),
        (write(2, "hostile", "4", "5", True, False), "lifted by someone other than dispatch"),
        (write(2, "hostile", "4", "3", True, True), "A changed"),
        (write(2, "dispatch-admission-controller", "4", "5", True, True), "A changed in a write that did not"),
    ],
)
def test_admission_number(change: TrainJobWrite, problem: str | None) -> None:
    found = invariants.admission_number_violations([change])
    assert (found == []) if problem is None else any(problem in f for f in found), found


QUEUED = [(NS, NAME)]


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        # the admission check controller raises A while suspended, then Kueue unsuspends
        (
            [
                write(2, "dispatch-admission-controller", None, "1", True, True),
                write(3, "lab-admin", "1", "1", True, False),
            ],
            None,
        ),
        ([write(2, "lab-admin", None, None, True, False)], "without a raise of A"),
        (
            [
                write(2, "dispatch-admission-controller", None, "1", True, True),
                write(3, "lab-admin", "1", "1", True, False),
                write(4, "lab-admin", "1", "1", False, True),
                write(5, "lab-admin", "1", "1", True, False),
            ],
            "without a raise of A",
        ),
        ([write(2, "dispatch-admission-controller", "1", "3", True, True)], "A changed"),
        ([write(2, "dispatch-admission-controller", "1", "2", False, False)], "A changed"),
        ([write(2, "caller-0", "1", "2", True, False)], "unsuspended by someone other than Kueue"),
    ],
)
def test_admission_number_in_kueue_mode(changes: list[TrainJobWrite], problem: str | None) -> None:
    found = invariants.admission_number_violations(changes, kueue=QUEUED)
    assert (found == []) if problem is None else any(problem in f for f in found), found


def test_only_the_new_writes_are_reported_but_all_give_the_history() -> None:
    changes = [write(2, "lab-admin", None, None, True, False), write(3, "caller-0", "0", "1", True, False)]
    assert len(invariants.admission_number_violations(changes)) == 1
    assert invariants.admission_number_violations(changes, start=1) == []


def process(
    serial: int,
    pod: str,
    uid: str,
    start: float,
    stop: float | None,
    admission: str,
    *,
    rank: tuple[str, str, str] = ("node", "0", "0"),
    attempt: str = "0",
) -> ProcessRecord:
    labels = {
        v.LABEL_JOBSET_NAME: NAME,
        v.LABEL_JOB_ID: "ft-7",
        v.LABEL_SUBMISSION: "1",
        v.POD_LABEL_ADMISSION: admission,
        REPLICATED_JOB_NAME: rank[0],
        JOB_INDEX: rank[1],
        COMPLETION_INDEX: rank[2],
        RESTART_ATTEMPT: attempt,
    }
    return ProcessRecord(serial, NS, pod, uid, "n1", labels, start, stop)


ADMISSIONS = [write(10, "caller-0", None, "1", True, False), write(20, "caller-0", "1", "2", True, False)]
PODS_CREATED = {
    "u1": PodCreated(11, NS, "p1", "u1", NAME),
    "u2": PodCreated(21, NS, "p2", "u2", NAME),
    "u0": PodCreated(5, NS, "p0", "u0", NAME),
}


@pytest.mark.parametrize(
    ("processes", "overlaps"),
    [
        ([process(0, "p1", "u1", 0, 10, "1"), process(1, "p2", "u2", 10, None, "2")], 0),
        ([process(0, "p1", "u1", 0, 11, "1"), process(1, "p2", "u2", 10, None, "2")], 1),
        # forged labels: both carry A=999; the creation order still tells the executions apart
        ([process(0, "p1", "u1", 0, 11, "999"), process(1, "p2", "u2", 10, None, "999")], 1),
        # two processes of one pod (a container restart) are one execution
        ([process(0, "p1", "u1", 0, 5, "1"), process(1, "p1", "u1", 4, None, "1")], 0),
    ],
)
def test_overlaps_by_admission(processes: list[ProcessRecord], overlaps: int) -> None:
    attributed = invariants.attribute(processes, PODS_CREATED, ADMISSIONS)
    assert len(invariants.overlaps_by_admission(attributed)) == overlaps


@pytest.mark.parametrize(
    ("processes", "found"),
    [
        # one execution, two pods of one rank at once: upstream's H1 (a replacement beside an evicted pod)
        ([process(0, "p1", "u1", 0, 20, "1"), process(1, "p1b", "u1b", 10, None, "1")], 1),
        ([process(0, "p1", "u1", 0, 10, "1"), process(1, "p1b", "u1b", 10, None, "1")], 0),
        # two ranks at once are the job itself
        ([process(0, "p1", "u1", 0, 20, "1"), process(1, "p1b", "u1b", 10, None, "1", rank=("node", "0", "1"))], 0),
        # a container restart is one pod
        ([process(0, "p1", "u1", 0, 5, "1"), process(1, "p1", "u1", 4, None, "1")], 0),
        # across executions too
        ([process(0, "p1", "u1", 0, 30, "1"), process(1, "p2", "u2", 25, None, "2")], 1),
    ],
)
def test_rank_overlaps(processes: list[ProcessRecord], found: int) -> None:
    created = {**PODS_CREATED, "u1b": PodCreated(12, NS, "p1b", "u1b", NAME)}
    attributed = invariants.attribute(processes, created, ADMISSIONS)
    assert len(invariants.rank_overlaps(attributed)) == found


@pytest.mark.parametrize(
    ("second", "found"),
    [
        (process(1, "p1b", "u1b", 10, None, "1", rank=("launcher", "0", "0"), attempt="1"), 1),
        (process(1, "p1b", "u1b", 20, None, "1", rank=("launcher", "0", "0"), attempt="1"), 0),
        (process(1, "p1b", "u1b", 10, None, "1", rank=("launcher", "0", "0"), attempt="0"), 0),
    ],
)
def test_attempt_overlaps(second: ProcessRecord, found: int) -> None:
    """Hazard H2: one execution runs two JobSet restart attempts at once (different ranks)."""
    created = {**PODS_CREATED, "u1b": PodCreated(12, NS, "p1b", "u1b", NAME)}
    attributed = invariants.attribute([process(0, "p1", "u1", 0, 20, "1"), second], created, ADMISSIONS)
    assert len(invariants.attempt_overlaps(attributed)) == found


def _at(revision: int, user: str, old: str | None, new: str, lab_time: float) -> TrainJobWrite:
    return TrainJobWrite(revision, "MODIFIED", NS, NAME, "uid-1", user, 9, old, new, True, False, lab_time)


@pytest.mark.parametrize(
    ("stop", "found"),
    [(None, 1), (25.0, 1), (20.0, 0), (15.0, 0)],
    ids=["still running", "stops after the admission", "stops at the admission", "stopped before"],
)
def test_an_admission_while_an_earlier_execution_runs_is_reported(stop: float | None, found: int) -> None:
    """Even if no process of the new execution ever starts beside it (a Job with podReplacementPolicy Failed
    keeps the index until the old pod is gone): the admission itself came too early."""
    admissions = [_at(10, "caller-0", None, "1", 0.0), _at(20, "caller-0", "1", "2", 20.0)]
    attributed = invariants.attribute([process(0, "p1", "u1", 1.0, stop, "1")], PODS_CREATED, admissions)
    assert len(invariants.early_admissions(attributed, admissions)) == found


def test_labels_are_judged_as_the_pod_was_created() -> None:
    """A person removed the pod's labels after the process started (to take it out of its controller): the
    rank and the admission label are the ones it was created with, so the edit neither hides nor invents."""
    relabelled = process(0, "p2", "u2", 10, None, "2")
    relabelled.labels = {}
    identity = PodIdentity.of(
        {v.LABEL_JOBSET_NAME: NAME, v.POD_LABEL_ADMISSION: "2"}, {REPLICATED_JOB_NAME: "node", JOB_INDEX: "0"}
    )
    created = {"u2": PodCreated(21, NS, "p2", "u2", NAME, identity)}
    attributed = invariants.attribute([relabelled], created, ADMISSIONS)
    assert attributed[0].rank == (NAME, "node", "0", "")
    assert invariants.label_mismatches(attributed, forged=()) == []


def test_pods_created_before_any_admission_and_forged_labels_are_reported() -> None:
    attributed = invariants.attribute(
        [process(0, "p0", "u0", 0, None, "1"), process(1, "p2", "u2", 0, None, "7")], PODS_CREATED, ADMISSIONS
    )
    assert len(invariants.unadmitted_pods(attributed)) == 1
    assert len(invariants.label_mismatches(attributed, forged=())) == 1  # p2 says A=7, was created under A=2
    assert invariants.label_mismatches(attributed, forged=[NAME]) == []


def outcome(result: object = None, error: BaseException | None = None, calls: list[Call] | None = None) -> Outcome:
    made = Outcome("caller-0", "sync", "release", f"{NS}/{NAME}", result, error)
    made.calls = calls or []
    return made


ADMITTING = write(30, "caller-0", "2", "3", True, False, serial=7)


@pytest.mark.parametrize(
    ("told", "problem"),
    [
        (outcome(Execution("ft-7", "1", 3), calls=[put(7)]), None),
        (outcome(Execution("ft-7", "1", 2), calls=[put(7)]), "admitted A=3 but returned"),
        (
            outcome(error=UnreachableError("lost; may or may not have been applied"), calls=[put(7, status="dropped")]),
            None,
        ),
        (outcome(error=ConflictError("409"), calls=[put(7, status="dropped")]), None),
        (outcome(error=UnreachableError("500"), calls=[put(7, status=200)]), "told it failed"),
        (outcome(error=UnreachableError("timed out; may or may not have been applied"), calls=[put(7)]), None),
        (outcome(error=ConflictError("409"), calls=[put(7, status=200)]), "told it failed"),
        (outcome(error=KeyError("x"), calls=[]), "outside DESIGN"),
        (outcome(Execution("ft-7", "1", 9), calls=[]), "never admitted"),
    ],
)
def test_what_callers_are_told(told: Outcome, problem: str | None) -> None:
    found = invariants.outcome_violations(told, [*ADMISSIONS, ADMITTING])
    assert (found == []) if problem is None else any(problem in f for f in found), found
