"""Request bodies in Kubernetes' protobuf encoding, for the kinds the lab decodes that way: those kubectl creates so.

client-go's generated clients send built-in kinds as protobuf when the type supports it (`rest.Request.
UseProtobufAsDefault`, k8s.io/client-go v0.36.3 `rest/request.go`: `Content-Type: application/vnd.kubernetes.
protobuf`, `Accept: application/vnd.kubernetes.protobuf,application/json`), and only a 415 for CBOR makes them fall
back. So what kubectl creates with the typed clientset comes in protobuf: the reviews of `kubectl auth can-i` and
`kubectl auth whoami`, and `kubectl create namespace|serviceaccount|role|clusterrole|rolebinding|
clusterrolebinding`. The answer may be JSON: the client accepts it and decodes by the answer's Content-Type.

The envelope (`apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`): the 4 bytes `k8s\\x00`, then a
`runtime.Unknown` message (`apimachinery/pkg/runtime/generated.proto`: 1 typeMeta {1 apiVersion, 2 kind},
2 raw, 3 contentEncoding, 4 contentType) whose `raw` is the object's own message. The messages decoded here are
those of `k8s.io/api` v0.36.3 `authorization/v1/generated.proto` and `authentication/v1/generated.proto`, field
numbers as declared there, with `core/v1`, `rbac/v1` and apimachinery's `meta/v1` `ObjectMeta` (what a create
carries; the server-owned fields are skipped). Any other kind in protobuf, and any field the lab neither decodes
nor may skip, is answered 415, naming what the lab accepts: the lab never drops what a client sent.
"""

from __future__ import annotations

from typing import Any, Final

from airflow_provider_dispatch_lab.apiserver import errors

Obj = dict[str, Any]
PROTOBUF: Final = "application/vnd.kubernetes.protobuf"
MAGIC: Final = b"k8s\x00"

# A message: field number -> (JSON name, type, repeated), and the numbers it skips. The type is "string", "bytes",
# "bool", "map" (`map<string, string>`: repeated entries {1 key, 2 value}) or a message's name. A field that is
# neither decoded nor skipped makes the body one the lab cannot take (415): it never drops what a client sent.
_Field = tuple[str, str, bool]
_REVIEW_SKIPS = frozenset({1, 3})  # metadata (empty in a review) and status (the answer's)
MESSAGES: Final[dict[str, tuple[dict[int, _Field], frozenset[int]]]] = {
    "Unknown": ({1: ("typeMeta", "TypeMeta", False), 2: ("raw", "bytes", False)}, frozenset({3, 4})),
    "TypeMeta": ({1: ("apiVersion", "string", False), 2: ("kind", "string", False)}, frozenset()),
    # apimachinery meta/v1 ObjectMeta: what a create carries; the server-owned fields are skipped (as on a create)
    "ObjectMeta": (
        {
            1: ("name", "string", False),
            2: ("generateName", "string", False),
            3: ("namespace", "string", False),
            6: ("resourceVersion", "string", False),
            11: ("labels", "map", False),
            12: ("annotations", "map", False),
            14: ("finalizers", "string", True),
        },
        frozenset({4, 5, 7, 8, 9, 10}),
    ),
    "SelfSubjectAccessReview": ({2: ("spec", "SelfSubjectAccessReviewSpec", False)}, _REVIEW_SKIPS),
    "SelfSubjectAccessReviewSpec": (
        {
            1: ("resourceAttributes", "ResourceAttributes", False),
            2: ("nonResourceAttributes", "NonResourceAttributes", False),
        },
        frozenset(),
    ),
    "ResourceAttributes": (
        {
            1: ("namespace", "string", False),
            2: ("verb", "string", False),
            3: ("group", "string", False),
            4: ("version", "string", False),
            5: ("resource", "string", False),
            6: ("subresource", "string", False),
            7: ("name", "string", False),
            8: ("fieldSelector", "SelectorAttributes", False),
            9: ("labelSelector", "SelectorAttributes", False),
        },
        frozenset(),
    ),
    # FieldSelectorAttributes and LabelSelectorAttributes have the same fields, as do their requirements
    "SelectorAttributes": (
        {1: ("rawSelector", "string", False), 2: ("requirements", "Requirement", True)},
        frozenset(),
    ),
    "Requirement": (
        {1: ("key", "string", False), 2: ("operator", "string", False), 3: ("values", "string", True)},
        frozenset(),
    ),
    "NonResourceAttributes": ({1: ("path", "string", False), 2: ("verb", "string", False)}, frozenset()),
    "SelfSubjectRulesReview": ({2: ("spec", "SelfSubjectRulesReviewSpec", False)}, _REVIEW_SKIPS),
    "SelfSubjectRulesReviewSpec": ({1: ("namespace", "string", False)}, frozenset()),
    "SelfSubjectReview": ({}, frozenset({1, 2})),
    # core/v1 (`kubectl create namespace`, `kubectl create serviceaccount`)
    "Namespace": (
        {1: ("metadata", "ObjectMeta", False), 2: ("spec", "NamespaceSpec", False)},
        frozenset({3}),
    ),
    "NamespaceSpec": ({1: ("finalizers", "string", True)}, frozenset()),
    "ServiceAccount": (
        {
            1: ("metadata", "ObjectMeta", False),
            2: ("secrets", "ObjectReference", True),
            3: ("imagePullSecrets", "LocalObjectReference", True),
            4: ("automountServiceAccountToken", "bool", False),
        },
        frozenset(),
    ),
    "ObjectReference": (
        {
            1: ("kind", "string", False),
            2: ("namespace", "string", False),
            3: ("name", "string", False),
            4: ("uid", "string", False),
            5: ("apiVersion", "string", False),
            6: ("resourceVersion", "string", False),
            7: ("fieldPath", "string", False),
        },
        frozenset(),
    ),
    "LocalObjectReference": ({1: ("name", "string", False)}, frozenset()),
    # rbac/v1 (`kubectl create role|clusterrole|rolebinding|clusterrolebinding`)
    "Role": ({1: ("metadata", "ObjectMeta", False), 2: ("rules", "PolicyRule", True)}, frozenset()),
    "ClusterRole": (
        {
            1: ("metadata", "ObjectMeta", False),
            2: ("rules", "PolicyRule", True),
            3: ("aggregationRule", "AggregationRule", False),
        },
        frozenset(),
    ),
    "PolicyRule": (
        {
            1: ("verbs", "string", True),
            2: ("apiGroups", "string", True),
            3: ("resources", "string", True),
            4: ("resourceNames", "string", True),
            5: ("nonResourceURLs", "string", True),
        },
        frozenset(),
    ),
    "AggregationRule": ({1: ("clusterRoleSelectors", "LabelSelector", True)}, frozenset()),
    "LabelSelector": (
        {1: ("matchLabels", "map", False), 2: ("matchExpressions", "Requirement", True)},
        frozenset(),
    ),
    "RoleBinding": (
        {1: ("metadata", "ObjectMeta", False), 2: ("subjects", "Subject", True), 3: ("roleRef", "RoleRef", False)},
        frozenset(),
    ),
    "Subject": (
        {
            1: ("kind", "string", False),
            2: ("apiGroup", "string", False),
            3: ("name", "string", False),
            4: ("namespace", "string", False),
        },
        frozenset(),
    ),
    "RoleRef": (
        {1: ("apiGroup", "string", False), 2: ("kind", "string", False), 3: ("name", "string", False)},
        frozenset(),
    ),
}
MESSAGES["ClusterRoleBinding"] = MESSAGES["RoleBinding"]
MESSAGES["MapEntry"] = ({1: ("key", "string", False), 2: ("value", "string", False)}, frozenset())
#: the kinds whose protobuf body the lab decodes, by the apiVersion and kind their envelope names
DECODED_KINDS: Final = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
    ("v1", "Namespace"),
    ("v1", "ServiceAccount"),
    *(("rbac.authorization.k8s.io/v1", kind) for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")),
}


class _Malformed(ValueError):
    pass


class _Unsupported(ValueError):
    """A field the lab does not decode in protobuf (it would drop what the client sent)."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise _Malformed("a varint runs past the end of the message")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of each field: an int for varints, bytes for length-delimited ones."""
    found: list[tuple[int, int, Any]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise _Malformed("a field runs past the end of the message")
            value, at = data[at : at + length], at + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, at = data[at : at + size], at + size
        else:
            raise _Malformed(f"wire type {wire} is not one protobuf has")
        found.append((number, wire, value))
    return found


def _message(data: bytes, name: str) -> Obj:
    """The message `name` as JSON; `_Unsupported` for a field the lab neither decodes nor may skip."""
    schema, skipped = MESSAGES[name]
    out: Obj = {}
    for number, wire, value in _fields(data):
        if number not in schema:
            if number in skipped:
                continue
            raise _Unsupported(f"field {number} of {name}")
        key, kind, repeated = schema[number]
        decoded: Any
        if kind == "bool":
            if wire != 0:
                raise _Malformed(f"field {key} of {name} is not a varint")
            decoded = bool(value)
        elif wire != 2:
            raise _Malformed(f"field {key} of {name} is not length-delimited")
        elif kind == "bytes":
            decoded = bytes(value)
        elif kind == "string":
            decoded = bytes(value).decode("utf-8")
        elif kind == "map":
            entry = _message(bytes(value), "MapEntry")
            out.setdefault(key, {})[entry.get("key", "")] = entry.get("value", "")
            continue
        else:
            decoded = _message(bytes(value), kind)
        if repeated:
            out.setdefault(key, []).append(decoded)
        elif decoded != "":
            out[key] = decoded  # Go writes an unset string too, where its JSON omits it: so does this
        else:
            out.pop(key, None)
    return out


def _unsupported(what: str) -> errors.ApiError:
    kinds = ", ".join(sorted(kind for _, kind in DECODED_KINDS))
    return errors.ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json, "
        f"application/yaml (the lab decodes protobuf only for {kinds}; not {what})",
    )


def decode(body: bytes) -> Obj:
    """The object in a protobuf request body, as the JSON the same object would be; 400 for a body that is not
    the envelope, 415 for a kind (or a field) the lab does not decode from protobuf."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("the protobuf body does not start with the Kubernetes envelope's magic bytes")
    try:
        unknown = _message(body[len(MAGIC) :], "Unknown")
        type_meta = unknown.get("typeMeta") or {}
        api_version, kind = str(type_meta.get("apiVersion") or ""), str(type_meta.get("kind") or "")
        if (api_version, kind) not in DECODED_KINDS:
            raise _unsupported(kind or "an object without a kind")
        obj = _message(unknown.get("raw") or b"", kind)
    except _Unsupported as error:
        raise _unsupported(str(error)) from error
    except (_Malformed, UnicodeDecodeError) as error:
        raise errors.bad_request(f"the protobuf body could not be decoded: {error}") from error
    return {"apiVersion": api_version, "kind": kind, **obj}


__all__ = ["DECODED_KINDS", "MAGIC", "PROTOBUF", "decode"]
