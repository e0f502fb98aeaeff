"""The lab's verdict on one TrainJob: was the promise kept? From the overlap recorder and the admission ledger.

What `dispatch demo` prints after its drill and `dispatch lab verdict` prints for a served lab (`GET
/lab/verdict`, `lab/scenario/served.py`), in one form: the admissions the ledger counted (each with the admission
annotation its write carried), the processes each execution ran (pod and node), and every overlap the recorder
shows:

- between executions: two processes of different executions of the TrainJob running at once (the promise);
- of one rank: two processes of one rank (replicated job, job index, pod index) running at once, in one
  execution or across two (the widened promise, DESIGN §1);
- of two restart attempts: two JobSet restart attempts of one execution running at once (hazard H2).

The promise is kept when all three lists are empty. The verdict is the lab's omniscient view (the machines'
processes, the store's writes): no client, dispatch included, can change what it says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger, OverlapRecorder

Obj = dict[str, Any]
#: the kind of the `/lab/verdict` answer
VERDICT_KIND = "LabVerdict"


@dataclass(frozen=True)
class TrainJobVerdict:
    """What the lab saw of one TrainJob (module docstring); `kept` is the promise."""

    namespace: str
    name: str
    admissions: tuple[str | None, ...] = ()
    """The admission annotation each admitting write carried, in order (None: the write carried none)."""
    executions: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """Admission number (0: a pod the ledger saw under no admission) -> its processes as `pod on node`."""
    overlaps: tuple[str, ...] = ()
    rank_overlaps: tuple[str, ...] = ()
    attempt_overlaps: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def kept(self) -> bool:
        """No two executions, no two processes of one rank and no two restart attempts ran at once."""
        return not (self.overlaps or self.rank_overlaps or self.attempt_overlaps)

    def lines(self, indent: str = "   ") -> list[str]:
        """The verdict as `dispatch demo` prints it: admissions (each by the admission annotation its write
        carried, `-` for none: an admission dispatch did not make), what each execution ran, then each overlap."""
        admitted = ", ".join("-" if a is None else a for a in self.admissions) or "none"
        out = [f"{indent}admissions of {self.ref}: {admitted}"]
        for admission, runs in sorted(self.executions.items()):
            out.append(f"{indent}execution {admission} ran: {', '.join(runs)}")
        for what, found in (
            ("between executions", self.overlaps),
            ("of one rank", self.rank_overlaps),
            ("of two restart attempts", self.attempt_overlaps),
        ):
            out.append(f"{indent}overlaps {what}: {len(found)}")
            out += [f"{indent}  {overlap}" for overlap in found]
        return out

    def as_json(self) -> Obj:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "admissions": list(self.admissions),
            "executions": [
                {"admission": admission, "processes": list(runs)} for admission, runs in sorted(self.executions.items())
            ],
            "overlaps": list(self.overlaps),
            "rankOverlaps": list(self.rank_overlaps),
            "attemptOverlaps": list(self.attempt_overlaps),
            "promiseKept": self.kept,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TrainJobVerdict:
        """The inverse of `as_json` (what a client of `/lab/verdict` reads back)."""
        return cls(
            str(body.get("namespace") or ""),
            str(body.get("name") or ""),
            tuple(None if a is None else str(a) for a in body.get("admissions") or ()),
            {
                int(e["admission"]): tuple(str(p) for p in e.get("processes") or ())
                for e in body.get("executions") or ()
            },
            tuple(str(o) for o in body.get("overlaps") or ()),
            tuple(str(o) for o in body.get("rankOverlaps") or ()),
            tuple(str(o) for o in body.get("attemptOverlaps") or ()),
        )


def verdict_of(recorder: OverlapRecorder, ledger: AdmissionLedger, namespace: str, name: str) -> TrainJobVerdict:
    """The verdict on `namespace/name` now (runs on the lab's loop, where the recorder and the ledger live)."""
    runs: dict[int, list[str]] = {}
    for record in recorder.processes(namespace, name):
        runs.setdefault(record.admission or 0, []).append(f"{record.pod} on {record.node}")
    return TrainJobVerdict(
        namespace,
        name,
        tuple(entry.admission_annotation for entry in ledger.history(namespace, name)),
        {admission: tuple(found) for admission, found in runs.items()},
        tuple(o.describe() for o in recorder.overlaps(namespace, name)),
        tuple(o.describe() for o in recorder.rank_overlaps(namespace, name)),
        tuple(o.describe() for o in recorder.attempt_overlaps(namespace, name)),
    )


def trainjobs_seen(
    recorder: OverlapRecorder, ledger: AdmissionLedger, namespace: str | None = None
) -> list[tuple[str, str]]:
    """Every TrainJob (namespace, name) the ledger saw admitted or a machine ran a process of, sorted."""
    seen: set[tuple[str, str]] = set(ledger.admissions)
    seen.update((r.namespace, r.trainjob) for r in recorder.records if r.trainjob)
    return sorted(key for key in seen if namespace is None or key[0] == namespace)


def verdicts(
    recorder: OverlapRecorder, ledger: AdmissionLedger, keys: Iterable[tuple[str, str]]
) -> list[TrainJobVerdict]:
    return [verdict_of(recorder, ledger, namespace, name) for namespace, name in keys]


__all__ = ["VERDICT_KIND", "TrainJobVerdict", "trainjobs_seen", "verdict_of", "verdicts"]
