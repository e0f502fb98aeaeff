"""docs/deploy.md's Airflow side on the real control plane: dispatch's roles and their bindings to the official
Airflow chart's ServiceAccounts applied from deploy/ (built with the pinned kustomize), every `kubectl auth can-i`
line of the page asked of the real API server and answered as the page says, and a restart chain run by real
Airflow (`dag.test()`) with the connection as the page sets it, as the worker's ServiceAccount.

The real tier has no Pods, so `in_cluster` cannot be used here: the connection is the page's other form, a
kubeconfig inline in `AIRFLOW_CONN_KUBERNETES_DEFAULT`, holding a token of the ServiceAccount `airflow-worker` from
the real TokenRequest API (what the kubelet would mount). The triggerer's identity is checked apart: it reads what a
deferred task reads and may not write.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from real.deploy_steps import ROOT, deploy_tools, documents, dump, kubectl, run, service_account_kubeconfig
from real.steps import RealSteps

from airflow_provider_dispatch.dispatch.assessment import State
from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.dispatch.errors import ForbiddenError
from airflow_provider_dispatch.dispatch.vocabulary import LABEL_SUBMISSION
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.simulated.nodes.workload import EXIT_CODE_BY_SUBMISSION, RUN_SECONDS

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.real]

DOC = ROOT / "docs" / "deploy.md"
AIRFLOW_NAMESPACE = "airflow"
CHART_ACCOUNTS = ("airflow-worker", "airflow-triggerer")
"""What the official chart names the worker's and the triggerer's ServiceAccounts for a release `airflow`."""
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def airflow_side(real_cluster: RealCluster) -> Iterator[kubernetes.client.ApiClient]:
    """The chart's namespace and ServiceAccounts (what `helm install airflow apache-airflow/airflow -n airflow`
    creates), then `kubectl apply -k deploy/airflow` (kustomize build, then apply); removed afterwards."""
    api = kubernetes.config.new_client_from_config(config_file=str(real_cluster.kubeconfig("admin")))
    core = kubernetes.client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": AIRFLOW_NAMESPACE}})
    for account in CHART_ACCOUNTS:
        core.create_namespaced_service_account(AIRFLOW_NAMESPACE, {"metadata": {"name": account}})
    built = documents(run([deploy_tools() / "kustomize", "build", ROOT / "deploy" / "airflow"]))
    kubectl(real_cluster, "apply", "-f", "-", stdin=dump(built))
    try:
        yield api
    finally:
        bindings = [d for d in built if d["kind"] == "ClusterRoleBinding"]
        kubectl(real_cluster, "delete", "--ignore-not-found", "-f", "-", stdin=dump(bindings))
        core.delete_namespace(AIRFLOW_NAMESPACE)
        api.close()


def can_i_lines() -> list[tuple[list[str], str]]:
    """Every `kubectl auth can-i` line of docs/deploy.md (continuations joined) with the answer its comment
    gives."""
    text = DOC.read_text().replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        match = re.match(r"^kubectl (auth can-i .*?)\s+#\s*(yes|no)\s*$", line.strip())
        if match:
            found.append((shlex.split(match.group(1)), match.group(2)))
    return found


def test_the_page_has_the_checks() -> None:
    lines = can_i_lines()
    assert len(lines) >= 6
    assert {answer for _, answer in lines} == {"yes", "no"}


@pytest.mark.parametrize(("argv", "answer"), can_i_lines(), ids=lambda x: " ".join(x) if isinstance(x, list) else x)
def test_every_can_i_of_the_page_is_answered_as_it_says(
    real_cluster: RealCluster, airflow_side: kubernetes.client.ApiClient, argv: list[str], answer: str
) -> None:
    assert real_cluster.build is not None
    command = [real_cluster.build.program("kubectl"), f"--kubeconfig={real_cluster.kubeconfig('admin')}", *argv]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert done.stdout.strip() == answer, done.stderr
    assert done.returncode == (0 if answer == "yes" else 1)


@pytest.fixture
def steps(real_cluster: RealCluster, airflow_side: kubernetes.client.ApiClient) -> Iterator[RealSteps]:
    made = RealSteps(real_cluster, airflow_side)
    yield made
    made.close()


def test_a_restart_chain_runs_as_the_workers_identity(
    real_cluster: RealCluster,
    airflow_side: kubernetes.client.ApiClient,
    steps: RealSteps,
    test_dags: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    worker = service_account_kubeconfig(
        real_cluster, airflow_side, AIRFLOW_NAMESPACE, CHART_ACCOUNTS[0], tmp_path / "w"
    )
    # docs/deploy.md, step 5: the connection with the kubeconfig inline, as an environment variable
    connection = {"conn_type": "kubernetes", "extra": {"kube_config": worker.read_text()}}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(connection))
    steps.node("a"), steps.node("b")
    runtime = steps.runtime(annotations={RUN_SECONDS: "5", EXIT_CODE_BY_SUBMISSION: "1=3"}, finite=True)
    manifest = steps.manifest("job", runtime)
    del manifest["metadata"]["labels"][LABEL_SUBMISSION]  # the chain numbers its submissions itself
    dag_run = test_dags["dispatch_restart"].test(run_conf={"manifest": manifest, "max_restarts": 1})
    assert str(dag_run.state) == "success"
    # the first submission failed, was held and drained; the second ran after it and completed, each admitted once
    assert steps.trainjob("job-2")["status"]["conditions"][-1]["type"] == "Complete"
    first, second = steps.processes("job-1"), steps.processes("job-2")
    assert first
    assert second
    assert max(p.stop or float("inf") for p in first) <= min(p.start for p in second)
    assert [steps.admissions("job-1"), steps.admissions("job-2")] == [["1"], ["1"]]

    # the triggerer's identity reads what a deferred task reads, and may not write
    triggerer = service_account_kubeconfig(
        real_cluster, airflow_side, AIRFLOW_NAMESPACE, CHART_ACCOUNTS[1], tmp_path / "t"
    )

    async def as_triggerer() -> tuple[State, str]:
        async with await AsyncDispatchAdapter.from_kubeconfig(triggerer, read_only=True) as reader:
            status = await reader.inspect(f"{steps.namespace}/job-2")
        async with await AsyncDispatchAdapter.from_kubeconfig(triggerer) as writer:
            try:
                await writer.hold(f"{steps.namespace}/job-2")
            except ForbiddenError as error:
                return status.state, error.message
        return status.state, "the hold was not refused"

    state, refusal = asyncio.run(as_triggerer())
    assert state is State.SUCCEEDED
    assert "403" in refusal or "forbidden" in refusal.lower()
