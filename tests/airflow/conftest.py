"""Fixtures for the tests with real Airflow 3.3: an isolated Airflow home, one migrated sqlite DB, the lab.

Airflow reads its configuration when first imported, so this module points it at a fresh home before that
happens (and reconfigures the ORM if another test module imported Airflow first). The metadata DB is migrated
once per session, in-process (`airflow.utils.db.initdb`); every `dag.test()` shares it.

The DAG bundles are `tests/airflow/dags/` (test-only DAGs) and, when it exists, `example_dags/`. `dag.test()`
needs the DAG in a configured bundle (research airflow.md §5).

The lab runs with RBAC (`Lab(rbac=True)`): the `kubernetes_default` connection is the `writer` identity's
kubeconfig (`AIRFLOW_CONN_KUBERNETES_DEFAULT`), `kubernetes_reader` the read-only one, and `nobody` is a
ServiceAccount without any binding (forbidden everything). The test builds cluster state as the lab's admin
through the API (`dispatch_lab.cluster.Cluster`, as the adapter tests do): the probe and the hooks ignore the
admin, so what they record and fault is exactly what the provider sent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

ROOT = Path(__file__).resolve().parents[2]
DAGS = Path(__file__).resolve().parent / "dags"
EXAMPLE_DAGS = ROOT / "example_dags"
HOME = Path(tempfile.mkdtemp(prefix="dispatch-airflow-home-"))


def _bundles() -> list[dict[str, Any]]:
    bundles = [{"name": "dispatch-tests", "path": DAGS}]
    if EXAMPLE_DAGS.is_dir():
        bundles.append({"name": "dispatch-examples", "path": EXAMPLE_DAGS})
    return [
        {
            "name": bundle["name"],
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(bundle["path"]), "refresh_interval": 0},
        }
        for bundle in bundles
    ]


def _isolate_airflow() -> None:
    os.environ.update(
        {
            "AIRFLOW_HOME": str(HOME),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME / 'airflow.db'}",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(HOME / "logs"),
            "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(_bundles()),
            "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "False",
        }
    )
    if "airflow.settings" in sys.modules:  # imported earlier in this session (e.g. by tests/lab): point it here
        from airflow import settings

        settings.configure_vars()
        settings.reconfigure_orm()


_isolate_airflow()

from airflow_lab import ADMIN_USER, AirflowEnvironment, AirflowLab, DagRunResult, Hooks, Probe, RunDag  # noqa: E402
from dispatch_lab.cluster import Cluster  # noqa: E402

from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import IDENTITY_NAMESPACE  # noqa: E402
from airflow_provider_dispatch_lab.runtime import Lab, write_kubeconfig  # noqa: E402

NOBODY_ACCOUNT = "dispatch-nobody"


@pytest.fixture(scope="session")
def airflow_lab() -> Iterator[AirflowLab]:
    probe, hooks = Probe(), Hooks(bypass=lambda user: user == ADMIN_USER, seed=5)
    with Lab(speed=100.0, rbac=True, middlewares=(probe.middleware, hooks.middleware)) as lab:
        admin = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig()))
        try:
            kubernetes.client.CoreV1Api(admin).create_namespaced_service_account(
                IDENTITY_NAMESPACE, {"metadata": {"name": NOBODY_ACCOUNT}}
            )
        finally:
            admin.close()
        rbac = lab.inner.rbac
        assert rbac is not None
        token = lab.call(lambda: rbac.service_accounts.issue(IDENTITY_NAMESPACE, NOBODY_ACCOUNT))
        kubeconfigs = {identity: lab.kubeconfig_for(identity) for identity in ("writer", "reader", "no-nodes")}
        kubeconfigs["nobody"] = write_kubeconfig(HOME / "kubeconfig-nobody.yaml", lab.url, token, NOBODY_ACCOUNT)
        kubeconfigs["admin"] = lab.kubeconfig()
        yield AirflowLab(lab, probe, hooks, kubeconfigs)


@pytest.fixture(autouse=True)
def _clear_hooks(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "airflow_lab" in request.fixturenames:
        request.getfixturevalue("airflow_lab").hooks.clear()


@pytest.fixture(scope="session")
def admin_client(airflow_lab: AirflowLab) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(airflow_lab.kubeconfigs["admin"]))
    yield client
    client.close()


@pytest.fixture
def cluster(admin_client: kubernetes.client.ApiClient) -> Cluster:
    """A namespace of its own, built as the admin through the API."""
    built = Cluster(admin_client, "")
    built.namespace = f"a-{built.suffix}-{uuid.uuid4().hex[:4]}"
    built.core.create_namespace({"metadata": {"name": built.namespace}})
    return built


@pytest.fixture(scope="session")
def airflow_env(airflow_lab: AirflowLab) -> Iterator[AirflowEnvironment]:
    """Connections pointing at the lab, and the metadata DB migrated once for the session (removed after)."""
    for conn_id, identity in (("kubernetes_default", "writer"), ("kubernetes_reader", "reader")):
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "kubernetes", "extra": airflow_lab.connection(identity)}
        )
    from airflow.utils import db

    started = time.monotonic()
    db.initdb()
    yield AirflowEnvironment(HOME, time.monotonic() - started)
    shutil.rmtree(HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def test_dags(airflow_env: AirflowEnvironment) -> dict[str, Any]:
    """The DAG objects of tests/airflow/dags, imported once (dag.test runs these objects)."""
    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location("dispatch_test_dags", DAGS / "dispatch_test_dags.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {dag.dag_id: dag for dag in vars(module).values() if isinstance(dag, DAG)}


@pytest.fixture
def run_dag(test_dags: dict[str, Any], airflow_env: AirflowEnvironment) -> RunDag:
    """`run_dag(dag_id, **conf)`: one `dag.test()` run with that conf; its result read back from the DB."""

    def run(dag_id: str, **conf: Any) -> DagRunResult:
        dag = test_dags[dag_id]
        dag_run = dag.test(run_conf=conf)
        return DagRunResult(dag_id, dag_run.run_id, str(dag_run.state))

    return run
