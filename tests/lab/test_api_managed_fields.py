"""managedFields of writes that are not apply (create, update, merge patch), on the lab and on the real API server.

dispatch's settle counts from the newest `time` of a JobSet's or a Job's managedFields entries outside `/status`
(evidence.py `spec_changed_at`): the time the API server writes when a manager's write changed a field. These
tests pin what that relies on, against both servers (tests/servers.py): which manager an entry names, that a
write which changes a field moves the field to its manager and sets that manager's time, that a write which
changes nothing leaves every entry as it was, that an update which carries no managedFields keeps them, and that a
status write is recorded under `/status`. The exact FieldsV1 encoding is not compared (the lab does not write the
`.` members of maps).
"""

from __future__ import annotations

from typing import Any

import kubernetes
from servers import SERVERS, make_pod

from airflow_provider_dispatch.dispatch.evidence import spec_changed_at
from airflow_provider_dispatch.dispatch.vocabulary import parse_time
from airflow_provider_dispatch_lab.scenario import manifests

API_SERVERS = SERVERS
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
#: the official Python client's User-Agent is `OpenAPI-Generator/<version>/python`: its prefix names the manager
CLIENT_MANAGER = "OpenAPI-Generator"


def _entries(obj: Any) -> list[dict[str, Any]]:
    if not isinstance(obj, dict):
        obj = kubernetes.client.ApiClient().sanitize_for_serialization(obj)
    return list(obj["metadata"].get("managedFields") or [])


def _by_manager(obj: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e.get("subresource", "")): e for e in _entries(obj)}


def _leaves(fields: dict[str, Any], prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The owned paths of a FieldsV1 tree, without its `.` members."""
    found: set[tuple[str, ...]] = set()
    for key, child in fields.items():
        if key == ".":
            continue
        path = (*prefix, key)
        found |= _leaves(child, path) if child else {path}
    return found


def _pod(labels: dict[str, str]) -> dict[str, Any]:
    body = make_pod("p")
    body["metadata"]["labels"] = labels
    return body


def _labels(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}}


def test_a_create_is_recorded_under_the_clients_manager_with_a_time(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    created = core_v1.create_namespaced_pod(namespace, _pod({"k": "v"}))
    entries = _by_manager(created)
    assert list(entries) == [(CLIENT_MANAGER, "")]
    entry = entries[(CLIENT_MANAGER, "")]
    assert entry["operation"] == "Update"
    assert parse_time(entry["time"]) is not None
    assert ("f:metadata", "f:labels", "f:k") in _leaves(entry["fieldsV1"])


def test_a_change_moves_the_field_to_its_manager_and_a_no_op_changes_nothing(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core_v1.create_namespaced_pod(namespace, _pod({"k": "v", "other": "o"}))
    edited = core_v1.patch_namespaced_pod("p", namespace, _labels({"k": "w"}), field_manager="editor")
    entries = _by_manager(edited)
    label, other = ("f:metadata", "f:labels", "f:k"), ("f:metadata", "f:labels", "f:other")
    assert label in _leaves(entries[("editor", "")]["fieldsV1"])
    assert label not in _leaves(entries[(CLIENT_MANAGER, "")]["fieldsV1"])
    assert other in _leaves(entries[(CLIENT_MANAGER, "")]["fieldsV1"])
    assert parse_time(entries[("editor", "")]["time"]) >= parse_time(entries[(CLIENT_MANAGER, "")]["time"])  # type: ignore[operator]

    again = core_v1.patch_namespaced_pod("p", namespace, _labels({"k": "w"}), field_manager="someone")
    assert _entries(again) == _entries(edited)
    assert again.metadata.resource_version == edited.metadata.resource_version


def test_an_update_that_carries_no_managed_fields_keeps_them(
    core_v1: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    created = core_v1.create_namespaced_pod(namespace, _pod({"k": "v"}))
    body = kubernetes.client.ApiClient().sanitize_for_serialization(created)
    body["metadata"].pop("managedFields")
    body["metadata"]["labels"]["k"] = "w"
    replaced = core_v1.replace_namespaced_pod("p", namespace, body, field_manager="replacer")
    assert set(_by_manager(replaced)) == {(CLIENT_MANAGER, ""), ("replacer", "")}


def test_a_status_write_is_recorded_under_status_and_is_not_a_change_of_the_spec(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    spec_time = spec_changed_at(created)
    assert spec_time is not None
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Suspended",
                    "status": "True",
                    "reason": "Suspended",
                    "message": "",
                    "lastTransitionTime": created["metadata"]["creationTimestamp"],
                }
            ]
        }
    }
    written = custom_objects.patch_namespaced_custom_object_status(
        *TRAINER, namespace, "trainjobs", "tj", status, field_manager="trainer"
    )
    entry = _by_manager(written)[("trainer", "status")]
    assert any(path[:2] == ("f:status", "f:conditions") for path in _leaves(entry["fieldsV1"]))
    assert spec_changed_at(written) == spec_time
