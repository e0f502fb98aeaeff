"""Field errors as the apiserver words them: the `details.causes` of a 422 Invalid Status.

Every validation in the lab reports through these constructors so that `reason`, `field` and `message` read as
the real apiserver's do. They follow `k8s.io/apimachinery/pkg/util/validation/field/errors.go` (`Required`,
`Invalid`, `NotSupported`, `Forbidden`, `TooLongMaxLength`, `TooMany`, `Duplicate`, `TypeInvalid`,
`InternalError`, and `Error.ErrorBody` for the message), and `field/path.go` for paths:
`spec.containers[0].name`, map keys as `[key]`, and `<nil>` for the object root (a nil `*field.Path`, as
root-level CEL rules report).

A `FieldCause.message` is `ErrorBody()`: the text without the field, which `apierrors.NewInvalid` puts in each
cause and joins with the field into the Status message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

ROOT = ""
"""The object root. Rendered `<nil>`, as `(*field.Path)(nil).String()` is."""

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
DUPLICATE = "FieldValueDuplicate"
INTERNAL = "InternalError"

_TYPE_TEXT = {
    REQUIRED: "Required value",
    INVALID: "Invalid value",
    TYPE_INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    TOO_MANY: "Too many",
    DUPLICATE: "Duplicate value",
    INTERNAL: "Internal error",
}

_OMIT = object()
"""`field.omitValue`: the error body carries no value."""


@dataclass(frozen=True)
class FieldCause:
    """One `metav1.StatusCause` of an Invalid answer."""

    field: str
    reason: str
    message: str

    def as_cause(self) -> dict[str, str]:
        """The JSON shape of a StatusCause."""
        return {"reason": self.reason, "message": self.message, "field": self.field}


def child(path: str, name: str) -> str:
    """`fldPath.Child(name)`."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """`fldPath.Index(i)`."""
    return f"{path}[{i}]"


def key(path: str, k: str) -> str:
    """`fldPath.Key(k)`: map entries in field paths are bracketed, unquoted."""
    return f"{path}[{k}]"


def _field(path: str) -> str:
    return path if path else "<nil>"


def go_value(value: Any) -> str:
    """A value as `ErrorBody` prints it: `%q` for strings, `%v` for bools and numbers, and JSON for everything else,
    a nil value included (`null`). Composite values became JSON in Kubernetes v1.34 (kubernetes/kubernetes#132314;
    `apimachinery/pkg/util/validation/field/errors.go` `ErrorBody`, as v1.36.3 has it), where they were `%#v`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return go_json(value)


def go_json_kind(value: Any) -> str:
    """The JSON kind Go's `encoding/json` decoder names in "json: cannot unmarshal <kind> into Go ..."
    (`UnmarshalTypeError.Value`): `bool`, `number`, `string`, `array`, `object`, or `null` for anything else.

    Decode errors of patches (registry) and of built-in objects (validation) both quote it, so they share it.
    """
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def go_number(value: float | int) -> str:
    """`%v` of a float64: integral values print without a fraction."""
    if isinstance(value, float) and math.isfinite(value) and value == int(value) and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


def go_json(value: Any) -> str:
    """`json.Marshal` of an unstructured value: compact, map keys sorted, integral floats without a fraction, and
    `<`, `>`, `&` escaped as Go's encoder escapes them."""

    def plain(item: Any) -> Any:
        if isinstance(item, dict):
            return {str(k): plain(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [plain(v) for v in item]
        if isinstance(item, float) and not isinstance(item, bool) and go_number(item) != repr(item):
            return int(item)
        return item

    text = json.dumps(plain(value), ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _body(reason: str, value: Any, detail: str) -> str:
    text = _TYPE_TEXT[reason]
    if reason not in (REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL) and value is not _OMIT:
        text = f"{text}: {go_value(value)}"
    if detail:
        text = f"{text}: {detail}"
    return text


def required(path: str, detail: str = "") -> FieldCause:
    return FieldCause(_field(path), REQUIRED, _body(REQUIRED, "", detail))


def invalid(path: str, value: Any, detail: str) -> FieldCause:
    return FieldCause(_field(path), INVALID, _body(INVALID, value, detail))


def type_invalid(path: str, value: Any, detail: str) -> FieldCause:
    return FieldCause(_field(path), TYPE_INVALID, _body(TYPE_INVALID, value, detail))


def not_supported(path: str, value: Any, valid: Sequence[str]) -> FieldCause:
    detail = "supported values: " + ", ".join(json.dumps(v, ensure_ascii=False) for v in valid) if valid else ""
    return FieldCause(_field(path), NOT_SUPPORTED, _body(NOT_SUPPORTED, value, detail))


def forbidden(path: str, detail: str) -> FieldCause:
    return FieldCause(_field(path), FORBIDDEN, _body(FORBIDDEN, "", detail))


def too_long(path: str, max_length: int) -> FieldCause:
    """`field.TooLongMaxLength` (the OpenAPI `maxLength` failure)."""
    detail = f"may not be longer than {max_length}" if max_length >= 0 else "value is too long"
    return FieldCause(_field(path), TOO_LONG, _body(TOO_LONG, "", detail))


def too_long_bytes(path: str, max_length: int) -> FieldCause:
    """`field.TooLong` (hand-written validation such as the annotation size limit)."""
    return FieldCause(_field(path), TOO_LONG, _body(TOO_LONG, "", f"must have at most {max_length} bytes"))


def too_many(path: str, actual: int, maximum: int) -> FieldCause:
    detail = f"must have at most {maximum} items" if maximum >= 0 else "has too many items"
    value: Any = actual if actual >= 0 else _OMIT
    return FieldCause(_field(path), TOO_MANY, _body(TOO_MANY, value, detail))


def duplicate(path: str, value: Any) -> FieldCause:
    return FieldCause(_field(path), DUPLICATE, _body(DUPLICATE, value, ""))


def internal(path: str, detail: str) -> FieldCause:
    return FieldCause(_field(path), INTERNAL, _body(INTERNAL, None, detail))


BLOCKING_REASONS = frozenset({NOT_SUPPORTED, REQUIRED, TOO_LONG, TOO_MANY, TYPE_INVALID})
"""Failures after which CRD CEL rules are not run (`customresource/strategy.go` `hasBlockingErr`)."""
