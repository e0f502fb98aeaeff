"""Kueue v0.19's waitForPodsReady, on by default, with the whole simulated cluster (issue 16 item 5, D1).

Kueue writes a `PodsReady` condition on each Workload (`Started` once every Job of the TrainJob's JobSet is ready,
`WaitForRecovery` when that is lost), evicts a Workload whose pods were not ready 30 min after its admission or
stayed unready 30 min after being ready (`PodsReadyTimeout`), and queues it again after a backoff of 60 s doubling
(`requeueState`). A lost node is the case that matters: the node lifecycle controller marks its pods not Ready
(`MarkPodsNotReady`), and Kueue suspends and re-queues the TrainJob by itself, one more re-admission for the drain
rule to stop.

The lab runs slowly (speed 5) and the tests cross the timeouts with `Scenario.advance`, the healthy kubelets
heartbeating all along, so each wait reads the lab's own timestamps and no test sleeps. Lab time goes on running
while a test waits, so an eviction may already be followed by its re-queue when the test looks (under load, a
30-minute advance takes minutes of wall time): each state lab time moves past is waited for in the versions
written since a resourceVersion read before the advance (`since`), never in the current state alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS, WORKLOAD_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.kueue import KUEUE_CONTROLLERS, kueue_controllers
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue.config import KueueConfig, RequeuingStrategy, WaitForPodsReady

from .kueue_steps import Kueue, checks, condition, has
from .nodes_support import Zone
from .workload_steps import trainjob_selector

CONTROLLERS = [*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *KUEUE_CONTROLLERS]
LAB_SPEED = 5.0
MINUTES_30 = 1800.0


def _at(obj: dict[str, Any], kind: str) -> float:
    """When the condition last changed, in lab seconds."""
    found = condition(obj, kind)
    assert found is not None, f"no {kind} condition"
    return parse_timestamp(str(found["lastTransitionTime"]))


def _requeue(wl: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = (wl.get("status") or {}).get("requeueState") or {}
    return state


def _evictions(wl: dict[str, Any]) -> list[dict[str, Any]]:
    evictions: list[dict[str, Any]] = ((wl.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    return evictions


def _running(pods: list[Any], count: int) -> bool:
    live = [p for p in pods if not p.metadata.deletion_timestamp]
    return len(live) == count and all(p.status.phase == "Running" for p in live)


def _ready(pod: Any) -> str | None:
    for entry in pod.status.conditions or ():
        if entry.type == "Ready":
            return str(entry.status)
    return None


def _advance_to(scenario: Scenario, when: float) -> None:
    scenario.advance(max(0.0, when - scenario.now()) + 1)


def _version(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def _evicted_by_timeout(wl: dict[str, Any] | None) -> bool:
    return has(wl, k.EVICTED, "True", k.EVICTED_BY_PODS_READY_TIMEOUT)


def _readmitted(wl: dict[str, Any] | None) -> bool:
    """Admitted again after a backoff (a version from before the eviction's release may still say Admitted)."""
    return has(wl, k.ADMITTED, "True") and has(wl, k.REQUEUED, "True", k.REASON_BACKOFF_FINISHED)


def test_a_lost_node_evicts_after_the_recovery_timeout_and_kueue_requeues_with_backoff(
    kueue: Kueue, scenario: Scenario
) -> None:
    zone = Zone(scenario)
    for node in ("a", "b", "c"):
        zone.node(node, cpu="8")
    setup = kueue.queues(cpu="16")
    runtime = kueue.zone_runtime(zone.name)  # one pod per node; podReplacementPolicy Failed, as dispatch requires
    name = kueue.queued_trainjob(setup, cpu=None, nodes=2, runtime=runtime)
    wl = kueue.workload_name(name)
    selector = trainjob_selector(name)
    first = kueue.wait_pods(selector, lambda pods: _running(pods, 2))

    started = kueue.wait_workload(wl, lambda w: has(w, k.PODS_READY, "True"))
    ready = condition(started, k.PODS_READY) or {}
    assert (ready["reason"], ready["message"]) == (k.PODS_READY_STARTED, k.PODS_READY_READY_MESSAGE)
    managers = {entry["manager"] for entry in started["metadata"]["managedFields"]}
    assert k.PODS_READY_MANAGER in managers  # `SetConditionAndUpdate`'s field owner

    lost = first[0]
    scenario.lose(lost.spec.node_name)  # the kubelet goes silent; its machine runs on
    scenario.advance(60)  # the node monitor grace period (50 s): Ready=Unknown, its pods marked not Ready
    waiting = kueue.wait_workload(wl, lambda w: has(w, k.PODS_READY, "False", k.PODS_READY_WAIT_FOR_RECOVERY))
    assert (condition(waiting, k.PODS_READY) or {})["message"] == k.PODS_READY_RECOVERY_MESSAGE
    assert _ready(kueue.core.read_namespaced_pod(lost.metadata.name, kueue.namespace)) == "False"
    unready_since = _at(waiting, k.PODS_READY)
    assert not has(waiting, k.EVICTED, "True")

    # Taint eviction deletes the lost pod after 300 s; podReplacementPolicy Failed keeps its rank until it is
    # proven gone, so readiness stays lost until the recovery timeout.
    mark = kueue.revision()
    _advance_to(scenario, unready_since + MINUTES_30)
    evicted = kueue.wait_workload(wl, _evicted_by_timeout, since=mark)
    eviction = condition(evicted, k.EVICTED) or {}
    assert eviction["message"] == f"Exceeded the PodsReady timeout {kueue.namespace}/{wl}"
    assert _at(evicted, k.EVICTED) >= unready_since + MINUTES_30
    assert _requeue(evicted)["count"] == 1
    requeue_at = parse_timestamp(_requeue(evicted)["requeueAt"])
    assert requeue_at == _at(evicted, k.EVICTED) + 60  # backoffBaseSeconds
    assert _evictions(evicted) == [
        {"reason": k.EVICTED_BY_PODS_READY_TIMEOUT, "underlyingCause": k.PODS_READY_WAIT_FOR_RECOVERY, "count": 1}
    ]

    released = kueue.wait_workload(
        wl,
        lambda w: has(w, k.REQUEUED, "False", k.EVICTED_BY_PODS_READY_TIMEOUT) and has(w, k.QUOTA_RESERVED, "False"),
        since=_version(evicted),
    )
    kueue.wait_trainjob(name, lambda tj: tj["spec"]["suspend"] is True, since=mark)  # Kueue stopped it by itself
    assert _at(released, k.QUOTA_RESERVED) < requeue_at  # released before the backoff ends: it waits in the queue

    _advance_to(scenario, requeue_at)
    readmitted = kueue.wait_workload(wl, _readmitted, since=_version(released))
    assert has(readmitted, k.REQUEUED, "True", k.REASON_BACKOFF_FINISHED)
    assert _at(readmitted, k.QUOTA_RESERVED) >= requeue_at
    assert _requeue(readmitted) == {"count": 1}  # requeueAt cleared, the count kept
    unsuspended = kueue.wait_trainjob(name, lambda tj: tj["spec"]["suspend"] is False, since=_version(released))
    assert unsuspended is not None

    # The lost pod still terminates and holds its rank, so the re-admitted TrainJob is not ready either: 30 min
    # after this admission Kueue evicts it again, and the backoff doubles.
    again = kueue.wait_workload(
        wl, lambda w: has(w, k.PODS_READY, "False", k.PODS_READY_WAIT_FOR_START), since=_version(released)
    )
    mark = kueue.revision()
    _advance_to(scenario, _at(again, k.ADMITTED) + MINUTES_30)
    second = kueue.wait_workload(wl, lambda w: _requeue(w).get("count") == 2 and has(w, k.EVICTED, "True"), since=mark)
    assert parse_timestamp(_requeue(second)["requeueAt"]) == _at(second, k.EVICTED) + 120
    assert {(e["underlyingCause"], e["count"]) for e in _evictions(second)} == {
        (k.PODS_READY_WAIT_FOR_RECOVERY, 1),
        (k.PODS_READY_WAIT_FOR_START, 1),
    }


def test_the_readmission_after_the_backoff_still_waits_for_the_admission_check(
    kueue: Kueue, scenario: Scenario
) -> None:
    """A `PodsReadyTimeout` eviction resets the checks to Pending: after the backoff Kueue reserves quota again,
    but admits only once the check (dispatch's drain check) is Ready."""
    zone = Zone(scenario)  # no node in the zone: the pods are never scheduled, so never ready
    setup = kueue.queues(cpu="16", checks=("drained",))
    [check] = setup.admission_checks
    name = kueue.queued_trainjob(setup, cpu=None, nodes=2, runtime=kueue.zone_runtime(zone.name))
    wl = kueue.workload_name(name)
    kueue.wait_workload(wl, lambda w: bool(checks(w)) and has(w, k.QUOTA_RESERVED, "True"))
    kueue.scenario.set_check_state(kueue.namespace, wl, check, k.CHECK_READY, "no pods remain")
    admitted = kueue.wait_workload(wl, lambda w: has(w, k.ADMITTED, "True"))
    kueue.wait_pods(trainjob_selector(name), lambda pods: len(pods) == 2)
    assert has(kueue.wait_workload(wl, lambda w: condition(w, k.PODS_READY) is not None), k.PODS_READY, "False")

    mark = kueue.revision()
    _advance_to(scenario, _at(admitted, k.ADMITTED) + MINUTES_30)
    evicted = kueue.wait_workload(wl, _evicted_by_timeout, since=mark)
    assert _evictions(evicted) == [
        {"reason": k.EVICTED_BY_PODS_READY_TIMEOUT, "underlyingCause": k.PODS_READY_WAIT_FOR_START, "count": 1}
    ]
    assert checks(evicted)[check]["state"] == k.CHECK_PENDING
    assert checks(evicted)[check]["message"] == "Reset to Pending after eviction. Previously: Ready"
    requeue_at = parse_timestamp(_requeue(evicted)["requeueAt"])

    _advance_to(scenario, requeue_at)
    held = kueue.wait_workload(
        wl,
        lambda w: has(w, k.REQUEUED, "True", k.REASON_BACKOFF_FINISHED) and has(w, k.QUOTA_RESERVED, "True"),
        since=_version(evicted),
    )
    assert not has(held, k.ADMITTED, "True")
    assert kueue.trainjob(name)["spec"]["suspend"] is True


def _own_lab(config: KueueConfig) -> Lab:
    return Lab(speed=LAB_SPEED, controllers=(*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *kueue_controllers(config)))


@pytest.fixture
def configured(request: pytest.FixtureRequest, cluster_namespace: str) -> Iterator[tuple[Kueue, Scenario]]:
    """A lab of its own with the Kueue configuration the test names, the way a deployment configures Kueue."""
    with _own_lab(request.param) as lab, Scenario(lab) as scenario:
        api = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig("configured")))
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": cluster_namespace}})
        steps = Kueue(api, cluster_namespace, lab)
        try:
            yield steps, scenario
        finally:
            steps.close()
            api.close()
            crashes = lab.call(lambda: list(lab.inner.crashes))
            assert not crashes, f"lab controllers crashed: {crashes}"


SHORT = KueueConfig(
    wait_for_pods_ready=WaitForPodsReady(
        timeout=120,
        recovery_timeout=0,
        requeuing_strategy=RequeuingStrategy(backoff_limit_count=1, backoff_base_seconds=10, backoff_max_seconds=15),
    )
)


@pytest.mark.parametrize("configured", [SHORT], indirect=True, ids=["short"])
def test_shorter_timeouts_and_a_requeue_limit_deactivate_the_workload(configured: tuple[Kueue, Scenario]) -> None:
    kueue, scenario = configured
    zone = Zone(scenario)  # no node: the pods never start
    setup = kueue.queues(cpu="16")
    name = kueue.queued_trainjob(setup, cpu=None, nodes=1, runtime=kueue.zone_runtime(zone.name))
    wl = kueue.workload_name(name)
    admitted = kueue.wait_workload(wl, lambda w: has(w, k.ADMITTED, "True"))

    mark = kueue.revision()
    _advance_to(scenario, _at(admitted, k.ADMITTED) + 120)
    evicted = kueue.wait_workload(wl, _evicted_by_timeout, since=mark)  # re-queued 10 s later
    assert parse_timestamp(_requeue(evicted)["requeueAt"]) == _at(evicted, k.EVICTED) + 10

    _advance_to(scenario, parse_timestamp(_requeue(evicted)["requeueAt"]))
    readmitted = kueue.wait_workload(wl, _readmitted, since=_version(evicted))
    mark = kueue.revision()
    _advance_to(scenario, _at(readmitted, k.ADMITTED) + 120)
    # backoffLimitCount 1 is used up: deactivated instead of evicted again
    deactivated = kueue.wait_workload(
        wl, lambda w: (w.get("spec") or {}).get("active") is False and has(w, k.EVICTED, "True"), since=mark
    )
    assert (condition(deactivated, k.EVICTED) or {})["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert (condition(deactivated, k.EVICTED) or {})["message"] == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )


@pytest.mark.parametrize(
    "configured", [KueueConfig(disable_wait_for_pods_ready=True)], indirect=True, ids=["DisableWaitForPodsReady"]
)
def test_the_feature_gate_turns_it_off(configured: tuple[Kueue, Scenario]) -> None:
    """With `DisableWaitForPodsReady` the job reconciler writes no `PodsReady` (it must write one before it starts
    a job when the feature is on), and nothing times out."""
    kueue, scenario = configured
    zone = Zone(scenario)
    zone.node("a", cpu="8")
    setup = kueue.queues(cpu="16")
    name = kueue.queued_trainjob(setup, cpu=None, nodes=1, runtime=kueue.zone_runtime(zone.name))
    kueue.wait_pods(trainjob_selector(name), lambda pods: _running(pods, 1))
    wl = kueue.workload(kueue.workload_name(name))
    assert condition(wl, k.PODS_READY) is None
    assert has(wl, k.ADMITTED, "True")
