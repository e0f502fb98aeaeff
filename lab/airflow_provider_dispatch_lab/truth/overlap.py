"""The overlap recorder: the ground truth of which simulated processes ran when, that dispatch cannot see.

Every simulated container process (one per pod run; a restarted container is a new process) is recorded by its
machine with the lab-time interval `[start, stop)` it actually ran, its pod's identity and labels, and its node.
The recorder is written by the machines, not by the API: a process on a frozen or partitioned node keeps
running here while the API shows its pod Terminating, Failed or gone, until the scenario powers the machine off.
That is the truth the reliability tests check the promise against: a taint put on a node whose machine still
runs, or a Node deleted under a live machine, is exactly how two executions could overlap, and the recorder must
show it.

What an execution is must not depend on dispatch, or a dispatch bug could hide itself: the `AdmissionLedger`
reads the lab's own store events (it is the lab's omniscient observer, not a simulated controller) and counts
every admission of a TrainJob, that is every write that leaves it unsuspended after it was suspended or absent,
whoever made it (dispatch, Kueue, a person). A pod belongs to the execution that was the latest admission when
the pod was created: creation and admissions are ordered by the global resourceVersion, so the attribution is
exact. Names count, not uids: a TrainJob deleted and created again under the same name continues the count,
which is how `open` of a name whose previous object left pods is checked. Pods the ledger did not see created
(a recorder without a ledger) fall back to the identity labels dispatch's runtime patch puts (job id,
submission, A). The TrainJob a process belongs to is its namespace and its `jobset.sigs.k8s.io/jobset-name` label
(the JobSet is named after the TrainJob, k8s-apis §1.4).

The widened promise (DESIGN §1) is about ranks: no two processes of one rank (TrainJob, replicated job, job
index, pod index) may run at once, within one execution or across executions. A pod's rank is what it was
created as: JobSet puts `jobset.sigs.k8s.io/replicatedjob-name` and `jobset.sigs.k8s.io/job-index` on the pod
template as labels and as annotations (`labelAndAnnotateObject`), the Job controller the completion index
(`batch.kubernetes.io/job-completion-index`, annotation and label). Anyone may edit a pod's labels later (the
usual way to take a pod out of its controller), so the ledger keeps each pod's identity as the store saw it at
creation (`PodIdentity`), and the recorder judges the TrainJob, the rank and the identity labels of a process
by that, not by the labels its pod happened to have when the process started. `rank_overlaps` is the check.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_ADMISSION,
    LABEL_JOB_ID,
    LABEL_JOBSET_NAME,
    LABEL_SUBMISSION,
    POD_LABEL_ADMISSION,
)
from airflow_provider_dispatch_lab.apiserver.storage.store import WatchEvent

_TRAINJOBS = "trainjobs.trainer.kubeflow.org"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True)
class PodIdentity:
    """What a pod was created as: its TrainJob (jobset-name), its rank keys and its identity labels, read from
    the annotations first (JobSet and the Job controller write each key as an annotation too, and nobody edits
    those to take a pod out of its controller), then from the labels, as they were at creation."""

    trainjob: str
    replicated_job: str
    job_index: str
    pod_index: str
    labels: Mapping[str, str]
    attempt: str = ""
    """JobSet's restart attempt the pod's Job was created for (`restart-attempt`)."""

    @classmethod
    def of(cls, labels: Mapping[str, str], annotations: Mapping[str, str]) -> PodIdentity:
        def key(name: str) -> str:
            return str(annotations.get(name) or labels.get(name) or "")

        return cls(
            key(LABEL_JOBSET_NAME),
            key(REPLICATED_JOB_NAME),
            key(JOB_INDEX),
            key(COMPLETION_INDEX),
            dict(labels),
            key(RESTART_ATTEMPT),
        )

    @property
    def rank(self) -> tuple[str, str, str, str]:
        """(TrainJob, replicated job, job index, pod index); "" where a key is missing."""
        return (self.trainjob, self.replicated_job, self.job_index, self.pod_index)


@dataclass(frozen=True)
class Admission:
    """One admission of a TrainJob as the store saw it: its revision, and the A annotation the write carried."""

    revision: int
    admission_annotation: str | None


@dataclass
class AdmissionLedger:
    """Every admission of every TrainJob, and which admission each pod was created under (a store listener)."""

    admissions: dict[tuple[str, str], list[Admission]] = field(default_factory=dict)
    _suspended: dict[tuple[str, str], bool] = field(default_factory=dict)
    _pods: dict[str, int] = field(default_factory=dict)
    _identities: dict[str, PodIdentity] = field(default_factory=dict)

    def observe(self, event: WatchEvent) -> None:
        metadata = event.obj.get("metadata") or {}
        if event.resource == _TRAINJOBS:
            key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
            if event.type == "DELETED":
                self._suspended.pop(key, None)
                return
            suspended = (event.obj.get("spec") or {}).get("suspend") is True
            was_suspended = self._suspended.get(key, True)
            self._suspended[key] = suspended
            if was_suspended and not suspended:
                annotation = (metadata.get("annotations") or {}).get(ANNOTATION_ADMISSION)
                self.admissions.setdefault(key, []).append(Admission(event.revision, annotation))
        elif event.resource == "pods" and event.type == "ADDED":
            identity = PodIdentity.of(metadata.get("labels") or {}, metadata.get("annotations") or {})
            uid = str(metadata.get("uid") or "")
            self._identities[uid] = identity
            count = len(self.admissions.get((str(metadata.get("namespace") or ""), identity.trainjob), ()))
            if count:
                self._pods[uid] = count

    def execution_of(self, pod_uid: str) -> int | None:
        """The number of the admission the pod was created under (1 for the first); None when the ledger saw no
        admission of its TrainJob before it (a pod made by hand, outside any TrainJob's run)."""
        return self._pods.get(pod_uid)

    def identity_of(self, pod_uid: str) -> PodIdentity | None:
        """The pod's identity at creation (None: the ledger did not see it created)."""
        return self._identities.get(pod_uid)

    def history(self, namespace: str, trainjob: str) -> list[Admission]:
        return list(self.admissions.get((namespace, trainjob), ()))


@dataclass(frozen=True, order=True)
class ExecutionKey:
    """(job id, submission, A) as the pod's labels carry them; "" where a label is missing."""

    job_id: str
    submission: str
    admission: str

    @classmethod
    def of(cls, labels: Mapping[str, str]) -> ExecutionKey:
        return cls(labels.get(LABEL_JOB_ID, ""), labels.get(LABEL_SUBMISSION, ""), labels.get(POD_LABEL_ADMISSION, ""))


@dataclass
class ProcessRecord:
    """One process: where it ran, for which pod, and when (lab seconds since the epoch; stop None = running)."""

    serial: int
    namespace: str
    pod: str
    pod_uid: str
    node: str
    labels: dict[str, str]
    start: float
    stop: float | None = None
    restart: int = 0
    admission: int | None = None
    """The ledger's admission number for the pod (independent of dispatch's labels), when known."""
    identity: PodIdentity | None = None
    """The pod as it was created (the ledger's), else as it was when the process started."""

    @property
    def created(self) -> PodIdentity:
        return self.identity if self.identity is not None else PodIdentity.of(self.labels, {})

    @property
    def trainjob(self) -> str:
        return self.created.trainjob

    @property
    def rank(self) -> tuple[str, str, str, str]:
        return self.created.rank

    @property
    def execution(self) -> ExecutionKey:
        """(job id, submission, A) as the pod was created with them (labels edited later do not count)."""
        return ExecutionKey.of(self.created.labels)

    @property
    def running(self) -> bool:
        return self.stop is None

    def same_execution(self, other: ProcessRecord) -> bool:
        """By the ledger when it saw both pods created; by the identity labels otherwise."""
        if self.admission is not None and other.admission is not None:
            return self.admission == other.admission
        return self.execution == other.execution

    def intersects(self, other: ProcessRecord) -> bool:
        """Half-open intervals: a process that starts exactly when another stops does not overlap it."""
        mine_ends_after = self.stop is None or other.start < self.stop
        theirs_ends_after = other.stop is None or self.start < other.stop
        return mine_ends_after and theirs_ends_after


@dataclass(frozen=True)
class Overlap:
    """Two processes of different executions of one TrainJob that ran at the same time, from `start` to `end`
    (end None: both still run)."""

    first: ProcessRecord
    second: ProcessRecord
    why: str = ""
    """Empty: two executions; else what else the two share (one rank; one execution, two restart attempts)."""

    @property
    def start(self) -> float:
        return max(self.first.start, self.second.start)

    @property
    def end(self) -> float | None:
        stops = [s for s in (self.first.stop, self.second.stop) if s is not None]
        return min(stops) if stops else None

    def describe(self) -> str:
        def one(record: ProcessRecord) -> str:
            seen = f"admission {record.admission}" if record.admission is not None else "no admission seen"
            key = record.execution
            labels = (
                f"; labels: job id {key.job_id or '-'}, submission {key.submission or '-'}, A {key.admission or '-'}"
                if key != ExecutionKey("", "", "")
                else ""
            )
            return f"{record.namespace}/{record.pod} on {record.node} ({seen}{labels})"

        what = f" ({self.why})" if self.why else ""
        end = "both still run" if self.end is None else f"until {_lab_time(self.end)}"
        return f"{one(self.first)} overlaps {one(self.second)}{what} from {_lab_time(self.start)}, {end}"


def _lab_time(seconds: float) -> str:
    """Lab seconds since the epoch as RFC 3339 with milliseconds (overlaps can be shorter than a second)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class OverlapRecorder:
    """Process intervals, appended by the simulated machines and queried by tests."""

    records: list[ProcessRecord] = field(default_factory=list)
    ledger: AdmissionLedger | None = None
    _serials: itertools.count[int] = field(default_factory=itertools.count)

    def started(
        self,
        *,
        namespace: str,
        pod: str,
        pod_uid: str,
        node: str,
        labels: Mapping[str, str],
        at: float,
        restart: int = 0,
        annotations: Mapping[str, str] | None = None,
    ) -> ProcessRecord:
        admission = self.ledger.execution_of(pod_uid) if self.ledger is not None else None
        identity = self.ledger.identity_of(pod_uid) if self.ledger is not None else None
        if identity is None and annotations is not None:
            identity = PodIdentity.of(labels, annotations)
        record = ProcessRecord(
            next(self._serials), namespace, pod, pod_uid, node, dict(labels), at, None, restart, admission, identity
        )
        self.records.append(record)
        return record

    def stopped(self, record: ProcessRecord, at: float) -> None:
        if record.stop is not None:
            raise ValueError(f"process {record.serial} of {record.namespace}/{record.pod} already stopped")
        if at < record.start:
            raise ValueError(f"a process cannot stop ({at}) before it started ({record.start})")
        record.stop = at

    def processes(self, namespace: str, trainjob: str) -> list[ProcessRecord]:
        return [r for r in self.records if r.namespace == namespace and r.trainjob == trainjob]

    def running(self, namespace: str | None = None) -> list[ProcessRecord]:
        return [r for r in self.records if r.running and (namespace is None or r.namespace == namespace)]

    def executions(self, namespace: str, trainjob: str) -> set[ExecutionKey]:
        return {r.execution for r in self.processes(namespace, trainjob)}

    def overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        """Every pair of processes of different executions of this TrainJob whose intervals intersect."""
        found: list[Overlap] = []
        for first, second in itertools.combinations(self.processes(namespace, trainjob), 2):
            if not first.same_execution(second) and first.intersects(second):
                found.append(Overlap(first, second))
        return found

    def rank_overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        """Every pair of processes of one rank of this TrainJob (in one execution or in two, of two pods)
        whose intervals intersect: the widened promise (module docstring). Processes whose pod carries no rank
        keys (made by hand) are left out; the restarts of one pod's container never overlap each other."""
        found: list[Overlap] = []
        by_rank: dict[tuple[str, str, str, str], list[ProcessRecord]] = {}
        for record in self.processes(namespace, trainjob):
            if record.rank[1:] != ("", "", ""):
                by_rank.setdefault(record.rank, []).append(record)
        for records in by_rank.values():
            for first, second in itertools.combinations(records, 2):
                if first.pod_uid != second.pod_uid and first.intersects(second):
                    found.append(Overlap(first, second, f"both rank {'/'.join(first.rank)}"))
        return found

    def attempt_overlaps(self, namespace: str, trainjob: str) -> list[Overlap]:
        """Every pair of processes of one execution but of two JobSet restart attempts whose intervals
        intersect: a failure-policy restart that started new Jobs beside an old one (hazard H2, `Recreate`)."""
        found: list[Overlap] = []
        for first, second in itertools.combinations(self.processes(namespace, trainjob), 2):
            attempts = (first.created.attempt, second.created.attempt)
            if (
                first.same_execution(second)
                and "" not in attempts
                and attempts[0] != attempts[1]
                and first.intersects(second)
            ):
                found.append(Overlap(first, second, f"restart attempts {attempts[0]} and {attempts[1]}"))
        return found
