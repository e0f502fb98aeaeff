"""Fixtures for the admission check controller tests: a lab with the whole simulated cluster and Kueue, RBAC on.

Each test module gets its own lab (`LAB_SPEED` may be set per module) running Trainer, JobSet, Jobs, the
scheduler, kubelets, node lifecycle, PodGC and Kueue, with RBAC by token: the controller runs as the lab's
`controller` service account, bound to the `dispatch-admission-controller` ClusterRole, so every test also
proves that role is enough. Tests start the controller themselves (`start_controller`), so that they can kill
and restart it; it is restricted to the test's own AdmissionCheck (`--check-name`), so controllers of
different tests never act on each other's Workloads. A lab controller that crashed fails the module.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import kubernetes
import pytest

from airflow_provider_dispatch.backoff import BackoffSchedule
from airflow_provider_dispatch.kueue.controller import ControllerOptions
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS, WORKLOAD_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.kueue import KUEUE_CONTROLLERS

from .support import ControllerTraffic, RunningController, Steps

CLUSTER = [*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *KUEUE_CONTROLLERS]
StartController = Callable[..., RunningController]


@pytest.fixture(scope="module")
def traffic() -> ControllerTraffic:
    return ControllerTraffic()


@pytest.fixture(scope="module")
def kueue_lab(request: pytest.FixtureRequest, traffic: ControllerTraffic) -> Iterator[Lab]:
    speed = getattr(request.module, "LAB_SPEED", 50.0)
    with Lab(speed=speed, rbac=True, controllers=CLUSTER, middlewares=(traffic.middleware,)) as lab:
        yield lab
        crashes = lab.call(lambda: list(lab.inner.crashes))
        assert not crashes, f"lab tasks crashed: {crashes}"


@pytest.fixture(scope="module")
def admin_api(kueue_lab: Lab) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(kueue_lab.kubeconfig("kueue-tests")))
    yield client
    client.close()


@pytest.fixture(scope="module")
def scenario(kueue_lab: Lab) -> Iterator[Scenario]:
    with Scenario(kueue_lab) as running:
        yield running


@pytest.fixture
def steps(admin_api: kubernetes.client.ApiClient, kueue_lab: Lab, scenario: Scenario) -> Iterator[Steps]:
    namespace = f"k-{uuid.uuid4().hex[:10]}"
    kubernetes.client.CoreV1Api(admin_api).create_namespace({"metadata": {"name": namespace}})
    running = Steps(admin_api, namespace, kueue_lab, scenario)
    yield running
    running.close()


def options(check: str, **overrides: object) -> ControllerOptions:
    """The controller's options in these tests: one check, a seeded jitter, a lab-time resync."""
    settings: dict[str, object] = {
        "check_names": frozenset({check}),
        "seed": 7,
        "resync_seconds": 30.0,
        "refused_backoff": BackoffSchedule(initial=5.0, maximum=20.0),
    }
    settings.update(overrides)
    return ControllerOptions(**settings)  # type: ignore[arg-type]


@pytest.fixture
def start_controller(kueue_lab: Lab, traffic: ControllerTraffic) -> Iterator[StartController]:
    """`start_controller(check, **options)`: a running controller; every one is killed at the end of the test."""
    started: list[RunningController] = []

    def start(check: str, **overrides: object) -> RunningController:
        running = RunningController(kueue_lab, options(check, **overrides)).start()
        started.append(running)
        return running

    yield start
    for running in started:
        running.kill()
    kueue_lab.call(lambda: [gate.open(forward=False) for gate in traffic.gates])
    traffic.reset()
