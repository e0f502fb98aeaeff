"""The structural schema of a custom resource version, compiled once from `openAPIV3Schema`.

A CRD's schema is structural (`apiextensions-apiserver/pkg/apiserver/schema/structural.go`): every node has a
type (or `x-kubernetes-int-or-string` / `x-kubernetes-preserve-unknown-fields`), value validations, and the
Kubernetes extensions that drive pruning, defaulting, list merging and CEL. The YAML dictionaries are turned
into `Structural` nodes so that the walks in `schema.py` and `schema_cel.py` do not re-read dictionaries on
every request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # Go's RE2 semantics, as kube-openapi's `pattern` check uses

MISSING: Any = object()
"""No `default:` at this node."""


@dataclass(frozen=True)
class CelRule:
    """One `x-kubernetes-validations` entry (`apiextensions/v1` `ValidationRule`)."""

    rule: str
    message: str = ""
    message_expression: str = ""
    field_path: str = ""
    reason: str = ""
    optional_old_self: bool = False

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> CelRule:
        return cls(
            rule=str(raw.get("rule", "")),
            message=str(raw.get("message") or ""),
            message_expression=str(raw.get("messageExpression") or ""),
            field_path=str(raw.get("fieldPath") or ""),
            reason=str(raw.get("reason") or ""),
            optional_old_self=bool(raw.get("optionalOldSelf", False)),
        )


@dataclass(eq=False)
class Structural:
    """One schema node. `type` is "" where the schema leaves it open (preserve-unknown or int-or-string)."""

    type: str = ""
    properties: dict[str, Structural] = field(default_factory=dict)
    additional: Structural | None = None
    additional_allowed: bool = False
    items: Structural | None = None
    required: tuple[str, ...] = ()
    default: Any = MISSING
    nullable: bool = False
    enum: tuple[Any, ...] | None = None
    pattern: str | None = None
    format: str = ""
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | None = None
    min_items: int | None = None
    max_items: int | None = None
    min_properties: int | None = None
    max_properties: int | None = None
    int_or_string: bool = False
    preserve_unknown: bool = False
    embedded: bool = False
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    map_type: str = ""
    any_of: tuple[Structural, ...] = ()
    all_of: tuple[Structural, ...] = ()
    one_of: tuple[Structural, ...] = ()
    not_: Structural | None = None
    rules: tuple[CelRule, ...] = ()
    rules_below: bool = False
    """This node or a descendant carries `x-kubernetes-validations`: the CEL walk skips the rest."""

    def child(self, name: str) -> Structural | None:
        """The schema of property `name`, falling back to `additionalProperties`."""
        found = self.properties.get(name)
        return found if found is not None else self.additional

    def pattern_matches(self, text: str) -> bool:
        assert self.pattern is not None
        return _compiled_pattern(self.pattern).search(text) is not None


@lru_cache(maxsize=4096)
def _compiled_pattern(pattern: str) -> Any:
    return re2.compile(pattern)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def compile_schema(raw: dict[str, Any]) -> Structural:
    """Turn an `openAPIV3Schema` dictionary into `Structural` nodes."""
    node = Structural(
        type=str(raw.get("type") or ""),
        required=tuple(str(name) for name in raw.get("required") or ()),
        default=raw.get("default", MISSING),
        nullable=bool(raw.get("nullable", False)),
        enum=tuple(raw["enum"]) if isinstance(raw.get("enum"), list) else None,
        pattern=str(raw["pattern"]) if raw.get("pattern") is not None else None,
        format=str(raw.get("format") or ""),
        min_length=_count(raw.get("minLength")),
        max_length=_count(raw.get("maxLength")),
        minimum=_number(raw.get("minimum")),
        maximum=_number(raw.get("maximum")),
        exclusive_minimum=bool(raw.get("exclusiveMinimum", False)),
        exclusive_maximum=bool(raw.get("exclusiveMaximum", False)),
        multiple_of=_number(raw.get("multipleOf")),
        min_items=_count(raw.get("minItems")),
        max_items=_count(raw.get("maxItems")),
        min_properties=_count(raw.get("minProperties")),
        max_properties=_count(raw.get("maxProperties")),
        int_or_string=bool(raw.get("x-kubernetes-int-or-string", False)),
        preserve_unknown=bool(raw.get("x-kubernetes-preserve-unknown-fields", False)),
        embedded=bool(raw.get("x-kubernetes-embedded-resource", False)),
        list_type=str(raw.get("x-kubernetes-list-type") or ""),
        list_map_keys=tuple(str(k) for k in raw.get("x-kubernetes-list-map-keys") or ()),
        map_type=str(raw.get("x-kubernetes-map-type") or ""),
        rules=tuple(CelRule.from_dict(r) for r in raw.get("x-kubernetes-validations") or () if isinstance(r, dict)),
    )
    properties = raw.get("properties")
    if isinstance(properties, dict):
        node.properties = {str(k): compile_schema(v) for k, v in properties.items() if isinstance(v, dict)}
    additional = raw.get("additionalProperties")
    if isinstance(additional, dict):
        node.additional = compile_schema(additional)
    elif additional is True:
        node.additional_allowed = True
    items = raw.get("items")
    if isinstance(items, dict):
        node.items = compile_schema(items)
    node.any_of = tuple(compile_schema(s) for s in raw.get("anyOf") or () if isinstance(s, dict))
    node.all_of = tuple(compile_schema(s) for s in raw.get("allOf") or () if isinstance(s, dict))
    node.one_of = tuple(compile_schema(s) for s in raw.get("oneOf") or () if isinstance(s, dict))
    if isinstance(raw.get("not"), dict):
        node.not_ = compile_schema(raw["not"])
    node.rules_below = bool(node.rules) or any(
        n.rules_below for n in (*node.properties.values(), node.additional, node.items) if n is not None
    )
    return node


def iter_rules(node: Structural, path: str = "") -> list[tuple[str, CelRule]]:
    """Every CEL rule under `node`, with a readable schema path (`[]` for items, `{}` for map values)."""
    found = [(path or "<root>", rule) for rule in node.rules]
    for name, prop in node.properties.items():
        if prop.rules_below:
            found.extend(iter_rules(prop, f"{path}.{name}" if path else name))
    if node.items is not None and node.items.rules_below:
        found.extend(iter_rules(node.items, f"{path}[]"))
    if node.additional is not None and node.additional.rules_below:
        found.extend(iter_rules(node.additional, f"{path}{{}}"))
    return found
