"""Exponential backoff with jitter, per key.

A controller that retries a failing call at a fixed pace synchronises with every other client that failed at
the same moment (an API server restart makes them all fail at once); jitter spreads the retries out. The delay
after the n-th consecutive failure is `min(cap, base * 2**n)`, of which a random part in `[delay/2, delay]` is
used ("equal jitter"): never less than half, so a flapping dependency is not hammered, never more than the cap.
This is client-go's `ItemExponentialFailureRateLimiter` with the jitter of `wait.Backoff`.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Backoff:
    base: float
    cap: float

    def __post_init__(self) -> None:
        if not 0 < self.base <= self.cap:
            raise ValueError(f"a backoff needs 0 < base <= cap, not base={self.base} cap={self.cap}")

    def delay(self, failures: int, rng: random.Random) -> float:
        """The wait after `failures` consecutive failures (0: the first retry)."""
        ceiling = min(self.cap, self.base * float(2 ** min(failures, 62)))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


@dataclass
class KeyedBackoff(Generic[K]):
    """Consecutive failures per key; `forget` after a success starts the key over."""

    backoff: Backoff
    rng: random.Random = field(default_factory=random.Random)
    _failures: dict[K, int] = field(default_factory=dict)

    def next_delay(self, key: K) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        return self.backoff.delay(failures, self.rng)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)


__all__ = ["Backoff", "KeyedBackoff"]
