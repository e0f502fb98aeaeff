"""The invariants, as functions from what the lab recorded to the list of violations (empty: it held).

The promise (DESIGN §1, widened): no two processes of one rank (TrainJob, replicated job, job index, pod index)
ever run at once, within one execution or across executions, and every pod carries the admission number of the
execution it was created under. Overlaps of executions are checked two independent ways, so that neither a bug
in one nor a hostile user who forges pod labels can hide an overlap:

* by labels: the lab's overlap recorder groups processes by the (job id, submission, A) labels dispatch's
  runtime patch puts on the pods (`lab/truth/overlap.py`);
* by admission: each process's pod is attributed to the admission that preceded its creation in the store's
  one global order (the ledger's revisions). Pods of a held object are not created (it stays held until the
  write that admits it), so a pod created after admission k and before admission k+1 belongs to execution k,
  whatever its labels say.

Ranks are checked twice as well: by the lab recorder (`OverlapRecorder.rank_overlaps`) and here (`rank_overlaps`,
from this test's own ledger of pod creations). Both judge a pod by what it was created as (`PodIdentity`), so a
label edited after the fact (a pod taken out of its controller) neither hides a process nor invents one, and the
admission label is the one the pod was created with.

Who may admit and raise A: in plain mode a dispatch caller, in one write that lifts the hold and raises A by
one. In Kueue mode the admission check controller (its own identity) raises A by one while the TrainJob is
suspended, and Kueue unsuspends it; each Kueue admission must come after at least one raise since the previous
one. A third party may suspend a TrainJob and resume what it suspended (the model's `third_party_suspend` and
`third_party_resume`, the latter only once nothing of the TrainJob runs): that resume is not an admission by
dispatch, raises nothing, and its pods belong to the execution that was running (same A).

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
from airflow_provider_dispatch_lab.truth.overlap import ProcessRecord

from .callers import Outcome
from .harness import ADMISSION_CONTROLLER, CALLERS, HOSTILE, KUEUE_USER, Call, PodCreated, TrainJobWrite

RUNTIME_RESOURCES = frozenset({v.CLUSTER_TRAINING_RUNTIME.resource, v.TRAINING_RUNTIME.resource})
ADMITTING_OPERATIONS = frozenset({"release", "open"})


# --- the promise -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attributed:
    process: ProcessRecord
    admission: TrainJobWrite | None
    created: PodCreated | None = None

    @property
    def created_labels(self) -> Mapping[str, str]:
        """The pod's labels at creation (this test's ledger), else when the process started."""
        if self.created is not None and self.created.identity is not None:
            return self.created.identity.labels
        return self.process.labels

    @property
    def rank(self) -> tuple[str, str, str, str]:
        if self.created is not None and self.created.identity is not None:
            return self.created.identity.rank
        return self.process.rank

    @property
    def attempt(self) -> str:
        if self.created is not None and self.created.identity is not None:
            return self.created.identity.attempt
        return self.process.created.attempt

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
        if write.admitted and not is_third_party_resume(write):
            admissions.setdefault((write.namespace, write.name), []).append(write)
    result = []
    for process in processes:
        created = pods.get(process.pod_uid)
        if created is None:
            result.append(Attributed(process, None))
            continue
        candidates = admissions.get((process.namespace, created.trainjob or process.trainjob), [])
        position = bisect.bisect_left([w.revision for w in candidates], created.revision)
        result.append(Attributed(process, candidates[position - 1] if position else None, created))
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


def early_admissions(attributed: Sequence[Attributed], writes: Sequence[TrainJobWrite]) -> list[str]:
    """An admission at a lab time when a process of an earlier execution of the TrainJob (name) still ran: the
    promise itself, "nothing re-admits an object while any pod of it may still run" (DESIGN §1). Judged at the
    admitting write, whether or not a process of the new execution ever starts beside the old one: with
    `podReplacementPolicy: Failed` a Job keeps an index until its old pod is gone, so an overlap may never come,
    and the admission was still too early. Third parties' resumes are not admissions."""
    found = []
    for write in writes:
        if not write.admitted or is_third_party_resume(write):
            continue
        for item in attributed:
            process = item.process
            if (process.namespace, process.trainjob) != (write.namespace, write.name) or item.admission is None:
                continue
            earlier = item.admission.revision < write.revision
            if earlier and process.start < write.lab_time and (process.stop is None or process.stop > write.lab_time):
                found.append(
                    f"{write.describe()}: admitted while {process.pod} (admission {item.key[1]}) still ran on "
                    f"{process.node} [{process.start}, {process.stop})"
                )
    return found


def rank_overlaps(attributed: Sequence[Attributed]) -> list[str]:
    """Two processes of two pods of one rank (TrainJob, replicated job, job index, pod index) that ran at the same
    lab time, whichever executions they belong to (within one: upstream's H1 and H2; across two: a re-admission
    too early). Pods without rank keys (made by hand) are left out."""
    found = []
    by_rank: dict[tuple[str, tuple[str, str, str, str]], list[Attributed]] = {}
    for item in attributed:
        if item.rank[1:] != ("", "", ""):
            by_rank.setdefault((item.process.namespace, item.rank), []).append(item)
    for (namespace, rank), items in sorted(by_rank.items()):
        for i, first in enumerate(items):
            for second in items[i + 1 :]:
                if first.process.pod_uid != second.process.pod_uid and first.process.intersects(second.process):
                    found.append(
                        f"{namespace}/{rank[0]}: two processes of rank {'/'.join(rank[1:])}: "
                        f"{first.process.pod} (admission {first.key[1]}) on {first.process.node} "
                        f"[{first.process.start}, {first.process.stop}) and {second.process.pod} (admission "
                        f"{second.key[1]}) on {second.process.node} [{second.process.start}, {second.process.stop})"
                    )
    return found


def attempt_overlaps(attributed: Sequence[Attributed]) -> list[str]:
    """Two processes of one execution but of two JobSet restart attempts that ran at the same lab time: a
    failure-policy restart started new Jobs beside an old one (hazard H2, `restartStrategy: Recreate`)."""
    found = []
    by_execution: dict[tuple[str, str, tuple[str, int]], list[Attributed]] = {}
    for item in attributed:
        if item.admission is not None and item.attempt:
            key = (item.process.namespace, item.process.trainjob, item.key)
            by_execution.setdefault(key, []).append(item)
    for (namespace, name, key), items in sorted(by_execution.items()):
        for i, first in enumerate(items):
            for second in items[i + 1 :]:
                if first.attempt != second.attempt and first.process.intersects(second.process):
                    found.append(
                        f"{namespace}/{name}: execution {key[1]} ran restart attempts {first.attempt} and "
                        f"{second.attempt} at once: {first.process.pod} on {first.process.node} "
                        f"[{first.process.start}, {first.process.stop}) and {second.process.pod} on "
                        f"{second.process.node} [{second.process.start}, {second.process.stop})"
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
    """A process whose pod was created with an A label other than its admission's A (TrainJobs whose labels a
    foreign patch forged are left out: their labels are the hostile user's, the attribution still holds). The
    label is the one the pod was created with: a label removed later (a pod taken out of its controller) is not
    a mismatch."""
    skip = set(forged)
    found = []
    for item in attributed:
        if item.admission is None or item.process.trainjob in skip:
            continue
        label = item.created_labels.get(v.POD_LABEL_ADMISSION)
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


def is_third_party_resume(write: TrainJobWrite) -> bool:
    """A third party lifted a suspension (its own: the model's `third_party_resume`) without touching A."""
    return write.admitted and write.user == HOSTILE and write.new_admission == write.old_admission


def admission_number_violations(
    writes: Sequence[TrainJobWrite], start: int = 0, kueue: Iterable[tuple[str, str]] = ()
) -> list[str]:
    """A grows by exactly one, only in a dispatch write that admits (plain mode) or, for TrainJobs in Kueue mode
    (`kueue`: their namespace and name), in the admission check controller's write while suspended; a Kueue
    admission comes after at least one raise since the previous one. Reports the writes from index `start` on
    (the earlier ones give the history)."""
    found = []
    queued = set(kueue)
    admitted_at: dict[str, int | None] = {}
    for index, write in enumerate(writes):
        problems: list[str] = []
        old, new = _number(write.old_admission), _number(write.new_admission)
        in_kueue = (write.namespace, write.name) in queued
        if write.kind == "ADDED":
            if write.new_admission is not None:
                problems.append("a new TrainJob carries A")
        elif write.kind == "DELETED" or is_third_party_resume(write):
            pass
        elif write.admitted and in_kueue:
            if write.user != KUEUE_USER:
                problems.append("a Kueue-mode TrainJob was unsuspended by someone other than Kueue")
            elif new is None or new <= (admitted_at.get(write.uid) or 0):
                problems.append(f"Kueue admitted without a raise of A since the last admission (A={new})")
            admitted_at[write.uid] = new
        elif write.admitted:
            if write.user not in CALLERS:
                problems.append("the hold was lifted by someone other than dispatch")
            elif old is None or new != old + 1:
                problems.append("an admission must raise A by exactly one")
            admitted_at[write.uid] = new
        elif write.new_admission != write.old_admission:
            raised = old is not None and new == old + 1
            if not (in_kueue and write.user == ADMISSION_CONTROLLER and raised and write.old_suspend is True):
                problems.append("A changed in a write that did not admit")
        if index >= start:
            found += [f"{write.describe()}: {problem}" for problem in problems]
    return found


def admissions_count_violations(
    writes: Sequence[TrainJobWrite], live: Mapping[tuple[str, str], str | None]
) -> list[str]:
    """The live A of each TrainJob equals the number of raises of A its instance (uid) has had (by dispatch:
    admitting writes in plain mode, the admission check controller's in Kueue mode)."""
    found = []
    per_uid: dict[str, int] = {}
    uid_of: dict[tuple[str, str], str] = {}
    for write in writes:
        if write.kind == "ADDED":
            uid_of[(write.namespace, write.name)] = write.uid
        old, new = _number(write.old_admission), _number(write.new_admission)
        raised = write.kind == "MODIFIED" and old is not None and new == old + 1
        per_uid[write.uid] = per_uid.get(write.uid, 0) + raised
    for key, value in live.items():
        uid = uid_of.get(key)
        if uid is None:
            continue
        if _number(value) != per_uid.get(uid, 0):
            found.append(f"{key[0]}/{key[1]}: A is {value} after {per_uid.get(uid, 0)} raises")
    return found


# --- what callers were told ----------------------------------------------------------------------------------


def applied_by(outcome: Outcome, writes: Iterable[TrainJobWrite]) -> list[TrainJobWrite]:
    serials = {call.serial for call in outcome.calls}
    return [w for w in writes if w.admitted and w.user == outcome.caller and w.serial in serials]


def outcome_violations(outcome: Outcome, writes: Sequence[TrainJobWrite], *, kueue: bool = False) -> list[str]:
    """What the caller was told against what was applied. `kueue`: the target is in Kueue mode, where release
    and open return the current execution and Kueue admits later (DESIGN §6)."""
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
    elif (
        outcome.error is None
        and outcome.execution is not None
        and outcome.operation in ADMITTING_OPERATIONS
        and not kueue
    ):
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
    # the TrainJob as checked: a GET, or the caller's own write of the hold's record (its answer is the object)
    reads = [
        i
        for i, c in enumerate(before)
        if c.method in ("GET", "PUT")
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
        # a 404 is an answer where the check asks whether something exists: a Node (gone), a recorded pod (its
        # object is gone: dispatch/fencing.py), the pod fence's policy and binding (not installed: dispatch/fence.py,
        # read last, after the pods); a 403 there is one too (not readable)
        answers = (
            "nodes",
            "pods",
            v.VALIDATING_ADMISSION_POLICY.resource,
            v.VALIDATING_ADMISSION_POLICY_BINDING.resource,
        )
        failed = [c for c in tail if not c.ok and not (c.resource in answers and c.status in (403, 404))]
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
