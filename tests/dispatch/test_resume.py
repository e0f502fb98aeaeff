"""The chain read back from the cluster (dispatch/restarts.py `from_cluster`, dispatch/resume.py), and the per-run key.

The central property: whatever stage a chain was in when its try died, the TrainJobs it left in the cluster say
where it stands. A chain is run through the state machine as the operator runs it (`drive`), stopped after every
event, and what it had written then is built as the cluster would hold it (`left_in_cluster`); `from_cluster`
must give the stage the chain was at (or the one before it, where redoing a step is safe: a hold again, a drain
check again), the same submissions, outcomes, admissions and drains, and never a submission opened twice.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dispatch.dispatch import chain as c
from airflow_provider_dispatch.dispatch import restarts as r
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import NotInChainError, NotManagedError, UnreachableError
from airflow_provider_dispatch.dispatch.programs import ListObjects, drive
from airflow_provider_dispatch.dispatch.resume import read_chain, resume

from .support import FakeApi, condition, trainjob
from .test_restarts import OUTCOMES
from .test_restarts import drive as run_chain

CHAIN = c.Chain("ml", "finetune", "finetune")
T0 = datetime(2026, 12, 5, 2, 0, tzinfo=UTC)


def stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def submission_trainjob(
    k: int,
    *,
    admission: int = 1,
    outcome: str | None = None,
    held: bool = False,
    follows: r.Submission | None = None,
    opened_at: float = 0.0,
    finished_at: float = 0.0,
    queue: str | None = None,
    chain: c.Chain = CHAIN,
) -> dict[str, Any]:
    """Submission k of `chain` as the cluster holds it: created at `opened_at`, running execution `admission`
    (held or not), finished with `outcome` at `finished_at`."""
    conditions = []
    if outcome is not None:
        kind = v.CONDITION_COMPLETE if outcome == r.COMPLETE else v.CONDITION_FAILED
        conditions.append({**condition(kind, "True", f"{outcome}Reason", f"{outcome} message")})
        conditions[-1]["lastTransitionTime"] = stamp(finished_at)
    body = trainjob(
        name=r.trainjob_name(chain.base, k),
        namespace=chain.namespace,
        job_id=chain.job_id,
        submission=str(k),
        admission=str(admission) if admission else None,
        suspend=held,
        suspended_condition="True" if held else None,
        conditions=conditions,
        queue=queue,
        uid=f"uid-{k}",
    )
    body["metadata"]["creationTimestamp"] = stamp(opened_at)
    if follows is not None:
        body["metadata"].setdefault("annotations", {})[v.ANNOTATION_FOLLOWS] = r.follows_annotation(follows)
    return body


def left_in_cluster(state: r.RestartState) -> list[dict[str, Any]]:
    """The TrainJobs a chain in `state` has written: one per submission it opened, its outcome (Trainer wrote it),
    held once the chain held it, and after the first the submission it follows."""
    found = []
    for index, entry in enumerate(state.history):
        if entry.opened_at is None:
            continue  # the open of this submission has not created it yet
        is_current = index == len(state.history) - 1
        held = entry.outcome == r.FAILED and not (is_current and state.stage in (r.Stage.HOLD, r.Stage.EXHAUSTED))
        follows = state.history[index - 1] if index else None
        found.append(
            submission_trainjob(
                entry.submission,
                admission=entry.admission or 0,
                outcome=entry.outcome,
                held=held,
                follows=follows,
                opened_at=entry.opened_at,
                finished_at=entry.finished_at or 0.0,
            )
        )
    return found


#: where the chain goes on from, for the stage its try died in: the same stage, or a safe step back (a hold that
#: was written is held again, idempotently; the drain check that let the next open runs again)
RESUMED_AT = {
    r.Stage.OUTCOME: r.Stage.OUTCOME,
    r.Stage.HOLD: r.Stage.HOLD,
    r.Stage.DRAIN: r.Stage.HOLD,
    r.Stage.SUCCEEDED: r.Stage.SUCCEEDED,
    r.Stage.EXHAUSTED: r.Stage.EXHAUSTED,
}


@given(
    max_restarts=st.integers(0, 6),
    outcomes=st.lists(OUTCOMES, min_size=7, max_size=7),
)
def test_a_chain_stopped_at_any_point_resumes_from_what_it_left_in_the_cluster(
    max_restarts: int, outcomes: list[str]
) -> None:
    for live in run_chain(max_restarts, outcomes):
        resumed = c.from_cluster(max_restarts, CHAIN, reversed(left_in_cluster(live)), now=99.0)
        opened = [entry for entry in live.history if entry.opened_at is not None]
        # died before the open created the next submission: the previous one is held again and drained again
        # (nothing opened yet: the first state)
        opening = r.Stage.HOLD if opened else r.Stage.OPEN
        expected = opening if live.stage is r.Stage.OPEN else RESUMED_AT[live.stage]
        assert resumed.stage is expected, (live, resumed)
        assert (resumed.max_restarts, resumed.stage_started) == (max_restarts, 99.0)
        if not opened:
            assert resumed == r.start(max_restarts, 99.0)
            continue
        # the same submissions, outcomes and executions; the restarts used are the submissions that exist
        assert [(e.submission, e.outcome, e.admission) for e in resumed.history] == [
            (e.submission, e.outcome, e.admission) for e in opened
        ]
        assert resumed.restarts == len(opened) - 1
        # how each earlier submission's pods went, as the next one recorded it in its create
        assert [e.drained for e in resumed.history[:-1]] == [e.drained for e in opened[:-1]]
        assert resumed.current.drained is None
        # it round-trips like any state, and the chain goes on from it by the same machine
        assert r.from_json(json.loads(json.dumps(resumed.as_json()))) == resumed


def test_the_history_read_back_carries_the_api_servers_times_and_texts() -> None:
    first = r.Submission(1, drained="ceased")
    found = [
        submission_trainjob(1, outcome=r.FAILED, held=True, opened_at=10, finished_at=70),
        submission_trainjob(2, follows=first, opened_at=100),
    ]
    state = c.from_cluster(3, CHAIN, found, now=5.0)
    assert state.stage is r.Stage.OUTCOME
    one, two = state.history
    epoch = T0.timestamp()
    assert (one.opened_at, one.finished_at, one.drained, one.drained_at) == (
        epoch + 10,
        epoch + 70,
        "ceased",
        epoch + 100,
    )
    assert (one.reason, one.message) == ("FailedReason", "Failed message")
    assert (two.opened_at, two.admission, two.outcome) == (epoch + 100, 1, None)


@pytest.mark.parametrize(
    ("last", "expected"),
    [
        ({"outcome": r.COMPLETE}, r.Stage.SUCCEEDED),
        ({"outcome": r.FAILED}, r.Stage.HOLD),
        ({"outcome": r.FAILED, "held": True}, r.Stage.HOLD),
        ({}, r.Stage.OUTCOME),
        ({"held": True, "admission": 0}, r.Stage.OPEN),  # created held, the open died before it released it
        ({"held": True, "admission": 2}, r.Stage.OPEN),  # held by someone while it ran: released again, checked
        ({"queue": "user-queue"}, r.Stage.OPEN),  # Kueue admits: the open (re)activates it, the wait is unpinned
    ],
)
def test_the_last_submission_decides_the_stage(last: dict[str, Any], expected: r.Stage) -> None:
    earlier = submission_trainjob(1, outcome=r.FAILED, held=True)
    found = [earlier, submission_trainjob(2, follows=r.Submission(1, drained="drained"), **last)]
    state = c.from_cluster(2, CHAIN, found, now=0.0)
    assert (state.stage, state.submission) == (expected, 2)


def test_a_failed_last_submission_with_no_restart_left_ends_the_chain_with_its_own_message() -> None:
    found = [
        submission_trainjob(1, outcome=r.FAILED, held=True),
        submission_trainjob(2, outcome=r.FAILED, follows=r.Submission(1, drained="drained")),
    ]
    state = c.from_cluster(1, CHAIN, found, now=0.0)
    assert state.stage is r.Stage.EXHAUSTED
    message = r.give_up_message(state, CHAIN.ref(2))
    assert message.startswith("gave up after 1 restart (max_restarts=1): submission 2, TrainJob ml/finetune-2")
    assert "FinishedError" not in message
    assert "unsuspending" not in message
    # a higher limit on the next try goes on: the restarts used are still the submissions that exist
    assert c.from_cluster(2, CHAIN, found, now=0.0).stage is r.Stage.HOLD
    # a lower one than the submissions made: exhausted, never refused (the history is longer than the limit)
    lower = c.from_cluster(0, CHAIN, found, now=0.0)
    assert (lower.stage, lower.restarts) == (r.Stage.EXHAUSTED, 1)
    assert r.from_json(lower.as_json()) == lower


def test_a_running_submission_beyond_a_lowered_limit_is_still_waited_for() -> None:
    found = [
        submission_trainjob(1, outcome=r.FAILED, held=True),
        submission_trainjob(2, follows=r.Submission(1, drained="drained")),
    ]
    state = c.from_cluster(0, CHAIN, found, now=0.0)
    assert (state.stage, state.submission) == (r.Stage.OUTCOME, 2)
    failed = r.advance(state, r.Finished(r.FAILED, "", "", 1.0))
    assert failed.stage is r.Stage.EXHAUSTED


def test_a_deleted_submission_is_an_entry_with_no_outcome_and_the_numbering_goes_on() -> None:
    found = [
        submission_trainjob(1, outcome=r.FAILED, held=True),
        submission_trainjob(3, outcome=r.FAILED, follows=r.Submission(2, drained="ceased")),
    ]
    state = c.from_cluster(5, CHAIN, found, now=0.0)
    assert [(e.submission, e.outcome, e.reason, e.drained) for e in state.history] == [
        (1, r.FAILED, "FailedReason", None),  # the TrainJob that said how its pods went is gone
        (2, None, c.DELETED_REASON, "ceased"),
        (3, r.FAILED, "FailedReason", None),
    ]
    assert (state.stage, state.restarts) == (r.Stage.HOLD, 2)


def test_a_last_submission_being_deleted_is_retryable() -> None:
    last = submission_trainjob(1)
    last["metadata"]["deletionTimestamp"] = stamp(5)
    with pytest.raises(UnreachableError, match="is being deleted"):
        c.from_cluster(1, CHAIN, [last], now=0.0)


def renamed(body: dict[str, Any], name: str) -> dict[str, Any]:
    body["metadata"]["name"] = name
    return body


@pytest.mark.parametrize(
    ("foreign", "match"),
    [
        (renamed(submission_trainjob(1), "finetune-v2-1"), "is not one of its submissions"),
        (renamed(submission_trainjob(1), "other"), "is not one of its submissions"),
        (renamed(submission_trainjob(2), "finetune-1"), "is not one of its submissions"),  # label says 2
        (trainjob(name="finetune-1", namespace="ml", job_id="finetune", submission="s1"), "label 's1'"),
        (trainjob(name="finetune-01", namespace="ml", job_id="finetune", submission="01"), "label '01'"),
        (trainjob(name="finetune-27", namespace="ml", job_id="finetune", submission="27"), "label '27'"),
        (trainjob(name="finetune-1", namespace="ml", job_id="finetune", submission=None), "label None"),
    ],
)
def test_a_trainjob_of_the_job_id_that_is_not_a_submission_is_refused(foreign: dict[str, Any], match: str) -> None:
    with pytest.raises(NotInChainError, match=match) as refused:
        c.from_cluster(3, CHAIN, [submission_trainjob(1, outcome=r.FAILED), foreign], now=0.0)
    assert "give the chain a job id of its own" in refused.value.message


def test_a_submission_run_by_another_manager_is_refused() -> None:
    body = submission_trainjob(1)
    body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    with pytest.raises(NotInChainError, match=r"run by kueue.x-k8s.io/multikueue \(spec.managedBy\)"):
        c.from_cluster(3, CHAIN, [body], now=0.0)
    body["spec"]["managedBy"] = v.TRAINER_MANAGED_BY
    assert c.from_cluster(3, CHAIN, [body], now=0.0).stage is r.Stage.OUTCOME


def test_a_submission_whose_admission_number_was_tampered_with_is_refused() -> None:
    body = submission_trainjob(1)
    body["metadata"]["annotations"][v.ANNOTATION_ADMISSION] = "two"
    with pytest.raises(NotManagedError):
        c.from_cluster(3, CHAIN, [body], now=0.0)


def test_an_unreadable_follows_annotation_says_nothing() -> None:
    for raw in ("{not json", "[]", '{"submission": "1", "drained": "drained"}', '{"submission": 1, "drained": "x"}'):
        body = submission_trainjob(2)
        body["metadata"]["annotations"][v.ANNOTATION_FOLLOWS] = raw
        assert r.follows_of(body) is None
    assert r.follows_of(None) is None


def test_the_submission_manifest_records_what_it_follows_and_refuses_what_the_chain_owns() -> None:
    manifest = {"metadata": {"name": "finetune", "namespace": "ml"}, "spec": {}}
    body = r.submission_manifest(manifest, 2, follows=r.Submission(1, drained="ceased"))
    assert r.follows_of(body) == (1, "ceased")
    assert v.ANNOTATION_FOLLOWS not in v.annotations_of(r.submission_manifest(manifest, 1))
    with pytest.raises(Exception, match=r"sets the annotation dispatch\.phpboyscout\.uk/follows"):
        r.submission_manifest(
            {**manifest, "metadata": {**manifest["metadata"], "annotations": {v.ANNOTATION_FOLLOWS: "x"}}}, 1
        )
    with pytest.raises(Exception, match=r"sets spec\.managedBy 'kueue\.x-k8s\.io/multikueue'"):
        r.submission_manifest({**manifest, "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}, 1)


def test_describe_says_what_the_try_found_and_does() -> None:
    assert c.describe(r.start(3, 0.0), CHAIN) == (
        "no TrainJob of job id finetune in namespace ml yet: opening submission 1"
    )
    found = [submission_trainjob(1, outcome=r.FAILED, held=True), submission_trainjob(2)]
    assert c.describe(c.from_cluster(3, CHAIN, found, now=0.0), CHAIN) == (
        "the cluster shows submissions 1 to 2 (1 restart used); ml/finetune-2 runs execution 1: waiting for its outcome"
    )


# --- the read ------------------------------------------------------------------------------------------------


def test_the_read_lists_the_job_id_and_keeps_only_the_chains() -> None:
    api = FakeApi()
    for k in range(1, 8):
        api.add(v.TRAINJOB, submission_trainjob(k, outcome=r.FAILED, held=True))
    api.add(v.TRAINJOB, trainjob(name="other-1", namespace="ml", job_id="other", submission="1"))
    api.add(v.TRAINJOB, submission_trainjob(1, chain=c.Chain("elsewhere", "finetune", "finetune")))
    found = drive(read_chain(CHAIN), api.respond)
    assert [v.name_of(t) for t in found] == sorted(f"finetune-{k}" for k in range(1, 8))
    lists = [request for request in api.requests if isinstance(request, ListObjects)]
    assert [(q.namespace, q.label_selector, q.resource_version) for q in lists] == [
        ("ml", f"{v.LABEL_JOB_ID}=finetune", None)
    ]
    assert not api.writes()
    state = drive(resume(CHAIN, 6, now=1.0), api.respond)
    assert (state.stage, state.submission, state.restarts) == (r.Stage.EXHAUSTED, 7, 6)


def test_the_read_refuses_a_bad_namespace_or_job_id_before_any_request() -> None:
    api = FakeApi()
    for chain in (c.Chain("ML", "finetune", "finetune"), c.Chain("ml", "finetune", "bad id!")):
        with pytest.raises(Exception, match=r"namespace|job id"):
            drive(read_chain(chain), api.respond)
    assert api.requests == []


# --- one chain per DAG run -----------------------------------------------------------------------------------


def test_the_run_key_is_the_runs_own_and_the_same_for_every_try() -> None:
    key = r.run_key(dag_id="nightly", task_id="train", run_id="scheduled__2026-12-05T02:00:00+00:00", date=T0)
    assert key == r.run_key(dag_id="nightly", task_id="train", run_id="scheduled__2026-12-05T02:00:00+00:00", date=T0)
    assert key.startswith("20261205-")
    assert len(key) == r.RUN_KEY_LENGTH - 1
    others = {
        r.run_key(dag_id="nightly", task_id="train", run_id="scheduled__2026-12-06T02:00:00+00:00", date=T0),
        r.run_key(dag_id="nightly", task_id="train", run_id="manual__2026-12-05T10:00:00+00:00", date=T0),
        r.run_key(dag_id="weekly", task_id="train", run_id="scheduled__2026-12-05T02:00:00+00:00", date=T0),
        r.run_key(dag_id="nightly", task_id="eval", run_id="scheduled__2026-12-05T02:00:00+00:00", date=T0),
        r.run_key(
            dag_id="nightly", task_id="train", run_id="scheduled__2026-12-05T02:00:00+00:00", date=T0, map_index=0
        ),
    }
    assert key not in others
    assert len(others) == 5
    # the date is the run's in UTC, whatever zone it came in
    late = datetime(2026, 12, 5, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert r.run_key(dag_id="d", task_id="t", run_id="x", date=late).startswith("20261206-")
    with pytest.raises(ValueError, match="time zone"):
        r.run_key(dag_id="d", task_id="t", run_id="x", date=datetime(2026, 12, 5))


def test_per_run_suffixes_the_name_and_the_job_id() -> None:
    key = "20261205-3fa9c2"
    plain = r.per_run({"metadata": {"name": "resnet", "namespace": "ml"}, "spec": {}}, key)
    assert c.chain_of(plain) == c.Chain("ml", f"resnet-{key}", f"resnet-{key}")
    labelled = r.per_run({"metadata": {"name": "resnet", "namespace": "ml", "labels": {v.LABEL_JOB_ID: "rn"}}}, key)
    assert c.chain_of(labelled) == c.Chain("ml", f"resnet-{key}", f"rn-{key}")
    # the longest name per_run leaves room for: 63 characters with the key and the last submission's "-26"
    longest = "x" * (63 - r.RUN_KEY_LENGTH - 3)
    assert len(r.trainjob_name(r.per_run({"metadata": {"name": longest}}, key)["metadata"]["name"], 26)) == 63
