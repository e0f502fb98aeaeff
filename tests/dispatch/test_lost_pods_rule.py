"""Issue 26 as pure functions: the record that only grows (`fencing.grown`), a deleted Node taken as proof only
after a wait the record remembers (`fencing.judged_nodes`, finding 4), a namesake's predecessor Jobs
(`evidence.predecessor_jobs`) and its settle (finding 3), and the pod fence's verification (`fence.py`).

The same cases run on the whole simulated cluster in tests/reliability/test_lost_pods.py."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import programs
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.blocking import Blocking
from airflow_provider_dispatch.dispatch.errors import PodFenceError
from airflow_provider_dispatch.dispatch.evidence import (
    DEFAULT_SETTLE_SECONDS,
    HoldEvidence,
    judge_hold,
    predecessor_jobs,
)
from airflow_provider_dispatch.dispatch.fence import (
    POLICY_NAME,
    FenceIdentity,
    FenceState,
    binding_manifest,
    in_force_throughout,
    judge_fence,
    policy_manifest,
    recorded_fence,
)
from airflow_provider_dispatch.dispatch.fencing import (
    ExecutionPods,
    blocking_pods,
    grown,
    judged_nodes,
    record,
    recorded,
)
from airflow_provider_dispatch.dispatch.nodes import (
    DEFAULT_CLOCK_SKEW_SECONDS,
    RETURN_MARGIN_SECONDS,
    NodeRead,
    Presence,
)
from airflow_provider_dispatch.dispatch.programs import ListObjects, Request, Response, drive

from .support import HOLD, NAME, NS, SERVER_NOW, FakeApi, jobset, node, pod, standard_api, trainjob

NODE_UNKNOWN = node("n1", ready="Unknown")

# --- the record grows: case 1 and case 2 -----------------------------------------------------------------------


def test_a_pod_recorded_without_a_node_is_kept_under_its_node_once_a_check_lists_it_bound() -> None:
    """Case 1: the hold recorded the pod unscheduled; bound after the record, a writer's check lists it with its
    node, and the record keeps it there. Once its object is gone, it blocks on that node."""
    unbound = pod("p-0", node=None, phase="Pending")
    made = record(2, [unbound], since=HOLD)
    assert made.unscheduled == ("p-0",)
    bound = {**copy.deepcopy(unbound), "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    bound["metadata"]["deletionTimestamp"] = "2026-12-03T12:00:10Z"
    after = grown(made, pods=[bound], nodes={"n1": NODE_UNKNOWN}, now=SERVER_NOW)
    assert (after.nodes, after.unscheduled) == ({"n1": ("p-0",)}, ())
    assert after.uids == {"p-0": v.field(bound, "metadata", "uid")}
    # its object is force-deleted: nothing lists it, the record still does
    (vanished,) = blocking_pods([], {"n1": NODE_UNKNOWN}, after, NS)
    assert (vanished.name, vanished.node.name, vanished.blocking) == ("p-0", "n1", Blocking.VANISHED)
    # the record before it grew lost it (the code before issue 26)
    assert blocking_pods([], {"n1": NODE_UNKNOWN}, made, NS) == ()


def test_a_pod_created_after_the_record_is_kept_once_a_check_lists_it() -> None:
    """Case 2: created after the record, listed by a writer's check, kept by name, uid, node and grace."""
    made = record(2, [], since=HOLD)
    late = pod("p-late", deletion="2026-12-03T12:00:10Z")
    after = grown(made, pods=[late], nodes={"n1": NODE_UNKNOWN}, now=SERVER_NOW)
    assert after.nodes == {"n1": ("p-late",)}
    assert after.grace == {"n1": 30}
    (vanished,) = blocking_pods([], {"n1": NODE_UNKNOWN}, after, NS)
    assert vanished.name == "p-late"


def test_the_record_does_not_grow_for_what_it_already_keeps_nor_for_finished_pods() -> None:
    running = pod("p-0", deletion="2026-12-03T12:00:10Z")
    made = record(2, [running], since=HOLD, nodes={"n1": node("n1")})
    assert grown(made, pods=[running], nodes={"n1": node("n1")}, now=SERVER_NOW) == made
    done = pod("p-1", phase="Succeeded")
    assert grown(made, pods=[done], nodes={"n1": node("n1")}, now=SERVER_NOW) == made
    # and it survives its annotation unchanged, so that an unchanged record is never written again
    assert recorded(_held_with(made), 2, "ml/ft-7") == made


def test_a_node_new_to_the_record_keeps_its_ready_transition() -> None:
    """A node first seen by a later check: Ready throughout since that check is what the returned-node rule asks."""
    made = record(2, [], since=HOLD)
    ready = node("n2")
    after = grown(made, pods=[pod("p-0", node="n2")], nodes={"n2": ready}, now=SERVER_NOW)
    assert after.ready == {"n2": ready["status"]["conditions"][0]["lastTransitionTime"]}


def _held_with(execution_pods: ExecutionPods) -> dict[str, Any]:
    obj = trainjob(admission=str(execution_pods.admission))
    obj["metadata"].setdefault("annotations", {})[v.ANNOTATION_EXECUTION_PODS] = execution_pods.to_annotation()
    return obj


# --- finding 4: a deleted Node --------------------------------------------------------------------------------


def test_a_deleted_node_is_not_proof_on_a_single_404() -> None:
    """A 404 with no time recorded for it (only a writer's check records one) is `gone, not yet proof`: a recorded
    pod that vanished there blocks, and so does a pod Kueue's failure recovery marked Failed there."""
    made = ExecutionPods(2, {"n1": ("p-0",)}, since=HOLD)
    judged = judged_nodes({"n1": NodeRead.GONE}, made, SERVER_NOW)
    assert judged == {"n1": NodeRead.DELETED_RECENTLY}
    (vanished,) = blocking_pods([], judged, made, NS)
    assert (vanished.node.presence, vanished.node.label, vanished.ceased) == (
        Presence.DELETED_RECENTLY,
        "gone, not yet proof",
        False,
    )


def test_a_deleted_node_is_proof_once_grace_margin_and_skew_have_passed_since_a_writer_first_saw_it() -> None:
    made = ExecutionPods(2, {"n1": ("p-0",)}, since=HOLD, grace={"n1": 45})
    seen = grown(made, nodes={"n1": NodeRead.GONE}, now=SERVER_NOW)
    assert seen.gone == {"n1": SERVER_NOW}
    wait = 45 + RETURN_MARGIN_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS
    almost = SERVER_NOW + timedelta(seconds=wait - 1)
    assert judged_nodes({"n1": NodeRead.GONE}, seen, almost) == {"n1": NodeRead.DELETED_RECENTLY}
    assert blocking_pods([], judged_nodes({"n1": NodeRead.GONE}, seen, almost), seen, NS) != ()
    later = SERVER_NOW + timedelta(seconds=wait)
    assert judged_nodes({"n1": NodeRead.GONE}, seen, later) == {"n1": NodeRead.GONE}
    assert blocking_pods([], judged_nodes({"n1": NodeRead.GONE}, seen, later), seen, NS) == ()
    # a second writer's check keeps the first time: the wait does not start again
    assert grown(seen, nodes={"n1": NodeRead.GONE}, now=later).gone == {"n1": SERVER_NOW}


def test_a_deleted_nodes_wait_starts_only_once_no_pod_that_may_run_is_listed_on_it() -> None:
    """While a check still lists a pod that may run on the deleted Node, its machine (if it runs) runs the pod on:
    PodGC deletes it 40 to 80 s after the Node, or later when slow, and only then does the kubelet stop it. So a
    writer's check that lists one there records no time for the deletion (and forgets one recorded earlier), the
    node is `gone, not yet proof` for that check whatever the record says, and the first check that lists none
    there starts the wait."""
    made = ExecutionPods(2, {"n1": ("p-0",)}, since=HOLD, grace={"n1": 45})
    running = pod("p-0", phase="Running")
    while_listed = grown(made, pods=[running], nodes={"n1": NodeRead.GONE}, now=SERVER_NOW)
    assert while_listed.gone == {}
    long_after = SERVER_NOW + timedelta(hours=1)
    earlier = grown(made, nodes={"n1": NodeRead.GONE}, now=SERVER_NOW)
    assert judged_nodes({"n1": NodeRead.GONE}, earlier, long_after, pods=[running]) == {"n1": NodeRead.DELETED_RECENTLY}
    assert grown(earlier, pods=[running], nodes={"n1": NodeRead.GONE}, now=long_after).gone == {}
    finished = pod("p-0", phase="Failed")
    assert grown(made, pods=[finished], nodes={"n1": NodeRead.GONE}, now=SERVER_NOW).gone == {"n1": SERVER_NOW}
    cleared = grown(while_listed, nodes={"n1": NodeRead.GONE}, now=long_after)
    assert cleared.gone == {"n1": long_after}
    wait = 45 + RETURN_MARGIN_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS
    assert judged_nodes({"n1": NodeRead.GONE}, cleared, long_after + timedelta(seconds=wait - 1)) == {
        "n1": NodeRead.DELETED_RECENTLY
    }
    assert judged_nodes({"n1": NodeRead.GONE}, cleared, long_after + timedelta(seconds=wait)) == {"n1": NodeRead.GONE}


def test_a_node_deleted_before_the_hold_gets_its_time_from_the_first_writers_check() -> None:
    """The hold read its time before the Nodes: a Node it found deleted may have been deleted after that time, so
    the record keeps no time for it, and the first writer's check (its time read after the Nodes) gives one."""
    made = record(2, [pod("p-0", deletion="2026-12-03T12:00:10Z")], since=HOLD, nodes={"n1": NodeRead.GONE})
    assert made.gone == {}
    assert grown(made, nodes={"n1": NodeRead.GONE}, now=SERVER_NOW).gone == {"n1": SERVER_NOW}


# --- finding 3: a namesake's predecessor -------------------------------------------------------------------------


def _job(name: str, *, controller: str | None, finished: bool = False) -> dict[str, Any]:
    job: dict[str, Any] = {
        "metadata": {"name": name, "namespace": NS, "labels": {v.LABEL_JOBSET_NAME: NAME}},
        "spec": {"suspend": False},
        "status": {"conditions": [{"type": "Failed", "status": "True"}] if finished else []},
    }
    if controller is not None:
        job["metadata"]["ownerReferences"] = [{"kind": "JobSet", "name": NAME, "uid": controller, "controller": True}]
    return job


def test_the_jobs_a_deleted_namesake_left_are_its_predecessors_until_they_finish_or_go() -> None:
    left = _job(f"{NAME}-node-0", controller="uid-of-the-deleted-jobset")
    assert predecessor_jobs(None, [left]) == (f"Job {NAME}-node-0 (controller uid-of-the-deleted-jobset)",)
    ours = jobset()
    ours["metadata"]["uid"] = "uid-js-new"
    mine = _job(f"{NAME}-node-0", controller="uid-js-new")
    assert predecessor_jobs(ours, [mine]) == ()
    assert predecessor_jobs(ours, [left]) != ()
    assert predecessor_jobs(None, [_job("x", controller=None, finished=True)]) == ()


def _namesake_verdict(execution_pods: ExecutionPods | None, predecessors: tuple[str, ...], now: Any) -> Any:
    held = trainjob(suspend=True, suspended_condition="True", admission="0")
    evidence = HoldEvidence(None, {}, execution_pods, now, predecessors=predecessors)
    return judge_hold(held, evidence, 0)


def test_a_namesake_is_not_observed_while_its_predecessors_job_lives() -> None:
    """Case 3: for A = 0 with no JobSet the hold used to count as observed without reading any Job."""
    verdict = _namesake_verdict(ExecutionPods(0, {}, since=HOLD), ("Job ft-7-node-0 (controller x)",), SERVER_NOW)
    assert verdict is not None
    assert verdict.seconds_left is None
    # what to do first (issue 25), then why
    assert verdict.reason.startswith("Wait until the garbage collector deletes Job ft-7-node-0 (controller x), or ")
    assert "was left by a deleted TrainJob of the same name" in verdict.reason


def test_a_namesake_settles_from_when_its_predecessors_last_job_was_found_gone() -> None:
    opened = record(0, [], since=HOLD, leftovers=True)
    assert (opened.leftovers, opened.cleared) == (True, None)
    seen_gone = grown(opened, predecessors=False, now=SERVER_NOW)
    assert seen_gone.cleared == SERVER_NOW
    wait = DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS
    settling = _namesake_verdict(seen_gone, (), SERVER_NOW + timedelta(seconds=wait - 1))
    assert settling is not None
    assert settling.seconds_left == pytest.approx(1)
    assert _namesake_verdict(seen_gone, (), SERVER_NOW + timedelta(seconds=wait)) is None
    # a Job of the predecessor found again (a creation that was in flight) starts it over
    again = grown(seen_gone, predecessors=True, now=SERVER_NOW)
    assert (again.leftovers, again.cleared) == (True, None)


def test_a_namesake_whose_open_found_only_pods_settles_from_the_open() -> None:
    """Its predecessor's Jobs were gone when it opened: the settle counts from the open's record."""
    opened = record(0, [pod("left", deletion="2026-12-03T12:00:00Z")], since=HOLD)
    assert (opened.leftovers, opened.cleared) == (True, HOLD)


def test_a_name_never_used_has_no_settle() -> None:
    opened = record(0, [], since=HOLD)
    assert not opened.leftovers
    assert _namesake_verdict(opened, (), SERVER_NOW) is None


# --- the pod fence --------------------------------------------------------------------------------------------


def _as_stored(manifest: dict[str, Any], uid: str, generation: int = 1) -> dict[str, Any]:
    stored = copy.deepcopy(manifest)
    stored["metadata"].update(uid=uid, generation=generation)
    return stored


def test_the_shipped_fence_is_in_force_and_identified_by_uids_and_generations() -> None:
    fence = judge_fence(_as_stored(policy_manifest(), "p"), _as_stored(binding_manifest(), "b"))
    assert fence.state is FenceState.IN_FORCE
    assert fence.identity == FenceIdentity("p/1", "b/1")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda p, b: p["spec"].update(failurePolicy="Ignore"), "failurePolicy is Ignore"),
        (lambda p, b: p["spec"]["validations"].pop(), "its validations differ"),
        (lambda p, b: p["spec"]["validations"][0].update(expression="true"), "its validations differ"),
        (lambda p, b: p["spec"]["matchConstraints"].update(namespaceSelector={"matchLabels": {"a": "b"}}), "narrows"),
        (lambda p, b: p["spec"]["matchConstraints"]["resourceRules"].pop(), "resource rules differ"),
        (lambda p, b: b["spec"].update(validationActions=["Warn"]), "do not include Deny"),
        (lambda p, b: b["spec"].update(policyName="other"), "binds policy 'other'"),
        (lambda p, b: b["spec"].update(matchResources={"objectSelector": {"matchLabels": {"a": "b"}}}), "narrows"),
    ],
)
def test_a_fence_that_is_not_dispatchs_is_not_in_force(change: Any, problem: str) -> None:
    policy, binding = _as_stored(policy_manifest(), "p"), _as_stored(binding_manifest(), "b")
    change(policy, binding)
    fence = judge_fence(policy, binding)
    assert fence.state is FenceState.ALTERED
    assert problem in fence.problem
    assert "dispatch pod-fence | kubectl apply -f -" in fence.problem


def test_the_api_servers_defaults_do_not_count_as_changes() -> None:
    policy = _as_stored(policy_manifest(), "p")
    policy["spec"]["matchConstraints"].update(matchPolicy="Equivalent", namespaceSelector={}, objectSelector={})
    for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
        rule["scope"] = "*"
    binding = _as_stored(binding_manifest(), "b")
    binding["spec"]["matchResources"] = {"namespaceSelector": {}, "objectSelector": {}, "matchPolicy": "Equivalent"}
    assert judge_fence(policy, binding).state is FenceState.IN_FORCE


def test_a_missing_or_unreadable_fence_says_what_to_do() -> None:
    absent = judge_fence(NodeRead.GONE, NodeRead.GONE)
    assert absent.state is FenceState.ABSENT
    assert POLICY_NAME in absent.problem
    assert "kubectl apply" in absent.problem
    unreadable = judge_fence(NodeRead.NOT_READABLE, NodeRead.GONE)
    assert unreadable.state is FenceState.NOT_READABLE
    assert "dispatch-fence-reader" in unreadable.problem


def test_the_fence_counts_only_when_unchanged_since_the_executions_admission() -> None:
    fence = judge_fence(_as_stored(policy_manifest(), "p", 2), _as_stored(binding_manifest(), "b"))
    held = trainjob(admission="3")
    assert recorded_fence(held, 3) is None
    assert in_force_throughout(fence, None) is not None
    held["metadata"]["annotations"][v.ANNOTATION_POD_FENCE] = FenceIdentity("p/2", "b/1").to_annotation(3)
    assert recorded_fence(held, 3) == FenceIdentity("p/2", "b/1")
    assert in_force_throughout(fence, recorded_fence(held, 3)) is None
    # edited since (its generation), or removed and created again (its uid)
    for then in (FenceIdentity("p/1", "b/1"), FenceIdentity("p-old/2", "b/1")):
        assert "changed during the execution" in str(in_force_throughout(fence, then))
    # recorded for another execution: not this one's
    assert recorded_fence(held, 4) is None


def _fenced_api(admission: str) -> FakeApi:
    """A TrainJob ready to release whose execution `admission` was admitted under the fence installed here."""
    api = standard_api(admission=admission)
    api.add(v.VALIDATING_ADMISSION_POLICY, _as_stored(policy_manifest(), "p"))
    api.add(v.VALIDATING_ADMISSION_POLICY_BINDING, _as_stored(binding_manifest(), "b"))
    held = api.get(v.TRAINJOB, NS, NAME)
    assert held is not None
    identity = FenceIdentity("p/1", "b/1").to_annotation(int(admission))
    held["metadata"].setdefault("annotations", {})[v.ANNOTATION_POD_FENCE] = identity
    return api


def test_a_fence_in_force_throughout_lets_require_pod_fence_admit_and_is_recorded_for_the_next() -> None:
    api = _fenced_api("2")
    execution = drive(programs.release(f"{NS}/{NAME}", require_pod_fence=True), api.respond)
    assert execution.admission == 3
    assert execution.fence_note == ""
    admitted = api.get(v.TRAINJOB, NS, NAME)
    assert admitted is not None
    assert recorded_fence(admitted, 3) == FenceIdentity("p/1", "b/1")


def test_the_fence_is_read_after_the_pods_so_its_removal_during_the_listing_refuses() -> None:
    """Who else writes what the rule reads: a cluster administrator may remove the fence, force-delete a pod and
    let the listing miss it. Read before the listing, the fence would vouch for a listing it no longer covered;
    read after it, its absence is seen and `require_pod_fence` refuses, writing nothing."""
    api = _fenced_api("2")

    def remove_the_fence_while_pods_are_listed(request: Request) -> Response | None:
        if isinstance(request, ListObjects) and request.coords is v.POD:
            api.objects.pop((v.VALIDATING_ADMISSION_POLICY.plural, None, POLICY_NAME), None)
        return None

    api.intercept = remove_the_fence_while_pods_are_listed
    with pytest.raises(PodFenceError) as refused:
        drive(programs.release(f"{NS}/{NAME}", require_pod_fence=True), api.respond)
    assert "is not installed (no policy)" in refused.value.message
    assert api.writes() == []
