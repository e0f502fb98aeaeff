"""Conflicts are not failures (issue 17 item 3), through `dag.test()`: Trainer writes the TrainJob's status
between the release's read and its conditional write, the API server answers a real 409, and the operator
re-runs the complete check inside the same try, saying so in the task log. Only a conflict on every attempt
fails the try, and retryably (the task's retries run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from airflow_lab import AirflowLab, DagRunResult, RunDag
from dispatch_lab.cluster import Cluster
from dispatch_lab.writers import StatusWriter, StatusWriters

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.operators.trainjob import TrainJobReleaseOperator

pytestmark = pytest.mark.airflow


@dataclass
class Released:
    """A run of a release DAG against TrainJob ft-7 while Trainer writes its status: the run, the writer, the
    statuses of the worker's PUTs of ft-7, and the task log (standard output)."""

    result: DagRunResult
    writer: StatusWriter
    puts: list[object]
    out: str


@pytest.fixture
def release_with_status_writes(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> Iterator[Callable[[str, int | None], Released]]:
    """`release_with_status_writes(dag_id, times)`: ft-7 held after execution 4, then the DAG run with Trainer
    writing the status before each of the first `times` PUTs of it (None: all)."""
    with StatusWriters(airflow_lab.lab, airflow_lab.hooks.add, cluster.namespace) as writers:

        def release(dag_id: str, times: int | None) -> Released:
            cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=4)
            writer = writers(times)
            mark = airflow_lab.probe.mark()
            result = run_dag(dag_id, namespace=cluster.namespace, name="ft-7")
            puts = [
                s.status
                for s in airflow_lab.probe.since(mark)
                if s.by_worker and s.phase == "done" and s.method == "PUT" and s.path.endswith("/trainjobs/ft-7")
            ]
            return Released(result, writer, puts, capfd.readouterr().out)

        yield release


def test_a_conflict_is_retried_inside_the_try_and_logged(
    cluster: Cluster, release_with_status_writes: Callable[[str, int | None], Released]
) -> None:
    released = release_with_status_writes("dispatch_release_retry", 1)
    result = released.result
    assert (result.state, result.try_number("release")) == ("success", 1)  # no Airflow retry was needed
    assert result.xcom("release") == {"job_id": "ft-7", "submission": "1", "admission": 5}
    assert released.puts == [409, 200]
    assert f"release of TrainJob {cluster.namespace}/ft-7: conflict on attempt 1 of 5" in released.out
    assert f"now at resourceVersion {released.writer.wrote[0]}, admission 4, held" in released.out


def test_a_persistent_conflict_fails_the_try_retryably_and_admits_nothing(
    cluster: Cluster, release_with_status_writes: Callable[[str, int | None], Released]
) -> None:
    released = release_with_status_writes("dispatch_release_conflicts", None)
    # conflict_attempts=2 per try, retries=1: both tries ran (a refusal would have failed on try 1)
    assert (released.result.task_state("release"), released.result.try_number("release")) == ("failed", 2)
    assert released.puts == [409, 409, 409, 409]
    live = cluster.trainjob_object("ft-7")
    assert (live["metadata"]["annotations"][v.ANNOTATION_ADMISSION], live["spec"]["suspend"]) == ("4", True)
    assert released.out.count("met a conflict on each of its 2 attempts") >= 2


@pytest.mark.parametrize("attempts", [0, 21, True])
def test_conflict_attempts_out_of_range_are_refused_when_the_dag_is_parsed(attempts: object) -> None:
    with pytest.raises(ValueError, match="conflict_attempts must be an integer from 1"):
        TrainJobReleaseOperator(task_id="release", namespace="ml", name="ft-7", conflict_attempts=attempts)
