"""The OpenAPI v3 documents kubectl downloads: `/openapi/v3` (the index) and `/openapi/v3/api/v1`,
`/openapi/v3/apis/<group>/<version>`.

kubectl (v1.36) reads them for two things. `apply`, `create` and `replace` ask whether the server validates fields
itself: `cli-runtime/pkg/resource/query_param_verifier_v3.go` looks in the group-version's document for the PATCH
operation carrying the kind's `x-kubernetes-group-version-kind` and a `fieldValidation` query parameter; when it is
there kubectl sends `fieldValidation=Strict` and validates nothing itself (otherwise it falls back to OpenAPI v2,
which the lab does not serve). And client-side `apply` looks at that PATCH operation's request body: only when it
lists `application/strategic-merge-patch+json` does it compute the patch from the document's schemas
(`kubectl/pkg/cmd/apply/patcher.go` `gvkSupportsPatchOpenAPIV3`). The lab's built-in kinds have no OpenAPI
schemas, so their PATCH lists only JSON, merge and apply patches: kubectl then uses its compiled-in types for a
strategic merge, the same patch it would compute from the real server's schemas. Custom resources carry their
CRD's `openAPIV3Schema` under `components.schemas`, named as the apiextensions server names them (the group
reversed, then version and kind: `org.kubeflow.trainer.v1alpha1.TrainJob`), so `kubectl explain` works for them.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from airflow_provider_dispatch_lab.apiserver.discovery import version as server_version
from airflow_provider_dispatch_lab.apiserver.registry.resources import Registry, ResourceType

Obj = dict[str, Any]

_QUERY = {"type": "string", "uniqueItems": True}
_WRITE_PARAMETERS = [
    {"name": "dryRun", "in": "query", "schema": _QUERY},
    {"name": "fieldManager", "in": "query", "schema": _QUERY},
    {
        "name": "fieldValidation",
        "in": "query",
        "description": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) "
        "containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default), Strict.",
        "schema": _QUERY,
    },
]
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json")


def group_version_path(group: str, version: str) -> str:
    """`api/v1` or `apis/<group>/<version>`: the key of a document in the index."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def schema_name(resource: ResourceType) -> str:
    """The schema's name in `components.schemas` (`builder.go` of kube-openapi, reversed group)."""
    reversed_group = ".".join(reversed(resource.group.split("."))) if resource.group else "io.k8s.api.core"
    return f"{reversed_group}.{resource.version}.{resource.kind}"


def _gvk(resource: ResourceType) -> Obj:
    return {"group": resource.group, "version": resource.version, "kind": resource.kind}


def _operations(resource: ResourceType) -> dict[str, Obj]:
    """The resource's collection and item paths with the operations kubectl looks at."""
    prefix = "/" + group_version_path(resource.group, resource.version)
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    collection = f"{prefix}{scope}/{resource.plural}"
    reference = {"$ref": f"#/components/schemas/{schema_name(resource)}"}
    body = {"content": {"*/*": {"schema": reference}}}
    item: Obj = {
        "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": _gvk(resource)},
        "put": {
            "x-kubernetes-action": "put",
            "x-kubernetes-group-version-kind": _gvk(resource),
            "parameters": _WRITE_PARAMETERS,
            "requestBody": body,
        },
        "patch": {
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": _gvk(resource),
            "parameters": [*_WRITE_PARAMETERS, {"name": "force", "in": "query", "schema": {"type": "boolean"}}],
            "requestBody": {"content": {media: {"schema": {"type": "object"}} for media in _PATCH_TYPES}},
        },
        "delete": {"x-kubernetes-action": "delete", "x-kubernetes-group-version-kind": _gvk(resource)},
    }
    paths = {
        collection: {
            "get": {"x-kubernetes-action": "list", "x-kubernetes-group-version-kind": _gvk(resource)},
            "post": {
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": _gvk(resource),
                "parameters": _WRITE_PARAMETERS,
                "requestBody": body,
            },
        }
    }
    if "create" in resource.verbs and resource.verbs != ("create",):
        paths[f"{collection}/{{name}}"] = item
    return paths


def _schema(resource: ResourceType) -> Obj:
    schema: Obj = dict(resource.openapi or {"type": "object"})
    schema["x-kubernetes-group-version-kind"] = [_gvk(resource)]
    return schema


@lru_cache(maxsize=64)
def _document(registry: Registry, group: str, version: str) -> bytes:
    served = [r for r in registry.all() if r.group == group and r.version == version]
    paths: Obj = {}
    for resource in served:
        paths.update(_operations(resource))
    document = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version()["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {schema_name(r): _schema(r) for r in served}},
    }
    return json.dumps(document, separators=(",", ":")).encode()


def document(registry: Registry, path: str) -> bytes | None:
    """The JSON of the document at `api/v1` or `apis/<group>/<version>`, or None when none is served there."""
    parts = path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        group, version = "", parts[1]
    elif parts[0] == "apis" and len(parts) == 3:
        group, version = parts[1], parts[2]
    else:
        return None
    if version not in registry.groups().get(group, []):
        return None
    return _document(registry, group, version)


def index(registry: Registry) -> Obj:
    """`/openapi/v3`: each document with its URL; the hash changes when the document does, as the real one's."""
    paths = {}
    for group, versions in registry.groups().items():
        for version in versions:
            key = group_version_path(group, version)
            digest = hashlib.sha512(_document(registry, group, version)).hexdigest().upper()
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest}"}
    return {"paths": paths}
