"""Driving the sans-I/O programs with a dict-backed fake API (support.FakeApi).

These tests see exactly what a program can see: the requests it yields and the answers it receives. The
adapter tests later run the same programs with the real clients against the lab.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import fencing, programs
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, State, drain_report
from airflow_provider_dispatch.dispatch.errors import (
    AlreadyExistsError,
    ConflictError,
    FinishedError,
    ForbiddenError,
    InvalidNameError,
    NotFoundError,
    NotManagedError,
    PodsRemainError,
    SpecRejectedError,
    SuspensionNotObservedError,
    UnreachableError,
)
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods, format_time
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS, RETURN_MARGIN_SECONDS
from airflow_provider_dispatch.dispatch.programs import (
    ApiFailure,
    CreateObject,
    GetNode,
    GetObject,
    ListObjects,
    ReplaceObject,
    Request,
    Response,
    drive,
    drive_async,
    queries,
)
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.vocabulary import parse_time

from .support import (
    NAME,
    NOW,
    NS,
    OUT_OF_SERVICE,
    FakeApi,
    assert_only_the_record_grew,
    condition,
    jobset,
    node,
    patch,
    pod,
    runtime,
    standard_api,
    status,
    trainjob,
    workload,
)

REF = f"{NS}/{NAME}"
TERMINATING = "2026-08-21T10:00:30Z"


def live(api: FakeApi) -> dict[str, Any]:
    found = api.get(v.TRAINJOB, NS, NAME)
    assert found is not None
    return found


def pod_lists(api: FakeApi) -> list[ListObjects]:
    return [r for r in api.requests if isinstance(r, ListObjects) and r.coords is v.POD]


def fail_when(
    predicate: Callable[[Request], bool], answer: ApiFailure, times: int = 1_000_000
) -> Callable[[Request], Response | None]:
    remaining = [times]

    def intercept(request: Request) -> Response | None:
        if remaining[0] > 0 and predicate(request):
            remaining[0] -= 1
            return answer
        return None

    return intercept


# --- release ------------------------------------------------------------------------------------------------


def test_release_admits_in_one_conditional_write() -> None:
    api = standard_api()
    api.pods.append(pod("old-finished", phase="Succeeded"))
    rv_read = live(api)["metadata"]["resourceVersion"]
    execution = drive(programs.release(REF), api.respond)
    assert execution == Execution("job-1", "s1", 1)
    (write,) = api.writes()
    assert isinstance(write, ReplaceObject)
    assert write.coords is v.TRAINJOB
    assert write.body["metadata"]["resourceVersion"] == rv_read
    assert write.body["spec"]["suspend"] is False
    stored = live(api)
    assert stored["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "1"
    assert [p["manager"] for p in stored["spec"]["runtimePatches"]] == [v.RUNTIME_PATCH_MANAGER]


def test_release_request_sequence_reads_before_the_one_write() -> None:
    api = standard_api()
    drive(programs.release(REF), api.respond)
    kinds = [(type(r).__name__, r.coords.kind) for r in api.requests]
    # the TrainJob; the runtime (policy); the hold's evidence (JobSet, its Jobs: none in this spec, the Jobs a
    # deleted namesake left, the API server's time); both pod selections; the pod fence, after the pods (fence.py:
    # not installed here); the API server's time again (admitted-at); the one write
    assert kinds == [
        ("GetObject", "TrainJob"),
        ("GetObject", "ClusterTrainingRuntime"),
        ("GetObject", "JobSet"),
        ("ListObjects", "Job"),
        ("ServerTime", "Version"),
        ("ListObjects", "Pod"),
        ("ListObjects", "Pod"),
        ("GetObject", "ValidatingAdmissionPolicy"),
        ("GetObject", "ValidatingAdmissionPolicyBinding"),
        ("ServerTime", "Version"),
        ("ReplaceObject", "TrainJob"),
    ]
    first, second = pod_lists(api)
    assert first.resource_version is None
    assert first.resource_version_match is None
    assert first.label_selector == "dispatch.phpboyscout.uk/job-id=job-1,dispatch.phpboyscout.uk/submission=s1"
    assert second.label_selector == "jobset.sigs.k8s.io/jobset-name=ft-7"
    assert second.resource_version_match == "Exact"
    assert second.resource_version == str(api.rv - 1)  # the first list's RV; the write bumped it once


def test_release_of_a_running_object_returns_its_execution_and_writes_nothing() -> None:
    api = standard_api(suspend=False, admission="3", suspended_condition="False")
    api.pods.append(pod("ft-7-node-0-0"))
    assert drive(programs.release(REF), api.respond) == Execution("job-1", "s1", 3)
    assert api.writes() == []
    assert len(api.requests) == 1


def test_release_twice_admits_once() -> None:
    api = standard_api()
    first = drive(programs.release(REF), api.respond)
    second = drive(programs.release(REF), api.respond)
    assert first == second == Execution("job-1", "s1", 1)
    assert len(api.writes()) == 1


def test_two_concurrent_releases_cannot_both_admit() -> None:
    """Airflow may run two tries at once (anchors §0.6): the conditional write makes a duplicate harmless."""
    api = standard_api()
    one, two = programs.release(REF), programs.release(REF)
    request_one, request_two = next(one), next(two)
    # interleave: both read and check the same state before either writes
    while not isinstance(request_one, ReplaceObject) or not isinstance(request_two, ReplaceObject):
        if not isinstance(request_one, ReplaceObject):
            request_one = one.send(api.respond(request_one))
        if not isinstance(request_two, ReplaceObject):
            request_two = two.send(api.respond(request_two))
    with pytest.raises(StopIteration) as done:
        one.send(api.respond(request_one))
    assert done.value.value == Execution("job-1", "s1", 1)
    # The loser's write gets 409; it reads the object again, finds it running, and returns that execution
    # (the one the winner admitted): one admission, both callers told the same identity.
    reread = two.send(api.respond(request_two))
    assert isinstance(reread, GetObject)
    with pytest.raises(StopIteration) as loser:
        two.send(api.respond(reread))
    assert loser.value.value == Execution("job-1", "s1", 1)
    assert live(api)["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "1"


def test_a_conflict_on_a_still_held_object_stays_retryable() -> None:
    """409 because someone else changed the held object (not an admission): the check must run again."""
    api = standard_api()
    program = programs.release(REF)
    request = next(program)
    while not isinstance(request, ReplaceObject):
        request = program.send(api.respond(request))
    live(api)["metadata"]["labels"]["example.com/touched"] = "yes"  # a concurrent write, still held
    live(api)["metadata"]["resourceVersion"] = str(int(live(api)["metadata"]["resourceVersion"]) + 1)
    reread = program.send(api.respond(request))
    assert isinstance(reread, GetObject)
    with pytest.raises(ConflictError) as conflict:
        program.send(api.respond(reread))
    assert conflict.value.retryable
    assert v.ANNOTATION_ADMISSION not in (live(api)["metadata"].get("annotations") or {})


@pytest.mark.parametrize(
    ("pods", "nodes", "forbidden", "states"),
    [
        ([pod("a", node="n1", deletion=TERMINATING)], {"n1": node("n1")}, False, ["Ready=True"]),
        (
            [pod("a", node="n2", deletion=TERMINATING)],
            {"n2": node("n2", ready="Unknown")},
            False,
            ["Ready=Unknown"],
        ),
        ([pod("a", node="n3", deletion=TERMINATING)], {}, False, ["gone, not yet proof"]),
        (
            [pod("a", node="n2", deletion=TERMINATING)],
            {"n2": node("n2", ready="False", taints=[OUT_OF_SERVICE])},
            False,
            ["Ready=False, out-of-service"],
        ),
        ([pod("a", node="n1"), pod("b", node="n2")], {}, True, ["not readable", "not readable"]),
        ([pod("a", node=None, phase="Pending")], {}, False, ["not scheduled"]),
        (
            [pod("renamed", job_id=None, submission=None, deletion=TERMINATING)],
            {"n1": node("n1")},
            False,
            ["Ready=True"],
        ),
        (
            [pod("other-jobset", jobset_name="x", deletion=TERMINATING)],
            {"n1": node("n1")},
            False,
            ["Ready=True"],
        ),
    ],
)
def test_release_refuses_while_pods_remain(
    pods: list[dict[str, Any]], nodes: dict[str, dict[str, Any]], forbidden: bool, states: list[str]
) -> None:
    api = standard_api()
    api.nodes = dict(nodes)
    api.nodes_forbidden = forbidden
    api.pods.extend(pods)
    before = copy.deepcopy(live(api))
    with pytest.raises(PodsRemainError) as caught:
        drive(programs.release(REF), api.respond)
    assert [p.node.label for p in caught.value.remaining] == states
    assert [p.name for p in caught.value.remaining] == [v.name_of(p) for p in pods]
    # the record grew by the pods the check listed (fencing.grown), and nothing else was written
    assert_only_the_record_grew(api, before)
    grown = fencing.recorded(live(api), 0, REF)
    assert grown is not None
    assert set(grown.names) >= {v.name_of(p) for p in pods}
    message = str(caught.value)
    assert "TrainJob ml/ft-7 is not admitted" in message
    assert "The hold stays in force" in message
    if forbidden:
        assert len([r for r in api.requests if isinstance(r, GetNode)]) == 1  # one 403 is enough


def test_kueue_failed_pod_blocks_until_its_node_ceased() -> None:
    kueue_failed = pod("a", node="n2", phase="Failed", conditions=[condition(v.CONDITION_KUEUE_FAILURE_RECOVERY)])
    api = standard_api()
    api.pods.append(kueue_failed)
    api.nodes["n2"] = node("n2", ready="Unknown")
    with pytest.raises(PodsRemainError):
        drive(programs.release(REF), api.respond)
    api.nodes["n2"] = node("n2", ready="Unknown", taints=[OUT_OF_SERVICE])
    assert drive(programs.release(REF), api.respond).admission == 1


def test_pods_of_another_namespace_or_object_do_not_block() -> None:
    api = standard_api()
    api.pods.append(pod("elsewhere", namespace="other", deletion=TERMINATING))
    api.pods.append(pod("stranger", jobset_name="ft-70", job_id="job-9", deletion=TERMINATING))
    assert drive(programs.release(REF), api.respond).admission == 1


@pytest.mark.parametrize(
    ("kwargs", "js", "error"),
    [
        ({"suspended_condition": None}, jobset(), SuspensionNotObservedError),
        ({"suspended_condition": "False"}, jobset(), SuspensionNotObservedError),
        ({}, jobset(suspend=False), SuspensionNotObservedError),
        ({"job_id": None}, jobset(), NotManagedError),
        ({"conditions": [condition("Complete", "True", "AllJobsCompleted")]}, jobset(), FinishedError),
    ],
)
def test_release_refusals_read_no_pods_and_write_nothing(
    kwargs: dict[str, Any], js: dict[str, Any], error: type[Exception]
) -> None:
    api = standard_api(**kwargs)
    api.add(v.JOBSET, js)
    with pytest.raises(error):
        drive(programs.release(REF), api.respond)
    assert pod_lists(api) == []
    assert api.writes() == []


def test_release_without_jobset_is_fine() -> None:
    api = standard_api()
    del api.objects[("jobsets", NS, NAME)]
    assert drive(programs.release(REF), api.respond).admission == 1


def test_release_of_missing_trainjob_is_not_found() -> None:
    with pytest.raises(NotFoundError, match="TrainJob ml/ft-7 was not found"):
        drive(programs.release(REF), FakeApi().respond)


def test_missing_runtime_is_refused() -> None:
    api = standard_api()
    del api.objects[("clustertrainingruntimes", None, "torch-distributed")]
    with pytest.raises(NotFoundError, match="runs ClusterTrainingRuntime torch-distributed, which was not found"):
        drive(programs.release(REF), api.respond)
    assert api.writes() == []


def test_namespaced_runtime_is_read_in_the_namespace() -> None:
    api = standard_api(runtime_kind="TrainingRuntime")
    api.add(v.TRAINING_RUNTIME, runtime(namespace=NS))
    assert drive(programs.release(REF), api.respond).admission == 1
    (get_runtime,) = [r for r in api.requests if isinstance(r, GetObject) and r.coords is v.TRAINING_RUNTIME]
    assert get_runtime.namespace == NS


@pytest.mark.parametrize("ref", ["ml/a,b", "ml/x=y", "../etc", "ml", "ML/ft-7"])
def test_invalid_refs_send_no_request(ref: str) -> None:
    api = standard_api()
    for program in (programs.release, programs.hold, programs.inspect, programs.ceased):
        with pytest.raises(InvalidNameError):
            drive(program(ref), api.respond)
    assert api.requests == []


def test_unsafe_runtime_is_refused_before_pods_are_read() -> None:
    api = standard_api()
    api.add(v.CLUSTER_TRAINING_RUNTIME, runtime(pod_annotations={v.ANNOTATION_SAFE_TO_FORCEFULLY_DELETE: "true"}))
    with pytest.raises(SpecRejectedError, match="safe-to-forcefully-delete"):
        drive(programs.release(REF), api.respond)
    assert pod_lists(api) == []
    assert api.writes() == []


def test_kueue_patch_is_kept_by_release() -> None:
    api = standard_api(patches=[patch(v.KUEUE_RUNTIME_PATCH_MANAGER)])
    drive(programs.release(REF), api.respond)
    assert [p["manager"] for p in live(api)["spec"]["runtimePatches"]] == [
        v.KUEUE_RUNTIME_PATCH_MANAGER,
        v.RUNTIME_PATCH_MANAGER,
    ]


@pytest.mark.parametrize(
    ("predicate", "answer", "error", "pods_remain"),
    [
        (lambda r: isinstance(r, GetObject), ApiFailure(None, "connection refused"), UnreachableError, True),
        (lambda r: isinstance(r, GetObject), status(503, "ServiceUnavailable"), UnreachableError, True),
        (lambda r: isinstance(r, GetObject), status(403, "Forbidden"), ForbiddenError, True),
        (lambda r: isinstance(r, GetObject), status(401, "Unauthorized"), ForbiddenError, True),
        (lambda r: isinstance(r, ListObjects), status(500, "InternalError"), UnreachableError, True),
        (lambda r: isinstance(r, ListObjects), status(429, "TooManyRequests"), UnreachableError, True),
        (lambda r: isinstance(r, GetNode), status(500, "InternalError"), UnreachableError, True),
        (lambda r: isinstance(r, GetNode), ApiFailure(None, "reset by peer"), UnreachableError, True),
        (lambda r: isinstance(r, ReplaceObject), status(409, "Conflict"), ConflictError, False),
        (
            lambda r: isinstance(r, ReplaceObject),
            status(422, "Invalid", "RuntimePatches can only be modified when the TrainJob is suspended"),
            SpecRejectedError,
            False,
        ),
        (lambda r: isinstance(r, ReplaceObject), ApiFailure(None, "timed out"), UnreachableError, False),
    ],
)
def test_api_failures_are_classified(
    predicate: Callable[[Request], bool], answer: ApiFailure, error: type[Exception], pods_remain: bool
) -> None:
    api = standard_api()
    if pods_remain:
        api.pods.append(pod("a", deletion=TERMINATING))
    api.intercept = fail_when(predicate, answer)
    with pytest.raises(error) as caught:
        drive(programs.release(REF), api.respond)
    assert type(caught.value) is error
    assert "ml/ft-7" in str(caught.value)
    assert live(api)["spec"]["suspend"] is True


# --- the consistent pod read --------------------------------------------------------------------------------


def crowded_api() -> FakeApi:
    api = standard_api()
    api.pods.extend(pod(f"mine-{i}", deletion=TERMINATING) for i in range(5))
    api.pods.extend(pod(f"renamed-{i}", job_id=None, submission=None) for i in range(3))
    api.pods.extend(pod(f"lost-label-{i}", jobset_name=None) for i in range(2))
    api.pods.extend(pod(f"noise-{i}", jobset_name=f"other-{i}", job_id="job-9") for i in range(20))
    return api


def selected_names(api: FakeApi, strategy: programs.PodReadStrategy, page_size: int = 3) -> tuple[list[str], str]:
    obj_selection = Selection(NS, NAME, "job-1", "s1")
    read = drive(programs.read_pods(obj_selection, ref=REF, strategy=strategy, page_size=page_size), api.respond)
    return sorted(v.name_of(p) for p in read.pods), read.strategy


EXPECTED_SELECTED = sorted(
    [f"mine-{i}" for i in range(5)] + [f"renamed-{i}" for i in range(3)] + [f"lost-label-{i}" for i in range(2)]
)


@pytest.mark.parametrize("strategy", ["pinned", "full"])
@pytest.mark.parametrize("page_size", [1, 3, 500])
def test_both_strategies_select_the_same_pods(strategy: programs.PodReadStrategy, page_size: int) -> None:
    api = crowded_api()
    names, used = selected_names(api, strategy, page_size)
    assert names == EXPECTED_SELECTED
    assert used == strategy
    for request in pod_lists(api):
        assert request.resource_version != "0"
        if request.continue_ is not None:
            assert request.resource_version is None
            assert request.resource_version_match is None


def test_full_read_is_a_quorum_read_of_the_namespace() -> None:
    api = crowded_api()
    selected_names(api, "full", 500)
    (request,) = pod_lists(api)
    assert (request.namespace, request.label_selector, request.resource_version) == (NS, None, None)


@pytest.mark.parametrize(
    "refusal",
    [
        status(400, "BadRequest"),
        status(410, "Expired"),
        status(422, "Invalid"),
        status(504, "Timeout", "Too large resource version"),
    ],
)
def test_pinned_read_falls_back_to_the_full_list_when_exact_is_refused(refusal: ApiFailure) -> None:
    api = crowded_api()
    api.intercept = fail_when(lambda r: isinstance(r, ListObjects) and r.resource_version_match == "Exact", refusal)
    names, used = selected_names(api, "pinned")
    assert (names, used) == (EXPECTED_SELECTED, "full")
    assert any(r.label_selector is None for r in pod_lists(api))


def test_pinned_read_falls_back_when_the_server_ignores_exact() -> None:
    api = crowded_api()
    real = api.respond

    def ignore_exact(request: Request) -> Response:
        answer = real(request)
        if (
            isinstance(request, ListObjects)
            and request.resource_version_match == "Exact"
            and not isinstance(answer, ApiFailure)
        ):
            return {**answer, "metadata": {"resourceVersion": "999999"}}
        return answer

    obj_selection = Selection(NS, NAME, "job-1", "s1")
    read = drive(programs.read_pods(obj_selection, ref=REF, page_size=500), ignore_exact)
    assert read.strategy == "full"
    assert sorted(v.name_of(p) for p in read.pods) == EXPECTED_SELECTED


def test_a_write_between_pinned_lists_forces_the_full_list() -> None:
    """A pod created between the two lists makes Exact answer 410 here; the full list then sees it."""
    api = crowded_api()
    real = api.respond

    def create_between(request: Request) -> Response:
        if isinstance(request, ListObjects) and request.resource_version_match == "Exact":
            api.pods.append(pod("late", job_id=None, submission=None))
            api.rv += 1
        return real(request)

    obj_selection = Selection(NS, NAME, "job-1", "s1")
    read = drive(programs.read_pods(obj_selection, ref=REF, page_size=500), create_between)
    assert read.strategy == "full"
    assert "late" in {v.name_of(p) for p in read.pods}


def test_full_list_restarts_from_the_first_page_on_410() -> None:
    api = crowded_api()
    api.intercept = fail_when(
        lambda r: isinstance(r, ListObjects) and r.continue_ is not None, status(410, "Expired"), times=2
    )
    names, _ = selected_names(api, "full", 10)
    assert names == EXPECTED_SELECTED
    first_pages = [r for r in pod_lists(api) if r.continue_ is None]
    assert len(first_pages) == 3


def test_full_list_gives_up_after_repeated_410() -> None:
    api = crowded_api()
    api.intercept = fail_when(lambda r: isinstance(r, ListObjects) and r.continue_ is not None, status(410, "Expired"))
    with pytest.raises(UnreachableError, match="kept expiring"):
        selected_names(api, "full", 10)
    assert len(pod_lists(api)) == 2 * programs.MAX_LIST_RESTARTS


def test_forbidden_pod_list_is_refused_not_retried() -> None:
    api = crowded_api()
    api.intercept = fail_when(lambda r: isinstance(r, ListObjects), status(403, "Forbidden"))
    with pytest.raises(ForbiddenError, match="`list pods`"):
        selected_names(api, "pinned")


def test_invalid_node_name_never_reaches_a_url() -> None:
    api = standard_api()
    api.pods.append(pod("a", node="../../secrets", deletion=TERMINATING))
    with pytest.raises(PodsRemainError) as caught:
        drive(programs.release(REF), api.respond)
    assert caught.value.remaining[0].node.label == "not readable"
    assert not [r for r in api.requests if isinstance(r, GetNode)]


# --- hold ---------------------------------------------------------------------------------------------------


def test_hold_suspends_conditionally() -> None:
    api = standard_api(suspend=False, admission="2", suspended_condition="False")
    assert drive(programs.hold(REF), api.respond) == Execution("job-1", "s1", 2)
    (write,) = api.writes()
    assert isinstance(write, ReplaceObject)
    assert write.body["spec"]["suspend"] is True
    assert write.body["metadata"]["resourceVersion"] == "101"
    assert live(api)["spec"]["suspend"] is True


def test_hold_is_idempotent() -> None:
    api = standard_api()
    drive(programs.hold(REF), api.respond)
    drive(programs.hold(REF), api.respond)
    assert api.writes() == []


def test_hold_conflict_is_retryable() -> None:
    api = standard_api(suspend=False)
    api.intercept = fail_when(lambda r: isinstance(r, ReplaceObject), status(409, "Conflict"))
    with pytest.raises(ConflictError):
        drive(programs.hold(REF), api.respond)


def test_hold_in_kueue_mode_deactivates_the_workload() -> None:
    api = standard_api(queue="user-queue", suspend=False)
    api.add(v.WORKLOAD, workload())
    drive(programs.hold(REF), api.respond)
    (write,) = api.writes()
    assert write.coords is v.WORKLOAD
    stored = api.get(v.WORKLOAD, NS, "trainjob-ft-7-3f9a1")
    assert stored is not None
    assert stored["spec"]["active"] is False
    assert live(api)["spec"]["suspend"] is False  # Kueue owns suspend
    drive(programs.hold(REF), api.respond)
    assert len(api.writes()) == 1


def test_release_in_kueue_mode_reactivates_and_leaves_admission_to_the_check() -> None:
    api = standard_api(queue="user-queue", admission="1")
    api.add(v.WORKLOAD, workload(active=False))
    assert drive(programs.release(REF), api.respond) == Execution("job-1", "s1", 1)
    stored = api.get(v.WORKLOAD, NS, "trainjob-ft-7-3f9a1")
    assert stored is not None
    assert stored["spec"]["active"] is True
    assert live(api)["spec"]["suspend"] is True
    assert all(w.coords is v.WORKLOAD for w in api.writes())


def test_kueue_hold_without_workload_of_a_running_job_is_retryable() -> None:
    api = standard_api(queue="user-queue", suspend=False)
    with pytest.raises(UnreachableError, match="no Workload yet"):
        drive(programs.hold(REF), api.respond)


# --- kueue_admit --------------------------------------------------------------------------------------------


def test_kueue_admit_raises_a_once_per_admission_key() -> None:
    api = standard_api(queue="user-queue", patches=[patch(v.KUEUE_RUNTIME_PATCH_MANAGER)])
    first = drive(programs.kueue_admit(REF, admission_key="wl-1/r1"), api.respond)
    again = drive(programs.kueue_admit(REF, admission_key="wl-1/r1"), api.respond)
    assert first == again == Execution("job-1", "s1", 1)
    assert len(api.writes()) == 1
    stored = live(api)
    assert stored["spec"]["suspend"] is True
    assert stored["metadata"]["annotations"][v.ANNOTATION_ADMISSION_KEY] == "wl-1/r1"
    assert v.ANNOTATION_EXECUTION_PODS not in stored["metadata"]["annotations"]
    # Kueue suspends execution 1 and admits again: the first check records execution 1's pods, and the hold
    # then settles before execution 2 is admitted (evidence.py)
    with pytest.raises(SuspensionNotObservedError, match="settles until 2026-12-03T12:01:35Z"):
        drive(programs.kueue_admit(REF, admission_key="wl-1/r2"), api.respond)
    assert fencing.recorded(live(api), 1, REF) is not None
    api.now = "2026-12-03T12:01:35Z"  # the settle, 90 s, plus the clock skew bound, 5 s
    assert drive(programs.kueue_admit(REF, admission_key="wl-1/r2"), api.respond).admission == 2


def test_kueue_admit_waits_for_pods() -> None:
    api = standard_api(queue="user-queue")
    api.pods.append(pod("a", node="n2", deletion=TERMINATING))
    api.nodes["n2"] = node("n2", ready="Unknown")
    before = copy.deepcopy(live(api))
    with pytest.raises(PodsRemainError):
        drive(programs.kueue_admit(REF, admission_key="k"), api.respond)
    assert_only_the_record_grew(api, before)


def test_kueue_admit_refuses_plain_objects() -> None:
    with pytest.raises(SpecRejectedError, match="not in Kueue mode"):
        drive(programs.kueue_admit(REF, admission_key="k"), standard_api().respond)


# --- open ---------------------------------------------------------------------------------------------------


def manifest(**changes: Any) -> dict[str, Any]:
    body = trainjob(rv=None, suspend=False, suspended_condition=None)
    body.pop("status")
    body["metadata"].pop("uid")
    for key, value in changes.items():
        body["metadata"][key] = value
    return body


def trainer_observes(api: FakeApi) -> Callable[[dict[str, Any]], None]:
    """Play Trainer: a created suspended TrainJob gets Suspended=True (k8s-apis §1.3)."""

    def observe(created: dict[str, Any]) -> None:
        if created["spec"].get("suspend") is True:
            created["status"] = {"conditions": [condition(v.CONDITION_SUSPENDED, "True", "Suspended")]}

    return observe


def fresh_api() -> FakeApi:
    api = FakeApi()
    api.add(v.CLUSTER_TRAINING_RUNTIME, runtime())
    api.nodes["n1"] = node("n1")
    return api


def test_open_creates_held_then_releases() -> None:
    api = fresh_api()
    api.on_create = trainer_observes(api)
    assert drive(programs.open(manifest()), api.respond) == Execution("job-1", "s1", 1)
    create, replace = api.writes()
    assert isinstance(create, CreateObject)
    assert create.body["spec"]["suspend"] is True
    assert "resourceVersion" not in create.body["metadata"]
    assert isinstance(replace, ReplaceObject)
    assert live(api)["spec"]["suspend"] is False


def test_open_right_after_create_is_not_observed_and_a_retry_continues() -> None:
    api = fresh_api()
    with pytest.raises(SuspensionNotObservedError):
        drive(programs.open(manifest()), api.respond)
    assert len(api.writes()) == 1
    stored = live(api)
    stored["status"] = {"conditions": [condition(v.CONDITION_SUSPENDED, "True")]}
    assert drive(programs.open(manifest()), api.respond).admission == 1


def test_open_meets_the_drain_check_of_a_namesake() -> None:
    api = fresh_api()
    api.on_create = trainer_observes(api)
    api.pods.append(pod("ft-7-node-0-0", job_id="old-job", submission="old", deletion=TERMINATING))
    with pytest.raises(PodsRemainError):
        drive(programs.open(manifest()), api.respond)
    assert live(api)["spec"]["suspend"] is True


def test_open_refuses_another_object_of_the_same_name() -> None:
    api = standard_api(submission="s0")
    with pytest.raises(AlreadyExistsError, match="already exists as another object"):
        drive(programs.open(manifest()), api.respond)
    assert [type(w) for w in api.writes()] == [CreateObject]


def test_open_of_a_deleting_namesake_is_retryable() -> None:
    api = standard_api()
    live(api)["metadata"]["deletionTimestamp"] = TERMINATING
    with pytest.raises(UnreachableError, match="being deleted"):
        drive(programs.open(manifest()), api.respond)


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"labels": {}}, "lacks the label dispatch.phpboyscout.uk/job-id"),
        ({"labels": {v.LABEL_JOB_ID: "job-1"}}, "lacks the label dispatch.phpboyscout.uk/submission"),
        ({"labels": {v.LABEL_JOB_ID: "a,b", v.LABEL_SUBMISSION: "s1"}}, "job id 'a,b' is not allowed"),
        ({"annotations": {v.ANNOTATION_ADMISSION: "5"}}, "dispatch owns the admission number"),
        ({"name": "A,B"}, "TrainJob name 'A,B' is not allowed"),
        ({"namespace": "other"}, "open was asked for ml/ft-7"),
    ],
)
def test_open_refuses_unusable_manifests_without_a_request(changes: dict[str, Any], needle: str) -> None:
    api = fresh_api()
    with pytest.raises((SpecRejectedError, InvalidNameError)) as caught:
        drive(programs.open(manifest(**changes), ref=REF), api.respond)
    assert needle in str(caught.value)
    assert api.requests == []


def test_open_refuses_a_dispatch_patch_in_the_manifest() -> None:
    body = manifest()
    body["spec"]["runtimePatches"] = [patch(v.RUNTIME_PATCH_MANAGER)]
    with pytest.raises(SpecRejectedError, match="dispatch owns that patch"):
        drive(programs.open(body), fresh_api().respond)


def test_open_refuses_an_unsafe_runtime_before_creating() -> None:
    api = FakeApi()
    api.add(
        v.CLUSTER_TRAINING_RUNTIME,
        runtime(tolerations=[{"key": v.TAINT_OUT_OF_SERVICE, "operator": "Exists"}]),
    )
    with pytest.raises(SpecRejectedError, match="tolerates the taint"):
        drive(programs.open(manifest()), api.respond)
    assert api.writes() == []


def test_prepare_manifest_strips_server_fields() -> None:
    body = manifest(uid="x", resourceVersion="7", creationTimestamp="t", managedFields=[])
    body["status"] = {"conditions": []}
    ref, created = programs.prepare_manifest(body)
    assert str(ref) == REF
    assert set(created["metadata"]) == {"name", "namespace", "labels"}
    assert "status" not in created


# --- inspect / find / remaining_pods / ceased ---------------------------------------------------------------


def test_inspect_waiting_with_explanation() -> None:
    api = standard_api()
    api.pods.append(pod("a", node="n2", deletion=TERMINATING))
    api.nodes["n2"] = node("n2", ready="Unknown")
    result = drive(programs.inspect(REF), api.respond)
    assert result.state is State.WAITING
    assert result.detail.startswith("Confirm n2 is powered off, then taint it out-of-service (Ready=Unknown)\n")
    assert "\nremaining pods: a on n2 (Ready=Unknown)\n" in result.detail
    assert api.writes() == []


def test_inspect_kueue_mode_reads_the_workload() -> None:
    api = standard_api(queue="user-queue")
    api.add(v.WORKLOAD, workload(checks=[{"name": "dispatch-drained", "state": "Pending", "message": "waiting"}]))
    api.add(
        v.WORKLOAD,
        {
            **workload(uid="someone-else"),
            "metadata": {"name": "other", "namespace": NS, "labels": {v.LABEL_KUEUE_JOB_UID: "someone-else"}},
        },
    )
    result = drive(programs.inspect(REF), api.respond)
    assert result.state is State.HELD
    assert result.detail.splitlines()[-1] == "admission check dispatch-drained Pending: waiting"
    (listing,) = [r for r in api.requests if isinstance(r, ListObjects) and r.coords is v.WORKLOAD]
    assert listing.label_selector == f"{v.LABEL_KUEUE_JOB_UID}=uid-tj-1"


def test_find_picks_the_newest_submission() -> None:
    api = FakeApi()
    api.add(v.CLUSTER_TRAINING_RUNTIME, runtime())
    old = trainjob(name="ft-6", submission="s0")
    old["metadata"]["creationTimestamp"] = "2026-08-20T10:00:00Z"
    new = trainjob(name="ft-7", submission="s1", suspend=False, admission="2")
    new["metadata"]["creationTimestamp"] = "2026-08-21T10:00:00Z"
    other = trainjob(name="ft-8", job_id="job-2")
    other["metadata"]["creationTimestamp"] = "2026-08-22T10:00:00Z"
    for obj in (old, new, other):
        api.add(v.TRAINJOB, obj)
    result = drive(programs.find(NS, "job-1"), api.respond)
    assert (result.ref, result.state, result.execution.admission) == ("ml/ft-7", State.RUNNING, 2)


def test_find_nothing_is_not_found() -> None:
    with pytest.raises(NotFoundError, match="no TrainJob in namespace ml carries"):
        drive(programs.find(NS, "job-1"), FakeApi().respond)


@pytest.mark.parametrize(("namespace", "job_id"), [("ml", "a,b"), ("ml", "x=y"), ("ml,x", "job-1"), ("ml", "")])
def test_find_validates_before_listing(namespace: str, job_id: str) -> None:
    api = FakeApi()
    with pytest.raises(InvalidNameError):
        drive(programs.find(namespace, job_id), api.respond)
    assert api.requests == []


@pytest.mark.parametrize(
    ("nodes", "forbidden", "ceased"),
    [
        # a Node deleted is proof only once a writer's check has recorded since when (finding 4): `ceased` reads
        ({}, False, False),
        ({"n2": node("n2", ready="Unknown", taints=[OUT_OF_SERVICE])}, False, True),
        ({"n2": node("n2", ready="True", taints=[OUT_OF_SERVICE])}, False, False),
        ({"n2": node("n2", ready="Unknown")}, False, False),
        ({"n2": node("n2", ready="Unknown", taints=[OUT_OF_SERVICE])}, True, False),
    ],
)
def test_ceased(nodes: dict[str, dict[str, Any]], forbidden: bool, ceased: bool) -> None:
    api = standard_api()
    api.nodes = dict(nodes)
    api.nodes_forbidden = forbidden
    api.pods.append(pod("a", node="n2", deletion=TERMINATING))
    assert drive(programs.ceased(REF), api.respond) is ceased
    assert api.writes() == []


def test_a_deleted_node_is_proof_once_its_recorded_deletion_is_old_enough() -> None:
    """`ceased` on a pod of a deleted Node: not on the 404 alone, nor while the record's first sight of the
    deletion is younger than the pods' grace plus the return margin and the skew bound, nor while the pod is
    still listed there (a machine that runs runs it until its object is deleted); then it is."""
    api = standard_api(admission="1")
    first_seen = parse_time(NOW)
    assert first_seen is not None
    annotations = live(api)["metadata"].setdefault("annotations", {})
    recorded = ExecutionPods(1, {"n2": ("a",)}, since=first_seen, gone={"n2": first_seen})
    annotations[v.ANNOTATION_EXECUTION_PODS] = recorded.to_annotation()
    api.pods.append(pod("a", node="n2", deletion=TERMINATING))
    assert drive(programs.ceased(REF), api.respond) is False
    api.now = format_time(first_seen + timedelta(seconds=30 + RETURN_MARGIN_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS))
    assert drive(programs.ceased(REF), api.respond) is False
    api.pods.clear()  # PodGC deleted the orphan
    assert drive(programs.ceased(REF), api.respond) is True


def lost_node_api() -> FakeApi:
    """A held TrainJob whose hold recorded p-0 on n1, p-0 force-deleted since and n1 lost; a pod remains on n2."""
    api = standard_api(admission="1")
    annotations = live(api)["metadata"].setdefault("annotations", {})
    annotations[v.ANNOTATION_EXECUTION_PODS] = ExecutionPods(1, {"n1": ("p-0",)}).to_annotation()
    api.nodes["n1"] = node("n1", ready="Unknown")
    api.nodes["n2"] = node("n2")
    api.pods.append(pod("a", node="n2", deletion=TERMINATING))
    return api


def drain_reads(api: FakeApi) -> list[Request]:
    return [r for r in api.requests if isinstance(r, GetNode) or (isinstance(r, ListObjects) and r.coords is v.POD)]


def test_every_drain_check_reads_the_same_pods_and_nodes_and_finds_the_same_pods() -> None:
    """release, inspect and remaining_pods all run `programs.drain`: one sequence of pod and node reads."""
    runs: dict[str, tuple[list[Request], list[str]]] = {}
    api = lost_node_api()
    with pytest.raises(PodsRemainError) as refused:
        drive(programs.release(REF), api.respond)
    runs["release"] = (drain_reads(api), [p.name for p in refused.value.remaining])
    api = lost_node_api()
    status_ = drive(programs.inspect(REF), api.respond)
    runs["inspect"] = (drain_reads(api), [p.name for p in status_.remaining])
    api = lost_node_api()
    report = drive(programs.remaining_pods(REF), api.respond)
    runs["remaining_pods"] = (drain_reads(api), [p.name for p in report.remaining])
    reads, names = runs["release"]
    assert [r.describe() for r in reads if isinstance(r, GetNode)] == ["get nodes n2", "get nodes n1"]
    assert names == ["a", "p-0"]
    assert all(run == (reads, names) for run in runs.values()), runs


def test_inspect_parses_the_hold_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The record `inspect` parsed for its node reads is the one `assess` judges by (not parsed again)."""
    parsed: list[str] = []

    def counting(trainjob: Any, admission: int, ref: str) -> ExecutionPods | None:
        parsed.append(ref)
        return fencing.recorded(trainjob, admission, ref)

    monkeypatch.setattr(queries, "recorded", counting)  # where `inspect` looks it up
    status_ = drive(programs.inspect(REF), lost_node_api().respond)
    assert parsed == [REF]
    assert [p.name for p in status_.remaining] == ["a", "p-0"]


def test_a_drain_reports_its_verdict_as_drain_report_words_it() -> None:
    api = lost_node_api()
    execution_pods = fencing.recorded(live(api), 1, REF)
    selection = Selection(NS, NAME, "job-1", "s1")
    drained = drive(programs.drain(selection, ref=REF, execution_pods=execution_pods), api.respond)
    expected = drain_report(
        REF, selection, drained.read.pods, drained.nodes, drained.read.resource_version, execution_pods=execution_pods
    )
    assert drained.report(REF, now=None) == expected
    assert api.writes() == []


def test_remaining_pods_of_a_deleted_trainjob_uses_jobset_name_and_given_labels() -> None:
    api = FakeApi()
    api.nodes["n1"] = node("n1")
    api.pods.append(pod("by-jobset", job_id=None, submission=None, deletion=TERMINATING))
    api.pods.append(pod("by-labels", jobset_name=None, deletion=TERMINATING))
    report = drive(programs.remaining_pods(REF), api.respond)
    assert [p.name for p in report.remaining] == ["by-jobset"]
    report = drive(programs.remaining_pods(REF, job_id="job-1", submission="s1"), api.respond)
    assert sorted(p.name for p in report.remaining) == ["by-jobset", "by-labels"]
    assert not report.drained
    assert not report.ceased
    assert report.resource_version == str(api.rv)
    assert report.as_dict()["remaining"][0]["node_state"] == "Ready=True"


def test_drained_report() -> None:
    api = standard_api()
    report = drive(programs.remaining_pods(REF), api.respond)
    assert (report.drained, report.ceased, report.detail) == (
        True,
        True,
        "no pod of TrainJob ml/ft-7 remains",
    )


async def test_drive_async_runs_the_same_program() -> None:
    api = standard_api()

    async def respond(request: Request) -> Response:
        return api.respond(request)

    assert await drive_async(programs.release(REF), respond) == Execution("job-1", "s1", 1)
    assert len(api.writes()) == 1


def test_requests_describe_themselves_without_bodies() -> None:
    api = standard_api()
    drive(programs.release(REF), api.respond)
    texts = [r.describe() for r in api.requests]
    assert texts[0] == "get trainjobs.trainer.kubeflow.org ml/ft-7"
    assert texts[-1].startswith("update trainjobs.trainer.kubeflow.org ml/ft-7 at resourceVersion ")
    assert any("?labelSelector=jobset.sigs.k8s.io/jobset-name=ft-7&resourceVersion=" in text for text in texts)
    assert GetNode("n1").describe() == "get nodes n1"
    assert ListObjects(v.POD, NS, limit=5, continue_="tok").query() == {"limit": "5", "continue": "tok"}


def test_release_of_a_deleting_trainjob_is_refused() -> None:
    api = standard_api()
    live(api)["metadata"]["deletionTimestamp"] = TERMINATING
    with pytest.raises(NotFoundError, match="is being deleted"):
        drive(programs.release(REF), api.respond)
    assert api.writes() == []
