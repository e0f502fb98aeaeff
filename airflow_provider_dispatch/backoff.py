"""Exponential backoff with jitter: the one schedule every retry and reconnect in dispatch waits on.

What owns it, and why it is one module: the triggers' shared watches (`triggers/watch.py`) and their consistent
re-checks (`triggers/base.py`), the release operator's wait for a hold to be observed (`operators/trainjob.py`),
and the Kueue admission check controller's informers and per-Workload requeues (`kueue/informer.py`,
`kueue/controller.py`) all retry something that failed or delivered nothing. They must pace it the same way, so
the schedule exists once; only the numbers (`initial`, `maximum`) differ by caller. It lives at the package's top
level, beside neither of its users, because the Kueue controller runs without Airflow and the Airflow layer must
not import the controller.

The schedule (`BackoffSchedule`): after `n` consecutive failures the ceiling is `min(maximum, initial *
factor**n)`, and the delay is drawn uniformly from `[ceiling/2, ceiling]` ("equal jitter"). Never less than
half, so a flapping dependency is not hammered; never more than the cap, so nothing waits for ever; random, so
many clients that failed at the same moment (an API server restart fails every trigger of a triggerer and every
informer at once) do not all come back at the same moment either (a thundering herd). This is client-go's
`ItemExponentialFailureRateLimiter` with the jitter of `wait.Backoff`.

Two ways to count failures:

* `Backoff`: one stream of consecutive failures (one watch, one check): `next_delay()` after each, `reset()` after
  a success;
* `KeyedBackoff`: a count per key (the controller's per-Workload requeues): `next_delay(key)`, `forget(key)`.

`jittered` is the other kind of jitter: a fixed period (a safety-net re-check) moved by up to 10% either way, so
that the periodic work of many triggers spreads out.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

#: the generator draws come from unless a caller passes one. One per process: the draws need no
#: reproducibility, and seeding a `random.Random()` reads the OS's entropy (16 µs), which a thousand triggers
#: starting at once would pay on one event loop turn. A test that needs a reproducible schedule passes its own.
SHARED_RNG: Final = random.Random()


@dataclass(frozen=True)
class BackoffSchedule:
    """The delays after successive failures: exponential from `initial`, capped at `maximum`, equal jitter."""

    initial: float
    maximum: float
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum or self.factor < 1:
            raise ValueError(
                f"a backoff needs 0 < initial <= maximum and factor >= 1, not initial={self.initial} "
                f"maximum={self.maximum} factor={self.factor}"
            )

    def ceiling(self, failures: int) -> float:
        """The longest wait after `failures` consecutive failures (0: before the first retry)."""
        # the exponent is capped (64 doublings pass any sane cap) so that a long outage cannot overflow a float
        return min(self.maximum, self.initial * self.factor ** min(max(failures, 0), 64))

    def delay(self, failures: int, rng: random.Random = SHARED_RNG) -> float:
        """The wait after `failures` consecutive failures (0: the first retry), jittered within [ceiling/2, ceiling]."""
        ceiling = self.ceiling(failures)
        return rng.uniform(ceiling / 2, ceiling)

    def least_total(self, retries: int) -> float:
        """The shortest time `retries` consecutive delays can take (each at its lowest, half its ceiling)."""
        return sum(self.ceiling(n) / 2 for n in range(max(0, retries)))

    def most_retries_within(self, seconds: float) -> int:
        """The most consecutive delays that fit in `seconds`: what bounds the rate of a client on this schedule
        (after the first attempt, at most this many more start within `seconds`, plus the one the last delay
        lets through)."""
        retries = 0
        while self.least_total(retries + 1) <= seconds:
            retries += 1
        return retries


@dataclass
class Backoff:
    """One stream of consecutive failures on a schedule: `next_delay()` after each failure, `reset()` after a
    success."""

    schedule: BackoffSchedule
    rng: random.Random = field(default=SHARED_RNG)
    failures: int = 0

    def next_delay(self) -> float:
        """The delay before the next attempt, counting this failure."""
        delay = self.schedule.delay(self.failures, self.rng)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


@dataclass
class KeyedBackoff(Generic[K]):
    """Consecutive failures per key on one schedule; `forget` after a success starts the key over."""

    schedule: BackoffSchedule
    rng: random.Random = field(default=SHARED_RNG)
    _failures: dict[K, int] = field(default_factory=dict)

    def next_delay(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return self.schedule.delay(failures, self.rng)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)


def jittered(seconds: float, rng: random.Random | None = None, spread: float = 0.1) -> float:
    """`seconds` moved by up to `spread` of itself either way, so periodic re-checks of many triggers spread out."""
    chooser = rng or SHARED_RNG
    return max(0.0, seconds * (1 + chooser.uniform(-spread, spread)))


__all__ = ["SHARED_RNG", "Backoff", "BackoffSchedule", "KeyedBackoff", "jittered"]
