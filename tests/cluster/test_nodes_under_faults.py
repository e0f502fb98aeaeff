"""The node side keeps working when the API server fails some of its requests (seeded, reproducible): pods
still run to their end and deletions are still confirmed, and no controller dies."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest
from kubernetes.client import ApiException

from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS

from .nodes_support import Zone, phase, pod


@pytest.fixture(scope="module")
def faulty() -> Iterator[tuple[Lab, FaultInjector]]:
    injector = FaultInjector(seed=7)
    with Lab(speed=20.0, controllers=NODE_CONTROLLERS, middlewares=(injector.middleware,)) as lab:
        yield lab, injector
        assert lab.call(lambda: list(lab.inner.crashes)) == []


def _delete_retrying(core: kubernetes.client.CoreV1Api, name: str) -> None:
    """The test is a client too, and the faults hit it as well: it retries a 500, a bounded number of times."""
    for _ in range(20):
        try:
            core.delete_namespaced_pod(name, "faults")
            return
        except ApiException as error:
            if error.status != 500:
                raise
    raise AssertionError(f"20 deletes of {name} in a row failed")


def test_pods_finish_and_deletions_complete_despite_failed_writes(faulty: tuple[Lab, FaultInjector]) -> None:
    lab, injector = faulty
    api = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig("faults")))
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "faults"}})
    with Scenario(lab) as scenario:
        zone = Zone(scenario)
        node = zone.node("n")
        lab.call(
            lambda: injector.add(
                FaultRule(kind="500", verbs=frozenset({"patch", "delete"}), resources=frozenset({"pods"}), rate=0.4)
            )
        )
        for index in range(4):
            core.create_namespaced_pod("faults", pod(f"done-{index}", node=node, run_seconds=20))
            core.create_namespaced_pod("faults", pod(f"deleted-{index}", node=node, termination_seconds=3))
        for index in range(4):
            scenario.wait_for_pod("faults", f"deleted-{index}", lambda p: phase(p) == "Running")
            _delete_retrying(core, f"deleted-{index}")
        scenario.advance(60)
        for index in range(4):
            assert (
                phase(scenario.wait_for_pod("faults", f"done-{index}", lambda p: phase(p) == "Succeeded"))
                == "Succeeded"
            )
            assert scenario.wait_for_pod("faults", f"deleted-{index}", lambda p: p is None) is None
    fired = lab.call(lambda: sum(rule.fired for rule in injector.rules))
    assert fired > 0
    api.close()
