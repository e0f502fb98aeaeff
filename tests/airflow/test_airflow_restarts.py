"""`TrainJobRestartOperator` without a run: its parse-time refusals, and what crosses a deferral.

The runs themselves (restarts, exhaustion, a frozen node, a bad manifest) are in test_example_dags.py, through
the example DAG `restart_operator` against the whole simulated cluster. Here: a deferral's trigger and its
`next_kwargs` go through Airflow's serde as the triggerer and the scheduler store them, and an operator built
afresh (a new worker) resumes the chain from them alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.sdk._shared.module_loading import import_string
from airflow.sdk.exceptions import TaskDeferred
from airflow.sdk.serde import deserialize, serialize

from airflow_provider_dispatch.dispatch import restarts
from airflow_provider_dispatch.dispatch.payloads import TRIGGER_KWARGS_LIMIT, json_size
from airflow_provider_dispatch.operators.restarts import STATE_KWARG, TrainJobRestartOperator
from airflow_provider_dispatch.triggers.pods_drained import PodsDrainedTrigger

pytestmark = pytest.mark.airflow
MANIFEST: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "finetune", "namespace": "ml"},
    "spec": {"runtimeRef": {"name": "torch-distributed"}},
}


def operator(**options: Any) -> TrainJobRestartOperator:
    return TrainJobRestartOperator(task_id="train", manifest=MANIFEST, **options)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_restarts": -1}, "max_restarts must be an integer from 0 to 25"),
        ({"max_restarts": 26}, "max_restarts must be an integer from 0 to 25"),
        ({"max_restarts": "three"}, "max_restarts must be an integer from 0 to 25"),
        ({"max_restarts": True}, "max_restarts must be an integer from 0 to 25"),
        ({"deferrable": False}, "always waits deferred: deferrable can only be True"),
        ({"on_pods_remaining": "retry"}, "always waits deferred: on_pods_remaining can only be 'wait'"),
        ({"training_timeout": 0}, "training_timeout must be a positive duration"),
    ],
)
def test_bad_parameters_are_refused_when_the_dag_is_parsed(
    airflow_env: Any, options: dict[str, Any], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        operator(**options)


def test_a_templated_max_restarts_is_checked_after_rendering(airflow_env: Any) -> None:
    assert operator(max_restarts="{{ params.max_restarts }}").max_restarts == "{{ params.max_restarts }}"


def failed_chain(max_restarts: int, failures: int) -> restarts.RestartState:
    """A chain whose first `failures` submissions failed, now waiting for the last one's pods."""
    state = restarts.start(max_restarts, 1.0)
    for k in range(failures):
        state = restarts.advance(state, restarts.Opened(1, 2.0 + k))
        state = restarts.advance(state, restarts.Finished(restarts.FAILED, "Failed", "x" * 1000, 3.0 + k))
        state = restarts.advance(state, restarts.Held(4.0 + k))
        if k < failures - 1:
            state = restarts.advance(state, restarts.Drained("ceased", 5.0 + k))
    assert state.stage is restarts.Stage.DRAIN
    return state


@pytest.mark.parametrize("failures", [1, restarts.MAX_RESTARTS_LIMIT])
def test_a_deferral_carries_the_chain_through_serde_to_a_fresh_operator(airflow_env: Any, failures: int) -> None:
    state = failed_chain(restarts.MAX_RESTARTS_LIMIT, failures)
    deferring = operator(max_restarts=restarts.MAX_RESTARTS_LIMIT)
    deferring._state = state
    with pytest.raises(TaskDeferred) as deferred:
        deferring.defer_drain("f" * 64)
    # what the scheduler stores as next_kwargs, and what the triggerer stores and rebuilds the trigger from
    next_kwargs = deserialize(serialize(deferred.value.kwargs))
    assert next_kwargs == {STATE_KWARG: state.as_json()}
    assert len(json.dumps(next_kwargs[STATE_KWARG], separators=(",", ":"))) <= restarts.STATE_LIMIT
    trigger = deferred.value.trigger
    assert isinstance(trigger, PodsDrainedTrigger)
    assert (trigger.ref, trigger.accept_ceased, trigger.known_fingerprint) == (
        f"ml/finetune-{failures}",
        True,
        "f" * 64,
    )
    classpath, kwargs = trigger.serialize()
    rebuilt = import_string(classpath)(**deserialize(serialize(kwargs)))
    assert rebuilt.serialize() == trigger.serialize()
    assert json_size({k: v for k, v in kwargs.items() if k != "connection_extras"}) <= TRIGGER_KWARGS_LIMIT
    assert deferred.value.method_name == "drain_complete"

    # a new worker: an operator built from the DAG again knows nothing but what the deferral carried
    fresh = operator(max_restarts=restarts.MAX_RESTARTS_LIMIT)
    with pytest.raises(Exception, match="no state"):
        _ = fresh.state
    fresh.resume({}, next_kwargs[STATE_KWARG])
    assert fresh.state == state
    assert fresh.ref_of(fresh.state.submission + 1).name == f"finetune-{failures + 1}"


def test_a_corrupted_state_is_not_resumed(airflow_env: Any) -> None:
    damaged = failed_chain(2, 1).as_json()
    damaged["stage"] = "running"
    with pytest.raises(Exception, match="cannot resume the restart chain"):
        operator().resume({}, damaged)
