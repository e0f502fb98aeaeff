"""The one backoff schedule (airflow_provider_dispatch.backoff): growth, cap, jitter, and the two ways to count."""

from __future__ import annotations

import random

import pytest

from airflow_provider_dispatch.backoff import Backoff, BackoffSchedule, KeyedBackoff, jittered


@pytest.mark.parametrize("failures", [0, 1, 2, 5, 10, 100, 10_000])
def test_the_delay_grows_is_capped_and_jittered_within_half_to_full(failures: int) -> None:
    schedule = BackoffSchedule(initial=0.5, maximum=30.0)
    ceiling = min(30.0, 0.5 * 2 ** min(failures, 64))
    assert schedule.ceiling(failures) == ceiling
    delays = [schedule.delay(failures, random.Random(seed)) for seed in range(50)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(set(delays)) > 1  # jittered


def test_one_stream_counts_its_failures_and_starts_over_after_a_success() -> None:
    backoff = Backoff(BackoffSchedule(initial=1.0, maximum=8.0), random.Random(3))
    delays = [backoff.next_delay() for _ in range(5)]
    ceilings = [1.0, 2.0, 4.0, 8.0, 8.0]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert backoff.failures == 5
    backoff.reset()
    assert 0.5 <= backoff.next_delay() <= 1.0


def test_keyed_backoff_counts_per_key_and_forgets() -> None:
    keyed = KeyedBackoff[str](BackoffSchedule(initial=1.0, maximum=8.0), random.Random(1))
    first, second, third = (keyed.next_delay("a") for _ in range(3))
    assert (0.5 <= first <= 1.0, 1.0 <= second <= 2.0, 2.0 <= third <= 4.0) == (True, True, True)
    assert keyed.failures("a") == 3
    assert keyed.failures("b") == 0
    keyed.forget("a")
    assert keyed.failures("a") == 0


@pytest.mark.parametrize(("initial", "maximum", "factor"), [(0.0, 1.0, 2.0), (2.0, 1.0, 2.0), (1.0, 2.0, 0.5)])
def test_a_schedule_that_would_not_back_off_is_refused(initial: float, maximum: float, factor: float) -> None:
    with pytest.raises(ValueError, match="0 < initial <= maximum and factor >= 1"):
        BackoffSchedule(initial=initial, maximum=maximum, factor=factor)


def test_least_total_is_the_shortest_time_the_retries_can_take() -> None:
    schedule = BackoffSchedule(initial=0.5, maximum=4.0)
    assert [schedule.least_total(n) for n in range(7)] == [0.0, 0.25, 0.75, 1.75, 3.75, 5.75, 7.75]
    rng = random.Random(7)
    for retries in range(12):
        assert sum(schedule.delay(n, rng) for n in range(retries)) >= schedule.least_total(retries)
    assert [schedule.most_retries_within(s) for s in (0.0, 0.24, 0.25, 3.0, 7.75, 100.0)] == [0, 0, 1, 3, 6, 52]


def test_jittered_moves_a_period_by_at_most_a_tenth() -> None:
    rng = random.Random(5)
    values = [jittered(300.0, rng) for _ in range(200)]
    assert all(270.0 <= value <= 330.0 for value in values)
    assert len(set(values)) > 1
    assert jittered(0.0, rng) == 0.0
