"""What the apiserver does to an object's metadata and status on create and update, before storing it.

The generic registry and each kind's strategy (`apiserver/pkg/registry/rest/create.go` `BeforeCreate`,
`update.go` `BeforeUpdate`, `pkg/registry/core/pod/strategy.go`, `pkg/registry/batch/job/strategy.go`,
`apiextensions-apiserver/pkg/registry/customresource/strategy.go`):

- create sets `uid`, `creationTimestamp` and `generation` 1, clears deletion fields, and expands `generateName`;
- the server owns `uid`, `creationTimestamp`, `deletionTimestamp` and `deletionGracePeriodSeconds`: an update
  cannot change them;
- where a kind has a `status` subresource, a write to the main resource keeps the stored status and a write to
  `/status` keeps everything but the status ("PUT/POST/PATCH requests to the /status subresource ... ignore
  changes to anything except the status stanza", CRD docs); create resets the status (pods start `Pending`);
- `generation` rises when anything but metadata and status changes;
- no finalizer may be added once the object is being deleted (`ValidateObjectMetaUpdate`).
"""

from __future__ import annotations

import copy
import secrets
import uuid
from typing import Any

from airflow_provider_dispatch_lab.apiserver.errors import MODIFIED, ApiError, bad_request, conflict, invalid
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType
from airflow_provider_dispatch_lab.apiserver.validation.schema_builtin import (
    apply_pod_create_admission,
    generate_job_selector,
)
from airflow_provider_dispatch_lab.clock import LabClock

Obj = dict[str, Any]

_SERVER_OWNED = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")
_GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""`apiserver/pkg/storage/names/generate.go` uses `utilrand.String(5)`, whose alphabet avoids vowels and
look-alike characters (`apimachinery/pkg/util/rand/rand.go`)."""

_KINDS_WITHOUT_GENERATION = frozenset(
    {
        "Namespace",
        "Node",
        "Event",
        "Lease",
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SelfSubjectReview",
        "ServiceAccount",
        "Role",
        "ClusterRole",
        "RoleBinding",
        "ClusterRoleBinding",
    }
)


def has_status_subresource(resource: ResourceType) -> bool:
    return "status" in resource.subresources


def _generated_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_GENERATE_NAME_ALPHABET) for _ in range(5))


def prepare_create(resource: ResourceType, obj: Obj, namespace: str | None, clock: LabClock) -> Obj:
    """Stamp a new object as the apiserver does before admission and validation."""
    obj = copy.deepcopy(obj)
    obj["apiVersion"] = resource.api_version
    obj["kind"] = resource.kind
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = _generated_name(str(meta["generateName"]))
    if resource.namespaced:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if meta.get("resourceVersion"):
        # etcd3 store `Create`: storage.ErrResourceVersionSetOnCreate, answered as an internal error.
        raise ApiError(500, "InternalError", "resourceVersion should not be set on objects to be created")
    for owned in _SERVER_OWNED:
        meta.pop(owned, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = clock.timestamp()
    if resource.kind in _KINDS_WITHOUT_GENERATION:
        meta.pop("generation", None)
    else:
        meta["generation"] = 1
    _reset_status_on_create(resource, obj)
    if resource.is_builtin and resource.kind == "Job":
        generate_job_selector(obj)
    if resource.is_builtin and resource.kind == "Pod":
        # The built-in admission plugins every cluster enables (DefaultTolerationSeconds, Priority).
        apply_pod_create_admission(obj)
    return obj


def _reset_status_on_create(resource: ResourceType, obj: Obj) -> None:
    if resource.kind == "Pod":
        # podStrategy.PrepareForCreate: status is reset to Pending with the QoS class computed.
        obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(obj.get("spec", {}))}
    elif resource.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif resource.kind == "Node":
        # nodeStrategy.PrepareForCreate keeps the status: kubelets register with it.
        pass
    elif has_status_subresource(resource):
        obj.pop("status", None)
        if resource.kind == "Job":
            obj["status"] = {}


def pod_qos_class(spec: Obj) -> str:
    """`pkg/apis/core/v1/helper/qos/qos.go` `GetPodQOS`, for cpu and memory."""
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    requests_seen = limits_seen = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        requests_seen |= any(k in requests for k in ("cpu", "memory"))
        limits_seen |= any(k in limits for k in ("cpu", "memory"))
        for name in ("cpu", "memory"):
            if name not in limits or requests.get(name, limits[name]) != limits[name]:
                guaranteed = False
    if not requests_seen and not limits_seen:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def prepare_update(resource: ResourceType, new: Obj, old: Obj, subresource: str | None) -> Obj:
    """Carry the server-owned fields over and keep what this endpoint may not change."""
    new = copy.deepcopy(new)
    name = old["metadata"]["name"]
    meta = new.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise bad_request("metadata must be an object")
    if meta.get("name", name) != name:
        raise bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    if resource.namespaced and meta.get("namespace", old["metadata"].get("namespace")) != old["metadata"].get(
        "namespace"
    ):
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    requested = meta.get("resourceVersion")
    current = old["metadata"].get("resourceVersion")
    if requested and requested != current:
        raise conflict(resource.plural, resource.group, name, MODIFIED)

    new["apiVersion"], new["kind"] = resource.api_version, resource.kind
    if subresource == "status":
        result = copy.deepcopy(old)
        if "status" in new:
            result["status"] = new["status"]
        else:
            result.pop("status", None)
        # The field manager records ownership whatever the strategy resets (`fieldmanager` runs after it).
        if "managedFields" in meta:
            result["metadata"]["managedFields"] = meta["managedFields"]
        return result
    if has_status_subresource(resource):
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
    for owned in _SERVER_OWNED:
        if owned in old["metadata"]:
            meta[owned] = old["metadata"][owned]
        else:
            meta.pop(owned, None)
    meta["name"] = name
    if resource.namespaced:
        meta["namespace"] = old["metadata"]["namespace"]
    _forbid_new_finalizers_while_deleting(resource, new, old)
    _track_generation(resource, new, old)
    return new


def _forbid_new_finalizers_while_deleting(resource: ResourceType, new: Obj, old: Obj) -> None:
    if not old["metadata"].get("deletionTimestamp"):
        return
    added = sorted(set(new["metadata"].get("finalizers") or []) - set(old["metadata"].get("finalizers") or []))
    if added:
        message = (
            f"Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added}"
        )
        raise invalid(
            resource.kind,
            resource.group,
            old["metadata"]["name"],
            [{"reason": "FieldValueForbidden", "field": "metadata.finalizers", "message": message}],
        )


def _body(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _track_generation(resource: ResourceType, new: Obj, old: Obj) -> None:
    if resource.kind in _KINDS_WITHOUT_GENERATION:
        new["metadata"].pop("generation", None)
        return
    generation = int(old["metadata"].get("generation") or 1)
    if _body(new) != _body(old):
        generation += 1
    new["metadata"]["generation"] = generation


def should_remove_after_update(obj: Obj) -> bool:
    """An update that removes the last finalizer of an object deleted with grace 0 removes it
    (`registry/generic/registry/store.go` `ShouldDeleteDuringUpdate`)."""
    meta = obj["metadata"]
    return (
        bool(meta.get("deletionTimestamp"))
        and not meta.get("finalizers")
        and int(meta.get("deletionGracePeriodSeconds") or 0) == 0
    )
