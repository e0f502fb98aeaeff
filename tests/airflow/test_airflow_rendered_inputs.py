"""Templated inputs are validated once rendered (issue 17 item 4), through `dag.test()` against the lab.

A template that pulls an XCom of a task that does not exist renders `None` (native rendering) or the text
`"None"`. The TrainJob here has finished (`Complete`), so an outcome sensor whose admission pin silently
dropped would succeed on that other execution's outcome; instead each task fails on its first try (its retries
unused: a refusal), says the template rendered nothing, and the worker sends no request at all.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import pkgutil
from typing import Any

import pytest
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from airflow_lab import AirflowLab, RunDag
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch import operators, sensors
from airflow_provider_dispatch.dispatch.vocabulary import LABEL_SUBMISSION
from airflow_provider_dispatch.operators import restarts as restart_operator
from airflow_provider_dispatch.operators import trainjob
from airflow_provider_dispatch.sensors import pods_drained, trainjob_outcome
from airflow_provider_dispatch.sensors.base import DispatchSensor
from airflow_provider_dispatch_lab.scenario import manifests

pytestmark = pytest.mark.airflow

NOTHING = "is what a template renders when it pulls nothing"


@pytest.mark.parametrize(
    ("dag_id", "task_id", "said"),
    [
        ("dispatch_outcome_pin_typo", "outcome", "must be an integer of at least 1, not 'None' ('None' " + NOTHING),
        ("dispatch_outcome_pin_typo_native", "outcome", "must be an integer of at least 1, not None (None " + NOTHING),
        ("dispatch_release_name_typo", "release", "TrainJob name 'None' is not allowed ('None' " + NOTHING),
        ("dispatch_hold_namespace_typo", "hold", "namespace 'None' is not allowed ('None' " + NOTHING),
        ("dispatch_open_manifest_typo", "open", "must be a mapping (a dict, or its YAML/JSON text), not NoneType"),
    ],
)
def test_a_template_that_rendered_nothing_is_refused_before_any_request(
    airflow_lab: AirflowLab,
    cluster: Cluster,
    run_dag: RunDag,
    capfd: pytest.CaptureFixture[str],
    dag_id: str,
    task_id: str,
    said: str,
) -> None:
    cluster.trainjob("ft-7", runtime=cluster.runtime(), admission=2, suspend=False)
    cluster.trainer_finishes("ft-7", "Complete")
    before = cluster.resource_version("ft-7")
    mark = airflow_lab.probe.mark()
    result = run_dag(dag_id, namespace=cluster.namespace, name="ft-7")
    assert (result.task_state(task_id), result.try_number(task_id)) == ("failed", 1)
    assert said in capfd.readouterr().out
    assert [s for s in airflow_lab.probe.since(mark) if s.by_worker] == []  # nothing read, nothing written
    assert cluster.resource_version("ft-7") == before


# --- every operator and sensor, every templated input -------------------------------------------------------

MANIFEST = manifests.trainjob("ft-7", runtime="torch")
MANIFEST["metadata"]["namespace"] = "ml"
#: the restart operator numbers the submissions itself: its manifest carries no submission label
CHAIN_MANIFEST = copy.deepcopy(MANIFEST)
del CHAIN_MANIFEST["metadata"]["labels"][LABEL_SUBMISSION]

#: valid arguments for each operator and sensor class the provider ships (a new class must be added here)
VALID: dict[type[BaseOperator], dict[str, Any]] = {
    trainjob.TrainJobHoldOperator: {"namespace": "ml", "name": "ft-7"},
    trainjob.TrainJobReleaseOperator: {"namespace": "ml", "name": "ft-7"},
    trainjob.TrainJobOpenOperator: {"manifest": MANIFEST},
    pods_drained.PodsDrainedSensor: {"namespace": "ml", "name": "ft-7"},
    trainjob_outcome.TrainJobOutcomeSensor: {"namespace": "ml", "name": "ft-7", "admission": "3"},
    restart_operator.TrainJobRestartOperator: {"manifest": CHAIN_MANIFEST, "max_restarts": "2"},
}
#: rendered fields that are outputs, not inputs
OUTPUTS = frozenset({"wait_reason", "trainjobs"})


def shipped_classes() -> set[type[BaseOperator]]:
    """Every concrete operator and sensor class defined in the provider's operators and sensors packages."""
    found: set[type[BaseOperator]] = set()
    for package in (operators, sensors):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for _, member in inspect.getmembers(module, inspect.isclass):
                if issubclass(member, BaseOperator) and member.__module__ == module.__name__:
                    found.add(member)
    return found


def templated_inputs() -> list[tuple[type[BaseOperator], str, object]]:
    cases = []
    for cls in sorted(VALID, key=lambda c: c.__name__):
        for field in cls.template_fields:
            if field not in OUTPUTS:
                cases.extend((cls, field, rendered) for rendered in (None, "None", "", "  "))
    return cases


def test_the_table_covers_every_operator_and_sensor_with_templated_fields() -> None:
    bases = {trainjob.TrainJobOperator, trainjob.AdmittingOperator, DispatchSensor}
    assert shipped_classes() - bases == set(VALID)


@pytest.mark.parametrize(("cls", "field", "rendered"), templated_inputs())
def test_every_templated_input_that_rendered_nothing_is_refused_before_the_connection(
    cls: type[BaseOperator], field: str, rendered: object
) -> None:
    task = cls(task_id="t", **VALID[cls])
    check_inputs = task.check_inputs  # type: ignore[attr-defined]
    check_inputs()  # valid as given
    setattr(task, field, rendered)
    with pytest.raises(AirflowFailException) as refused:
        check_inputs()
    assert "must be" in str(refused.value) or "not allowed" in str(refused.value) or "is empty" in str(refused.value)
    assert "hook" not in vars(task)  # the connection was never touched
