"""The overlap recorder: the ground truth of which simulated processes ran when, that dispatch cannot see.

Every simulated container process (one per pod run; a restarted container is a new process) is recorded by its
machine with the lab-time interval `[start, stop)` it actually ran, its pod's identity and labels, and its node.
The recorder is written by the machines, not by the API: a process on a frozen or partitioned node keeps
running here while the API shows its pod Terminating, Failed or gone, until the scenario powers the machine off.
That is the truth the reliability tests check the promise against: a taint put on a node whose machine still
runs, or a Node deleted under a live machine, is exactly how two executions could overlap, and the recorder must
show it.

An execution is told apart by the pod labels dispatch's runtime patch puts (DESIGN §2: the identity is job id,
submission and the admission number A). Pods without A fall back to what is left (job id, submission), so all
such pods of one submission count as one execution. The TrainJob a process belongs to is its namespace and its
`jobset.sigs.k8s.io/jobset-name` label (the JobSet is named after the TrainJob, k8s-apis §1.4).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_provider_dispatch.dispatch.vocabulary import (
    LABEL_JOB_ID,
    LABEL_JOBSET_NAME,
    LABEL_SUBMISSION,
    POD_LABEL_ADMISSION,
)


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

    @property
    def trainjob(self) -> str:
        return self.labels.get(LABEL_JOBSET_NAME, "")

    @property
    def execution(self) -> ExecutionKey:
        return ExecutionKey.of(self.labels)

    @property
    def running(self) -> bool:
        return self.stop is None

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

    @property
    def start(self) -> float:
        return max(self.first.start, self.second.start)

    @property
    def end(self) -> float | None:
        stops = [s for s in (self.first.stop, self.second.stop) if s is not None]
        return min(stops) if stops else None

    def describe(self) -> str:
        def one(record: ProcessRecord) -> str:
            return f"{record.namespace}/{record.pod} on {record.node} (execution {record.execution})"

        return f"{one(self.first)} overlaps {one(self.second)} from {self.start} to {self.end}"


@dataclass
class OverlapRecorder:
    """Process intervals, appended by the simulated machines and queried by tests."""

    records: list[ProcessRecord] = field(default_factory=list)
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
    ) -> ProcessRecord:
        record = ProcessRecord(next(self._serials), namespace, pod, pod_uid, node, dict(labels), at, None, restart)
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
            if first.execution != second.execution and first.intersects(second):
                found.append(Overlap(first, second))
        return found
