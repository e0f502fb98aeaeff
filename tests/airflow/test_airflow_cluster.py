"""Which cluster a task writes to (issue 17 item 5), through `dag.test()` against the lab.

Every writing task logs the API server, the kubeconfig context and user, the namespace, and the connection that
chose them. A connection that does not exist is a refusal, `kubernetes_default` included: never a silent fall
back to the ambient kubeconfig (here the lab's, so a fall back would visibly write). Only
`kubernetes_conn_id=None` asks for the ambient configuration, and the log says so.

The `kubernetes` client reads `$KUBECONFIG` once, when it is imported, into `KUBE_CONFIG_DEFAULT_LOCATION`, which
every default load then uses: `ambient_kubeconfig` sets that value for the test, as a worker started with
`KUBECONFIG=<path>` would have it (setting the variable now would reach nothing).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from airflow_lab import AirflowLab, RunDag
from dispatch_lab.cluster import Cluster
from kubernetes.config import kube_config

pytestmark = pytest.mark.airflow


def names(kubeconfig: Path) -> tuple[str, str]:
    """(current context, its user) of a kubeconfig the lab wrote."""
    config = yaml.safe_load(kubeconfig.read_text())
    context = config["current-context"]
    (entry,) = [c for c in config["contexts"] if c["name"] == context]
    return context, entry["context"]["user"]


def ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))


def running(cluster: Cluster) -> None:
    cluster.trainjob("ft-7", runtime=cluster.runtime(), admission=3, suspend=False)


def acting_on(airflow_lab: AirflowLab, cluster: Cluster, kubeconfig: Path, configuration: str) -> str:
    """The line a writing task logs about its cluster, with the kubeconfig's context and user."""
    context, user = names(kubeconfig)
    return (
        f"Acting on the cluster at {airflow_lab.lab.url} (context {context}, as {user}), namespace "
        f"{cluster.namespace}; configuration from {configuration}"
    )


def test_a_writing_task_logs_the_cluster_and_the_connection(
    airflow_lab: AirflowLab, cluster: Cluster, run_dag: RunDag, capfd: pytest.CaptureFixture[str]
) -> None:
    running(cluster)
    result = run_dag("dispatch_hold_logged", namespace=cluster.namespace, name="ft-7")
    assert result.state == "success"
    path = airflow_lab.kubeconfigs["writer"]
    line = acting_on(airflow_lab, cluster, path, f"connection kubernetes_default (kube_config_path {path})")
    assert line in capfd.readouterr().out


@pytest.mark.parametrize(
    ("dag_id", "drop_default", "said"),
    [
        # a named connection that does not exist is refused (retries=2 unused) and nothing is sent
        ("dispatch_hold_missing_connection", False, ["The connection 'does_not_exist' does not exist"]),
        # a missing kubernetes_default never falls back to the ambient kubeconfig; the message says how to ask
        # for the ambient configuration
        (
            "dispatch_hold_default_connection",
            True,
            ["The connection 'kubernetes_default' does not exist", "kubernetes_conn_id=None"],
        ),
    ],
    ids=["named-connection", "kubernetes_default"],
)
def test_a_connection_that_does_not_exist_is_refused_never_falls_back_and_sends_nothing(
    airflow_lab: AirflowLab,
    cluster: Cluster,
    run_dag: RunDag,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    dag_id: str,
    drop_default: bool,
    said: list[str],
) -> None:
    running(cluster)
    if drop_default:
        monkeypatch.delenv("AIRFLOW_CONN_KUBERNETES_DEFAULT")
    ambient_kubeconfig(monkeypatch, airflow_lab.kubeconfigs["admin"])
    mark = airflow_lab.probe.mark()
    result = run_dag(dag_id, namespace=cluster.namespace, name="ft-7")
    assert (result.task_state("hold"), result.try_number("hold")) == ("failed", 1)
    out = capfd.readouterr().out
    assert [text for text in said if text not in out] == []
    assert airflow_lab.probe.since(mark) == []
    assert cluster.trainjob_object("ft-7")["spec"]["suspend"] is False


def test_no_connection_asked_for_uses_the_ambient_kubeconfig_and_says_so(
    airflow_lab: AirflowLab,
    cluster: Cluster,
    run_dag: RunDag,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    running(cluster)
    path = airflow_lab.kubeconfigs["writer"]
    ambient_kubeconfig(monkeypatch, path)
    result = run_dag("dispatch_hold_ambient", namespace=cluster.namespace, name="ft-7")
    assert result.state == "success"
    assert cluster.trainjob_object("ft-7")["spec"]["suspend"] is True
    configuration = (
        f"no connection (kubernetes_conn_id=None): the ambient kubeconfig {path} (the connection names no "
        "configuration)"
    )
    assert acting_on(airflow_lab, cluster, path, configuration) in capfd.readouterr().out
