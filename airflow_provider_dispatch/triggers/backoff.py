"""Exponential backoff with jitter, for a watch that keeps failing and a check the API server did not answer.

Many triggers in one triggerer see the same API server fail at the same moment; without jitter they would all
come back at the same moment too (a thundering herd). Each delay is drawn uniformly from the upper half of the
exponential step ("equal jitter"), so retries spread out while the wait still grows: 0.5 s, 1 s, 2 s, ... up to
`maximum`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Final

#: the generator a Backoff draws from unless given one. One per process: the draws need no reproducibility, and
#: seeding a `random.Random()` reads the OS's entropy (16 µs), which a thousand triggers starting at once would
#: pay on one event loop turn.
SHARED_RNG: Final = random.Random()


@dataclass
class Backoff:
    """Delays for successive failures; `reset()` after a success."""

    initial: float = 0.5
    maximum: float = 30.0
    factor: float = 2.0
    rng: random.Random = field(default=SHARED_RNG)
    failures: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum or self.factor < 1:
            raise ValueError("Backoff needs 0 < initial <= maximum and factor >= 1")

    def next(self) -> float:
        """The delay before the next attempt, counting this failure."""
        step = min(self.maximum, self.initial * self.factor**self.failures)
        self.failures += 1
        return self.rng.uniform(step / 2, step)

    def reset(self) -> None:
        self.failures = 0


def jittered(seconds: float, rng: random.Random | None = None, spread: float = 0.1) -> float:
    """`seconds` moved by up to `spread` of itself either way, so periodic re-checks of many triggers spread out."""
    chooser = rng or random
    return max(0.0, seconds * (1 + chooser.uniform(-spread, spread)))


__all__ = ["Backoff", "jittered"]
