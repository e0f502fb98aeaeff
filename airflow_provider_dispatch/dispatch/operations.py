"""The operations both adapters offer, as programs with the adapter's options applied.

`DispatchAdapter` and `AsyncDispatchAdapter` must offer the same operations with the same options and the same
refusals, differing only in how a request is carried out. So the mapping from an operation to its program lives
here once: each method returns the program of `programs/` to run, with the adapter's pod read strategy, page
size and clock applied. A read-only adapter's write operations raise `ForbiddenError` here, when the program is
asked for, so nothing at all is sent. Hold, release and open re-run from their first read when they meet a
conflict, up to `conflict_attempts` times (conflicts.py), and each such retry is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from airflow_provider_dispatch.dispatch import programs
from airflow_provider_dispatch.dispatch.assessment import DrainReport, Execution, Status
from airflow_provider_dispatch.dispatch.conflicts import (
    DEFAULT_CONFLICT_ATTEMPTS,
    ConflictRetry,
    retrying,
    validate_conflict_attempts,
)
from airflow_provider_dispatch.dispatch.errors import ForbiddenError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS
from airflow_provider_dispatch.dispatch.policy import validate_accepted_risks
from airflow_provider_dispatch.dispatch.programs import DEFAULT_PAGE_SIZE, DEFAULT_POD_READ, PodReadStrategy, Program
from airflow_provider_dispatch.dispatch.transport import DEFAULT_TIMEOUT
from airflow_provider_dispatch.dispatch.validation import Ref

logger = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


def log_conflict_retry(retry: ConflictRetry) -> None:
    """The adapters' report of a conflict that is retried (an Airflow task's log shows it)."""
    logger.info("%s", retry.describe())


def read_only_refusal(operation: str, ref: object = None) -> ForbiddenError:
    """What a read-only adapter raises instead of sending anything for `operation`."""
    text = str(ref)[:80] if ref is not None else None
    where = f"{text}: " if text else ""
    return ForbiddenError(
        f"{where}this dispatch adapter is read-only, so it does not {operation}; nothing was sent to the API "
        "server. Use a writer adapter (read_only=False) whose credentials may get, list and update TrainJobs.",
        ref=text,
    )


@dataclass(frozen=True)
class Operations:
    """An adapter's options, and the program each of its operations runs."""

    read_only: bool = False
    pod_read: PodReadStrategy = DEFAULT_POD_READ
    page_size: int = DEFAULT_PAGE_SIZE
    request_timeout: tuple[float, float] = DEFAULT_TIMEOUT
    clock: Callable[[], datetime] = utc_now
    settle_seconds: float = DEFAULT_SETTLE_SECONDS
    """How long a hold settles before an admission (evidence.py); lower it only with the API server's
    `--request-timeout` lowered too."""
    accepted_risks: Collection[str] = field(default_factory=frozenset)
    """Runtime risks (policy.py) accepted by name: such runtimes are admitted, and the risk is logged."""
    conflict_attempts: int = DEFAULT_CONFLICT_ATTEMPTS
    """Attempts of hold, release and open when they meet a conflict, the first included (1 to 20; conflicts.py)."""
    on_conflict: Callable[[ConflictRetry], None] = log_conflict_retry
    """Told of every conflict that is retried."""
    clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS
    """The assumed bound on the skew between API server replicas' clocks, added to every wait that compares two
    times the API server wrote (the settle, a deleted Node's: nodes.py)."""
    require_pod_fence: bool = False
    """Refuse an admission unless the pod fence was in force, unchanged, for the whole execution it ends
    (fence.py); without it dispatch admits on the record alone and logs why."""

    def __post_init__(self) -> None:
        """Refuse options that would make every call fail, with a clear error when the adapter is built."""
        validate_conflict_attempts(self.conflict_attempts)
        object.__setattr__(self, "accepted_risks", validate_accepted_risks(self.accepted_risks))
        settle = self.settle_seconds
        if isinstance(settle, bool) or not isinstance(settle, int | float) or not 0 <= settle <= 3600:
            raise ValueError(f"settle_seconds must be a number of seconds from 0 to 3600, not {settle!r}")
        skew = self.clock_skew_seconds
        if isinstance(skew, bool) or not isinstance(skew, int | float) or not 0 <= skew <= 3600:
            raise ValueError(f"clock_skew_seconds must be a number of seconds from 0 to 3600, not {skew!r}")
        if not isinstance(self.require_pod_fence, bool):
            raise ValueError(f"require_pod_fence must be True or False, not {self.require_pod_fence!r}")
        if self.pod_read not in ("pinned", "full"):
            raise ValueError(f"pod_read must be 'pinned' or 'full', not {self.pod_read!r}")
        if isinstance(self.page_size, bool) or not isinstance(self.page_size, int) or self.page_size < 1:
            raise ValueError(f"page_size must be a positive integer, not {self.page_size!r}")
        timeout = self.request_timeout
        if len(timeout) != 2 or any(isinstance(t, bool) or not isinstance(t, int | float) or t <= 0 for t in timeout):
            raise ValueError(f"request_timeout must be (connect seconds, read seconds), both > 0, not {timeout!r}")

    def _now(self, now: datetime | None) -> datetime:
        return now if now is not None else self.clock()

    def _reading(self) -> dict[str, Any]:
        return {"pod_read": self.pod_read, "page_size": self.page_size, "clock_skew_seconds": self.clock_skew_seconds}

    def _admitting(self) -> dict[str, Any]:
        return {
            **self._reading(),
            "settle_seconds": self.settle_seconds,
            "accepted_risks": self.accepted_risks,
            "require_pod_fence": self.require_pod_fence,
        }

    def _writer(self, operation: str, ref: object) -> None:
        if self.read_only:
            raise read_only_refusal(operation, ref)

    def _retrying(self, operation: str, start: Callable[[], Program[Execution]]) -> Program[Execution]:
        return retrying(operation, start, attempts=self.conflict_attempts, report=self.on_conflict)

    def hold(self, ref: str | Ref) -> Program[Execution]:
        self._writer("hold", ref)
        return self._retrying("hold", lambda: programs.hold(ref, **self._reading()))

    def release(self, ref: str | Ref, *, now: datetime | None = None) -> Program[Execution]:
        self._writer("release", ref)
        return self._retrying("release", lambda: programs.release(ref, now=self._now(now), **self._admitting()))

    def open(
        self, manifest: Mapping[str, Any], *, ref: str | Ref | None = None, now: datetime | None = None
    ) -> Program[Execution]:
        self._writer("open", ref if ref is not None else manifest_ref(manifest))
        return self._retrying("open", lambda: programs.open(manifest, ref=ref, now=self._now(now), **self._admitting()))

    def kueue_admit(self, ref: str | Ref, *, admission_key: str, now: datetime | None = None) -> Program[Execution]:
        self._writer("admit", ref)
        return programs.kueue_admit(ref, admission_key=admission_key, now=self._now(now), **self._admitting())

    def inspect(self, ref: str | Ref, *, now: datetime | None = None) -> Program[Status]:
        return programs.inspect(ref, now=self._now(now), **self._reading(), settle_seconds=self.settle_seconds)

    def find(self, namespace: str, job_id: str, *, now: datetime | None = None) -> Program[Status]:
        return programs.find(
            namespace, job_id, now=self._now(now), **self._reading(), settle_seconds=self.settle_seconds
        )

    def list_managed(
        self, namespace: str | None, *, now: datetime | None = None
    ) -> Program[tuple[programs.Listed, ...]]:
        return programs.list_managed(
            namespace, now=self._now(now), **self._reading(), settle_seconds=self.settle_seconds
        )

    def remaining_pods(
        self,
        ref: str | Ref,
        *,
        job_id: str | None = None,
        submission: str | None = None,
        now: datetime | None = None,
    ) -> Program[DrainReport]:
        return programs.remaining_pods(ref, job_id=job_id, submission=submission, now=self._now(now), **self._reading())

    def ceased(self, ref: str | Ref, *, job_id: str | None = None, submission: str | None = None) -> Program[bool]:
        return programs.ceased(ref, job_id=job_id, submission=submission, **self._reading())


ClientT = TypeVar("ClientT")


class AdapterBase(Generic[ClientT]):
    """What both adapters are built from: their client, whether they own it, and their options as `Operations`.

    One constructor for both, so that an option added to the adapters reaches both with the same default and
    the same checks (`Operations.__post_init__`); each adapter documents the options and carries requests out.
    """

    def __init__(
        self,
        api_client: ClientT,
        *,
        read_only: bool = False,
        pod_read: PodReadStrategy = DEFAULT_POD_READ,
        page_size: int = DEFAULT_PAGE_SIZE,
        request_timeout: tuple[float, float] = DEFAULT_TIMEOUT,
        clock: Callable[[], datetime] = utc_now,
        settle_seconds: float = DEFAULT_SETTLE_SECONDS,
        accepted_risks: Collection[str] = frozenset(),
        conflict_attempts: int = DEFAULT_CONFLICT_ATTEMPTS,
        on_conflict: Callable[[ConflictRetry], None] = log_conflict_retry,
        owns_client: bool = False,
        clock_skew_seconds: float = DEFAULT_CLOCK_SKEW_SECONDS,
        require_pod_fence: bool = False,
    ) -> None:
        self.operations = Operations(
            read_only,
            pod_read,
            page_size,
            request_timeout,
            clock,
            settle_seconds,
            frozenset(accepted_risks),
            conflict_attempts,
            on_conflict,
            clock_skew_seconds,
            require_pod_fence,
        )
        self.api_client = api_client
        self._owns_client = owns_client

    @property
    def read_only(self) -> bool:
        return self.operations.read_only


def log_accepted_risks(logger: logging.Logger, execution: Execution, ref: object) -> Execution:
    """Log, at every admission, the runtime risks a platform team accepted for it (policy.py), and why the
    admission was not backed by the pod fence when it was not (fence.py); pass through."""
    if execution.fence_note:
        logger.warning(
            "TrainJob %s: execution %s was admitted on the record of the previous execution's pods alone: %s "
            "(docs/reliability.md, what stays outside the promise without the pod fence)",
            ref,
            execution.admission,
            execution.fence_note,
        )
    if execution.accepted_risks:
        logger.warning(
            "TrainJob %s runs execution %s with accepted runtime risks %s: its runtime lets a controller start "
            "a second process of one rank (dispatch's runtime policy); remove the risk from the runtime to close it",
            ref,
            execution.admission,
            ", ".join(execution.accepted_risks),
        )
    return execution


def manifest_ref(manifest: object) -> str | None:
    """`namespace/name` of a manifest, for the read-only refusal's message only (nothing is validated here)."""
    metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    if not isinstance(metadata, Mapping):
        return None
    name, namespace = metadata.get("name"), metadata.get("namespace")
    return f"{namespace}/{name}" if isinstance(name, str) and isinstance(namespace, str) else None


__all__ = [
    "AdapterBase",
    "ClientT",
    "Operations",
    "log_accepted_risks",
    "log_conflict_retry",
    "manifest_ref",
    "read_only_refusal",
    "utc_now",
]
