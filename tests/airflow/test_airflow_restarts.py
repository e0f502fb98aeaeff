"""`TrainJobRestartOperator` without a run: its parse-time refusals, and what crosses a deferral.

The runs themselves (restarts, exhaustion, a frozen node, a bad manifest) are in test_example_dags.py, through
the example DAG `restart_operator` against the whole simulated cluster. Here: a deferral's trigger and its
`next_kwargs` go through Airflow's serde as the triggerer and the scheduler store them, and an operator built
afresh (a new worker) resumes the chain from them alone; and two tries of the task alive at once, against the lab:
the one that finds the next submission opened by the other goes on from the cluster (the resumes of a new try
from the cluster at every stage are in test_example_dags.py, and in real Airflow in tests/browser).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk._shared.module_loading import import_string
from airflow.sdk.exceptions import TaskDeferred
from airflow.sdk.serde import deserialize, serialize
from airflow_lab import AirflowLab
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import restarts
from airflow_provider_dispatch.dispatch.payloads import TRIGGER_KWARGS_LIMIT, json_size
from airflow_provider_dispatch.hooks.errors import airflow_errors
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
    return TrainJobRestartOperator(task_id="train", **{"manifest": MANIFEST, **options})


def in_namespace(namespace: str) -> dict[str, Any]:
    manifest = copy.deepcopy(MANIFEST)
    manifest["metadata"]["namespace"] = namespace
    return manifest


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
        ({"quiet_period": -1}, "quiet_period must be from 0 to 3600 seconds"),
        ({"quiet_period": True}, "quiet_period must be from 0 to 3600 seconds"),
        ({"per_run": "yes"}, "per_run must be True or False"),
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


# --- two tries alive at once: the create of <name>-<k> is the fence ---------------------------------------------


def chain_at_open(submission: int) -> restarts.RestartState:
    """This try drained submission k-1 and is about to open submission k."""
    state = failed_chain(3, submission - 1)
    return restarts.advance(state, restarts.Drained("drained", 9.0))


def test_an_open_finds_the_submission_another_try_opened_and_goes_on_from_the_cluster(
    airflow_env: Any, airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    """Before it opens submission 2 the chain reads the cluster: another try of the task (a zombie beside its retry)
    opened and released it already, so this try waits for that execution's outcome and writes nothing; had the
    other try only created it (held, not released), this one opens it as it is."""
    runtime = cluster.runtime()
    cluster.trainjob("finetune-1", runtime=runtime, job_id="finetune", submission="1", admission=1)
    cluster.trainer_finishes("finetune-1", "Failed")
    cluster.trainjob("finetune-2", runtime=runtime, job_id="finetune", submission="2", admission=1, suspend=False)
    chain = operator(manifest=in_namespace(cluster.namespace), max_restarts=3)
    chain._state = chain_at_open(2)
    mark = airflow_lab.probe.mark()
    chain.open_submission({})  # type: ignore[arg-type]  # the adopted path needs no context
    assert (chain.state.stage, chain.state.submission, chain.state.current.admission) == (
        restarts.Stage.OUTCOME,
        2,
        1,
    )
    assert [s for s in airflow_lab.probe.since(mark) if s.writes] == []

    cluster.trainjob("finetune-3", runtime=runtime, job_id="finetune", submission="3", admission=0)
    waiting = operator(manifest=in_namespace(cluster.namespace), max_restarts=3)
    waiting._state = chain_at_open(3)
    assert waiting.adopted(3) is False  # created held by the other try, not released: this one's open takes it
    assert waiting.state == chain_at_open(3)


def test_a_submission_that_finished_before_this_try_could_open_it_is_no_refusal(
    airflow_env: Any, airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    """The other try opened submission 2, saw it fail and held it while this try's open was under way: the
    release answers FinishedError, and the chain goes on from the cluster (hold, drain, submission 3) instead of
    failing the task in the release's words."""
    runtime = cluster.runtime()
    cluster.trainjob("finetune-1", runtime=runtime, job_id="finetune", submission="1", admission=1)
    cluster.trainer_finishes("finetune-1", "Failed")
    cluster.trainjob("finetune-2", runtime=runtime, job_id="finetune", submission="2", admission=1)
    cluster.trainer_finishes("finetune-2", "Failed")
    chain = operator(manifest=in_namespace(cluster.namespace), max_restarts=3)
    chain._state = chain_at_open(2)

    def release_as_the_open_would() -> dict[str, Any]:
        with airflow_errors():
            return chain.adapter().release(chain.ref_of(2)).as_dict()

    with pytest.raises(AirflowFailException, match="unsuspending it would admit nothing"):
        release_as_the_open_would()
    chain.opening(release_as_the_open_would)
    assert (chain.state.stage, chain.state.submission, chain.state.restarts) == (restarts.Stage.HOLD, 2, 1)
