"""The four patch kinds through the official clients, chosen by content type as the clients choose it."""

from __future__ import annotations

import kubernetes
import kubernetes_asyncio
import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException
from servers import SERVERS, make_pod

from airflow_provider_dispatch_lab.scenario import manifests

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
KUEUE = ("kueue.x-k8s.io", "v1beta2")

API_SERVERS = SERVERS


def test_merge_patch_on_a_custom_resource(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    patched = custom_objects.patch_namespaced_custom_object(
        *TRAINER,
        namespace,
        "trainjobs",
        "tj",
        {"metadata": {"labels": {"dispatch.phpboyscout.uk/submission": None}}},
    )
    assert "dispatch.phpboyscout.uk/submission" not in patched["metadata"]["labels"]


def test_merge_patch_with_resource_version_is_conditional(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    custom_objects.patch_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj", {"spec": {"suspend": False}})
    with pytest.raises(ApiException) as raised:
        custom_objects.patch_namespaced_custom_object(
            *TRAINER,
            namespace,
            "trainjobs",
            "tj",
            {
                "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                "spec": {"suspend": True},
            },
        )
    expect_answer(raised.value, 409)
    assert (
        custom_objects.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj")["spec"]["suspend"] is False
    )


def test_json_patch_with_a_test_operation(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    operations = [
        {"op": "test", "path": "/spec/suspend", "value": True},
        {"op": "replace", "path": "/spec/suspend", "value": False},
    ]
    # The sync client offers only merge patch for custom objects: a JSON patch needs its content type named.
    json_patch = "application/json-patch+json"
    patched = custom_objects.patch_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "tj", operations, _content_type=json_patch
    )
    assert patched["spec"]["suspend"] is False
    with pytest.raises(ApiException) as raised:
        custom_objects.patch_namespaced_custom_object(
            *TRAINER, namespace, "trainjobs", "tj", operations, _content_type=json_patch
        )
    expect_answer(raised.value, 422)


def test_strategic_merge_patch_merges_containers_by_name(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    body = make_pod("p")
    body["spec"]["containers"].append({"name": "side", "image": "busybox:1.35"})
    core_v1.create_namespaced_pod(namespace, body)
    # The sync client sends a dict patch on a built-in kind as a strategic merge patch.
    patched = core_v1.patch_namespaced_pod(
        "p", namespace, {"spec": {"containers": [{"name": "side", "image": "busybox:1.36"}]}}
    )
    images = {c.name: c.image for c in patched.spec.containers}
    assert images == {"main": "busybox:1.36", "side": "busybox:1.36"}


def test_strategic_merge_patch_is_refused_for_custom_resources(
    api_client: kubernetes.client.ApiClient, namespace: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    with pytest.raises(ApiException) as raised:
        api_client.call_api(
            f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/tj",
            "PATCH",
            header_params={
                "Content-Type": "application/strategic-merge-patch+json",
                "Accept": "application/json",
            },
            body={"spec": {"suspend": False}},
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
    expect_answer(raised.value, 415, "UnsupportedMediaType")


def _workload(name: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "node",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "n", "image": "x"}]}},
                }
            ],
        },
    }


def _check_entry(name: str, state: str, message: str) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "status": {
            "admissionChecks": [
                {
                    "name": name,
                    "state": state,
                    "message": message,
                    "lastTransitionTime": "2026-12-02T10:00:00Z",
                }
            ]
        },
    }


def test_server_side_apply_of_one_admission_check_entry(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    custom_objects.create_namespaced_custom_object(*KUEUE, namespace, "workloads", _workload("wl"))
    for manager, check in (("kueue", "other-check"), ("dispatch", "dispatch-drained")):
        custom_objects.patch_namespaced_custom_object_status(
            *KUEUE,
            namespace,
            "workloads",
            "wl",
            _check_entry(check, "Pending", ""),
            field_manager=manager,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    applied = custom_objects.patch_namespaced_custom_object_status(
        *KUEUE,
        namespace,
        "workloads",
        "wl",
        _check_entry("dispatch-drained", "Ready", "no pods remain"),
        field_manager="dispatch",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    states = {c["name"]: c["state"] for c in applied["status"]["admissionChecks"]}
    assert states == {"other-check": "Pending", "dispatch-drained": "Ready"}
    managers = {entry["manager"] for entry in applied["metadata"]["managedFields"]}
    assert {"kueue", "dispatch"} <= managers


def test_server_side_apply_with_a_stale_resource_version_is_409(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    created = custom_objects.create_namespaced_custom_object(*KUEUE, namespace, "workloads", _workload("wl"))
    apply = {"field_manager": "dispatch", "force": True, "_content_type": "application/apply-patch+yaml"}
    custom_objects.patch_namespaced_custom_object_status(
        *KUEUE, namespace, "workloads", "wl", _check_entry("dispatch-drained", "Pending", ""), **apply
    )
    stale = _check_entry("dispatch-drained", "Ready", "")
    stale["metadata"] = {"name": "wl", "resourceVersion": created["metadata"]["resourceVersion"]}
    with pytest.raises(ApiException) as raised:
        custom_objects.patch_namespaced_custom_object_status(*KUEUE, namespace, "workloads", "wl", stale, **apply)
    expect_answer(raised.value, 409)
    current = custom_objects.get_namespaced_custom_object(*KUEUE, namespace, "workloads", "wl")
    assert [c["state"] for c in current["status"]["admissionChecks"]] == ["Pending"]


async def test_async_client_patches(async_api_client: kubernetes_asyncio.client.ApiClient, namespace: str) -> None:
    custom = kubernetes_asyncio.client.CustomObjectsApi(async_api_client)
    await custom.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    # kubernetes_asyncio sends a dict patch on a custom object as a JSON patch (its first content type), which
    # the apiserver refuses; a merge patch must be asked for by name.
    with pytest.raises(kubernetes_asyncio.client.ApiException) as raised:
        await custom.patch_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj", {"metadata": {}})
    expect_answer(raised.value, 400)
    merged = await custom.patch_namespaced_custom_object(
        *TRAINER,
        namespace,
        "trainjobs",
        "tj",
        {"metadata": {"annotations": {"a": "1"}}},
        _content_type="application/merge-patch+json",
    )
    assert merged["metadata"]["annotations"] == {"a": "1"}
    json_patched = await custom.patch_namespaced_custom_object(
        *TRAINER,
        namespace,
        "trainjobs",
        "tj",
        [{"op": "add", "path": "/metadata/annotations/b", "value": "2"}],
    )
    assert json_patched["metadata"]["annotations"] == {"a": "1", "b": "2"}
    core = kubernetes_asyncio.client.CoreV1Api(async_api_client)
    await core.create_namespaced_pod(namespace, make_pod("p"))
    # The async client sends a dict patch on a built-in kind as a strategic merge patch too.
    patched = await core.patch_namespaced_pod("p", namespace, {"metadata": {"finalizers": ["example.com/keep"]}})
    assert patched.metadata.finalizers == ["example.com/keep"]
