"""The invariants, as functions from what the lab recorded to the list of violations (empty: it held).

The promise (DESIGN §1): one TrainJob never has two executions at once. Checked two independent ways, so that
neither a bug in one nor a hostile user who forges pod labels can hide an overlap:

* by labels: the lab's overlap recorder groups processes by the (job id, submission, A) labels dispatch's
  runtime patch puts on the pods (`lab/overlap.py`);
* by admission: each process's pod is attributed to the admission that preceded its creation in the store's
  one global order (the ledger's revisions). Pods of a held object are not created (it stays held until the
  write that admits it), so a pod created after admission k and before admission k+1 belongs to execution k,
  whatever its labels say.

The admission number (DESIGN §2): A only grows, by exactly one per admission, in the write that admits, and
nothing but a dispatch writer's admitting write changes it. What callers were told must match what happened:
an admission is returned to its caller, or its answer was lost on the wire; never "failed" after it applied.

No admission without a full check (DESIGN §3): each admitting write follows, in the same caller's requests, a
successful read of the TrainJob at the resourceVersion the write is conditional on, then the JobSet and the
runtime, then a complete read of the pods (every page, both selections or the full list).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.lab.overlap import ProcessRecord

from .callers import Outcome
from .harness import CALLERS, Call, PodCreated, TrainJobWrite

RUNTIME_RESOURCES = frozenset({v.CLUSTER_TRAINING_RUNTIME.resource, v.TRAINING_RUNTIME.resource})
ADMITTING_OPERATIONS = frozenset({"release", "open"})


# --- the promise -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attributed:
    process: ProcessRecord
    admission: TrainJobWrite | None

    @property
    def key(self) -> tuple[str, int]:
        """(TrainJob uid, A) of the admission; ("", 0) for a pod created before any admission."""
        if self.admission is None:
            return ("", 0)
        return (self.admission.uid, int(self.admission.new_admission or 0))


def attribute(
    processes: Iterable[ProcessRecord], pods: Mapping[str, PodCreated], writes: Sequence[TrainJobWrite]
) -> list[Attributed]:
    """Each process with the admission its pod was created under (by store revision)."""
    admissions: dict[tuple[str, str], list[TrainJobWrite]] = {}
    for write in writes:
        if write.admitted:
            admissions.setdefault((write.namespace, write.name), []).append(write)
    result = []
    for process in processes:
        created = pods.get(process.pod_uid)
        candidates = admissions.get((process.namespace, process.trainjob), [])
        if created is None:
            result.append(Attributed(process, None))
            continue
        position = bisect.bisect_left([w.revision for w in candidates], created.revision)
        result.append(Attributed(process, candidates[position - 1] if position else None))
    return result


def overlaps_by_admission(attributed: Sequence[Attributed]) -> list[str]:
    """Two processes of one TrainJob (name) from different admissions that ran at the same lab time."""
    found = []
    by_trainjob: dict[tuple[str, str], list[Attributed]] = {}
    for item in attributed:
        by_trainjob.setdefault((item.process.namespace, item.process.trainjob), []).append(item)
    for (namespace, name), items in sorted(by_trainjob.items()):
        for i, first in enumerate(items):
            for second in items[i + 1 :]:
                if first.key != second.key and first.process.intersects(second.process):
                    found.append(
                        f"{namespace}/{name}: process of {first.process.pod} (admission {first.key[1]}) on "
                        f"{first.process.node} [{first.process.start}, {first.process.stop}) overlaps "
                        f"{second.process.pod} (admission {second.key[1]}) on {second.process.node} "
                        f"[{second.process.start}, {second.process.stop})"
                    )
    return found


def unadmitted_pods(attributed: Sequence[Attributed]) -> list[str]:
    """Processes whose pod no admission preceded: something unsuspended the object besides dispatch."""
    return [
        f"{a.process.namespace}/{a.process.pod} ran without any admission before its creation"
        for a in attributed
        if a.admission is None
    ]


def label_mismatches(attributed: Sequence[Attributed], forged: Iterable[str]) -> list[str]:
    """A process whose A label is not its admission's A (TrainJobs whose labels a foreign patch forged are
    left out: their labels are the hostile user's, the attribution still holds)."""
    skip = set(forged)
    found = []
    for item in attributed:
        if item.admission is None or item.process.trainjob in skip:
            continue
        label = item.process.labels.get(v.POD_LABEL_ADMISSION)
        if label != item.admission.new_admission:
            found.append(
                f"{item.process.namespace}/{item.process.pod}: label A={label!r} but created under admission "
                f"A={item.admission.new_admission}"
            )
    return found


# --- the admission number ----------------------------------------------------------------------------------


def _number(value: str | None) -> int | None:
    if value is None:
        return 0
    return int(value) if value.isdigit() else None


def admission_number_violations(writes: Iterable[TrainJobWrite]) -> list[str]:
    """A grows by exactly one in each admitting write of a dispatch caller, and changes in no other write."""
    found = []
    for write in writes:
        if write.kind == "ADDED":
            if write.new_admission is not None:
                found.append(f"{write.describe()}: a new TrainJob carries A")
            continue
        if write.kind == "DELETED":
            continue
        old, new = _number(write.old_admission), _number(write.new_admission)
        if write.admitted:
            if write.user not in CALLERS:
                found.append(f"{write.describe()}: the hold was lifted by someone other than dispatch")
            elif old is None or new != old + 1:
                found.append(f"{write.describe()}: an admission must raise A by exactly one")
        elif write.new_admission != write.old_admission:
            found.append(f"{write.describe()}: A changed in a write that did not admit")
    return found


def admissions_count_violations(
    writes: Sequence[TrainJobWrite], live: Mapping[tuple[str, str], str | None]
) -> list[str]:
    """The live A of each TrainJob equals the number of admissions its instance (uid) has had."""
    found = []
    per_uid: dict[str, int] = {}
    uid_of: dict[tuple[str, str], str] = {}
    for write in writes:
        if write.kind == "ADDED":
            uid_of[(write.namespace, write.name)] = write.uid
        per_uid[write.uid] = per_uid.get(write.uid, 0) + write.admitted
    for key, value in live.items():
        uid = uid_of.get(key)
        if uid is None:
            continue
        if _number(value) != per_uid.get(uid, 0):
            found.append(f"{key[0]}/{key[1]}: A is {value} after {per_uid.get(uid, 0)} admissions")
    return found


# --- what callers were told ----------------------------------------------------------------------------------


def applied_by(outcome: Outcome, writes: Iterable[TrainJobWrite]) -> list[TrainJobWrite]:
    serials = {call.serial for call in outcome.calls}
    return [w for w in writes if w.admitted and w.user == outcome.caller and w.serial in serials]


def outcome_violations(outcome: Outcome, writes: Sequence[TrainJobWrite]) -> list[str]:
    found = []
    if outcome.family == "unexpected":
        found.append(f"{outcome.describe()}: an exception outside DESIGN §5 ({type(outcome.error).__name__})")
    applied = applied_by(outcome, writes)
    if len(applied) > 1:
        found.append(f"{outcome.describe()}: {len(applied)} admissions in one call")
    if outcome.operation not in ADMITTING_OPERATIONS and applied:
        found.append(f"{outcome.describe()}: {outcome.operation} admitted")
    if applied:
        write = applied[0]
        execution = outcome.execution
        if outcome.error is None:
            if execution is None or str(execution.admission) != write.new_admission:
                found.append(f"{outcome.describe()}: admitted A={write.new_admission} but returned {execution}")
        else:
            answer = next((c for c in outcome.calls if c.serial == write.serial), None)
            dropped = answer is not None and answer.status == "dropped"
            # a client that gave up waiting (its read timeout) saw no answer either, and says so
            unknown = "may or may not have been applied" in str(outcome.error)
            if not (dropped or unknown):
                found.append(
                    f"{outcome.describe()}: admitted A={write.new_admission} but the caller was told it failed"
                )
            if outcome.family != "unreachable":
                found.append(f"{outcome.describe()}: a lost answer after an admission must be retryable")
    elif outcome.error is None and outcome.execution is not None and outcome.operation in ADMITTING_OPERATIONS:
        known = {w.new_admission for w in writes if w.admitted and w.name == outcome.target.split("/")[-1]}
        if str(outcome.execution.admission) not in known:
            found.append(f"{outcome.describe()}: returned an execution that was never admitted")
    return found


# --- no admission without a full check ----------------------------------------------------------------------


@dataclass(frozen=True)
class _PodList:
    calls: tuple[Call, ...]

    @property
    def selector(self) -> str | None:
        return self.calls[0].query.get("labelSelector")

    @property
    def complete(self) -> bool:
        return all(c.ok for c in self.calls) and self.calls[-1].answer_continue is None

    @property
    def resource_version(self) -> str | None:
        return self.calls[0].answer_rv

    @property
    def pinned_to(self) -> str | None:
        query = self.calls[0].query
        return query.get("resourceVersion") if query.get("resourceVersionMatch") == "Exact" else None


def _pod_lists(calls: Sequence[Call]) -> list[_PodList]:
    lists: list[list[Call]] = []
    for call in calls:
        if call.resource != "pods" or call.verb != "list":
            continue
        if "continue" in call.query and lists:
            lists[-1].append(call)
        else:
            lists.append([call])
    return [_PodList(tuple(group)) for group in lists]


def _complete_read(lists: Sequence[_PodList], name: str) -> _PodList | None:
    """The first list of the last complete pod read: a full list, or the pinned pair of selector lists."""
    jobset_selector = f"{v.LABEL_JOBSET_NAME}={name}"
    for index in range(len(lists) - 1, -1, -1):
        last = lists[index]
        if not last.complete:
            return None
        if last.selector is None:
            return last
        if last.pinned_to is not None and index > 0:
            first = lists[index - 1]
            selectors = {first.selector, last.selector}
            if (
                first.complete
                and first.pinned_to is None
                and first.resource_version == last.pinned_to
                and jobset_selector in selectors
                and any(s and v.LABEL_JOB_ID in s for s in selectors)
            ):
                return first
        return None
    return None


def without_resends(calls: Sequence[Call]) -> list[Call]:
    """The calls without those whose connection dropped and that the client library sent again at once, as
    aiohttp does for an idempotent request on a reused connection: the repeated request is the one that
    counts."""
    kept = []
    for index, call in enumerate(calls):
        following = calls[index + 1] if index + 1 < len(calls) else None
        same = following is not None and (following.method, following.path, following.query) == (
            call.method,
            call.path,
            call.query,
        )
        if call.status == "dropped" and same:
            continue
        kept.append(call)
    return kept


def full_check_problems(calls: Sequence[Call], put: Call, name: str) -> list[str]:
    """What is missing from the check before the admitting write `put` (the caller's calls, in order)."""
    before = without_resends(calls[: calls.index(put) + 1])[:-1]
    reads = [
        i
        for i, c in enumerate(before)
        if c.method == "GET"
        and c.resource == v.TRAINJOB.resource
        and c.name == name
        and c.ok
        and c.answer_rv == put.body_rv
    ]
    if not reads:
        return [f"no successful read of TrainJob {name} at resourceVersion {put.body_rv} before {put.describe()}"]
    after = before[reads[-1] + 1 :]
    problems = []
    if not any(c.resource == v.JOBSET.resource and (c.ok or c.status == 404) for c in after):
        problems.append("the JobSet was not read after the TrainJob")
    if not any(c.resource in RUNTIME_RESOURCES and c.ok for c in after):
        problems.append("the runtime was not read after the TrainJob")
    lists = _pod_lists(after)
    read = _complete_read(lists, name)
    if read is None:
        problems.append(f"no complete read of the pods after the TrainJob ({len(lists)} lists)")
    else:
        tail = after[after.index(read.calls[0]) :]
        failed = [c for c in tail if not c.ok and not (c.resource == "nodes" and c.status in (403, 404))]
        if failed:
            problems.append("failed requests after the pod read: " + "; ".join(c.describe() for c in failed))
    return [f"{put.describe()}: {problem}" for problem in problems]


def unchecked_admissions(outcomes: Iterable[Outcome], writes: Sequence[TrainJobWrite]) -> list[str]:
    found = []
    for outcome in outcomes:
        for write in applied_by(outcome, writes):
            put = next((c for c in outcome.calls if c.serial == write.serial), None)
            if put is None:
                found.append(f"{outcome.describe()}: the admitting write is not in the caller's requests")
                continue
            found += full_check_problems(outcome.calls, put, write.name)
    return found
