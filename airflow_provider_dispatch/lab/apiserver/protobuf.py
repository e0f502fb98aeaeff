"""Request bodies in Kubernetes' protobuf encoding, for the kinds the lab decodes that way: the reviews.

client-go's generated clients send built-in kinds as protobuf when the type supports it (`rest.Request.
UseProtobufAsDefault`, k8s.io/client-go v0.36.3 `rest/request.go`: `Content-Type: application/vnd.kubernetes.
protobuf`, `Accept: application/vnd.kubernetes.protobuf,application/json`), and only a 415 for CBOR makes them fall
back. So `kubectl auth can-i` and `kubectl auth whoami`, which create their reviews with the typed clientset,
post protobuf. The answer may be JSON: the client accepts it and decodes by the answer's Content-Type.

The envelope (`apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`): the 4 bytes `k8s\\x00`, then a
`runtime.Unknown` message (`apimachinery/pkg/runtime/generated.proto`: 1 typeMeta {1 apiVersion, 2 kind},
2 raw, 3 contentEncoding, 4 contentType) whose `raw` is the object's own message. The messages decoded here are
those of `k8s.io/api` v0.36.3 `authorization/v1/generated.proto` and `authentication/v1/generated.proto`, field
numbers as declared there; `ObjectMeta` is skipped (a review's metadata carries nothing the answer uses). Any
other kind in protobuf is answered 415, naming what the lab accepts: the lab does not carry the schemas of the
other kinds in this encoding.
"""

from __future__ import annotations

from typing import Any, Final

from airflow_provider_dispatch.lab.apiserver import errors

Obj = dict[str, Any]
PROTOBUF: Final = "application/vnd.kubernetes.protobuf"
MAGIC: Final = b"k8s\x00"

# A message: field number -> (JSON name, type, repeated). The type is "string", "bytes", or a message's name.
_Field = tuple[str, str, bool]
MESSAGES: Final[dict[str, dict[int, _Field]]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta", False), 2: ("raw", "bytes", False), 4: ("contentType", "string", False)},
    "TypeMeta": {1: ("apiVersion", "string", False), 2: ("kind", "string", False)},
    "SelfSubjectAccessReview": {2: ("spec", "SelfSubjectAccessReviewSpec", False)},
    "SelfSubjectAccessReviewSpec": {
        1: ("resourceAttributes", "ResourceAttributes", False),
        2: ("nonResourceAttributes", "NonResourceAttributes", False),
    },
    "ResourceAttributes": {
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
    # FieldSelectorAttributes and LabelSelectorAttributes have the same fields, as do their requirements
    "SelectorAttributes": {1: ("rawSelector", "string", False), 2: ("requirements", "Requirement", True)},
    "Requirement": {1: ("key", "string", False), 2: ("operator", "string", False), 3: ("values", "string", True)},
    "NonResourceAttributes": {1: ("path", "string", False), 2: ("verb", "string", False)},
    "SelfSubjectRulesReview": {2: ("spec", "SelfSubjectRulesReviewSpec", False)},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", "string", False)},
    "SelfSubjectReview": {},
}
#: the kinds whose protobuf body the lab decodes, by the apiVersion their envelope names
DECODED_KINDS: Final = {
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
}


class _Malformed(ValueError):
    pass


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
    """The message `name` as JSON, its unknown fields skipped (as a decoder of an older schema skips them)."""
    schema = MESSAGES[name]
    out: Obj = {}
    for number, wire, value in _fields(data):
        if number not in schema:
            continue
        key, kind, repeated = schema[number]
        decoded: Any
        if wire != 2:
            raise _Malformed(f"field {key} of {name} is not length-delimited")
        elif kind == "bytes":
            decoded = bytes(value)
        elif kind == "string":
            decoded = bytes(value).decode("utf-8")
        else:
            decoded = _message(bytes(value), kind)
        if repeated:
            out.setdefault(key, []).append(decoded)
        else:
            out[key] = decoded
    return out


def decode(body: bytes) -> Obj:
    """The object in a protobuf request body, as the JSON the same object would be; 400 for a body that is not
    the envelope, 415 for a kind the lab does not decode from protobuf."""
    if not body.startswith(MAGIC):
        raise errors.bad_request("the protobuf body does not start with the Kubernetes envelope's magic bytes")
    try:
        unknown = _message(body[len(MAGIC) :], "Unknown")
        type_meta = unknown.get("typeMeta") or {}
        api_version, kind = str(type_meta.get("apiVersion") or ""), str(type_meta.get("kind") or "")
        if (api_version, kind) not in DECODED_KINDS:
            accepted = "application/json, application/yaml"
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: {accepted} "
                f"(the lab decodes protobuf only for SelfSubjectAccessReview, SelfSubjectRulesReview and "
                f"SelfSubjectReview, not for {kind or 'an object without a kind'})",
            )
        obj = _message(unknown.get("raw") or b"", kind)
    except (_Malformed, UnicodeDecodeError) as error:
        raise errors.bad_request(f"the protobuf body could not be decoded: {error}") from error
    return {"apiVersion": api_version, "kind": kind, **obj}


__all__ = ["DECODED_KINDS", "MAGIC", "PROTOBUF", "decode"]
