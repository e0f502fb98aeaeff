"""The execution a release is about to admit, kept across the task's retries in Airflow 3.3's task state store.

The lost-response problem (DESIGN §3, last paragraph): try 1 sends the admitting write, the API server applies
it, and the answer is lost (a dropped connection, a worker killed). Try 2 must not admit again. When it finds
the object running, the release program already returns the current execution and writes nothing; but by then
the object may be held again (someone held it after our admission), and a plain release would admit a second
execution on behalf of the same task.

So, before the admitting write, the operator records the execution it expects to admit (the TrainJob's uid,
job id, submission, and A+1) under `STATE_KEY` in `context["task_state_store"]`, which is scoped to (dag, run,
task, map index) and survives retries (AIP-103; cncf's KubernetesPodOperator keeps its pod identity there the
same way, `durable=True`). A later try that finds the same object (same uid, job id and submission) with an
admission number at or above the recorded one knows the admission happened, by this task or by someone else
since, and returns the object's current execution instead of admitting again. The record is deleted once the
release answered, so clearing a finished task to release again admits as it should.

Below Airflow 3.3 there is no task state store: `ExecutionRecords` then records nothing, and a retry relies on
the release program alone (which is still never a double admission of a running object).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

from airflow_provider_dispatch.dispatch.assessment import ManagedObject
from airflow_provider_dispatch.version_compat import AIRFLOW_V_3_3_PLUS

#: the task state store key
STATE_KEY: Final = "dispatch_expected_execution"


@dataclass(frozen=True)
class ExpectedExecution:
    """The execution a try was about to admit. `uid` None: the TrainJob did not exist yet (an open)."""

    ref: str
    uid: str | None
    job_id: str
    submission: str
    admission: int

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: object) -> ExpectedExecution | None:
        """The record, or None when the stored value is not one (another writer, another version)."""
        if not isinstance(value, Mapping):
            return None
        ref, uid, job_id = value.get("ref"), value.get("uid"), value.get("job_id")
        submission, admission = value.get("submission"), value.get("admission")
        if not (isinstance(ref, str) and isinstance(job_id, str) and isinstance(submission, str)):
            return None
        if uid is not None and not isinstance(uid, str):
            return None
        if isinstance(admission, bool) or not isinstance(admission, int):
            return None
        return cls(ref, uid, job_id, submission, admission)

    def reached_by(self, obj: ManagedObject) -> bool:
        """The object is the recorded one and its admission number reached the recorded one."""
        same = (
            str(obj.ref) == self.ref
            and obj.job_id == self.job_id
            and obj.submission == self.submission
            and (self.uid is None or obj.uid == self.uid)
        )
        return same and obj.admission >= self.admission


class ExecutionRecords:
    """The task state store of one task instance, as far as the release needs it (a no-op without one)."""

    def __init__(self, context: Mapping[str, Any], log: logging.Logger | Any) -> None:
        self.store = context.get("task_state_store") if AIRFLOW_V_3_3_PLUS else None
        self.log = log

    @property
    def available(self) -> bool:
        return self.store is not None

    def expected(self, ref: str) -> ExpectedExecution | None:
        if self.store is None:
            return None
        record = ExpectedExecution.from_json(self.store.get(STATE_KEY))
        return record if record is not None and record.ref == ref else None

    def record(self, expected: ExpectedExecution) -> None:
        """Store `expected`; say so in the log once per expected execution (an open records again when the
        TrainJob it created has a uid, which is the same expectation, said at debug level)."""
        if self.store is None:
            return
        before = ExpectedExecution.from_json(self.store.get(STATE_KEY))
        self.store.set(STATE_KEY, expected.as_json())
        same = before is not None and replace(before, uid=expected.uid) == expected
        say = self.log.debug if same else self.log.info
        say(
            "Noted in the task state store that this try admits execution %s of TrainJob %s (job id %s, submission "
            "%s), so that a retry after a lost answer returns it instead of admitting again",
            expected.admission,
            expected.ref,
            expected.job_id,
            expected.submission,
        )

    def forget(self) -> None:
        if self.store is not None:
            self.store.delete(STATE_KEY)


__all__ = ["STATE_KEY", "ExecutionRecords", "ExpectedExecution"]
