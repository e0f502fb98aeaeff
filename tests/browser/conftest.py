"""Fixtures of the browser test: the lab on a thread, a real Airflow deployment against it, headless Chromium.

* `drill_lab`: the lab with every controller a training cluster runs (`lab.scenario.presets.cluster_controllers`, no
  Kueue; its fencing agent too), three nodes and the default runtime (`provision`), RBAC on. Its speed is 10:
  a frozen node goes `Ready=Unknown` about 5 s of wall time after its last heartbeat (the 50 s grace period),
  PodGC passes every 2 s. Nothing the test checks depends on the speed: the frozen node stays frozen until
  the test proves cessation itself (the drill arms the fencing agent, the test gives it a billion seconds).
* `airflow_stack`: api-server, scheduler, dag-processor and triggerer (`airflow_stack.AirflowStack`) in a
  temporary home, the DAGs of `example_dags/`, `kubernetes_default` as the lab's `writer` identity and
  `lab_admin` as its admin (the drill's `chaos_conn_id`: only it may patch Nodes).
* `browser`: a fresh headless Chromium session (`chromium.start_chromium`).
* `artifacts`: where screenshots and logs go: `$DISPATCH_ARTIFACTS/browser` if set, else
  `tests/browser/artifacts` (gitignored). The terminal summary lists what the test left there.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from browser_support import Artifacts, DrillLab
from chromium import remove_profile, require_browser, start_chromium
from deployment.airflow_stack import AirflowStack

from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario.presets import ClusterShape, cluster_controllers, provision
from airflow_provider_dispatch_lab.scenario.scenario import Scenario

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: the repository's example DAGs: the browser test runs the lost-node drill from there
EXAMPLE_DAGS = ROOT / "example_dags"
LAB_SPEED = 10.0


_ARTIFACTS: list[Artifacts] = []


def _artifacts_root() -> Path:
    configured = os.environ.get("DISPATCH_ARTIFACTS")
    return Path(configured) / "browser" if configured else HERE / "artifacts"


@pytest.fixture(scope="session")
def artifacts() -> Artifacts:
    root = _artifacts_root()
    shutil.rmtree(root / "airflow-logs", ignore_errors=True)  # the previous run's component logs
    root.mkdir(parents=True, exist_ok=True)
    found = Artifacts(root)
    _ARTIFACTS.append(found)
    return found


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for found in _ARTIFACTS:
        if not found.written and not found.notes:
            continue
        terminalreporter.section("browser test artifacts")
        for note in found.notes:
            terminalreporter.write_line(note)
        for path in found.written:
            terminalreporter.write_line(str(path))


@pytest.fixture(scope="module")
def drill_lab() -> Iterator[DrillLab]:
    with Lab(speed=LAB_SPEED, rbac=True, controllers=cluster_controllers(kueue=False)) as lab:
        provisioned = lab.run(lambda: provision(lab.inner, ClusterShape(nodes=3)))
        lab.run(provisioned.close)
        kubeconfigs = {"admin": lab.kubeconfig(), "writer": lab.kubeconfig_for("writer")}
        with Scenario(lab) as scenario:
            yield DrillLab(lab, scenario, kubeconfigs)
        assert not lab.inner.crashes, f"lab tasks crashed: {lab.inner.crashes}"


@pytest.fixture
def namespace(drill_lab: DrillLab) -> Iterator[str]:
    """A namespace of the test's own in the drill lab."""
    name = f"browser-{uuid.uuid4().hex[:6]}"
    client = drill_lab.admin()
    try:
        kubernetes.client.CoreV1Api(client).create_namespace({"metadata": {"name": name}})
        yield name
    finally:
        client.close()


@pytest.fixture(scope="session")
def browser_available() -> None:
    """Checked before anything is started: without Chromium, fail (or skip where allowed) at once."""
    require_browser()


@pytest.fixture(scope="module")
def airflow_stack(browser_available: None, drill_lab: DrillLab, artifacts: Artifacts) -> Iterator[AirflowStack]:
    started = time.monotonic()
    home = Path(tempfile.mkdtemp(prefix="dispatch-browser-airflow-"))
    connections = {
        name: {"conn_type": "kubernetes", "extra": {"kube_config_path": str(drill_lab.kubeconfigs[identity])}}
        for name, identity in (("kubernetes_default", "writer"), ("lab_admin", "admin"))
    }
    stack = AirflowStack.create(home, artifacts.path("airflow-logs/components"), EXAMPLE_DAGS, connections)
    try:
        stack.migrate()
        stack.start()
        health = stack.wait_ready()
        artifacts.notes.append(f"Airflow ready in {time.monotonic() - started:.1f} s: {json.dumps(health)[:300]}")
        yield stack
    except BaseException:
        print(stack.report())
        raise
    finally:
        codes = stack.stop()
        # the task and trigger logs as Airflow wrote them, kept beside the component logs
        if (home / "logs").is_dir():
            shutil.copytree(home / "logs", artifacts.path("airflow-logs/tasks"), dirs_exist_ok=True)
        shutil.rmtree(home, ignore_errors=True)
        artifacts.notes.append(f"Airflow components stopped (exit codes {codes})")


@pytest.fixture
def browser(browser_available: None, artifacts: Artifacts) -> Iterator[Any]:
    profile = Path(tempfile.mkdtemp(prefix="dispatch-chromium-"))
    driver = start_chromium(profile, artifacts.path("chromedriver.log"))
    try:
        yield driver
    finally:
        driver.quit()
        remove_profile(profile)
