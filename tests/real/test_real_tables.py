"""Differential: the lab's `kubectl get` Tables (`lab.apiserver.tables`) against the real API server's.

For pods, nodes, jobs and events the real server's column definitions must equal the lab's, and the lab's printer,
run on the very object the real server printed (`includeObject=Object` puts it in the row), must give the real
server's cells, all but the ages (they depend on the instant of printing).

The lab prints as the pinned v1.36.3 does. The version matrix (`controlplane/matrix`) runs this test against
other releases too; where one of them prints a cell in another form, the test knows that release's form and the
upstream change that made the difference (`_served_form`), so that every cell is still compared exactly.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest

from airflow_provider_dispatch_lab.apiserver import tables
from airflow_provider_dispatch_lab.apiserver.registry.resources import default_registry
from airflow_provider_dispatch_lab.runtime import Lab

from .steps import server_release

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
KERNEL_WITH_ARCHITECTURE = (1, 36)
"""The first release whose node Table prints the Kernel-Version cell as `<kernelVersion> (<architecture>)`:
kubernetes/kubernetes#132402 added the architecture to `printNode` (`pkg/printers/internalversion/printers.go`,
"append arch to kernelVersion"; CHANGELOG-1.36.md, v1.36.0-alpha.1, changes since v1.35.0: "Add architecture to
the kernel version column in the `kubectl get node -owide` output"). Read in the modules themselves: v1.36.3 and
v1.37.2 append it, v1.34.4 prints the kernel version alone."""
KINDS = {  # path -> (registry key, cells that are ages or durations)
    "/api/v1/pods": (("", "pods"), {4}),
    "/api/v1/nodes": (("", "nodes"), {3}),
    "/apis/batch/v1/jobs": (("batch", "jobs"), {3, 4}),
    "/api/v1/events": (("", "events"), {0, 7}),
}


def _served_form(
    path: str, columns: list[str], cells: list[Any], obj: dict[str, Any], release: tuple[int, int]
) -> list[Any]:
    """The lab's cells (it prints as the pinned v1.36.3 does) as the API server of `release` prints them: before
    `KERNEL_WITH_ARCHITECTURE`, a node's Kernel-Version cell without the architecture the lab appended."""
    if path != "/api/v1/nodes" or release >= KERNEL_WITH_ARCHITECTURE:
        return cells
    architecture = ((obj.get("status") or {}).get("nodeInfo") or {}).get("architecture")
    if not architecture:
        return cells
    kernel = columns.index("Kernel-Version")
    assert cells[kernel].endswith(f" ({architecture})"), ("the lab no longer prints as v1.36.3 does", cells)
    return [*cells[:kernel], cells[kernel].removesuffix(f" ({architecture})"), *cells[kernel + 1 :]]


def _table(client: kubernetes.client.ApiClient, path: str) -> dict[str, Any]:
    answer = client.call_api(
        path,
        "GET",
        query_params=[("includeObject", "Object")],
        header_params={"Accept": TABLE},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    return json.loads(answer.data)


@pytest.fixture
def real_job(real_admin: kubernetes.client.ApiClient, real_namespace: str) -> str:
    """A Job on the real cluster: its controller makes a pod, the scheduler places it on a simulated node."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "tables"},
        "spec": {
            "parallelism": 2,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
            },
        },
    }
    kubernetes.client.BatchV1Api(real_admin).create_namespaced_job(real_namespace, job)
    core = kubernetes.client.CoreV1Api(real_admin)
    stream = kubernetes.watch.Watch().stream(core.list_namespaced_pod, real_namespace, timeout_seconds=60)
    for event in stream:  # the timeout is a failure bound only: the first pod ends the wait
        if event["type"] == "ADDED":
            break
    else:
        pytest.fail("the real Job controller made no pod in 60 s")
    return real_namespace


def test_the_labs_tables_are_the_real_servers(real_admin: kubernetes.client.ApiClient, real_job: str, lab: Lab) -> None:
    lab_client = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig()))
    registry = default_registry()
    release = server_release(real_admin)
    try:
        for path, ((group, plural), ages) in KINDS.items():
            real = _table(real_admin, path)
            ours = _table(lab_client, path)
            assert ours["columnDefinitions"] == real["columnDefinitions"], path
            resource = next(r for r in registry.all() if (r.group, r.plural) == (group, plural))
            rows = real["rows"]
            if path != "/api/v1/events":
                assert rows, f"the real cluster has no {plural} to print"
            columns = [column["name"] for column in real["columnDefinitions"]]
            for row in rows:
                printed = tables.to_table(resource, row["object"], 0.0)["rows"][0]["cells"]
                printed = _served_form(path, columns, printed, row["object"], release)
                keep = [i for i in range(len(printed)) if i not in ages]
                assert [printed[i] for i in keep] == [row["cells"][i] for i in keep], (path, row["cells"])
    finally:
        lab_client.close()
