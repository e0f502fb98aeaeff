"""The lab's type registry: which resources it serves, at which paths, with which verbs and schema.

Built-in kinds are the ones the provider and the simulated controllers touch. Their discovery facts (plural,
scope, short names, verbs, subresources) are as `kubectl api-resources` reports them for Kubernetes 1.34, from
the registries under `kubernetes/kubernetes:pkg/registry/` (pods and nodes have `status`, pods `binding`;
namespaces have no `deletecollection`, `pkg/registry/core/namespace/storage/storage.go`;
`selfsubjectaccessreviews`, `selfsubjectrulesreviews` and `selfsubjectreviews` are create-only and never stored,
`pkg/registry/authorization/selfsubjectaccessreview/rest.go` and its siblings, answered by `reviews.py`).
`customresourcedefinitions` are served for reading only (`registry/crd_objects.py`).

Custom resources come from the upstream CRD YAMLs in `lab/crds/` (package data; see `crds/SOURCES.md`). Only
the storage version of each CRD is served: the Kueue files declare v1beta1 as served too, but that only works
with the conversion webhook a real install patches in, which the files do not carry (`SOURCES.md`, Notes). The
YAML (about 4 MB) is parsed once per process with libyaml when PyYAML has it, and schemas compile on first
use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources as package_data
from importlib.resources.abc import Traversable
from typing import Any

import yaml

from airflow_provider_dispatch_lab.apiserver.validation.schema import CrdSchema, TypeSchema
from airflow_provider_dispatch_lab.apiserver.validation.schema_builtin import BuiltinSchema

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One served resource: a (group, version, plural) with its kind, scope, discovery facts and schema."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    subresources: frozenset[str]
    short_names: tuple[str, ...]
    verbs: tuple[str, ...]
    categories: tuple[str, ...]
    schema: TypeSchema
    review_only: bool = False
    """Create-only and never stored: the server computes the answer (the reviews, `lab.apiserver.reviews`)."""
    printer_columns: tuple[dict[str, Any], ...] = ()
    """A CRD version's `additionalPrinterColumns`: what `kubectl get` shows (`lab.apiserver.tables`)."""
    openapi: dict[str, Any] | None = None
    """A CRD version's `openAPIV3Schema`, published under /openapi/v3 (`lab.apiserver.openapi`)."""

    @property
    def api_version(self) -> str:
        """`v1` for the core group, `group/version` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def qualified(self) -> str:
        """`pods` or `trainjobs.trainer.kubeflow.org`: the resource as `GroupResource.String` names it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def is_builtin(self) -> bool:
        return isinstance(self.schema, BuiltinSchema)

    @property
    def allows_unconditional_update(self) -> bool:
        """May a PUT omit `metadata.resourceVersion`? `AllowUnconditionalUpdate` is true in the strategies of
        the built-in kinds served here (`pkg/registry/core/pod/strategy.go`, `.../node`, `.../namespace`,
        `.../event`, `pkg/registry/batch/job/strategy.go`, `pkg/registry/coordination/lease/strategy.go`) and
        false for custom resources (`apiextensions-apiserver/pkg/registry/customresource/strategy.go`)."""
        return self.is_builtin


class Registry:
    """Lookups by REST path and by (apiVersion, kind)."""

    def __init__(self, types: Iterable[ResourceType]) -> None:
        self._types: list[ResourceType] = []
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_kind: dict[tuple[str, str], ResourceType] = {}
        for resource in types:
            self.add(resource)

    def add(self, resource: ResourceType) -> None:
        path = (resource.group, resource.version, resource.plural)
        if path in self._by_path:
            raise ValueError(f"resource {resource.qualified}/{resource.version} is registered twice")
        self._types.append(resource)
        self._by_path[path] = resource
        self._by_kind[(resource.api_version, resource.kind)] = resource

    def by_path(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def all(self) -> list[ResourceType]:
        return list(self._types)

    def groups(self) -> dict[str, list[str]]:
        """Group -> served versions, preferred first; "" is the core group. Built-in groups come first, in
        registration order, as the apiserver lists them before CRD groups."""
        out: dict[str, list[str]] = {}
        for resource in self._types:
            versions = out.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
        return out


def _builtin(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool,
    subresources: Iterable[str] = (),
    short_names: tuple[str, ...] = (),
    verbs: tuple[str, ...] = STANDARD_VERBS,
    categories: tuple[str, ...] = (),
    review_only: bool = False,
) -> ResourceType:
    api_version = f"{group}/{version}" if group else version
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        singular=kind.lower(),
        kind=kind,
        namespaced=namespaced,
        subresources=frozenset(subresources),
        short_names=short_names,
        verbs=verbs,
        categories=categories,
        schema=BuiltinSchema(kind, api_version),
        review_only=review_only,
    )


def builtin_types() -> list[ResourceType]:
    no_deletecollection = tuple(v for v in STANDARD_VERBS if v != "deletecollection")
    return [
        _builtin("", "v1", "namespaces", "Namespace", False, ("status",), ("ns",), no_deletecollection),
        _builtin("", "v1", "pods", "Pod", True, ("status", "binding"), ("po",), categories=("all",)),
        _builtin("", "v1", "nodes", "Node", False, ("status",), ("no",)),
        _builtin("", "v1", "events", "Event", True, (), ("ev",)),
        _builtin("batch", "v1", "jobs", "Job", True, ("status",), categories=("all",)),
        _builtin("coordination.k8s.io", "v1", "leases", "Lease", True),
        _builtin(
            "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
            verbs=("create",), review_only=True,
        ),
        _builtin(
            "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
            verbs=("create",), review_only=True,
        ),
        _builtin(
            "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False,
            verbs=("create",), review_only=True,
        ),
        # The CRDs the lab serves, as objects: read-only (`registry/crd_objects.py`).
        _builtin(
            "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
            short_names=("crd", "crds"), verbs=("get", "list", "watch"), categories=("api-extensions",),
        ),
        # RBAC by token (lab.rbac): the kinds its authorizer reads, served like any built-in kind.
        _builtin("", "v1", "serviceaccounts", "ServiceAccount", True, (), ("sa",)),
        _builtin("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        _builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        _builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        _builtin("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        # in-process admission policies (apiserver/registry/admission_policies.py)
        _builtin(
            "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False,
            ("status",),
        ),
        _builtin(
            "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding", False,
        ),
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------------------- CRDs


def _yaml_files(directory: Traversable) -> Iterator[Traversable]:
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            yield from _yaml_files(entry)
        elif entry.name.endswith((".yaml", ".yml")):
            yield entry


@lru_cache(maxsize=1)
def load_crds() -> tuple[dict[str, Any], ...]:
    """Every CustomResourceDefinition document under `lab/crds/`, parsed once per process."""
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    documents: list[dict[str, Any]] = []
    for entry in _yaml_files(package_data.files("airflow_provider_dispatch_lab").joinpath("crds")):
        with entry.open("rb") as stream:
            for document in yaml.load_all(stream, Loader=loader):
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                    documents.append(document)
    return tuple(documents)


def crd_type(crd: dict[str, Any]) -> ResourceType:
    """The served storage version of a CRD as a ResourceType."""
    spec = crd["spec"]
    names = spec["names"]
    storage = [v for v in spec["versions"] if v.get("storage") and v.get("served", True)]
    if len(storage) != 1:
        raise ValueError(f"CRD {crd.get('metadata', {}).get('name')} has {len(storage)} served storage versions")
    version = storage[0]
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    openapi = (version.get("schema") or {}).get("openAPIV3Schema") or {"type": "object"}
    return ResourceType(
        group=spec["group"],
        version=version["name"],
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        kind=names["kind"],
        namespaced=namespaced,
        subresources=frozenset((version.get("subresources") or {}).keys()),
        short_names=tuple(names.get("shortNames") or ()),
        verbs=STANDARD_VERBS,
        categories=tuple(names.get("categories") or ()),
        schema=CrdSchema(spec["group"], version["name"], names["kind"], namespaced, openapi),
        printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
        openapi=openapi,
    )


def crd_types() -> list[ResourceType]:
    return sorted((crd_type(crd) for crd in load_crds()), key=lambda r: (r.group, r.plural))


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The built-in kinds and the CRDs' storage versions. Cached: every lab in a process shares it
    (read-only)."""
    return Registry([*builtin_types(), *crd_types()])
