"""Per resource type: defaulting, pruning, validation and list semantics, as the apiserver applies them.

`TypeSchema` is the contract the server uses; `CrdSchema` implements it for a custom resource version from its
structural schema (`spec.versions[].schema.openAPIV3Schema`), and `schema_builtin.BuiltinSchema` for the
built-in kinds. The server calls `default` and `prune` on every decoded body and `validate(obj, old)` before
storing (`old` is None on create); a non-empty answer is a 422 Invalid whose `details.causes` are the
`FieldCause`s.

For custom resources the steps and their order follow the apiextensions-apiserver:

- pruning: `schema/pruning/algorithm.go` `Prune` (unknown fields dropped except under
  `x-kubernetes-preserve-unknown-fields`; `apiVersion`, `kind`, `metadata` kept at the root and in
  `x-kubernetes-embedded-resource` objects), and `schema/objectmeta/coerce.go` for `metadata` itself;
- defaulting: `schema/defaulting/prunenulls.go` `PruneNonNullableNullsWithoutDefaults` then
  `schema/defaulting/algorithm.go` `Default` (a `default:` applies where the field is absent, or null and not
  nullable; at every depth, inside list items and map values too);
- validation: `registry/customresource/validator.go` (`ValidateTypeMeta`, `ValidateObjectMetaAccessor` with
  `NameIsDNSSubdomain`, the OpenAPI schema through kube-openapi's validator, turned into field errors by
  `apiserver/validation/validation.go` `kubeOpenAPIResultToFieldErrors`), then
  `registry/customresource/strategy.go` (`ValidateListSetsAndMaps` from `schema/listtype/validation.go`,
  ratcheted on update, and the CEL rules unless an earlier error is blocking, `hasBlockingErr`), CEL in
  `schema_cel.py`.

Not reproduced: validation ratcheting on update (`CRDValidationRatcheting`; every write the lab stores was
validated, so an unchanged field passes again), the ObjectMeta checks inside `x-kubernetes-embedded-resource`
objects (`objectmeta.Validate`; no shipped CRD has one), the formats no shipped CRD uses (only `date-time` and
`date` are checked; `int32`/`int64` are never checked by the apiserver), and the CEL cost budget.

The OpenAPI walk is written out rather than delegated to `jsonschema` so that field paths and messages read as
kube-openapi's (`spec.runtimePatches[0].manager in body should match '...'`, errors in
`kube-openapi/pkg/validation/errors/schema.go`).
"""

from __future__ import annotations

import copy
import json
import math
import re
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

from airflow_provider_dispatch_lab.apiserver.registry.patching import ATOMIC, ListSemantics
from airflow_provider_dispatch_lab.apiserver.validation import schema_cel, schema_meta
from airflow_provider_dispatch_lab.apiserver.validation import schema_fields as f
from airflow_provider_dispatch_lab.apiserver.validation.schema_fields import FieldCause
from airflow_provider_dispatch_lab.apiserver.validation.schema_structural import (
    MISSING,
    CelRule,
    Structural,
    compile_schema,
    iter_rules,
)

__all__ = ["CrdSchema", "FieldCause", "TypeSchema"]


@runtime_checkable
class TypeSchema(Protocol):
    """What the server needs from a resource type's schema."""

    def default(self, obj: dict[str, Any]) -> None:
        """Apply the apiserver's defaults in place."""

    def prune(self, obj: dict[str, Any]) -> None:
        """Drop unknown fields in place, as decoding (built-ins) or structural pruning (CRDs) does."""

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldCause]:
        """The field errors of a create (`old` None) or an update; empty when the object is valid."""

    def list_semantics(self, path: tuple[str, ...]) -> ListSemantics:
        """How the list at `path` (field names from the root, no indices) merges under server-side apply."""

    def strategic_list_semantics(self, path: tuple[str, ...]) -> ListSemantics:
        """How it merges under a strategic merge patch (`patchStrategy`/`patchMergeKey`), if different."""


_META_FIELDS = ("apiVersion", "kind", "metadata")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_BLOCKED_CEL = (
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation"
)


class CrdSchema:
    """The schema of one served version of a custom resource."""

    def __init__(self, group: str, version: str, kind: str, namespaced: bool, openapi: dict[str, Any]) -> None:
        self.group = group
        self.version = version
        self.kind = kind
        self.namespaced = namespaced
        self._openapi = openapi

    def __repr__(self) -> str:
        return f"CrdSchema({self.kind}.{self.group}/{self.version})"

    @cached_property
    def structural(self) -> Structural:
        """Compiled on first use: a registry of eight CRDs loads without compiling the ones a test never
        writes."""
        return compile_schema(self._openapi)

    def rules(self) -> list[tuple[str, CelRule]]:
        """Every CEL rule of this version with its schema path."""
        return iter_rules(self.structural)

    # --------------------------------------------------------------------------------------------- defaulting

    def default(self, obj: dict[str, Any]) -> None:
        _prune_nulls(obj, self.structural)
        _default(obj, self.structural)

    # ------------------------------------------------------------------------------------------------ pruning

    def prune(self, obj: dict[str, Any]) -> None:
        _prune(obj, self.structural, resource_root=True)

    # --------------------------------------------------------------------------------------------- validation

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[FieldCause]:
        causes = self._type_meta(obj)
        if causes:
            return causes  # customResourceValidator.Validate stops here
        meta_types = schema_meta.validate_meta_types(obj.get("metadata"))
        if meta_types:
            return meta_types  # the body does not decode: nothing further is checked
        causes.extend(
            schema_meta.validate_object_meta(obj.get("metadata"), self.namespaced, schema_meta.dns1123_subdomain)
        )
        if old is not None:
            causes.extend(schema_meta.validate_object_meta_update(obj.get("metadata"), old.get("metadata")))
        causes.extend(_validate_value(obj, self.structural, f.ROOT))
        if old is None or not _list_sets_and_maps(old, self.structural, f.ROOT):
            causes.extend(_list_sets_and_maps(obj, self.structural, f.ROOT))
        if any(c.reason in f.BLOCKING_REASONS for c in causes):
            causes.append(f.invalid(f.ROOT, None, _BLOCKED_CEL))
        else:
            causes.extend(schema_cel.validate(self.structural, obj, old))
        return causes

    def _type_meta(self, obj: dict[str, Any]) -> list[FieldCause]:
        causes = []
        if obj.get("kind") != self.kind:
            causes.append(f.invalid("kind", obj.get("kind", ""), f"must be {self.kind}"))
        api_version = f"{self.group}/{self.version}"
        if obj.get("apiVersion") != api_version:
            causes.append(f.invalid("apiVersion", obj.get("apiVersion", ""), f"must be {api_version}"))
        return causes

    # ----------------------------------------------------------------------------------------- list semantics

    def list_semantics(self, path: tuple[str, ...]) -> ListSemantics:
        """From `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`; a list without them is atomic.

        `metadata` is not described by a CRD's schema: its lists follow `metav1.ObjectMeta`.
        """
        node: Structural | None = self.structural
        for depth, name in enumerate(path):
            if node is None:
                return ATOMIC
            while node.type == "array" and node.items is not None:
                node = node.items
            if name == "metadata" and (depth == 0 or node.embedded) and len(path) == depth + 2:
                return schema_meta.OBJECT_META_LISTS.get(path[depth + 1], ATOMIC)
            node = node.child(name)
        if node is None or node.type != "array":
            return ATOMIC
        if node.list_type == "set":
            return ListSemantics("set")
        if node.list_type == "map" and node.list_map_keys:
            return ListSemantics("map", node.list_map_keys)
        return ATOMIC

    def strategic_list_semantics(self, path: tuple[str, ...]) -> ListSemantics:
        """Custom resources do not support strategic merge patch (the apiserver answers 415); the structural
        answer is returned for callers that ask anyway."""
        return self.list_semantics(path)


# ---------------------------------------------------------------------------------------- pruning, defaulting


def _prune(value: Any, node: Structural | None, resource_root: bool = False) -> None:
    """`pruning.Prune`, with the root treated as an embedded resource."""
    if node is not None and node.preserve_unknown:
        _skip_prune(value, node)
        return
    if isinstance(value, dict):
        if node is None:
            value.clear()
            return
        embedded = resource_root or node.embedded
        for k in list(value):
            if embedded and k in _META_FIELDS:
                if k == "metadata":
                    _coerce_metadata(value[k])
                continue
            prop = node.properties.get(k)
            if prop is not None:
                _prune(value[k], prop, prop.embedded)
            elif node.additional is not None:
                _prune(value[k], node.additional, node.additional.embedded)
            elif not node.additional_allowed:
                del value[k]
    elif isinstance(value, list):
        items = node.items if node is not None else None
        for item in value:
            _prune(item, items, items is not None and items.embedded)


def _skip_prune(value: Any, node: Structural) -> None:
    """Under `x-kubernetes-preserve-unknown-fields` unknown fields stay, known ones are still pruned below."""
    if isinstance(value, dict):
        for k, v in value.items():
            if node.embedded and k in _META_FIELDS:
                continue
            prop = node.properties.get(k)
            if prop is not None:
                _prune(v, prop, prop.embedded)
            elif node.additional is not None:
                _prune(v, node.additional, node.additional.embedded)
    elif isinstance(value, list) and node.items is not None:
        for item in value:
            _skip_prune(item, node.items)


def _coerce_metadata(meta: Any) -> None:
    """`objectmeta.Coerce`: metadata round-trips through `metav1.ObjectMeta`, so unknown fields vanish."""
    if isinstance(meta, dict):
        for k in [k for k in meta if k not in schema_meta.OBJECT_META_FIELDS]:
            del meta[k]


def _child_schema(node: Structural | None, name: str) -> Structural | None:
    return node.child(name) if node is not None else None


def _prune_nulls(value: Any, node: Structural | None) -> None:
    """`PruneNonNullableNullsWithoutDefaults`."""
    if isinstance(value, dict):
        for k in list(value):
            sub = _child_schema(node, k)
            if value[k] is None and sub is not None and not sub.nullable and sub.default is MISSING:
                del value[k]
            else:
                _prune_nulls(value[k], sub)
    elif isinstance(value, list):
        items = node.items if node is not None else None
        for item in value:
            _prune_nulls(item, items)


def _default(value: Any, node: Structural | None) -> None:
    """`defaulting.Default`: defaults are deep-copied, then defaulted further themselves."""
    if node is None:
        return
    if isinstance(value, dict):
        for k, prop in node.properties.items():
            if prop.default is MISSING:
                continue
            if k not in value or (value[k] is None and not prop.nullable):
                value[k] = copy.deepcopy(prop.default)
        for k in list(value):
            known = node.properties.get(k)
            if known is not None:
                _default(value[k], known)
            elif node.additional is not None:
                if value[k] is None and not node.additional.nullable and node.additional.default is not MISSING:
                    value[k] = copy.deepcopy(node.additional.default)
                _default(value[k], node.additional)
    elif isinstance(value, list) and node.items is not None:
        for i in range(len(value)):
            if value[i] is None and not node.items.nullable and node.items.default is not MISSING:
                value[i] = copy.deepcopy(node.items.default)
            _default(value[i], node.items)


# ----------------------------------------------------------------------------------- OpenAPI value validation


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_matches(value: Any, node: Structural) -> bool:
    if node.int_or_string:
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    kind = node.type
    if not kind:
        return True
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    return True


def _valid_date_time(text: str) -> bool:
    """strfmt `DateTime`: RFC 3339 (and the variants strfmt accepts) naming a real instant."""
    if not _DATE_TIME.match(text):
        return False
    try:
        datetime.fromisoformat(text.replace("z", "Z").replace("t", "T").replace(" ", "T"))
    except ValueError:
        return False
    return True


def _valid_date(text: str) -> bool:
    if not _DATE.match(text):
        return False
    try:
        datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        return False
    return True


_FORMATS = {"date-time": _valid_date_time, "datetime": _valid_date_time, "date": _valid_date}
"""The formats kube-openapi checks that occur in the lab's CRDs (`int32`/`int64` are not checked by the
apiserver: `apiextensions-apiserver/pkg/apiserver/validation/formats.go` keeps only its supported formats)."""


def _validate_value(value: Any, node: Structural, path: str) -> list[FieldCause]:
    """kube-openapi's `SchemaValidator.Validate` for one node and, recursively, its children."""
    name = path
    if value is None:
        if node.nullable:
            return []
        return [f.type_invalid(path, "null", f'{name} in body must be of type {_type_name(node)}: "null"')]
    if not _type_matches(value, node):
        actual = _json_type(value)
        return [f.type_invalid(path, actual, f'{name} in body must be of type {_type_name(node)}: "{actual}"')]
    causes: list[FieldCause] = []
    if node.enum is not None and value not in node.enum:
        causes.append(f.not_supported(path, value, [_enum_text(v) for v in node.enum]))
    if isinstance(value, str):
        causes.extend(_validate_string(value, node, path))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        causes.extend(_validate_number(value, node, path))
    elif isinstance(value, list):
        causes.extend(_validate_array(value, node, path))
    elif isinstance(value, dict):
        causes.extend(_validate_object(value, node, path))
    causes.extend(_validate_combinators(value, node, path))
    return causes


def _type_name(node: Structural) -> str:
    return "integer,string" if node.int_or_string else node.type


def _enum_text(value: Any) -> str:
    return value if isinstance(value, str) else f.go_value(value)


def _validate_string(value: str, node: Structural, path: str) -> list[FieldCause]:
    causes = []
    if node.max_length is not None and len(value) > node.max_length:
        causes.append(f.too_long(path, node.max_length))
    if node.min_length is not None and len(value) < node.min_length:
        causes.append(f.invalid(path, value, f"{path} in body should be at least {node.min_length} chars long"))
    if node.pattern is not None and not node.pattern_matches(value):
        causes.append(f.invalid(path, value, f"{path} in body should match '{node.pattern}'"))
    check = _FORMATS.get(node.format)
    if check is not None and not check(value):
        causes.append(f.type_invalid(path, value, f'{path} in body must be of type {node.format}: "{value}"'))
    return causes


def _validate_number(value: float, node: Structural, path: str) -> list[FieldCause]:
    causes = []
    if node.maximum is not None and (value > node.maximum or (node.exclusive_maximum and value == node.maximum)):
        relation = "less than" if node.exclusive_maximum else "less than or equal to"
        causes.append(f.invalid(path, value, f"{path} in body should be {relation} {f.go_number(node.maximum)}"))
    if node.minimum is not None and (value < node.minimum or (node.exclusive_minimum and value == node.minimum)):
        relation = "greater than" if node.exclusive_minimum else "greater than or equal to"
        causes.append(f.invalid(path, value, f"{path} in body should be {relation} {f.go_number(node.minimum)}"))
    if node.multiple_of is not None and node.multiple_of > 0:
        quotient = value / node.multiple_of
        if not math.isclose(quotient, round(quotient)):
            causes.append(
                f.invalid(path, value, f"{path} in body should be a multiple of {f.go_number(node.multiple_of)}")
            )
    return causes


def _validate_array(value: list[Any], node: Structural, path: str) -> list[FieldCause]:
    causes = []
    if node.max_items is not None and len(value) > node.max_items:
        causes.append(f.too_many(path, len(value), node.max_items))
    if node.min_items is not None and len(value) < node.min_items:
        causes.append(f.invalid(path, len(value), f"{path} in body should have at least {node.min_items} items"))
    if node.items is not None:
        for i, item in enumerate(value):
            causes.extend(_validate_value(item, node.items, f.index(path, i)))
    return causes


def _validate_object(value: dict[str, Any], node: Structural, path: str) -> list[FieldCause]:
    causes = []
    if node.max_properties is not None and len(value) > node.max_properties:
        causes.append(f.too_many(path, len(value), node.max_properties))
    if node.min_properties is not None and len(value) < node.min_properties:
        causes.append(
            f.invalid(
                path,
                node.min_properties,
                f"{path} in body should have at least {node.min_properties} properties",
            )
        )
    for required in node.required:
        if required not in value:
            causes.append(f.required(f.child(path, required)))
    for k, v in value.items():
        prop = node.properties.get(k)
        if prop is not None:
            causes.extend(_validate_value(v, prop, f.child(path, k)))
        elif node.additional is not None:
            causes.extend(_validate_value(v, node.additional, f.child(path, k)))
    return causes


def _validate_combinators(value: Any, node: Structural, path: str) -> list[FieldCause]:
    """`allOf`/`anyOf`/`oneOf`/`not` carry only value validations in a structural schema."""
    causes = []
    for sub in node.all_of:
        causes.extend(_validate_nested(value, sub, path))
    if node.any_of and not any(not _validate_nested(value, sub, path) for sub in node.any_of):
        causes.append(f.invalid(path, value, f"{path} in body must validate at least one schema (anyOf)"))
    if node.one_of and sum(1 for sub in node.one_of if not _validate_nested(value, sub, path)) != 1:
        causes.append(f.invalid(path, value, f"{path} in body must validate one and only one schema (oneOf)"))
    if node.not_ is not None and not _validate_nested(value, node.not_, path):
        causes.append(f.invalid(path, value, f"{path} in body must not validate the schema (not)"))
    return causes


def _validate_nested(value: Any, node: Structural, path: str) -> list[FieldCause]:
    """A combinator branch: its own type (int-or-string's `anyOf` branches have one) and value validations."""
    if node.type and not node.int_or_string and not _type_matches(value, node):
        actual = _json_type(value)
        return [f.type_invalid(path, actual, f'{path} in body must be of type {node.type}: "{actual}"')]
    return _validate_value(value, node, path) if value is not None else []


# --------------------------------------------------------------------------------------- list-type invariants


def _list_sets_and_maps(value: Any, node: Structural | None, path: str) -> list[FieldCause]:
    """`listtype.ValidateListSetsAndMaps`: set items and map keys are unique; the second occurrence is
    reported."""
    if node is None:
        return []
    causes: list[FieldCause] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in node.properties:
                causes.extend(_list_sets_and_maps(v, node.properties[k], f.child(path, k)))
            elif node.additional is not None:
                causes.extend(_list_sets_and_maps(v, node.additional, f.key(path, k)))
    elif isinstance(value, list):
        if node.list_type == "set":
            causes.extend(f.duplicate(f.index(path, i), value[i]) for i in _repeated(value))
        elif node.list_type == "map":
            causes.extend(_list_map_duplicates(value, node, path))
        for i, item in enumerate(value):
            causes.extend(_list_sets_and_maps(item, node.items, f.index(path, i)))
    return causes


def _identity(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return ("json", json.dumps(value, sort_keys=True, separators=(",", ":")))
    return (type(value).__name__, value)


def _repeated(values: list[Any]) -> list[int]:
    """Indices of the first repeat of each value (`validateListSet` reports when a value is seen the 2nd
    time)."""
    seen: dict[Any, int] = {}
    repeats = []
    for i, v in enumerate(values):
        ident = _identity(v)
        seen[ident] = seen.get(ident, 0) + 1
        if seen[ident] == 2:
            repeats.append(i)
    return repeats


_UNSPECIFIED = ("unspecified", None)


def _list_map_duplicates(value: list[Any], node: Structural, path: str) -> list[FieldCause]:
    for i, item in enumerate(value):
        if item is not None and not isinstance(item, dict):
            return [f.invalid(f.index(path, i), item, "must be an object for an array of list-type map")]
    if len(value) <= 1:
        return []
    if len(node.list_map_keys) == 1:
        (key_field,) = node.list_map_keys
        keys = [item[key_field] if isinstance(item, dict) and key_field in item else _UNSPECIFIED for item in value]
        causes = []
        for i in _repeated(keys):
            shown = {} if keys[i] == _UNSPECIFIED else {key_field: keys[i]}
            causes.append(f.duplicate(f.index(path, i), shown))
        return causes
    composite = [
        {k: item[k] for k in node.list_map_keys if k in item} if isinstance(item, dict) else {} for item in value
    ]
    return [f.duplicate(f.index(path, i), composite[i]) for i in _repeated(composite)]
