"""What a request is about: the apiserver's RequestInfo, parsed from the path and the method.

Follows `apiserver/pkg/endpoints/request/requestinfo.go` (`RequestInfoFactory.NewRequestInfo`): resource paths
are `/api/v1/...` for the core group and `/apis/<group>/<version>/...` for the others, optionally under
`namespaces/<ns>/`, then `<resource>[/<name>[/<subresource>]]`. The verb comes from the method: GET is `get` with
a name, `list` without, `watch` with `watch=true`; DELETE without a name is `deletecollection`. Authorization
(RBAC) and fault injection match on this, exactly as the real apiserver's authorizer does.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dispatch_lab.apiserver.errors import ApiError, not_found

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "GET": "get"}


@dataclass(frozen=True)
class RequestInfo:
    """A resource request (`is_resource`), or a non-resource path such as /version or /apis."""

    is_resource: bool
    path: str
    verb: str
    group: str = ""
    version: str = ""
    resource: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None

    @property
    def qualified_resource(self) -> str:
        """`pods` or `trainjobs.trainer.kubeflow.org`: how the store and the errors name a resource."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


def _name_from_field_selector(field_selector: str) -> str | None:
    """`metadata.name=x` as the only requirement on the name: requestinfo.go gives such a list or watch that
    name, so that RBAC `resourceNames` rules can allow it."""
    names = []
    for requirement in filter(None, (part.strip() for part in field_selector.split(","))):
        for operator in ("==", "="):
            key, found, value = requirement.partition(operator)
            if found and key.strip() == "metadata.name" and not key.endswith("!"):
                names.append(value.strip())
                break
    return names[0] if len(names) == 1 else None


def parse_request(method: str, path: str, query_watch: bool, field_selector: str = "") -> RequestInfo:
    """Parse a path such as `/apis/trainer.kubeflow.org/v1alpha1/namespaces/ml/trainjobs/ft/status`."""
    parts = [part for part in path.split("/") if part]
    verb = _VERB_BY_METHOD.get(method.upper(), method.lower())
    non_resource_verb = method.lower()  # non-resource requests are authorized by the lowercased HTTP method
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return RequestInfo(is_resource=False, path=path, verb=non_resource_verb)
    if not rest:
        return RequestInfo(is_resource=False, path=path, verb=non_resource_verb)

    namespace: str | None = None
    # `namespaces/<ns>/<resource>...` is a namespaced resource; `namespaces[/<name>[/status|/finalize]]` is the
    # Namespace itself (`namespaceSubresources` in requestinfo.go).
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) >= 3 else None
    if len(rest) > 3:
        raise not_found(resource, group, "/".join(rest[1:]))
    if resource == "namespaces" and name is not None:
        namespace = name

    if verb == "get" and name is None:
        verb = "watch" if query_watch else "list"
        name = _name_from_field_selector(field_selector)
    elif verb == "delete" and name is None:
        verb = "deletecollection"
    return RequestInfo(True, path, verb, group, version, resource, namespace, name, subresource)


def require_name(info: RequestInfo) -> str:
    if not info.name:
        raise ApiError(405, "MethodNotAllowed", f"{info.verb} needs a name in the path {info.path}")
    return info.name
