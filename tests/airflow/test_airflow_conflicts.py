"""Conflicts are not failures (issue 17 item 3), through `dag.test()`: Trainer writes the TrainJob's status
between the release's read and its conditional write, the API server answers a real 409, and the operator
re-runs the complete check inside the same try, saying so in the task log. Only a conflict on every attempt
fails the try, and retryably (the task's retries run)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from airflow_lab import AirflowLab, RunDag
from dispatch_lab.cluster import Cluster
from dispatch_lab.writers import StatusWriter, StatusWriters

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.operators.trainjob import TrainJobReleaseOperator

pytestmark = pytest.mark.airflow

MakeWriter = Callable[[int | None], StatusWriter]


@pytest.fixture
def status_writer(airflow_lab: AirflowLab, cluster: Cluster) -> Iterator[MakeWriter]:
    writers = StatusWriters(airflow_lab.lab, airflow_lab.hooks.add, cluster.namespace)
    yield writers
    writers.close()


def worker_puts(airflow_lab: AirflowLab, mark: int) -> list[object]:
    return [
        s.status
        for s in airflow_lab.probe.since(mark)
        if s.by_worker and s.phase == "done" and s.method == "PUT" and s.path.endswith("/trainjobs/ft-7")
    ]


def test_a_conflict_is_retried_inside_the_try_and_logged(
    airflow_lab: AirflowLab,
    cluster: Cluster,
    run_dag: RunDag,
    status_writer: MakeWriter,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=4)
    writer = status_writer(1)
    mark = airflow_lab.probe.mark()
    result = run_dag("dispatch_release_retry", namespace=cluster.namespace, name="ft-7")
    assert (result.state, result.try_number("release")) == ("success", 1)  # no Airflow retry was needed
    assert result.xcom("release") == {"job_id": "ft-7", "submission": "1", "admission": 5}
    assert worker_puts(airflow_lab, mark) == [409, 200]
    out = capfd.readouterr().out
    assert f"release of TrainJob {cluster.namespace}/ft-7: conflict on attempt 1 of 5" in out
    assert f"now at resourceVersion {writer.wrote[0]}, admission 4, held" in out


def test_a_persistent_conflict_fails_the_try_retryably_and_admits_nothing(
    airflow_lab: AirflowLab,
    cluster: Cluster,
    run_dag: RunDag,
    status_writer: MakeWriter,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=4)
    status_writer(None)
    mark = airflow_lab.probe.mark()
    result = run_dag("dispatch_release_conflicts", namespace=cluster.namespace, name="ft-7")
    # conflict_attempts=2 per try, retries=1: both tries ran (a refusal would have failed on try 1)
    assert (result.task_state("release"), result.try_number("release")) == ("failed", 2)
    assert worker_puts(airflow_lab, mark) == [409, 409, 409, 409]
    live = cluster.trainjob_object("ft-7")
    assert (live["metadata"]["annotations"][v.ANNOTATION_ADMISSION], live["spec"]["suspend"]) == ("4", True)
    out = capfd.readouterr().out
    assert out.count("met a conflict on each of its 2 attempts") >= 2


@pytest.mark.parametrize("attempts", [0, 21, True])
def test_conflict_attempts_out_of_range_are_refused_when_the_dag_is_parsed(attempts: object) -> None:
    with pytest.raises(ValueError, match="conflict_attempts must be an integer from 1"):
        TrainJobReleaseOperator(task_id="release", namespace="ml", name="ft-7", conflict_attempts=attempts)
