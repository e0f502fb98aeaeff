"""The settle's shortcut (evidence.py, 4): a release right after a hold skips the settle only when every Job shows
that JobSet resumed it for the current execution and the Job controller acted on the hold since.

The time since the execution started proves nothing by itself: JobSet retries a resume that failed (a 504 from
API Priority and Fairness queueing, a webhook down) from its view for as long as that view shows the JobSet
running, so its resume may still land after the hold however long ago the start was. A Job still suspended from
the earlier hold, with that hold's admission label, is the sign (`schedules/shortcut-before-the-resume.json`
replays the case in the lab, through the real clients).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch.evidence import (
    DEFAULT_SETTLE_SECONDS,
    HoldEvidence,
    judge_hold,
    spec_changed_at,
)
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS

from .support import HOLD, NAME, SERVER_NOW, child_job, jobset, trainjob

ADMISSION = 2
#: what the settle waits: its 90 s and the bound on the API server replicas' clock skew (evidence.py, 4)
WAIT = DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS


LONG_BEFORE_THE_HOLD = HOLD - timedelta(seconds=WAIT + 5)


def _judge(job: dict[str, Any], *, started: datetime = LONG_BEFORE_THE_HOLD) -> float | None:
    """How long the settle has left for a release now (None: the hold is observed, the shortcut applied)."""
    held = trainjob(suspend=True, suspended_condition="True", admission=str(ADMISSION))
    record = ExecutionPods(ADMISSION, {}, since=HOLD, started=started)
    evidence = HoldEvidence(jobset(), {f"{NAME}-node-0": job}, record, SERVER_NOW)
    verdict = judge_hold(held, evidence, ADMISSION)
    if verdict is None:
        return None
    assert verdict.seconds_left is not None, verdict.reason  # only the settle may be missing here
    return verdict.seconds_left


def test_a_job_resumed_for_this_execution_and_suspended_by_the_job_controller_skips_the_settle() -> None:
    assert _judge(child_job(label=ADMISSION, started=True, suspended_condition=True)) is None


def test_a_job_still_suspended_from_the_earlier_hold_waits_the_settle() -> None:
    """JobSet's resume for this execution may still be in flight: the Job carries the earlier execution's label."""
    left = _judge(child_job(label=ADMISSION - 1, started=True, suspended_condition=True))
    assert left == pytest.approx(WAIT - 1)


def test_a_job_never_resumed_waits_the_settle() -> None:
    assert _judge(child_job(label=None, started=False, suspended_condition=False)) is not None


@pytest.mark.parametrize(
    ("started", "suspended_condition"),
    [(False, True), (True, False)],
    ids=["no-start-time", "no-suspended-condition"],
)
def test_a_job_the_job_controller_has_not_acted_on_waits_the_settle(started: bool, suspended_condition: bool) -> None:
    assert _judge(child_job(label=ADMISSION, started=started, suspended_condition=suspended_condition)) is not None


def test_a_finished_job_needs_nothing_more() -> None:
    assert _judge(child_job(label=ADMISSION - 1, started=True, suspended_condition=False, finished=True)) is None


def test_an_execution_started_less_than_the_settle_before_the_hold_waits_the_settle() -> None:
    recent = HOLD - timedelta(seconds=WAIT - 1)
    assert _judge(child_job(label=ADMISSION, started=True, suspended_condition=True), started=recent) is not None


# --- the settle counts from when the hold reached the JobSet and the Jobs ------------------------------------


def _changed(at: datetime, subresource: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"manager": "m", "operation": "Update", "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _settle_left(
    jobset_changed: datetime | None, *, status_changed: datetime | None = None, since: datetime = HOLD
) -> float | None:
    """How long the settle has left for a release now, for a hold recorded at `since` of an execution started
    just before it (no shortcut), whose JobSet's spec last changed at `jobset_changed`."""
    held = trainjob(suspend=True, suspended_condition="True", admission=str(ADMISSION))
    body = jobset()
    entries = [] if jobset_changed is None else [_changed(jobset_changed)]
    if status_changed is not None:
        entries.append(_changed(status_changed, "status"))
    body["metadata"]["managedFields"] = entries
    job = child_job(label=ADMISSION - 1, started=True, suspended_condition=True)
    record = ExecutionPods(ADMISSION, {}, since=since, started=since - timedelta(seconds=5))
    verdict = judge_hold(held, HoldEvidence(body, {f"{NAME}-node-0": job}, record, SERVER_NOW), ADMISSION)
    if verdict is None:
        return None
    assert verdict.seconds_left is not None, verdict.reason
    return verdict.seconds_left


def test_the_settle_counts_from_the_record_when_the_jobset_changed_before_it() -> None:
    assert _settle_left(HOLD - timedelta(seconds=30)) == pytest.approx(WAIT - 1)


def test_the_settle_counts_from_the_jobsets_suspension_when_the_hold_reached_it_late() -> None:
    """Trainer's apply of the hold was late: JobSet may have resumed a Job from its older view until then."""
    reached = HOLD + timedelta(seconds=120)
    assert _settle_left(reached) == pytest.approx(WAIT + 120 - 1)


def test_a_status_write_is_not_a_change_of_the_spec() -> None:
    assert _settle_left(None, status_changed=HOLD + timedelta(seconds=120)) == pytest.approx(WAIT - 1)


def test_the_settle_is_over_once_as_long_has_passed_since_the_late_change() -> None:
    now = SERVER_NOW
    long_held = now - timedelta(seconds=300)
    assert _settle_left(now - timedelta(seconds=WAIT), since=long_held) is None
    assert _settle_left(now - timedelta(seconds=80), since=long_held) == pytest.approx(WAIT - 80)


def test_the_skew_bound_is_part_of_the_wait() -> None:
    """Finding 5: two `GET /version` answers may come from two API server replicas whose clocks differ. The
    settle waits the bound on that skew too (a parameter): with 45 s of it allowed, 45 s more than without."""
    held = trainjob(suspend=True, suspended_condition="True", admission=str(ADMISSION))
    job = child_job(label=ADMISSION - 1, started=True, suspended_condition=True)
    record = ExecutionPods(ADMISSION, {}, since=HOLD, started=HOLD - timedelta(seconds=5))
    verdicts = [
        judge_hold(
            held,
            HoldEvidence(jobset(), {f"{NAME}-node-0": job}, record, SERVER_NOW, clock_skew_seconds=skew),
            ADMISSION,
        )
        for skew in (0.0, 45.0)
    ]
    left = [v.seconds_left if v is not None else None for v in verdicts]
    assert left == [pytest.approx(DEFAULT_SETTLE_SECONDS - 1), pytest.approx(DEFAULT_SETTLE_SECONDS + 45 - 1)]
    assert verdicts[1] is not None
    assert "plus 45 s for the API servers' clocks" in verdicts[1].reason


def test_spec_changed_at_takes_the_newest_time_outside_status_and_skips_entries_without_one() -> None:
    obj = {
        "metadata": {
            "managedFields": [
                _changed(HOLD),
                _changed(HOLD + timedelta(seconds=7)),
                _changed(HOLD + timedelta(seconds=60), "status"),
                {"manager": "no-time", "operation": "Update"},
            ]
        }
    }
    assert spec_changed_at(obj) == HOLD + timedelta(seconds=7)
    assert spec_changed_at({"metadata": {}}) is None
    assert spec_changed_at(None) is None
