"""What the controller counts: its checks, waits, admissions, errors and leadership. Plain Python, no dependency.

The counters live here, updated by the controller from each reconcile's outcome (`record`), so the lab's
in-process controller and a worker install count too. Serving them in Prometheus' text format is `http.py`'s
business, with `prometheus_client` (the `controller` extra); the names and meanings are listed once, here:

==============================================  =====================================================================
``dispatch_admission_checks_total{result}``     drain checks that reached a verdict: ``admitted`` (our entry Ready for
                                                a dispatch TrainJob), ``waiting`` (pods of the previous execution
                                                remain), ``settling`` (a hold still settling), ``refused`` (a person
                                                must act), ``unreachable`` (the API failed: nothing decided),
                                                ``not_dispatch`` (not a dispatch TrainJob: Ready without a check)
``dispatch_admission_waits_total``              checks that left a Workload Pending because pods remain
``dispatch_admission_admissions_total``         Workloads our entry set Ready for a dispatch TrainJob (A raised)
``dispatch_admission_errors_total{kind}``       ``api`` (a read or the drain check's call failed), ``write`` (our
                                                entry's write failed), ``refused``, ``reconcile`` (a bug: an
                                                exception, logged with its trace)
``dispatch_admission_waiting_workloads``        Workloads waiting for pods to go, now
``dispatch_admission_leader``                   1 while this replica leads (always 1 without leader election)
``dispatch_admission_leader_changes_total``     leaders this replica has observed take the Lease
==============================================  =====================================================================
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final

from airflow_provider_dispatch.kueue.verdicts import Retry, Verdict
from airflow_provider_dispatch.kueue.workloads import READY

CHECK_RESULTS: Final = ("admitted", "waiting", "settling", "refused", "unreachable", "not_dispatch")
ERROR_KINDS: Final = ("api", "write", "refused", "reconcile")


def check_result(verdict: Verdict) -> str:
    """Which of `CHECK_RESULTS` a verdict is."""
    if verdict.state is None:
        return "unreachable"
    if verdict.retry is Retry.WAITING:
        return "waiting"
    if verdict.retry is Retry.SETTLING:
        return "settling"
    if verdict.retry is Retry.REFUSED:
        return "refused"
    if verdict.state == READY and verdict.execution is not None:
        return "admitted"
    return "not_dispatch"


@dataclass
class ControllerMetrics:
    """The counters of one controller process (or lab controller)."""

    checks: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    waits: int = 0
    admissions: int = 0
    waiting_workloads: int = 0
    leader: bool = False
    leader_changes: int = 0

    def checked(self, verdict: Verdict, *, written: bool, write_failed: bool) -> None:
        result = check_result(verdict)
        self.checks[result] += 1
        if result == "waiting":
            self.waits += 1
        elif result == "admitted" and written:
            self.admissions += 1
        elif result == "unreachable":
            self.errors["api"] += 1
        elif result == "refused":
            self.errors["refused"] += 1
        if write_failed:
            self.errors["write"] += 1

    def failed(self, kind: str) -> None:
        self.errors[kind] += 1


__all__ = ["CHECK_RESULTS", "ERROR_KINDS", "ControllerMetrics", "check_result"]
