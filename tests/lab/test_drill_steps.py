"""The drill's chaos steps (`lab/scenario/drill.py`): they act through the API only, and only on the lab.

The lab's `/version` carries its marker; a server that reports another gitCommit (here: the lab behind a
middleware that answers as a real cluster would) is refused before anything is written, and so are bad
arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from aiohttp import web

from airflow_provider_dispatch.dispatch.errors import InvalidNameError, RefusedError
from airflow_provider_dispatch_lab.apiserver.discovery import LAB_GIT_COMMIT
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import drill, manifests
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FENCE_AFTER_SECONDS
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import STATE_ANNOTATION

REAL_COMMIT = "0b1d3e7c2f6a4b8d9e0f1a2b3c4d5e6f7a8b9c0d"


@web.middleware
async def answers_as_a_real_cluster(request: web.Request, handler: Any) -> web.StreamResponse:
    response: web.StreamResponse = await handler(request)
    if request.path.rstrip("/") == "/version" and isinstance(response, web.Response) and response.text:
        return web.json_response({**json.loads(response.text), "gitCommit": REAL_COMMIT})
    return response


@pytest.fixture(scope="module")
def not_the_lab() -> Iterator[kubernetes.client.ApiClient]:
    with Lab(middlewares=(answers_as_a_real_cluster,)) as masked:
        client = kubernetes.config.new_client_from_config(config_file=str(masked.kubeconfig()))
        kubernetes.client.CoreV1Api(client).create_node(manifests.node("victim"))
        yield client
        client.close()


def test_the_lab_reports_its_marker(api_client: kubernetes.client.ApiClient) -> None:
    assert drill.server_commit(api_client) == LAB_GIT_COMMIT
    drill.require_lab(api_client, step="test")


def test_freezing_a_node_of_the_lab_arms_the_fencing_agent(api_client: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api_client)
    core.create_node(manifests.node("drill-step-1"))
    drill.freeze_node(api_client, "drill-step-1", fence_after_seconds=45)
    annotations = core.read_node("drill-step-1").metadata.annotations
    assert (annotations[STATE_ANNOTATION], annotations[FENCE_AFTER_SECONDS]) == ("frozen", "45")


def test_another_server_is_refused_before_anything_is_written(not_the_lab: kubernetes.client.ApiClient) -> None:
    with pytest.raises(drill.NotTheLabError) as raised:
        drill.freeze_node(not_the_lab, "victim", fence_after_seconds=10)
    assert "is not the dispatch lab" in raised.value.message
    assert REAL_COMMIT in raised.value.message
    assert isinstance(raised.value, RefusedError)  # Airflow: AirflowFailException, no retry
    assert kubernetes.client.CoreV1Api(not_the_lab).read_node("victim").metadata.annotations is None


@pytest.mark.parametrize(
    ("node", "fence_after", "error"),
    [("a,b", None, InvalidNameError), ("Node_1", 10.0, InvalidNameError), ("node-1", -1.0, RefusedError)],
)
def test_bad_arguments_are_refused_before_any_request(
    not_the_lab: kubernetes.client.ApiClient, node: str, fence_after: float | None, error: type[Exception]
) -> None:
    # against the masked server a request would fail as NotTheLabError: the argument check comes first
    with pytest.raises(error) as raised:
        drill.freeze_node(not_the_lab, node, fence_after_seconds=fence_after)
    assert not isinstance(raised.value, drill.NotTheLabError)


def test_running_pods_waits_for_every_live_pod(api_client: kubernetes.client.ApiClient, namespace: str) -> None:
    core = kubernetes.client.CoreV1Api(api_client)
    assert drill.running_pods(api_client, namespace, "tj") is None  # no pod yet
    labels = {"jobset.sigs.k8s.io/jobset-name": "tj", "dispatch.phpboyscout.uk/admission": "1"}
    for name in ("tj-0", "tj-1"):
        core.create_namespaced_pod(namespace, manifests.pod(name, node_name="n1", labels=labels))
    status = {"phase": "Running"}
    core.patch_namespaced_pod_status("tj-0", namespace, {"status": status})
    assert drill.running_pods(api_client, namespace, "tj") is None  # tj-1 is still Pending
    core.patch_namespaced_pod_status("tj-1", namespace, {"status": status})
    places = drill.running_pods(api_client, namespace, "tj")
    assert places == [drill.PodPlace("tj-0", "n1", "1"), drill.PodPlace("tj-1", "n1", "1")]
