"""The lag sampler tells the samples a full garbage collection delayed from the rest (harness.gc_pauses).

A full collection run on the loop while the sampler sleeps must show as a full collection in the phase and its
delayed sample must be left out of the "outside full collections" summary; a phase with no collection must
keep every sample there. Real collections, real loop: nothing is simulated.
"""

from __future__ import annotations

import gc

from .harness.gc_pauses import FULL, GcPauses, timed_full_collection
from .harness.loop_lag import LoopLag


async def test_a_full_collection_is_split_out_of_the_lag() -> None:
    lag = LoopLag(interval=0.001)
    try:
        lag.start()
        await lag.next_sample()
        quiet = lag.take()
        await lag.next_sample()  # the sampler is asleep again: the collection below delays its wake-up
        gc.collect()
        await lag.next_sample()
        busy = lag.take()
    finally:
        await lag.stop()

    assert quiet.full_collections == 0
    assert quiet.outside_full_collections == quiet.all
    assert busy.full_collections >= 1
    assert busy.longest_full_collection > 0
    assert busy.outside_full_collections.samples < busy.all.samples  # the delayed sample is left out
    assert busy.all.max >= busy.longest_full_collection - lag.interval  # the loop was held for the collection


async def test_a_stopped_sampler_records_no_more_collections() -> None:
    lag = LoopLag(interval=0.001)
    lag.start()
    await lag.stop()
    gc.collect()
    assert lag.take().full_collections == 0


def test_removed_recorder_sees_no_more_collections() -> None:
    pauses = GcPauses()
    pauses.install()
    gc.collect()
    pauses.remove()
    gc.collect()
    # one full collection: the first (a young one may have run on its own in between; the second is not seen)
    assert [p.generation for p in pauses.take()].count(FULL) == 1
    timed = timed_full_collection()
    assert timed["objects"] > 0
    assert timed["seconds"] > 0
