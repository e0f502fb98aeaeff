"""Discovery documents: /version, /api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>.

The official clients and the cncf-kubernetes hooks need only the legacy (unaggregated) discovery documents; a
client that asks for aggregated discovery (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroup
DiscoveryList`) falls back to these when the answer's content type is plain JSON, as client-go's discovery client
does (`client-go/discovery/discovery_client.go` `isV2Beta1ContentType`). Shapes follow
`apimachinery/pkg/apis/meta/v1/types.go` (`APIVersions`, `APIGroupList`, `APIGroup`, `APIResourceList`).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from airflow_provider_dispatch_lab.apiserver.registry.resources import Registry, ResourceType

KUBERNETES_VERSION = {"major": "1", "minor": "34"}
"""The Kubernetes minor whose behaviour the lab reproduces (research k8s-apis.md: podReplacementPolicy GA in 1.34,
node-monitor-grace-period 50 s since 1.32)."""

LAB_GIT_COMMIT = hashlib.sha1(b"lab.dispatch.phpboyscout.uk", usedforsecurity=False).hexdigest()
"""The `gitCommit` the lab's /version reports: the lab's marker. A real apiserver reports the git commit it was
built from, never this digest of the lab's domain, so a drill's chaos steps can refuse any API server that does
not report it (`lab.scenario.drill.require_lab`)."""

_SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "binding": ["create"], "eviction": ["create"]}
_SUBRESOURCE_KIND = {"binding": ("Binding", "", "v1"), "eviction": ("Eviction", "policy", "v1")}


def version() -> dict[str, str]:
    return {
        **KUBERNETES_VERSION,
        "gitVersion": f"v{KUBERNETES_VERSION['major']}.{KUBERNETES_VERSION['minor']}.0",
        "gitCommit": LAB_GIT_COMMIT,
        "gitTreeState": "clean",
        "buildDate": "2026-08-26T00:00:00Z",
        "goVersion": "go1.24.6",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulationMajor": KUBERNETES_VERSION["major"],
        "emulationMinor": KUBERNETES_VERSION["minor"],
    }


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_document(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(registry: Registry) -> dict[str, Any]:
    groups = [_group_document(name, versions) for name, versions in registry.groups().items() if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: Registry, name: str) -> dict[str, Any] | None:
    versions = registry.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_document(name, versions)}


def _storage_version_hash(resource: ResourceType) -> str:
    """An opaque, stable hash per resource, as the apiserver publishes for storage migration."""
    digest = hashlib.sha256(f"{resource.group}/{resource.version}/{resource.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def resource_list(registry: Registry, group_name: str, version_name: str) -> dict[str, Any] | None:
    served = [r for r in registry.all() if r.group == group_name and r.version == version_name]
    if not served:
        return None
    resources: list[dict[str, Any]] = []
    for resource in sorted(served, key=lambda r: r.plural):
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(resource.verbs),
            "storageVersionHash": _storage_version_hash(resource),
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.categories:
            entry["categories"] = list(resource.categories)
        resources.append(entry)
        for sub in sorted(resource.subresources):
            kind, sub_group, sub_version = _SUBRESOURCE_KIND.get(sub, (resource.kind, "", ""))
            sub_entry: dict[str, Any] = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": kind,
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if sub_group:
                sub_entry["group"], sub_entry["version"] = sub_group, sub_version
            resources.append(sub_entry)
    group_version = f"{group_name}/{version_name}" if group_name else version_name
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
