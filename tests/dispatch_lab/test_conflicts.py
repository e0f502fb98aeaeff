"""Conflicts are not failures (issue 17 item 3): a real 409 re-runs the whole operation inside the call.

The 409s here are the API server's own: a concurrent writer (`writers.StatusWriter`, Trainer writing the
TrainJob's status) moves the resourceVersion between dispatch's read and its conditional write, so the store
refuses the write. Each retry re-reads everything and runs the complete check again; a conflict on every attempt
surfaces as the retryable `PersistentConflictError`, with nothing admitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import ConflictError, PersistentConflictError, UnreachableError
from airflow_provider_dispatch_lab.apiserver.faults import FaultRule

from .cluster import Cluster
from .conftest import DispatchLab, MakeAdapter
from .either import Either
from .writers import StatusWriter, StatusWriters

LOGGER = "airflow_provider_dispatch.dispatch.operations"


@dataclass
class Conflicts:
    """A test's adapter, with Trainer writing TrainJob ft-7's status before dispatch's PUTs, and what it saw."""

    make_adapter: MakeAdapter
    kind: str
    dispatch_lab: DispatchLab
    caplog: pytest.LogCaptureFixture
    writers: StatusWriters
    mark: int = 0

    async def adapter(self, writes: int | None, **options: Any) -> tuple[Either, StatusWriter]:
        """The adapter, and a writer of the status before each of its first `writes` PUTs (None: all); the
        calls and the retry log are read from here on."""
        adapter = await self.make_adapter(self.kind, **options)
        writer = self.writers(writes)
        self.mark = self.dispatch_lab.recorder.mark()
        self.caplog.set_level("INFO", logger=LOGGER)
        return adapter, writer

    def put_statuses(self) -> list[str]:
        return [str(c.status) for c in self.dispatch_lab.recorder.since(self.mark) if c.method == "PUT"]

    def retries_logged(self) -> list[str]:
        records = self.caplog.records
        return [r.getMessage() for r in records if r.name == LOGGER and "conflict on attempt" in r.getMessage()]


@pytest.fixture
def conflicts(
    make_adapter: MakeAdapter,
    kind: str,
    cluster: Cluster,
    dispatch_lab: DispatchLab,
    caplog: pytest.LogCaptureFixture,
) -> Iterator[Conflicts]:
    with StatusWriters(dispatch_lab.lab, dispatch_lab.hooks.add, cluster.namespace) as writers:
        yield Conflicts(make_adapter, kind, dispatch_lab, caplog, writers)


async def test_a_status_write_before_the_release_is_retried_and_admits_once(
    conflicts: Conflicts, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=1)
    adapter, writer = await conflicts.adapter(1)
    ref = f"{cluster.namespace}/ft-7"
    assert await adapter.release(ref) == Execution("ft-7", "1", 2)
    assert conflicts.put_statuses() == ["409", "200"]  # the store refused the stale write; then one admission
    assert cluster.trainjob_object("ft-7")["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "2"
    (logged,) = conflicts.retries_logged()
    assert logged.startswith(f"release of TrainJob {ref}: conflict on attempt 1 of 5 (")
    assert "409" in logged
    assert f"now at resourceVersion {writer.wrote[0]}, admission 1, held" in logged
    assert "re-running the complete check" in logged
    # the retry re-ran the complete check: the second attempt read the TrainJob and the pods again
    calls = dispatch_lab.recorder.since(conflicts.mark)
    first_put = next(i for i, c in enumerate(calls) if c.method == "PUT")
    after = [c.path for c in calls[first_put + 1 :]]
    assert any(p.endswith("/trainjobs/ft-7") for p in after[:-1])
    assert any(p.endswith("/pods") for p in after)


async def test_a_conflict_on_every_attempt_surfaces_retryable_and_admits_nothing(
    conflicts: Conflicts, cluster: Cluster
) -> None:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=1)
    adapter, _ = await conflicts.adapter(None, conflict_attempts=3)
    with pytest.raises(PersistentConflictError, match="met a conflict on each of its 3 attempts") as raised:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert isinstance(raised.value, UnreachableError)  # retryable: Airflow's retries may try again later
    assert conflicts.put_statuses() == ["409", "409", "409"]
    live = cluster.trainjob_object("ft-7")
    assert (live["metadata"]["annotations"][v.ANNOTATION_ADMISSION], live["spec"]["suspend"]) == ("1", True)
    assert [m.split(" (")[0] for m in conflicts.retries_logged()] == [
        f"release of TrainJob {cluster.namespace}/ft-7: conflict on attempt {n} of 3" for n in (1, 2)
    ]


async def test_a_status_write_before_the_hold_is_retried_and_holds(conflicts: Conflicts, cluster: Cluster) -> None:
    execution = cluster.running_execution("ft-7", runtime=cluster.runtime(), admission=3, observed=False)
    adapter, _ = await conflicts.adapter(1)
    assert await adapter.hold(f"{cluster.namespace}/ft-7") == execution
    assert conflicts.put_statuses() == ["409", "200"]
    live = cluster.trainjob_object("ft-7")
    assert live["spec"]["suspend"] is True
    assert v.ANNOTATION_EXECUTION_PODS in live["metadata"]["annotations"]  # the record came with the retried hold
    (logged,) = conflicts.retries_logged()
    assert "hold of TrainJob" in logged
    assert "admission 3, not held" in logged


async def test_one_attempt_keeps_the_conflict_for_the_caller(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    """`conflict_attempts=1`: the first conflict is raised itself (retryable); the next call admits."""
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=1)
    adapter = await make_adapter(kind, conflict_attempts=1)
    dispatch_lab.hooks.faults(
        FaultRule("409", verbs=frozenset({"update"}), resources=frozenset({"trainjobs"}), count=1)
    )
    with pytest.raises(ConflictError, match="Nothing was admitted") as raised:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert not isinstance(raised.value, PersistentConflictError)  # the conflict itself, for the caller to retry
    assert cluster.trainjob_object("ft-7")["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "1"
    assert await adapter.release(f"{cluster.namespace}/ft-7") == Execution("ft-7", "1", 2)
