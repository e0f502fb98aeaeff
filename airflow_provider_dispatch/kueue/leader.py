"""Leader election on a `coordination.k8s.io/v1` Lease: which replica of the controller may work and write.

client-go's semantics (`k8s.io/client-go/tools/leaderelection/leaderelection.go`, v0.36.3 as pinned in
controlplane/, the package controller-runtime, Kueue, JobSet and Trainer elect with), in a small asyncio form:

* **acquire**: every `retry_period` (jittered up to 1.2 times, `JitterFactor`), try to take the Lease: create it
  when there is none; otherwise take it only when it is free (no holder) or when its record has not changed for
  `lease_duration` *on this replica's own monotonic clock*, counted from when this replica last saw it change
  (`observedTime`). The record's own times (`renewTime`) are never compared with a local clock, so clock skew
  between machines does not matter, only their rates (client-go's package comment).
* **renew**: the leader renews every `retry_period`; each renewal keeps trying for at most `renew_deadline`, each
  attempt bounded by what is left of it. When none succeeded by then, it stops leading (`renew` returns). One
  thing more than client-go: a leader that reads the Lease held by another (it was paused past its lease) stops
  at once rather than at the deadline.
* **release**: on a graceful stop the leader writes the Lease free (no holder, `leaseDurationSeconds: 1`), so the
  other replica takes over at its next try instead of after `lease_duration` (`ReleaseOnCancel`).
* every write of the Lease is a PUT conditional on the resourceVersion read (or a create), so two candidates
  never both win one record.

The defaults are controller-runtime's (`pkg/leaderelection`, `manager.Options`): 15 s, 10 s, 2 s. A standby
replica takes over at most `lease_duration` plus one `retry_period` (and its jitter) after the leader's last
renewal; a leader that cannot renew stops after at most `renew_deadline` plus one `retry_period`, before anyone
can take over.

Why not `kubernetes_asyncio.leaderelection` (v36): it measures with the wall clock (`time.time()`), so a clock
step moves expiry; one attempt is not bounded by the renew deadline, so a hung request keeps a leader leading
past it; it has no release and no transitions count; and it sleeps on asyncio's clock, where the lab needs its
own.

Leader election does not fence (client-go says so: it "does not guarantee that only one client is acting as a
leader"). A leader that was paused (SIGSTOP, a frozen VM) and wakes after another took over may still have a
write built. `may_write` closes most of that window: it is true only while this replica renewed within
`renew_deadline` on its monotonic clock, which keeps running during a pause, so a woken process sees at once
that it may not write and sends nothing (`WritePermit`). What is left, a pause between that check and the
request leaving, is covered by the writes themselves: each is conditional on the resourceVersion it was decided
from (docs/reliability.md, "A paused old leader").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from airflow_provider_dispatch.dispatch.errors import UnreachableError
from airflow_provider_dispatch.dispatch.vocabulary import ApiCoordinates
from airflow_provider_dispatch.kueue.api import ApiCallError, KubeApi
from airflow_provider_dispatch.kueue.clock import Clock

logger = logging.getLogger("airflow_provider_dispatch.kueue")

Obj = dict[str, Any]
LEASE: Final = ApiCoordinates("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
#: client-go's `JitterFactor`: a candidate's retry waits between `retry_period` and 2.2 times it
JITTER_FACTOR: Final = 1.2
DEFAULT_LEASE_NAME: Final = "dispatch-admission-controller"


@dataclass(frozen=True)
class ElectionConfig:
    """Where the Lease is and its timing, validated as client-go's `NewLeaderElector` validates it."""

    namespace: str
    identity: str
    name: str = DEFAULT_LEASE_NAME
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs an identity")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(
                f"the lease duration ({self.lease_duration:g} s) must be greater than the renew deadline "
                f"({self.renew_deadline:g} s)"
            )
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(
                f"the renew deadline ({self.renew_deadline:g} s) must be greater than the retry period times "
                f"{JITTER_FACTOR} ({JITTER_FACTOR * self.retry_period:g} s)"
            )
        if self.lease_duration < 1 or self.retry_period <= 0:
            raise ValueError("the lease duration must be at least 1 s and the retry period more than 0 s")


class NotLeaderError(UnreachableError):
    """A write this replica was about to send while it is not (or no longer surely) the leader: nothing was sent.
    Retryable: the reconcile is simply not done here; the leader does it."""


def micro_time(seconds: float) -> str:
    """`metav1.MicroTime` as it serializes (RFC 3339, microseconds): the Lease's acquireTime and renewTime."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _record(lease: Obj | None) -> Obj:
    """The election record of a Lease: what a change of means the holder renewed (client-go compares the raw
    record; these are its fields)."""
    spec = (lease or {}).get("spec") or {}
    keys = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions")
    return {key: spec.get(key) for key in keys}


class LeaderElector:
    """One candidate. `clock` paces the retries (the lab's clock in the lab); `monotonic` measures the lease
    (default: the clock's `now` when it is not the wall clock's, else `time.monotonic`)."""

    def __init__(
        self,
        api: KubeApi,
        config: ElectionConfig,
        clock: Clock,
        *,
        monotonic: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.clock = clock
        self.monotonic = monotonic or clock.now
        self.rng = rng or random.Random()
        self._lease: Obj | None = None  # the Lease as last read or written, for the next conditional write
        self._observed: Obj = _record(None)
        self._observed_at = -float("inf")
        self._renewed_at = -float("inf")  # when the request of the last successful acquire or renewal was sent
        self.leading = False
        #: the last time (monotonic) any read or write of the Lease succeeded: the API server is reachable
        self.reached_at = -float("inf")
        self.transitions_seen = 0

    # --- what others ask ---------------------------------------------------------------------------------------

    @property
    def holder(self) -> str:
        """The last holder this candidate observed ("" for none)."""
        return str(self._observed.get("holderIdentity") or "")

    def may_write(self) -> bool:
        """True while this replica leads and renewed within `renew_deadline` (on its monotonic clock, which runs on
        while the process is paused): no other candidate can have taken the Lease before `lease_duration` after
        that renewal was sent."""
        return self.leading and self.monotonic() - self._renewed_at < self.config.renew_deadline

    def healthy(self, tolerance: float = 20.0) -> bool:
        """client-go's `Check`: a leader whose last observation is older than the lease duration plus `tolerance`
        should have stepped down and did not (a stuck loop): report unhealthy so it is restarted."""
        if not self.leading:
            return True
        return self.monotonic() - self._observed_at <= self.config.lease_duration + tolerance

    # --- acquire, renew, release -------------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once this candidate holds the Lease (cancel to give up)."""
        logger.info(
            "attempting to acquire the leader lease %s/%s",
            self.config.namespace,
            self.config.name,
            extra={"lease": self._describe(), "identity": self.config.identity},
        )
        while True:
            if await self._attempt(self.config.renew_deadline):
                self.leading = True
                logger.info("acquired the leader lease %s", self._describe(), extra={"identity": self.config.identity})
                return
            period = self.config.retry_period
            await self.clock.sleep(period + self.rng.uniform(0.0, JITTER_FACTOR * period))

    async def renew(self) -> None:
        """Renew until a renewal fails for `renew_deadline`; then stop leading and return (cancel to stop)."""
        while True:
            await self.clock.sleep(self.config.retry_period)
            started = self.monotonic()
            while True:
                left = self.config.renew_deadline - (self.monotonic() - started)
                if left > 0 and await self._attempt(left):
                    break
                taken = self.holder not in ("", self.config.identity)
                left = self.config.renew_deadline - (self.monotonic() - started)
                if taken or left <= self.config.retry_period:
                    self.leading = False
                    logger.warning(
                        "stopped leading: %s",
                        f"the Lease {self._describe()} is held by {self.holder}"
                        if taken
                        else f"the Lease {self._describe()} was not renewed within {self.config.renew_deadline:g} s",
                        extra={"identity": self.config.identity, "leader": self.holder},
                    )
                    return
                await self.clock.sleep(self.config.retry_period)

    async def release(self) -> bool:
        """Write the Lease free if this candidate holds it (after its work has stopped); False if it could not."""
        if not self.leading:
            return False
        self.leading = False
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                lease = await self._get()
            if lease is None or _record(lease).get("holderIdentity") != self.config.identity:
                return False
            now = micro_time(self.clock.now())
            spec = {
                **(lease.get("spec") or {}),
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            async with asyncio.timeout(self.config.renew_deadline):
                written = await self._put({**lease, "spec": spec})
        except (ApiCallError, TimeoutError) as error:
            logger.warning("could not release the leader lease %s: %s", self._describe(), error)
            return False
        self._observe(written)
        logger.info("released the leader lease %s", self._describe(), extra={"identity": self.config.identity})
        return True

    # --- one try (client-go's tryAcquireOrRenew) ------------------------------------------------------------

    async def _attempt(self, within: float) -> bool:
        try:
            async with asyncio.timeout(within):
                return await self._try_acquire_or_renew()
        except TimeoutError:
            logger.warning("a try on the leader lease %s took longer than %.1f s", self._describe(), within)
            return False
        except ApiCallError as error:
            if not error.conflict:
                logger.warning("leader lease %s: %s", self._describe(), error)
            return False

    async def _try_acquire_or_renew(self) -> bool:
        sent = self.monotonic()
        now = micro_time(self.clock.now())
        mine: Obj = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": round(self.config.lease_duration),
            "acquireTime": now,
            "renewTime": now,
        }
        # 1. the leader's fast path: renew the Lease as it last wrote it
        if self.leading and self._lease is not None and self._valid(sent):
            spec = {**(self._lease.get("spec") or {}), **mine, "acquireTime": self._observed.get("acquireTime")}
            try:
                self._won(await self._put({**self._lease, "spec": spec}), sent)
                return True
            except ApiCallError as error:
                logger.debug("fast renewal of %s failed, reading it: %s", self._describe(), error)
        # 2. read it, or create it
        lease = await self._get()
        if lease is None:
            body = {
                "apiVersion": LEASE.api_version,
                "kind": LEASE.kind,
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": {**mine, "leaseTransitions": 0},
            }
            self._won(await self.api.create(LEASE, self.config.namespace, body), sent)
            return True
        # 3. a holder whose record this candidate has seen change within the lease duration keeps it
        self._lease = lease
        record = _record(lease)
        if record != self._observed:
            self._observe(lease)
        holder = str(record.get("holderIdentity") or "")
        if holder and holder != self.config.identity and self._valid(self.monotonic()):
            return False
        # 4. take or renew it, conditionally on the version just read
        transitions = int(record.get("leaseTransitions") or 0)
        if holder == self.config.identity:
            mine["acquireTime"] = record.get("acquireTime") or now
        else:
            transitions += 1
        spec = {**(lease.get("spec") or {}), **mine, "leaseTransitions": transitions}
        self._won(await self._put({**lease, "spec": spec}), sent)
        return True

    def _valid(self, now: float) -> bool:
        duration = self._observed.get("leaseDurationSeconds")
        seconds = float(duration) if isinstance(duration, int | float) else self.config.lease_duration
        return now < self._observed_at + seconds

    def _won(self, lease: Obj, sent: float) -> None:
        self._observe(lease)
        self._renewed_at = sent
        self.reached_at = self.monotonic()

    def _observe(self, lease: Obj) -> None:
        before = self.holder
        self._lease = lease
        self._observed = _record(lease)
        self._observed_at = self.monotonic()
        self.reached_at = self._observed_at
        if self.holder != before:
            self.transitions_seen += 1
            logger.info(
                "the leader of %s is %s",
                self._describe(),
                self.holder or "(none)",
                extra={"leader": self.holder, "identity": self.config.identity},
            )

    async def _get(self) -> Obj | None:
        try:
            lease = await self.api.get(LEASE, self.config.namespace, self.config.name)
        except ApiCallError as error:
            if error.not_found:
                self.reached_at = self.monotonic()
                return None
            raise
        self.reached_at = self.monotonic()
        return lease

    async def _put(self, lease: Obj) -> Obj:
        return await self.api.replace(LEASE, self.config.namespace, self.config.name, lease)

    def _describe(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"


class WritePermit:
    """What every write of the controller asks first (`KubeApi` and the adapter's writes): with leader election,
    whether this replica may write now (`LeaderElector.may_write`); without it, always."""

    def __init__(self, elector: LeaderElector | None = None) -> None:
        self.elector = elector

    def check(self, what: str) -> None:
        if self.elector is not None and not self.elector.may_write():
            raise NotLeaderError(f"not the leader (or not renewed within the renew deadline): {what} was not sent")


async def stop_leading(elector: LeaderElector, renewing: asyncio.Task[None]) -> None:
    """Stop the renewals, then write the Lease free: what a graceful stop of the leader does last."""
    renewing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await renewing
    await elector.release()


def default_identity(pod_name: str | None = None) -> str:
    """`<pod or host name>_<random>`, as controller-runtime names a candidate (`hostname + "_" + uuid`)."""
    import socket
    import uuid

    return f"{pod_name or socket.gethostname()}_{uuid.uuid4()}"


__all__ = [
    "DEFAULT_LEASE_NAME",
    "LEASE",
    "ElectionConfig",
    "LeaderElector",
    "NotLeaderError",
    "WritePermit",
    "default_identity",
    "micro_time",
    "stop_leading",
]
