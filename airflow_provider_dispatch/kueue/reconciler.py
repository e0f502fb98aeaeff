"""One reconcile of one Workload: read it, run the shared drain check for its TrainJob, write our entry::

    workload -> candidate? -> owner TrainJob (same uid, a dispatch object?) -> kueue_admit(ref, admission_key)
             -> verdict -> server-side apply of our check entries (only when they change)

The drain check and the raising of A are `AsyncDispatchAdapter.kueue_admit`, i.e. `programs.kueue_admit`: the
same program release runs in plain mode, with the same reads, the same conditional write and the same errors
(DESIGN §3, §6). The key passed to it (`workloads.admission_key`) makes the raise idempotent per Workload
admission: when the TrainJob already carries that key, A was raised for this admission (by this controller before
a crash, or by another replica) and nothing is written again. So the order "raise A, then set Ready" is safe to
interrupt anywhere: killed before the raise, nothing happened; killed between, the next reconcile finds the key
and only sets Ready; killed after, the entry is Ready and Kueue admits.

The Workload is read fresh (a GET, not the informer's cache): the key and the entry's state must describe the
admission being decided, and the apply that follows is conditional on that read (status_patch.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_dispatch.dispatch import programs
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import managed
from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.dispatch.errors import (
    DispatchError,
    HoldSettlingError,
    PodsRemainError,
    RefusedError,
    UnreachableError,
    classify_api_failure,
)
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref
from airflow_provider_dispatch.kueue import verdicts
from airflow_provider_dispatch.kueue.api import ApiCallError, KubeApi
from airflow_provider_dispatch.kueue.clock import Clock, as_datetime, timestamp
from airflow_provider_dispatch.kueue.status_patch import check_entry, entry_unchanged, workload_status_patch
from airflow_provider_dispatch.kueue.verdicts import Retry, Verdict
from airflow_provider_dispatch.kueue.waiting import WaitingIndex
from airflow_provider_dispatch.kueue.workloads import Candidate, Skip, candidate

Key = tuple[str, str]
Identity = tuple[str, str, str]
logger = logging.getLogger("airflow_provider_dispatch.kueue")


@dataclass(frozen=True)
class Outcome:
    """What a reconcile did: the verdict (None when the Workload was not a candidate) and whether it wrote."""

    retry: Retry
    verdict: Verdict | None = None
    written: bool = False
    skipped: str = ""
    #: the verdict was reached but its write failed (or was not sent: this replica is not the leader)
    write_failed: bool = False


def _api_error(error: ApiCallError, ref: str, verb: str, resource: str) -> DispatchError:
    return classify_api_failure(error.status, error.body, ref, verb, resource)


class Reconciler:
    def __init__(
        self,
        api: KubeApi,
        adapter: AsyncDispatchAdapter,
        clock: Clock,
        our_checks: Callable[[], frozenset[str]],
        waiting: WaitingIndex,
        field_manager: str,
    ) -> None:
        self.api = api
        self.adapter = adapter
        self.clock = clock
        self.our_checks = our_checks
        self.waiting = waiting
        self.field_manager = field_manager

    async def reconcile(self, key: Key) -> Outcome:
        namespace, name = key
        try:
            workload = await self.api.get(v.WORKLOAD, namespace, name)
        except ApiCallError as error:
            if error.not_found:
                self.waiting.clear(key)
                return Outcome(Retry.NONE, skipped="the Workload is gone")
            failure = _api_error(error, f"{namespace}/{name}", "get", v.WORKLOAD.resource)
            return self._unwritten(key, failure)
        target = candidate(workload, self.our_checks())
        if isinstance(target, Skip):
            self.waiting.clear(key)
            return Outcome(Retry.NONE, skipped=target.reason)
        verdict, identity = await self._verdict(target)
        if verdict.state is None:
            return Outcome(verdict.retry, verdict)
        try:
            written = await self._write(workload, target, verdict)
        except ApiCallError as error:
            failure = _api_error(error, target.ref, "patch", v.WORKLOAD.resource + "/status")
            logger.warning(
                "could not write the admission check of Workload %s: %s",
                target.ref,
                failure.message,
                extra={"workload": target.ref},
            )
            return Outcome(Retry.TRANSIENT if failure.retryable else Retry.REFUSED, verdict, write_failed=True)
        self._track(key, target, verdict, identity)
        return Outcome(verdict.retry, verdict, written)

    def _unwritten(self, key: Key, failure: DispatchError) -> Outcome:
        logger.warning("could not read Workload %s/%s: %s", *key, failure.message, extra={"workload": "/".join(key)})
        return Outcome(Retry.TRANSIENT if failure.retryable else Retry.REFUSED)

    async def _verdict(self, target: Candidate) -> tuple[Verdict, Identity | None]:
        """The verdict, and the TrainJob's (namespace, job id, submission) when it is a dispatch object."""
        owner = target.owner
        if owner is None or not owner.is_trainjob:
            return verdicts.not_a_trainjob(owner), None
        text = f"{target.namespace}/{owner.name}"
        try:
            ref = parse_ref(text)
            trainjob = await self.adapter.run(
                programs.call(programs.GetObject(v.TRAINJOB, ref.namespace, ref.name), str(ref))
            )
        except UnreachableError as error:
            return verdicts.transient(error), None
        except RefusedError as error:
            return verdicts.refused(text, error), None
        found_uid = v.field(trainjob, "metadata", "uid")
        if owner.uid and found_uid != owner.uid:
            return verdicts.owner_replaced(text, owner.uid, str(found_uid)), None
        if not verdicts.claims_dispatch(v.labels_of(trainjob), v.annotations_of(trainjob)):
            return verdicts.not_dispatch(text), None
        identity: Identity | None = None
        try:
            obj = managed(trainjob)
            identity = (obj.ref.namespace, obj.job_id, obj.submission)
        except RefusedError:
            identity = None  # kueue_admit refuses it with the reason; the index then watches by TrainJob only
        return await self._drain_check(ref, target), identity

    async def _drain_check(self, ref: Ref, target: Candidate) -> Verdict:
        now = as_datetime(self.clock.now())
        try:
            execution = await self.adapter.kueue_admit(ref, admission_key=target.admission_key, now=now)
        except PodsRemainError as error:
            return verdicts.pods_remain(error)
        except HoldSettlingError as error:
            return verdicts.settling(error)
        except UnreachableError as error:
            return verdicts.transient(error)
        except RefusedError as error:
            return verdicts.refused(str(ref), error)
        return verdicts.admitted(str(ref), execution)

    async def _write(self, workload: Mapping[str, Any], target: Candidate, verdict: Verdict) -> bool:
        assert verdict.state is not None
        now = timestamp(self.clock.now())
        entries = [
            check_entry(name, verdict.state, verdict.message, previous, now)
            for name, previous in sorted(target.entries.items())
            if not entry_unchanged(previous, verdict.state, verdict.message)
        ]
        if not entries:
            return False
        await self.api.apply_status(v.WORKLOAD, workload_status_patch(workload, entries), self.field_manager)
        return True

    def _track(self, key: Key, target: Candidate, verdict: Verdict, identity: Identity | None) -> None:
        if verdict.retry is not Retry.WAITING or target.owner is None:
            self.waiting.clear(key)
            return
        nodes = [pod.node.name for pod in verdict.remaining]
        self.waiting.wait(key, (target.namespace, target.owner.name), identity, nodes)


__all__ = ["Outcome", "Reconciler"]
