"""The lost-node drill's own steps, through the Kubernetes API only: find where a TrainJob runs, freeze a node.

A drill runs in another process than the lab (`airflow dags test`, a worker), so it can only act through the
API, as a person with kubectl would: the lab's machines follow the Node annotation
`lab.dispatch.phpboyscout.uk/state` (`scenario.py`), and the lab's fencing agent follows
`lab.dispatch.phpboyscout.uk/fence-after-seconds` (`simulated/nodes/fencing.py`). On a real cluster those
annotations would do nothing, and a freeze there would mean real harm elsewhere: so every step that changes
the cluster first calls `require_lab`, which refuses any API server whose `/version` does not report the
lab's marker (`discovery.LAB_GIT_COMMIT`). The refusal is a dispatch `RefusedError` (`NotTheLabError`), which
the Airflow layer turns into a failure without retries.

Every function takes a `kubernetes.client.ApiClient` (in a DAG: `KubernetesHook(conn_id=...).api_client`) and
works on plain JSON. Nothing here imports Airflow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kubernetes

from airflow_provider_dispatch.dispatch.errors import RefusedError
from airflow_provider_dispatch.dispatch.validation import parse_ref, validate_node_name
from airflow_provider_dispatch.dispatch.vocabulary import LABEL_JOBSET_NAME, POD_LABEL_ADMISSION
from airflow_provider_dispatch_lab.apiserver.discovery import LAB_GIT_COMMIT
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FENCE_AFTER_SECONDS
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import STATE_ANNOTATION, MachineState

Obj = dict[str, Any]


class NotTheLabError(RefusedError):
    """A drill step that changes machines was pointed at an API server that is not the lab."""


@dataclass(frozen=True)
class PodPlace:
    """Where one pod of a TrainJob runs."""

    pod: str
    node: str
    admission: str

    def as_dict(self) -> dict[str, str]:
        return {"pod": self.pod, "node": self.node, "admission": self.admission}


def _json(response: Any) -> Obj:
    data: Obj = json.loads(response.data)
    return data


def server_commit(api: kubernetes.client.ApiClient) -> str:
    """The `gitCommit` the API server's `/version` reports."""
    response = kubernetes.client.VersionApi(api).get_code(_preload_content=False)
    return str(_json(response).get("gitCommit", ""))


def require_lab(api: kubernetes.client.ApiClient, *, step: str) -> None:
    """Refuse (`NotTheLabError`) unless the API server is the lab: `step` says what was about to happen."""
    commit = server_commit(api)
    if commit != LAB_GIT_COMMIT:
        host = api.configuration.host
        raise NotTheLabError(
            f"refusing to {step}: {host} is not the dispatch lab (its /version gitCommit is {commit!r}, the lab "
            f"reports {LAB_GIT_COMMIT}). The drill's chaos steps only run against `dispatch lab serve` or "
            "`dispatch demo`."
        )


def trainjob_pods(api: kubernetes.client.ApiClient, namespace: str, name: str) -> list[Obj]:
    """The pods JobSet made for TrainJob `namespace/name` (label `jobset.sigs.k8s.io/jobset-name`)."""
    ref = parse_ref(f"{namespace}/{name}")
    response = kubernetes.client.CoreV1Api(api).list_namespaced_pod(
        ref.namespace, label_selector=f"{LABEL_JOBSET_NAME}={ref.name}", _preload_content=False
    )
    items = _json(response).get("items") or []
    return [item for item in items if isinstance(item, dict)]


def _running(pod: Mapping[str, Any]) -> bool:
    metadata = pod.get("metadata") or {}
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and not metadata.get("deletionTimestamp")


def running_pods(api: kubernetes.client.ApiClient, namespace: str, name: str) -> list[PodPlace] | None:
    """Where the TrainJob's current execution runs, once every one of its live pods is Running on a node;
    None while any is still Pending (or no pod exists yet). Pods being deleted (a previous execution) are left
    out."""
    live = [
        pod for pod in trainjob_pods(api, namespace, name) if not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    if not live or not all(_running(pod) for pod in live):
        return None
    places = [
        PodPlace(
            str(pod["metadata"]["name"]),
            str((pod.get("spec") or {}).get("nodeName") or ""),
            str(((pod["metadata"].get("labels") or {}).get(POD_LABEL_ADMISSION)) or ""),
        )
        for pod in live
    ]
    return sorted(places, key=lambda place: place.pod)


def freeze_node(api: kubernetes.client.ApiClient, node: str, *, fence_after_seconds: float | None = None) -> Obj:
    """Freeze the machine under `node` (it stops heartbeating; its processes pause, still holding what they
    hold) and, with `fence_after_seconds`, arm the lab's fencing agent for it. Refused unless this is the lab."""
    validate_node_name(node)
    if fence_after_seconds is not None and not fence_after_seconds >= 0:
        raise RefusedError(f"fence_after_seconds must be 0 or more, not {fence_after_seconds!r}", ref=node)
    require_lab(api, step=f"freeze node {node}")
    annotations = {STATE_ANNOTATION: MachineState.FROZEN.value}
    if fence_after_seconds is not None:
        annotations[FENCE_AFTER_SECONDS] = f"{fence_after_seconds:g}"
    response = kubernetes.client.CoreV1Api(api).patch_node(
        node, {"metadata": {"annotations": annotations}}, _preload_content=False
    )
    return _json(response)


__all__ = [
    "NotTheLabError",
    "PodPlace",
    "freeze_node",
    "require_lab",
    "running_pods",
    "server_commit",
    "trainjob_pods",
]
