"""CRD `x-kubernetes-validations`: CEL rules evaluated with `cel-python`, as the apiextensions-apiserver does.

The walk, the correlation of `oldSelf` and the error texts follow
`apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go` (`Validator.validate`, `validateExpressions`,
`validateMap`, `validateArray`, `MapIsCorrelatable`, `fieldErrorForReason`, `evalMessageExpression`,
`ruleMessageOrDefault`, `ValidFieldPath`) and `apiserver/pkg/cel/common/maplist.go` (`MakeMapList`):

- a rule sees `self`, the value at its schema node; a node whose value is null or absent is not visited;
- a transition rule (one that references `oldSelf`) runs only when an old value exists at the same place: the
  same property (any map type is correlatable), or, in a `x-kubernetes-list-type: map` list, the old item with
  the same key values. Items of atomic and set lists never have an `oldSelf`; neither does anything on create;
- a failed rule reports `Invalid value: "<schema type>": <message>` at the node (plus `fieldPath`), or
  Forbidden, Required or Duplicate when `reason` says so; `messageExpression` wins over `message` when it
  evaluates to a non-empty single-line string; without either the text is `failed rule: <rule>`;
- a rule that fails to evaluate reports `<error> evaluating rule: <rule or message>`, and one that does not
  compile `rule compile error: <error>` (the apiserver compiles rules when the CRD is written, so the latter
  means the lab's CEL lacks something the apiserver has): neither is swallowed.

Values are converted with the schema, as `apiserver/pkg/cel/common/values.go` does: only declared properties
are visible (by their CEL-escaped names, `apiserver/pkg/cel/escaping.go`, with reserved words also reachable
unescaped as `recognizeKeywordAsFieldName` allows), the root and embedded resources expose `apiVersion`,
`kind`, `metadata.name` and `metadata.generateName` (`model.WithTypeAndObjectMeta`), `date-time` strings
become timestamps, and set and map lists compare equal regardless of order (`unstructuredSetList.Equal`,
`unstructuredMapList.Equal`).

Not reproduced: the runtime cost budget, ratcheting of unchanged values (the lab validates every write, so an
unchanged subtree passes again), optional types (`?.`, `optional.of`, `optionalOldSelf`: celpy has no
optionals), and the Kubernetes libraries listed in `UNSUPPORTED_LIBRARIES`.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import celpy
import lark
import re2  # type: ignore[import-untyped]
from celpy import celtypes

from airflow_provider_dispatch_lab.apiserver.validation import schema_fields as f
from airflow_provider_dispatch_lab.apiserver.validation.schema_fields import FieldCause
from airflow_provider_dispatch_lab.apiserver.validation.schema_structural import CelRule, Structural

logging.getLogger("celpy").setLevel(logging.WARNING)

MAX_MESSAGE_EXPRESSION_BYTES = 5 * 1024
"""`celconfig.MaxEvaluatedMessageExpressionSizeBytes`."""

UNSUPPORTED_LIBRARIES = (
    "optional types (`?.`, `[?]`, `optional.*`) and `optionalOldSelf`",
    "`url`/`isURL` (library/urls.go)",
    "`quantity`/`isQuantity` (library/quantity.go)",
    "`ip`/`cidr` (library/ip.go, cidr.go)",
    "`format.*` (library/format.go)",
    "`sets.*` (cel-go ext/sets.go)",
    "`authorizer` (library/authz.go, not available to CRD rules anyway)",
)
"""Parts of the Kubernetes CEL environment the lab does not provide. No rule in the shipped CRDs uses them."""

# CEL reserved words (`apiserver/pkg/cel/escaping.go` `celReservedSymbols`).
_RESERVED = frozenset(
    {
        "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
        "import", "let", "loop", "package", "namespace", "return", "var", "void", "while",
    }
)  # fmt: skip
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def escape(name: str) -> str | None:
    """A property name as CEL sees it (`cel.Escape`), or None when it cannot be reached from CEL."""
    if not name or name[0].isdigit():
        return None
    if name in _RESERVED:
        return f"__{name}__"
    out: list[str] = []
    i = 0
    while i < len(name):
        if name.startswith("__", i):
            out.append("__underscores__")
            i += 2
            continue
        c = name[i]
        if c == ".":
            out.append("__dot__")
        elif c == "-":
            out.append("__dash__")
        elif c == "/":
            out.append("__slash__")
        elif c in _IDENT_CHARS:
            out.append(c)
        else:
            return None
        i += 1
    return "".join(out)


# ------------------------------------------------------------------------------------------- value conversion


class SetList(celtypes.ListType):
    """A `x-kubernetes-list-type: set` list: equal to another with the same elements in any order."""

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, list):
            return super().__eq__(other)
        return len(self) == len(other) and all(any(_equal(a, b) for b in other) for a in self)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)


class MapList(celtypes.ListType):
    """A `x-kubernetes-list-type: map` list: equal to another with the same keyed elements in any order."""

    keys: tuple[str, ...] = ()

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, list):
            return super().__eq__(other)
        if len(self) != len(other):
            return False
        by_key = {_item_key(item, self.keys): item for item in other}
        return all(_equal(item, by_key.get(_item_key(item, self.keys))) for item in self)

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)


def _item_key(item: Any, keys: tuple[str, ...]) -> Any:
    if not isinstance(item, Mapping):
        return None
    return tuple(str(item.get(celtypes.StringType(k))) for k in keys)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except TypeError:
        return False


def _scalar(value: Any, node: Structural | None) -> Any:
    kind = node.type if node is not None else ""
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.DoubleType(value) if kind == "number" else celtypes.IntType(value)
    if isinstance(value, float):
        if kind == "integer" and value.is_integer():
            return celtypes.IntType(int(value))
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        fmt = node.format if node is not None else ""
        try:
            if fmt in ("date-time", "date"):
                return celtypes.TimestampType(value)
            if fmt == "duration":
                return celtypes.DurationType(value)
            if fmt == "byte":
                return celtypes.BytesType(base64.b64decode(value, validate=True))
        except (ValueError, TypeError, binascii.Error):
            return celtypes.StringType(value)
        return celtypes.StringType(value)
    return None


def to_cel(value: Any, node: Structural | None, resource_root: bool = False) -> Any:
    """`UnstructuredToVal`: the value as CEL sees it through its schema."""
    if value is None:
        return None
    if isinstance(value, list):
        items = node.items if node is not None else None
        converted = [to_cel(v, items, items is not None and items.embedded) for v in value]
        if node is not None and node.list_type == "set":
            return SetList(converted)
        if node is not None and node.list_type == "map" and node.list_map_keys:
            result = MapList(converted)
            result.keys = node.list_map_keys
            return result
        return celtypes.ListType(converted)
    if isinstance(value, dict):
        return _object(value, node, resource_root)
    return _scalar(value, node)


def _object(value: dict[str, Any], node: Structural | None, resource_root: bool) -> celtypes.MapType:
    entries: dict[Any, Any] = {}
    if node is not None and node.additional is not None and not node.properties:
        for k, v in value.items():
            entries[celtypes.StringType(k)] = to_cel(v, node.additional, node.additional.embedded)
    elif node is not None:
        for k, v in value.items():
            prop = node.properties.get(k)
            if prop is None or v is None:
                continue
            escaped = escape(k)
            if escaped is None:
                continue
            converted = to_cel(v, prop, prop.embedded)
            entries[celtypes.StringType(escaped)] = converted
            if k in _RESERVED:
                entries[celtypes.StringType(k)] = converted
    if resource_root:
        for k in ("apiVersion", "kind"):
            if isinstance(value.get(k), str):
                entries[celtypes.StringType(k)] = celtypes.StringType(value[k])
        meta = value.get("metadata")
        if isinstance(meta, dict):
            entries[celtypes.StringType("metadata")] = celtypes.MapType(
                {
                    celtypes.StringType(k): celtypes.StringType(meta[k])
                    for k in ("name", "generateName")
                    if isinstance(meta.get(k), str)
                }
            )
    return celtypes.MapType(entries)


# -------------------------------------------------------------------- Kubernetes CEL library (the parts used)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return str(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("no such overload")
    return int(value)


def _lower_ascii(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.lower() if "A" <= c <= "Z" else c for c in _text(s)))


def _upper_ascii(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.upper() if "a" <= c <= "z" else c for c in _text(s)))


def _trim(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_text(s).strip())


def _replace(s: Any, old: Any, new: Any, n: Any = None) -> celtypes.StringType:
    count = -1 if n is None else _int(n)
    return celtypes.StringType(_text(s).replace(_text(old), _text(new), count))


def _split(s: Any, sep: Any, n: Any = None) -> celtypes.ListType:
    """`strings.SplitN`: n == 0 gives [], n < 0 every part, an empty separator splits into characters."""
    text, separator = _text(s), _text(sep)
    limit = -1 if n is None else _int(n)
    if limit == 0:
        return celtypes.ListType([])
    if separator == "":
        parts = list(text)
        if 0 < limit < len(parts):
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(separator, limit - 1 if limit > 0 else -1)
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _substring(s: Any, start: Any, end: Any = None) -> celtypes.StringType:
    text = _text(s)
    first, last = _int(start), len(text) if end is None else _int(end)
    if first < 0 or first > len(text) or last < first or last > len(text):
        raise ValueError(f"index out of range: {first if first < 0 or first > len(text) else last}")
    return celtypes.StringType(text[first:last])


def _char_at(s: Any, i: Any) -> celtypes.StringType:
    text, at = _text(s), _int(i)
    if at < 0 or at > len(text):
        raise ValueError(f"index out of range: {at}")
    return celtypes.StringType(text[at : at + 1])


def _join(items: Any, sep: Any = None) -> celtypes.StringType:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    return celtypes.StringType(("" if sep is None else _text(sep)).join(_text(x) for x in items))


def _index_of(target: Any, item: Any, offset: Any = None) -> celtypes.IntType:
    """String `indexOf` (cel-go ext strings) or list `indexOf` (library/lists.go), by receiver."""
    if isinstance(target, list):
        return celtypes.IntType(next((i for i, x in enumerate(target) if _equal(x, item)), -1))
    text, sub = _text(target), _text(item)
    start = 0 if offset is None else _int(offset)
    if start < 0 or start > len(text):
        raise ValueError(f"index out of range: {start}")
    return celtypes.IntType(text.find(sub, start))


def _last_index_of(target: Any, item: Any, offset: Any = None) -> celtypes.IntType:
    if isinstance(target, list):
        found = [i for i, x in enumerate(target) if _equal(x, item)]
        return celtypes.IntType(found[-1] if found else -1)
    text, sub = _text(target), _text(item)
    last = len(text) if offset is None else _int(offset)
    if last < 0 or last > len(text):
        raise ValueError(f"index out of range: {last}")
    return celtypes.IntType(text.rfind(sub, 0, last + len(sub)))


def _reverse(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_text(s)[::-1])


def _is_sorted(items: Any) -> celtypes.BoolType:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    return celtypes.BoolType(all(not (b < a) for a, b in itertools.pairwise(items)))


def _sum(items: Any) -> Any:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    if not items:
        return celtypes.IntType(0)
    total = items[0]
    for x in items[1:]:
        total = total + x
    return total


def _max(items: Any) -> Any:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    if not items:
        raise ValueError("max called on empty list")
    best = items[0]
    for x in items[1:]:
        if best < x:
            best = x
    return best


def _includes(target: Any, item: Any) -> celtypes.BoolType:
    if isinstance(target, list):
        return celtypes.BoolType(any(_equal(x, item) for x in target))
    return celtypes.BoolType(_equal(target, item))


def _find(s: Any, pattern: Any) -> celtypes.StringType:
    match = re2.search(_text(pattern), _text(s))
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(s: Any, pattern: Any, n: Any = None) -> celtypes.ListType:
    limit = -1 if n is None else _int(n)
    found = [m.group(0) for m in re2.finditer(_text(pattern), _text(s))]
    if limit >= 0:
        found = found[:limit]
    return celtypes.ListType([celtypes.StringType(x) for x in found])


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    # cel-go ext.Strings, part of the Kubernetes base environment (`apiserver/pkg/cel/environment/base.go`).
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "trim": _trim,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "charAt": _char_at,
    "join": _join,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "reverse": _reverse,
    # `apiserver/pkg/cel/library/lists.go` (`min` is celpy's built-in macro, with the same result).
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
    "includes": _includes,
    # `apiserver/pkg/cel/library/regex.go`.
    "find": _find,
    "findAll": _find_all,
}
"""Functions the Kubernetes CEL environment has and celpy lacks. celpy already provides `size`, `has`,
`matches` (RE2), `contains`, `startsWith`, `endsWith`, the `all`/`exists`/`exists_one`/`map`/`filter` macros,
conversions and timestamp accessors."""


# -------------------------------------------------------------------------------------------------- compiling


@dataclass(frozen=True)
class Compiled:
    runner: celpy.Runner | None
    error: str
    uses_old_self: bool


_environment: celpy.Environment | None = None


def _env() -> celpy.Environment:
    global _environment
    if _environment is None:
        _environment = celpy.Environment()
    return _environment


def _references_old_self(tree: lark.Tree[Any]) -> bool:
    """`UsesOldSelf`: the expression names the variable `oldSelf` (not a field or a string that says so)."""
    for sub in tree.iter_subtrees():
        if sub.data == "ident" and sub.children and str(sub.children[0]) == "oldSelf":
            return True
    return False


@lru_cache(maxsize=2048)
def compile_expression(text: str) -> Compiled:
    """Parse a rule once; the same text in many CRDs (`self == oldSelf`) shares the program."""
    try:
        tree = _env().compile(text)
        runner = _env().program(tree, functions=KUBERNETES_FUNCTIONS)
    except Exception as error:  # celpy raises CELParseError and lark errors
        return Compiled(None, _short_error(error), False)
    return Compiled(runner, "", _references_old_self(tree))


def _short_error(error: BaseException) -> str:
    """celpy's message without the activation dump it appends."""
    text = str(error.args[0]) if error.args else str(error)
    text = text.split(" (in activation", 1)[0]
    if text.startswith("no such member in mapping: "):
        return "no such key: " + text.removeprefix("no such member in mapping: ").strip("'\"")
    return text.splitlines()[0] if text else type(error).__name__


def _rule_error_string(rule: CelRule) -> str:
    return rule.message.strip() if rule.message else rule.rule.strip()


def _rule_message_or_default(rule: CelRule) -> str:
    return rule.message.strip() if rule.message else f"failed rule: {rule.rule.strip()}"


# ------------------------------------------------------------------------------------------------- evaluation


def _evaluate(compiled: Compiled, activation: dict[str, Any]) -> Any:
    assert compiled.runner is not None
    return compiled.runner.evaluate(activation)


def _message(rule: CelRule, activation: dict[str, Any]) -> str:
    if rule.message_expression:
        compiled = compile_expression(rule.message_expression)
        if compiled.runner is not None:
            try:
                result = _evaluate(compiled, activation)
            except Exception:  # evalMessageExpression: a failed messageExpression falls back to `message`
                result = None
            if isinstance(result, str):
                text = str(result).strip()
                if text and "\n" not in text and len(text.encode()) <= MAX_MESSAGE_EXPRESSION_BYTES:
                    return text
    return _rule_message_or_default(rule)


def _failure(rule: CelRule, node: Structural, path: str, detail: str) -> FieldCause:
    """`fieldErrorForReason`."""
    where = path
    if rule.field_path:
        where = _rule_field_path(rule.field_path, node, path)
    if rule.reason == "FieldValueForbidden":
        return f.forbidden(where, detail)
    if rule.reason == "FieldValueRequired":
        return f.required(where, detail)
    if rule.reason == "FieldValueDuplicate":
        return f.duplicate(where, node.type)
    return f.invalid(where, node.type, detail)


def _rule_field_path(json_path: str, node: Structural, path: str) -> str:
    """`ValidFieldPath`: `.a.b` or `.a['b.c']` from the rule's node; an unusable path keeps the node."""
    where, current = path, node
    rest = json_path
    while rest:
        if rest.startswith("."):
            rest = rest[1:]
            end = min([i for i in (rest.find("."), rest.find("[")) if i >= 0] or [len(rest)])
            name, rest = rest[:end], rest[end:]
        elif rest.startswith("['"):
            end = rest.find("']")
            if end < 0:
                return path
            name, rest = rest[2:end], rest[end + 2 :]
        else:
            return path
        if name in current.properties:
            where, current = f.child(where, name), current.properties[name]
        elif current.additional is not None:
            where, current = f.key(where, name), current.additional
        else:
            return path
    return where


def _run_rules(node: Structural, value: Any, old: Any, path: str, resource_root: bool) -> list[FieldCause]:
    causes: list[FieldCause] = []
    activation: dict[str, Any] | None = None
    for rule in node.rules:
        compiled = compile_expression(rule.rule)
        if compiled.runner is None:
            causes.append(f.invalid(path, node.type, f"rule compile error: {compiled.error}"))
            continue
        if compiled.uses_old_self and old is None:
            if rule.optional_old_self:
                causes.append(
                    f.invalid(
                        path,
                        node.type,
                        "rule compile error: optionalOldSelf needs optional types, which the "
                        "lab's CEL (celpy) does not have",
                    )
                )
            continue  # transition rules run only where an old value is correlated
        if activation is None:
            activation = {"self": to_cel(value, node, resource_root)}
        if compiled.uses_old_self and "oldSelf" not in activation:
            activation["oldSelf"] = to_cel(old, node, resource_root)
        try:
            result = _evaluate(compiled, activation)
        except Exception as error:  # CELEvalError, or a Python error inside a library function
            causes.append(
                f.invalid(path, node.type, f"{_short_error(error)} evaluating rule: {_rule_error_string(rule)}")
            )
            continue
        if isinstance(result, celtypes.BoolType) and bool(result):
            continue
        causes.append(_failure(rule, node, path, _message(rule, activation)))
    return causes


def _correlated_items(node: Structural, old: Any) -> dict[tuple[Any, ...], Any]:
    """`MakeMapList`: old items of a map list by their key values; scalar keys only, first item wins."""
    if node.list_type != "map" or not node.list_map_keys or not isinstance(old, list):
        return {}
    keyed: dict[tuple[Any, ...], Any] = {}
    for item in old:
        item_key = _scalar_key(item, node.list_map_keys)
        if item_key is not None and item_key not in keyed:
            keyed[item_key] = item
    return keyed


def _scalar_key(item: Any, keys: tuple[str, ...]) -> tuple[Any, ...] | None:
    if not isinstance(item, dict):
        return None
    values = []
    for k in keys:
        v = item.get(k)
        if k not in item or isinstance(v, (dict, list)) or v is None:
            return None
        values.append((type(v).__name__, v))
    return tuple(values)


def _walk(node: Structural, value: Any, old: Any, path: str, resource_root: bool) -> list[FieldCause]:
    if value is None or not node.rules_below:
        return []
    causes = _run_rules(node, value, old, path, resource_root) if node.rules else []
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) and node.map_type in ("", "granular", "atomic") else {}
        if node.additional is not None and not node.properties:
            if node.additional.rules_below:
                for k, v in value.items():
                    causes.extend(_walk(node.additional, v, old_map.get(k), f.key(path, k), node.additional.embedded))
        else:
            for k, v in value.items():
                prop = node.properties.get(k)
                if prop is not None and prop.rules_below:
                    causes.extend(_walk(prop, v, old_map.get(k), f.child(path, k), prop.embedded))
    elif isinstance(value, list) and node.items is not None and node.items.rules_below:
        correlated = _correlated_items(node, old)
        for i, item in enumerate(value):
            item_key = _scalar_key(item, node.list_map_keys) if correlated else None
            old_item = correlated.get(item_key) if item_key is not None else None
            causes.extend(_walk(node.items, item, old_item, f.index(path, i), node.items.embedded))
    return causes


def validate(root: Structural, obj: dict[str, Any], old: dict[str, Any] | None) -> list[FieldCause]:
    """Every rule of the object, with `oldSelf` where the old object correlates."""
    return _walk(root, obj, old, f.ROOT, True)
