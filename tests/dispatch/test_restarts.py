"""The restart chain's state machine (dispatch/restarts.py): every stage, every event, every limit."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from airflow_provider_dispatch.dispatch import restarts as r

OUTCOMES = st.sampled_from([r.COMPLETE, r.FAILED])
TEXT = st.text(max_size=2 * r.TEXT_LIMIT)
STAGES_AND_EVENTS = [
    (stage, event)
    for stage in r.Stage
    for event in (r.Opened(1, 0.0), r.Finished(r.FAILED, "", "", 0.0), r.Held(0.0), r.Drained("drained", 0.0))
]


def state_at(stage: r.Stage, max_restarts: int = 2) -> r.RestartState:
    return r.RestartState(max_restarts, stage, 0.0, (r.Submission(1),))


def drive(max_restarts: int, outcomes: list[str], texts: tuple[str, str] = ("", "")) -> list[r.RestartState]:
    """Run the chain as the operator does, taking submission k's outcome from `outcomes[k-1]`; every state."""
    state = r.start(max_restarts, 0.0)
    states = [state]
    clock = 0.0
    while not state.stage.final:
        clock += 1.0
        if state.stage is r.Stage.OPEN:
            event: r.Event = r.Opened(1, clock)
        elif state.stage is r.Stage.OUTCOME:
            event = r.Finished(outcomes[state.submission - 1], texts[0], texts[1], clock)
        elif state.stage is r.Stage.HOLD:
            event = r.Held(clock)
        else:
            event = r.Drained("ceased" if state.submission % 2 else "drained", clock)
        state = r.advance(state, event)
        states.append(state)
    return states


@given(
    max_restarts=st.integers(0, r.MAX_RESTARTS_LIMIT),
    outcomes=st.lists(OUTCOMES, min_size=r.MAX_RESTARTS_LIMIT + 1, max_size=r.MAX_RESTARTS_LIMIT + 1),
)
def test_the_chain_stops_at_the_first_complete_or_after_max_restarts(max_restarts: int, outcomes: list[str]) -> None:
    states = drive(max_restarts, outcomes)
    final = states[-1]
    allowed = outcomes[: max_restarts + 1]
    succeeded = r.COMPLETE in allowed
    submissions = allowed.index(r.COMPLETE) + 1 if succeeded else max_restarts + 1
    assert final.stage is (r.Stage.SUCCEEDED if succeeded else r.Stage.EXHAUSTED)
    assert [entry.submission for entry in final.history] == list(range(1, submissions + 1))
    assert final.restarts == submissions - 1 <= max_restarts
    assert [entry.outcome for entry in final.history] == outcomes[:submissions]
    # every submission before the last failed and was drained before the next one was opened
    for before, after in zip(final.history, final.history[1:], strict=False):
        assert (before.outcome, before.drained is not None) == (r.FAILED, True)
        assert before.drained_at is not None
        assert after.opened_at is not None
        assert before.drained_at <= after.opened_at
    assert final.current.drained is None
    # a restart is opened only from a drain, and a hold only follows a Failed
    for previous, following in itertools.pairwise(states):
        if following.stage is r.Stage.OPEN:
            assert previous.stage is r.Stage.DRAIN
        if following.stage is r.Stage.HOLD:
            assert (previous.stage, following.current.outcome) == (r.Stage.OUTCOME, r.FAILED)


@given(max_restarts=st.integers(0, r.MAX_RESTARTS_LIMIT), outcomes=st.lists(OUTCOMES, min_size=26, max_size=26))
def test_every_state_round_trips_through_json(max_restarts: int, outcomes: list[str]) -> None:
    for state in drive(max_restarts, outcomes, ("BackoffLimitExceeded", "Job failed")):
        text = json.dumps(state.as_json())
        assert r.from_json(json.loads(text)) == state
        assert r.from_json(text) == state


@given(reason=TEXT, message=TEXT)
@example(reason="\U0001f600" * 1000, message="\x00 " * 1000)  # the longest JSON escapes, with and without words
def test_the_longest_chain_stays_within_the_state_limit(reason: str, message: str) -> None:
    final = drive(r.MAX_RESTARTS_LIMIT, [r.FAILED] * (r.MAX_RESTARTS_LIMIT + 1), (reason, message))[-1]
    assert final.stage is r.Stage.EXHAUSTED
    assert all(len(entry.reason) <= r.TEXT_LIMIT and len(entry.message) <= r.TEXT_LIMIT for entry in final.history)
    size = len(json.dumps(final.as_json(), separators=(",", ":"), ensure_ascii=True))
    assert size <= r.STATE_LIMIT


@pytest.mark.parametrize(("stage", "event"), STAGES_AND_EVENTS, ids=lambda x: getattr(x, "value", type(x).__name__))
def test_each_stage_takes_only_its_own_event(stage: r.Stage, event: r.Event) -> None:
    expected = {r.Stage.OPEN: r.Opened, r.Stage.OUTCOME: r.Finished, r.Stage.HOLD: r.Held, r.Stage.DRAIN: r.Drained}
    state = state_at(stage)
    if expected.get(stage) is type(event):
        assert r.advance(state, event) != state
    else:
        with pytest.raises(r.TransitionError, match=f"stage {stage.value} expects"):
            r.advance(state, event)


@pytest.mark.parametrize(
    ("stage", "event", "match"),
    [
        (r.Stage.OPEN, r.Opened(-1, 0.0), "never negative"),
        (r.Stage.OUTCOME, r.Finished("Succeeded", "", "", 0.0), "Complete or Failed"),
        (r.Stage.DRAIN, r.Drained("progress", 0.0), "drained or ceased"),
    ],
)
def test_an_impossible_event_is_refused(stage: r.Stage, event: r.Event, match: str) -> None:
    with pytest.raises(r.TransitionError, match=match):
        r.advance(state_at(stage), event)


def test_zero_restarts_gives_up_after_the_first_failure() -> None:
    state = r.advance(r.advance(r.start(0, 0.0), r.Opened(1, 1.0)), r.Finished(r.FAILED, "Failed", "exit 3", 2.0))
    assert state.stage is r.Stage.EXHAUSTED
    message = r.give_up_message(state, "ns/train-1")
    assert message.startswith("gave up after 0 restarts (max_restarts=0): submission 1, TrainJob ns/train-1")
    assert "ended Failed (Failed: exit 3)" in message


def test_kueue_admission_zero_is_an_opening() -> None:
    state = r.advance(r.start(1, 0.0), r.Opened(0, 5.0))
    assert (state.stage, state.current.admission, state.stage_started) == (r.Stage.OUTCOME, 0, 5.0)


def test_kueue_mode_records_the_execution_kueue_ran() -> None:
    """Opened as 0 (Kueue admits later): the outcome's execution is the submission's, in the history."""
    opened = r.advance(r.start(1, 0.0), r.Opened(0, 5.0))
    finished = r.advance(opened, r.Finished(r.FAILED, "Failed", "exit 3", 6.0, admission=2))
    assert (finished.stage, finished.current.admission) == (r.Stage.HOLD, 2)
    unknown = r.advance(opened, r.Finished(r.FAILED, "Failed", "exit 3", 6.0))
    assert unknown.current.admission == 0


@pytest.mark.parametrize(
    ("opened", "finished", "match"),
    [(1, 2, "opened as execution 1; the outcome of execution 2 is not its"), (0, -1, "never negative")],
)
def test_an_outcome_of_another_execution_is_refused(opened: int, finished: int, match: str) -> None:
    state = r.advance(r.start(1, 0.0), r.Opened(opened, 5.0))
    with pytest.raises(r.TransitionError, match=match):
        r.advance(state, r.Finished(r.COMPLETE, "", "", 6.0, admission=finished))


@pytest.mark.parametrize("value", [0, 3, r.MAX_RESTARTS_LIMIT, "2", " 4 "])
def test_max_restarts_accepts_integers_and_their_text(value: object) -> None:
    assert r.validate_max_restarts(value) == int(str(value).strip())


@pytest.mark.parametrize("value", [-1, r.MAX_RESTARTS_LIMIT + 1, True, 2.0, "1.5", "", "None", None, "-1"])
def test_max_restarts_refuses_anything_else(value: object) -> None:
    with pytest.raises(ValueError, match="max_restarts must be an integer from 0 to"):
        r.validate_max_restarts(value)


def good_json() -> dict[str, Any]:
    return drive(2, [r.FAILED, r.COMPLETE])[-1].as_json()


@pytest.mark.parametrize(
    "damage",
    [
        lambda s: s.update(stage="running"),
        lambda s: s.update(max_restarts=-1),
        lambda s: s.update(stage_started="now"),
        lambda s: s.update(history=[]),
        lambda s: s.update(history=s["history"] * 3),
        lambda s: s["history"][0].update(submission=2),
        lambda s: s["history"][0].update(admission=-1),
        lambda s: s["history"][0].update(outcome="Succeeded"),
        lambda s: s["history"][0].update(drained="progress"),
        lambda s: s["history"][0].update(reason="x" * (r.TEXT_LIMIT + 1)),
        lambda s: s["history"][0].update(opened_at="yesterday"),
        lambda s: s.update(history="none"),
    ],
)
def test_a_malformed_state_is_refused(damage: Any) -> None:
    state = good_json()
    damage(state)
    with pytest.raises(r.TransitionError):
        r.from_json(state)


@pytest.mark.parametrize("value", ["{not json", "[]", 3, None])
def test_what_is_not_a_state_object_is_refused(value: object) -> None:
    with pytest.raises(r.TransitionError):
        r.from_json(value)


def test_the_trainjob_of_submission_k() -> None:
    assert [r.trainjob_name("train", k) for k in (1, 2, 12)] == ["train-1", "train-2", "train-12"]
