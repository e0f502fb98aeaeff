"""The patch kinds the apiserver accepts: JSON merge patch, JSON patch, strategic merge patch, apply.

Why each is a careful port and not "close enough": the adapter's one conditional write and Kueue-style
controllers depend on exactly which writes succeed, which fail with which status, and what the stored object
looks like afterwards (list order, ownership, pruning). Every function is pure: it deep-copies its inputs,
returns a new object and raises :class:`PatchError` (the server turns it into a ``Status``).

Sources (read through the search tools, not copied):

* Dispatch and status codes: ``kubernetes/kubernetes:staging/src/k8s.io/apiserver/pkg/endpoints/handlers/
  patch.go`` -- ``jsonPatcher.applyJSPatch`` (JSON patch decode error -> 400; apply error, including a failed
  ``test``, -> ``NewGenericServerResponse(422)``, whose message is the fixed "the server rejected our request
  due to an error in our request" with the library's detail dropped), ``interpretStrategicMergePatchError``,
  ``applyPatcher``; ``staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go`` ``NewGenericServerResponse``,
  ``NewInvalid``, ``NewApplyConflict``; errors that are not a Status become 500 with an empty reason
  (``responsewriters`` ``ErrorToAPIStatus``).
* JSON merge patch and JSON patch: ``evanphx/json-patch`` v4 (``merge.go`` ``MergePatch``/``mergeDocs``/
  ``pruneNulls``; ``patch.go`` ``test``), the library the apiserver links.
* Strategic merge patch: ``kubernetes/apimachinery:pkg/util/strategicpatch/patch.go`` (and, for the v0.36
  behaviour of values taken whole and delete lists, the port of v0.36.2 in ``flanksource/commons:merge/
  strategicpatch``, checked against upstream's ``patch_test.go`` cases) ``mergeMap``,
  ``applyRetainKeysDirective``, ``mergePatchIntoOriginal``, ``mergeSlice``, ``mergeSliceWithSpecialElements``,
  ``mergeSliceWithoutSpecialElements``, ``normalizeElementOrder``, ``mergeSortedSlice``,
  ``deduplicateScalars``;
  ``pkg/util/mergepatch/errors.go`` for the messages.
* Server-side apply: ``kubernetes-sigs/structured-merge-diff`` ``merge/update.go`` ``Updater.Apply``,
  ``prune``, ``update``, ``typed/merge.go`` and ``typed/compare.go`` (list order, leaves),
  ``typed/tofieldset.go``,
  ``fieldpath`` (``PathElement.String``, FieldsV1 serialisation); ``staging/src/k8s.io/apimachinery/pkg/util/
  managedfields/internal``: ``stripmeta.go`` (fields never owned), ``conflict.go`` ``NewConflictError``/
  ``printManager``, ``managedfields.go`` ``BuildManagerIdentifier``/``sortEncodedManagedFields``,
  ``managedfieldsupdater.go`` (the entry's time moves only when the object changed), ``structuredmerge.go``
  (``metadata.managedFields must be nil``, version check).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final, Literal

import jsonpatch
import jsonpointer

from airflow_provider_dispatch_lab.apiserver.validation.schema_fields import go_json_kind

__all__ = [
    "ATOMIC",
    "ListSemantics",
    "ListSemanticsFn",
    "PatchError",
    "json_patch",
    "merge_patch",
    "server_side_apply",
    "strategic_merge_patch",
    "unsupported_media_type",
]


@dataclass(frozen=True)
class ListSemantics:
    """How a list merges: ``atomic`` (replaced), ``set`` (scalars, union) or ``map`` (merged by ``keys``).

    Strategic merge patch uses the first key as its single ``patchMergeKey``; server-side apply uses all keys
    (``x-kubernetes-list-map-keys``).
    """

    kind: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()


ATOMIC: Final = ListSemantics("atomic")

ListSemanticsFn = Callable[[tuple[str, ...]], ListSemantics]
"""Given the field names from the object root to a list (indices skipped), that list's semantics."""


class PatchError(Exception):
    """A patch the apiserver rejects: HTTP ``code``, Status ``reason``, ``message`` and optional ``causes``.

    ``reason`` is ``BadRequest`` (400), ``Invalid`` (422), ``Conflict`` (409), ``UnsupportedMediaType`` (415),
    or ``""`` for the 500 the apiserver sends when a library error reaches it unwrapped.
    """

    def __init__(self, code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes

    def __repr__(self) -> str:
        return f"PatchError({self.code}, {self.reason!r}, {self.message!r})"


_GENERIC_422: Final = "the server rejected our request due to an error in our request"
_PATCH_CONTENT_TYPES: Final = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)


def _bad_request(message: str) -> PatchError:
    return PatchError(400, "BadRequest", message)


def _generic_invalid() -> PatchError:
    """``NewGenericServerResponse(422, ...)``: reason Invalid, the fixed message, no causes."""
    return PatchError(422, "Invalid", _GENERIC_422)


def _unwrapped(message: str) -> PatchError:
    """A plain Go error reaching the handler: ``ErrorToAPIStatus`` makes it a 500 with an empty reason."""
    return PatchError(500, "", message)


def unsupported_media_type(accepted: Iterable[str] = _PATCH_CONTENT_TYPES) -> PatchError:
    """``negotiation.NewUnsupportedMediaTypeError``: a patch content type the resource does not accept.

    Pass the resource's accepted types: custom resources accept all but strategic merge patch.
    """
    listed = ", ".join(accepted)
    return PatchError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {listed}",
    )


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _not_an_object(result: Any) -> PatchError:
    """The patched document is not an object, so it cannot decode into the kind (``NewInvalid`` on ``patch``).

    The decoder's own wording after the colon is approximate: it depends on the kind's Go type.
    """
    detail = f"json: cannot unmarshal {go_json_kind(result)} into Go value of type map[string]interface {{}}"
    body = f"Invalid value: {json.dumps(_compact(result))}: {detail}"
    return PatchError(
        422,
        "Invalid",
        f' "" is invalid: patch: {body}',
        [{"reason": "FieldValueInvalid", "message": body, "field": "patch"}],
    )


# ------------------------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386 as evanphx/json-patch v4 implements it).


def _prune_nulls(value: Any) -> Any:
    """``pruneNulls``: drop null members of objects, recursively, also inside arrays (array nulls stay)."""
    if isinstance(value, dict):
        return {key: _prune_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_prune_nulls(item) if item is not None else None for item in value]
    return value


def _merge_docs(doc: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            doc.pop(key, None)
        elif key not in doc or doc[key] is None:
            doc[key] = _prune_nulls(value)
        elif isinstance(doc[key], dict):
            if isinstance(value, dict):
                _merge_docs(doc[key], value)
            else:
                doc[key] = copy.deepcopy(value)  # an object replaced by a non-object keeps its nulls
        else:
            doc[key] = _prune_nulls(value)


def merge_patch(obj: Mapping[str, Any], patch: Any) -> dict[str, Any]:
    """Apply a JSON merge patch: objects merge recursively, ``null`` deletes, everything else replaces.

    A patch that is not an object or array is "Invalid JSON Patch" (400); an array patch replaces the whole
    document and so fails to decode (422).
    """
    if isinstance(patch, list):
        raise _not_an_object(_prune_nulls(patch))
    if not isinstance(patch, dict):
        raise _bad_request("Invalid JSON Patch")
    doc = copy.deepcopy(dict(obj))
    _merge_docs(doc, patch)
    return doc


# ------------------------------------------------------------------------------------------------------------
# JSON patch (RFC 6902) with the jsonpatch library, adjusted to evanphx/json-patch v4 where they differ.


class _V4TestOperation(jsonpatch.TestOperation):
    """evanphx v4 ``test``: testing for ``null`` (or with no ``value``) passes when the member is absent from
    an existing object; otherwise RFC 6902 equality."""

    def apply(self, obj: Any) -> Any:
        expected = self.operation.get("value")
        if expected is None:
            try:
                parent, part = self.pointer.to_last(obj)
            except jsonpointer.JsonPointerException:
                parent, part = None, None
            if isinstance(parent, dict) and part is not None and part not in parent:
                return obj
            if "value" not in self.operation:
                self.operation = dict(self.operation, value=None)
        return super().apply(obj)


class _V4AddOperation(jsonpatch.AddOperation):
    """evanphx v4 adds ``null`` when ``value`` is missing instead of rejecting the operation."""

    def apply(self, obj: Any) -> Any:
        if "value" not in self.operation:
            self.operation = dict(self.operation, value=None)
        return super().apply(obj)


class _V4ReplaceOperation(jsonpatch.ReplaceOperation):
    """evanphx v4 replaces with ``null`` when ``value`` is missing."""

    def apply(self, obj: Any) -> Any:
        if "value" not in self.operation:
            self.operation = dict(self.operation, value=None)
        return super().apply(obj)


class _ApiserverJsonPatch(jsonpatch.JsonPatch):
    """RFC 6902 with the three v4 behaviours above (applied without ``atomic``: each op's ``apply`` runs)."""

    operations = MappingProxyType(
        {
            **jsonpatch.JsonPatch.operations,
            "test": _V4TestOperation,
            "add": _V4AddOperation,
            "replace": _V4ReplaceOperation,
        }
    )


def json_patch(obj: Mapping[str, Any], ops: Any) -> dict[str, Any]:
    """Apply an RFC 6902 JSON patch (``test`` included).

    A body that is not an array of objects does not decode (400, Go's decoder message); ``null`` is an empty
    patch. Any failure while applying -- a failed ``test``, a missing path, an unknown ``op`` -- is the
    apiserver's 422 with its fixed message; the library's explanation is kept as ``__cause__``.
    """
    if ops is None:
        return copy.deepcopy(dict(obj))
    if not isinstance(ops, list):
        raise _bad_request(f"json: cannot unmarshal {go_json_kind(ops)} into Go value of type jsonpatch.Patch")
    for op in ops:
        if op is not None and not isinstance(op, dict):
            raise _bad_request(f"json: cannot unmarshal {go_json_kind(op)} into Go value of type jsonpatch.Operation")
    if len(ops) > 10000:  # maxJSONPatchOperations
        raise PatchError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: The allowed maximum operations in a JSON patch is 10000, got {len(ops)}",
        )
    if any(isinstance(op, dict) and "" in (op.get("path"), op.get("from")) for op in ops):
        # evanphx v4 cannot address the document root ("" splits into one part): the op fails.
        raise _generic_invalid()
    try:
        patched = _ApiserverJsonPatch([op if op is not None else {} for op in ops]).apply(copy.deepcopy(dict(obj)))
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError, TypeError) as error:
        raise _generic_invalid() from error
    if not isinstance(patched, dict):
        raise _not_an_object(patched)
    return patched


# ------------------------------------------------------------------------------------------------------------
# Go value semantics the strategic merge code relies on.


def _go_type(value: Any) -> str:
    """The dynamic Go type a decoded JSON value has (``UnmarshalCaseSensitivePreserveInts``)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return "<nil>"


def _go_equal(left: Any, right: Any) -> bool:
    """Go ``==`` on two interface values holding scalars: same dynamic type and value."""
    return _go_type(left) == _go_type(right) and left == right


def _go_key(value: Any) -> tuple[str, Any]:
    """A hashable stand-in for a scalar as a Go map key (type-strict, unlike Python's ``1 == True``)."""
    return (_go_type(value), value if not isinstance(value, (dict, list)) else _compact(value))


def _go_v(value: Any) -> str:
    """``fmt``'s ``%v`` for decoded JSON, as the library's error messages print maps and slices."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{key}:{_go_v(value[key])}" for key in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_v(item) for item in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ------------------------------------------------------------------------------------------------------------
# Strategic merge patch.

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST: Final = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER: Final = "$setElementOrder"

_ERR_PRIMITIVE_LIST: Final = "invalid patch format of primitive list"
_ERR_RETAIN_KEYS: Final = "invalid patch format of retainKeys"
_ERR_SET_ELEMENT_ORDER: Final = "invalid patch format of setElementOrder list"


def _no_merge_key(item: Mapping[str, Any], key: str) -> PatchError:
    return _unwrapped(f"map: {_go_v(dict(item))} does not contain declared merge key: {key}")


def _bad_arg_type(expected: str, actual: Any) -> PatchError:
    return _unwrapped(f"expected a {expected}, but received a {_go_type(actual)}")


def _bad_patch_type(directive: Any, item: Mapping[str, Any]) -> PatchError:
    return _unwrapped(f"unknown patch type: {_go_v(directive)} in map: {_go_v(dict(item))}")


def _is_directive_key(key: str) -> bool:
    return key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith(
        (_SET_ELEMENT_ORDER + "/", _DELETE_FROM_PRIMITIVE_LIST + "/")
    )


def _strip_directives(value: Any) -> Any:
    """Drop directive keys left in values the merge adopted whole.

    Upstream leaves them in the merged map and the typed decoder ignores them as unknown fields; the lab
    stores JSON, so it drops them here to store what a cluster would.
    """
    if isinstance(value, dict):
        return {key: _strip_directives(item) for key, item in value.items() if not _is_directive_key(key)}
    if isinstance(value, list):
        return [_strip_directives(item) for item in value]
    return value


_ABSENT: Final = object()


def _discard_nulls(value: Any) -> Any:
    """``discardNullValuesFromPatch``: null members of maps go, at any depth (list nulls stay)."""
    if isinstance(value, dict):
        return {key: _discard_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_discard_nulls(item) for item in value]
    return value


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """``removeDirectives``: a map holding ``$patch`` is dropped (False), at any depth, in maps and lists."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        kept: dict[str, Any] = {}
        for key, item in value.items():
            cleaned, keep = _remove_directives(item)
            if keep:
                kept[key] = cleaned
        return kept, True
    if isinstance(value, list):
        items = [_remove_directives(item) for item in value]
        return [cleaned for cleaned, keep in items if keep], True
    return value, True


class _StrategicMerge:
    """``StrategicMergeMapPatch`` with ``MergeParallelList`` and ``IgnoreUnmatchedNulls`` (server side)."""

    def __init__(self, list_semantics: ListSemanticsFn) -> None:
        self._semantics = list_semantics

    def _strategy(self, path: tuple[str, ...]) -> tuple[bool, str]:
        """(merge?, merge key) for the list at ``path``: ``map`` and ``set`` merge, ``atomic`` replaces."""
        semantics = self._semantics(path)
        if semantics.kind == "atomic":
            return False, ""
        return True, semantics.keys[0] if semantics.kind == "map" and semantics.keys else ""

    def merge_map(self, original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        if _DIRECTIVE in patch:
            directive = patch[_DIRECTIVE]
            if directive == "replace":
                del patch[_DIRECTIVE]
                return patch
            if directive == "delete":
                return {}
            raise _bad_patch_type(directive, patch)
        self._apply_retain_keys(original, patch)
        self._merge_set_element_order(original, patch, path)
        for key in list(patch):
            value = patch[key]
            delete_list = False
            if key.startswith(_DELETE_FROM_PRIMITIVE_LIST):
                prefix, slash, rest = key.partition("/")
                if not slash or prefix != _DELETE_FROM_PRIMITIVE_LIST:
                    raise _bad_request(_ERR_PRIMITIVE_LIST)
                key, delete_list = rest, True
            if value is None:  # after the prefix is cut, so a null delete list deletes the field
                original.pop(key, None)
                continue
            current = original.get(key, _ABSENT)
            if current is _ABSENT or _go_type(current) != _go_type(value):
                # Taken whole, minus nulls and maps carrying $patch; a delete list adopts nothing.
                if not delete_list:
                    adopted, keep = _remove_directives(_discard_nulls(value))
                    if keep:
                        original[key] = adopted
                    else:
                        original.pop(key, None)
                continue
            if isinstance(current, dict):
                original[key] = self.merge_map(current, value, (*path, key))
            elif isinstance(current, list):
                merge, merge_key = self._strategy((*path, key))
                # Delete lists are handled the same way whatever the field's patch strategy.
                original[key] = (
                    self._merge_slice(current, value, (*path, key), merge_key, delete_list)
                    if merge or delete_list
                    else value
                )
            else:
                original[key] = value
        return original

    @staticmethod
    def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
        if _RETAIN_KEYS not in patch:
            return
        retain = patch.pop(_RETAIN_KEYS)
        if not isinstance(retain, list):
            raise _bad_request(_ERR_RETAIN_KEYS)
        kept = {_go_key(item) for item in retain}
        for key, value in patch.items():
            if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER)):
                continue
            if _go_key(key) not in kept:
                raise _bad_request(_ERR_RETAIN_KEYS)
        for key in list(original):
            if _go_key(key) not in kept:
                del original[key]

    def _merge_set_element_order(self, original: dict[str, Any], patch: dict[str, Any], path: tuple[str, ...]) -> None:
        """``mergePatchIntoOriginal``: merge each list named by ``$setElementOrder/<field>``, and order it."""
        for key in [key for key in patch if key.startswith(_SET_ELEMENT_ORDER)]:
            order = patch.pop(key)
            if not isinstance(order, list):
                raise _bad_arg_type("[]interface {}", order)
            prefix, slash, field = key.partition("/")
            if not slash or prefix != _SET_ELEMENT_ORDER:
                raise _bad_request(_ERR_SET_ELEMENT_ORDER)
            found_original, found_patch = field in original, field in patch
            original_list: list[Any] = []
            patch_list: list[Any] = []
            if found_original:
                if not isinstance(original[field], list):
                    raise _bad_arg_type("[]interface {}", original[field])
                original_list = original[field]
            if found_patch:
                if not isinstance(patch[field], list):
                    raise _bad_arg_type("[]interface {}", patch[field])
                patch_list = patch[field]
            merge, merge_key = self._strategy((*path, field))
            _validate_against_order(patch_list, order, merge_key)
            if found_original and not found_patch:
                merged = original_list
            elif found_patch and not found_original:
                merged, _ = _remove_directives(patch_list)
            elif found_original and found_patch:
                server_order = list(original_list)
                merged = (
                    self._merge_slice(original_list, patch_list, (*path, field), merge_key, False)
                    if merge
                    else patch_list
                )
                original_list = server_order
            else:
                continue
            if merge_key:
                patch_items, server_only = _partition_maps(merged, order, merge_key)
            else:
                patch_items, server_only = _partition_primitives(merged, order)
            kind = _slice_element_kind(original_list, patch_list)
            original[field] = _normalize_element_order(patch_items, server_only, order, original_list, merge_key, kind)
            patch.pop(field, None)

    def _merge_slice(
        self, original: list[Any], patch: list[Any], path: tuple[str, ...], merge_key: str, delete_list: bool
    ) -> list[Any]:
        if not original and not patch:
            return original
        kind = _slice_element_kind(original, patch)
        if kind != "map":
            if delete_list:
                doomed = {_go_key(item) for item in patch}
                return [item for item in original if _go_key(item) not in doomed]
            merged = _deduplicate_scalars([*original, *patch])
        else:
            if not merge_key:
                raise _unwrapped("cannot merge lists without merge key for type struct")
            original, patch = _merge_special_elements(original, patch, merge_key)
            merged = self._merge_plain_elements(original, patch, path, merge_key)
        if merge_key:
            patch_items, server_only = _partition_maps(merged, patch, merge_key)
        else:
            patch_items, server_only = _partition_primitives(merged, patch)
        return _normalize_element_order(patch_items, server_only, patch, original, merge_key, kind)

    def _merge_plain_elements(
        self, original: list[Any], patch: list[Any], path: tuple[str, ...], merge_key: str
    ) -> list[Any]:
        merged = list(original)
        for item in patch:
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            index = _find_by_key(merged, merge_key, item[merge_key])
            if index is None:
                merged.append(item)
            else:
                merged[index] = self.merge_map(merged[index], item, path)
        return merged


def _slice_element_kind(*slices: list[Any]) -> str:
    """``sliceElementType``: all elements share one type, not a list; "map" for objects else the Go type."""
    first: str | None = None
    for items in slices:
        for item in items:
            current = _go_type(item)
            if first is None:
                if current == "[]interface {}":
                    raise PatchError(422, "Invalid", _GENERIC_422)  # ErrNoListOfLists
                if current == "<nil>":  # reflect.TypeOf(nil).Kind() panics upstream; the server answers 500
                    raise _unwrapped("runtime error: invalid memory address or nil pointer dereference")
                first = current
            elif current != first:
                raise _unwrapped(f"list element types are not identical: {_go_v(list(slices))}")
    if first is None:
        raise _unwrapped("no elements in any of the given slices")
    return "map" if first == "map[string]interface {}" else first


def _deduplicate_scalars(items: list[Any]) -> list[Any]:
    """``deduplicateScalars``: its swap-with-last algorithm, so the pre-normalisation order matches."""
    result = list(items)
    length = len(result) - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _go_equal(result[i], result[j]):
                result[j] = result[length]
                result = result[:length]
                length -= 1
                j -= 1
            j += 1
        i += 1
    return result


def _find_by_key(items: list[Any], key: str, value: Any) -> int | None:
    """``findMapInSliceBasedOnKeyValue``."""
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise _unwrapped(f"value for key {index} is not a map")
        if key in item and _go_equal(item[key], value):
            return index
    return None


def _merge_special_elements(original: list[Any], patch: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    """``mergeSliceWithSpecialElements``: ``$patch: delete`` removes by key, ``$patch: replace`` replaces."""
    plain: list[Any] = []
    replace = False
    remaining = list(original)
    for item in patch:
        if _DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            while (index := _find_by_key(remaining, merge_key, item[merge_key])) is not None:
                del remaining[index]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise _unwrapped("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_patch_type(directive, item)
    if replace:
        return plain, []
    return remaining, plain


def _partition_primitives(items: list[Any], by: list[Any]) -> tuple[list[Any], list[Any]]:
    wanted = {_go_key(item) for item in by}
    in_patch = [item for item in items if _go_key(item) in wanted]
    server_only = [item for item in items if _go_key(item) not in wanted]
    return in_patch, server_only


def _partition_maps(items: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    in_patch: list[Any] = []
    server_only: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type("map[string]interface {}", item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        (in_patch if _find_by_key(by, merge_key, item[merge_key]) is not None else server_only).append(item)
    return in_patch, server_only


def _index(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    """``index``: position of ``value`` in ``items`` by merge key (maps) or by value (scalars), or -1."""

    def identity(item: Any) -> Any:
        if kind == "map":
            return item.get(merge_key) if isinstance(item, dict) else None
        return item

    wanted = identity(value)
    for position, item in enumerate(items):
        if _go_equal(identity(item), wanted):
            return position
    return -1


def _validate_against_order(patch_list: list[Any], order: list[Any], merge_key: str) -> None:
    """``validatePatchWithSetOrderList``: the patch's items appear in ``$setElementOrder``, in order."""
    if not order or not patch_list:
        return
    plain = patch_list
    if merge_key:
        for item in patch_list:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
        plain = [item for item in patch_list if item.get(_DIRECTIVE) != "delete"]
    patch_index = order_index = 0
    while patch_index < len(plain) and order_index < len(order):
        item = plain[patch_index]
        if isinstance(item, dict) and _DIRECTIVE in item:
            patch_index += 1
            continue
        if merge_key:
            for candidate in (item, order[order_index]):
                if not isinstance(candidate, dict):
                    raise _bad_arg_type("map[string]interface {}", candidate)
                if merge_key not in candidate:
                    raise _no_merge_key(candidate, merge_key)
            equal = _go_equal(item[merge_key], order[order_index][merge_key])
        else:
            equal = _go_equal(item, order[order_index])
        if equal:
            patch_index += 1
        order_index += 1
    if patch_index < len(plain) and order_index >= len(order):
        raise _unwrapped(
            f"the order in patch list:\n{_go_v(patch_list)}\n doesn't match {_SET_ELEMENT_ORDER} list:\n{_go_v(order)}"
        )


def _normalize_slice_order(items: list[Any], order: list[Any], merge_key: str, kind: str) -> list[Any]:
    """``normalizeSliceOrder``: stable sort by position in ``order``; deletions go last.

    Go's ``sort.SliceStable`` is an insertion sort for up to 20 items; its comparator says "less" whenever an
    item is missing from ``order``, and the insertion sort below reproduces what that does.
    """
    doomed: list[Any] = []
    if kind == "map":
        for item in [*items, *order]:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
        doomed = [item for item in items if item.get(_DIRECTIVE) == "delete"]
        items = [item for item in items if item.get(_DIRECTIVE) != "delete"]

    def less(left: Any, right: Any) -> bool:
        left_index = _index(order, left, merge_key, kind)
        if left_index >= 0:
            right_index = _index(order, right, merge_key, kind)
            if right_index >= 0:
                return left_index < right_index
        return True

    result = list(items)
    for i in range(1, len(result)):
        j = i
        while j > 0 and less(result[j], result[j - 1]):
            result[j], result[j - 1] = result[j - 1], result[j]
            j -= 1
    return result + doomed


def _normalize_element_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    """``normalizeElementOrder`` + ``mergeSortedSlice``: patch items in patch order, server-only items in live
    order, interleaved by their positions in the live list."""
    patch_items = _normalize_slice_order(patch_items, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    merged: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if i >= len(server_only):
            merged.append(patch_items[j])
            j += 1
        elif j >= len(patch_items):
            merged.append(server_only[i])
            i += 1
        else:
            left_index = _index(server_order, server_only[i], merge_key, kind)
            right_index = _index(server_order, patch_items[j], merge_key, kind)
            if left_index >= 0 and right_index >= 0 and left_index < right_index:
                merged.append(server_only[i])
                i += 1
            else:
                merged.append(patch_items[j])
                j += 1
    return merged


def strategic_merge_patch(obj: Mapping[str, Any], patch: Any, list_semantics: ListSemanticsFn) -> dict[str, Any]:
    """Apply a strategic merge patch to a built-in object (apimachinery v0.36 semantics).

    Lists whose semantics are ``map`` merge by their first key, ``set`` lists merge as de-duplicated unions,
    ``atomic`` lists are replaced. Supported directives: ``$patch: replace|delete`` in maps and list items,
    ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>`` (honoured).
    Custom resources do not accept this patch type (the server answers :func:`unsupported_media_type`).
    Values taken whole (a field the object lacks, or of another type) lose their null members and any map
    holding ``$patch`` (``discardNullValuesFromPatch``, ``removeDirectives``); a delete list for a field the
    object lacks changes nothing, and one for an atomic list still deletes from it. Upstream quirk kept: a
    ``null`` under a delete-list key deletes the field. Directive keys left in merged values, which the typed
    decoder would ignore, are dropped from the result.
    """
    if patch is None:  # JSON null decodes into an empty map: nothing to do
        return copy.deepcopy(dict(obj))
    if not isinstance(patch, dict):
        raise _bad_request(
            f"json: cannot unmarshal {go_json_kind(patch)} into Go value of type map[string]interface {{}}"
        )
    merged = _StrategicMerge(list_semantics).merge_map(copy.deepcopy(dict(obj)), copy.deepcopy(patch), ())
    result = _strip_directives(merged)
    assert isinstance(result, dict)
    return result


# ------------------------------------------------------------------------------------------------------------
# Server-side apply: field sets.

# A path element: ("f", field), ("k", canonical JSON of the key fields), ("v", canonical JSON of a set value).
PathElement = tuple[str, str]
FieldPath = tuple[PathElement, ...]

_MISSING: Final = object()

# stripmeta.go: never part of anyone's managed fields.
_STRIPPED: Final[frozenset[FieldPath]] = frozenset(
    {(("f", "apiVersion"),), (("f", "kind"),), (("f", "metadata"),)}
    | {
        (("f", "metadata"), ("f", name))
        for name in (
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        )
    }
)


def _canonical(value: Any) -> str:
    """Canonical compact JSON for key and set values; integral floats read as integers (SMD equality)."""

    def normal(item: Any) -> Any:
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, dict):
            return {key: normal(element) for key, element in item.items()}
        if isinstance(item, list):
            return [normal(element) for element in item]
        return item

    return json.dumps(normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _typed_failure(what: str, path: str, detail: str) -> PatchError:
    """The structured-merge-diff conversion errors the apiserver passes on unwrapped (500)."""
    return _unwrapped(f"failed to create typed {what} object: {path}: {detail}")


def _path_string(path: FieldPath) -> str:
    """``fieldpath.Path.String``: ``.spec.containers[name="c"].image``, ``.finalizers[="x"]``."""

    def scalar(value: Any) -> str:
        if isinstance(value, str):
            return json.dumps(value, ensure_ascii=False)
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "null"
        return str(value)

    parts = []
    for kind, text in path:
        if kind == "f":
            parts.append("." + text)
        elif kind == "k":
            fields = json.loads(text)
            parts.append("[" + ",".join(f"{name}={scalar(fields[name])}" for name in sorted(fields)) + "]")
        elif kind == "i":
            parts.append(f"[{text}]")
        else:
            parts.append(f"[={scalar(json.loads(text))}]")
    return "".join(parts)


class _Walker:
    """Field-set, merge, compare and removal walks over JSON objects, driven by the list semantics."""

    def __init__(self, list_semantics: ListSemanticsFn) -> None:
        self._semantics = list_semantics

    def list_semantics(self, names: tuple[str, ...]) -> ListSemantics:
        return self._semantics(names)

    def element(self, item: Any, semantics: ListSemantics, index: int, path: FieldPath, what: str) -> PathElement:
        """The path element naming a list item (``listItemToPathElement``)."""
        if semantics.kind == "set":
            if isinstance(item, (dict, list)):
                raise _typed_failure(what, _path_string(path), f"element {index}: set items must be scalars")
            return ("v", _canonical(item))
        if not isinstance(item, dict):
            raise _typed_failure(what, _path_string(path), f"element {index}: associative list items must be maps")
        key: dict[str, Any] = {}
        for name in semantics.keys:
            if name not in item:
                raise _typed_failure(
                    what,
                    _path_string(path),
                    f"element {index}: associative list with keys has an element that omits key field "
                    f'"{name}" (and doesn\'t have default value)',
                )
            key[name] = item[name]
        return ("k", _canonical(key))

    def index_items(
        self, items: list[Any], semantics: ListSemantics, path: FieldPath, what: str, allow_duplicates: bool
    ) -> tuple[list[PathElement], dict[PathElement, Any]]:
        order: list[PathElement] = []
        observed: dict[PathElement, Any] = {}
        for index, item in enumerate(items):
            element = self.element(item, semantics, index, path, what)
            if element in observed:
                if not allow_duplicates:
                    raise _typed_failure(
                        what, _path_string(path), f"duplicate entries for key {_path_string((element,))}"
                    )
                continue
            observed[element] = item
            order.append(element)
        return order, observed

    # ---- ToFieldSet

    def field_set(self, value: Any, live: Any = _MISSING) -> set[FieldPath]:
        """``ToFieldSet`` of an applied configuration: leaves, list items (as members) and set values.

        A ``null`` where ``live`` holds a non-empty map or list is not owned: upstream's walker treats it as
        an absent map or list there.
        """
        owned: set[FieldPath] = set()
        self._collect(value, live, (), (), owned)
        return owned

    def _collect(self, value: Any, live: Any, names: tuple[str, ...], path: FieldPath, owned: set[FieldPath]) -> None:
        if isinstance(value, dict):
            live_map = live if isinstance(live, dict) else {}
            for key, item in value.items():
                self._collect(item, live_map.get(key, _MISSING), (*names, key), (*path, ("f", key)), owned)
        elif isinstance(value, list):
            semantics = self.list_semantics(names)
            if semantics.kind == "atomic":
                owned.add(path)
                return
            order, observed = self.index_items(value, semantics, path, "patch", allow_duplicates=False)
            live_items: dict[PathElement, Any] = {}
            if isinstance(live, list):
                _, live_items = self.index_items(live, semantics, path, "live", allow_duplicates=True)
            for element in order:
                child = (*path, element)
                if semantics.kind == "map":
                    self._collect(observed[element], live_items.get(element, _MISSING), names, child, owned)
                owned.add(child)
        elif value is not None or not (isinstance(live, (dict, list)) and live):
            owned.add(path)

    # ---- Merge (typed/merge.go): config wins on leaves, maps and associative lists merge.

    def merge(self, live: Any, config: Any, names: tuple[str, ...] = (), path: FieldPath = ()) -> Any:
        if config is _MISSING:
            return copy.deepcopy(live)
        if live is _MISSING:
            return copy.deepcopy(config)
        if config is None and isinstance(live, (dict, list)) and live:
            return copy.deepcopy(live)  # null on a container merges nothing into it
        if isinstance(live, dict) and isinstance(config, dict):
            if not live and not config:
                return {}
            out = {
                key: self.merge(item, config.get(key, _MISSING), (*names, key), (*path, ("f", key)))
                for key, item in live.items()
            }
            for key, item in config.items():
                if key not in live:
                    out[key] = copy.deepcopy(item)
            return out
        if isinstance(live, list) and isinstance(config, list):
            semantics = self.list_semantics(names)
            if semantics.kind == "atomic" or (not live and not config):
                return copy.deepcopy(config)
            return self._merge_items(live, config, names, path, semantics)
        return copy.deepcopy(config)

    def _merge_items(
        self,
        live: list[Any],
        config: list[Any],
        names: tuple[str, ...],
        path: FieldPath,
        semantics: ListSemantics,
    ) -> list[Any]:
        """``mergingWalker.visitListItems``: live order, with shared items following the config's order."""
        rhs_order, rhs = self.index_items(config, semantics, path, "patch", allow_duplicates=False)
        lhs_order, lhs = self.index_items(live, semantics, path, "live", allow_duplicates=True)
        shared = [element for element in rhs_order if element in lhs]
        next_shared = shared.pop(0) if shared else None
        out: list[Any] = []
        done: set[PathElement] = set()

        def merged(element: PathElement) -> Any:
            value = self.merge(lhs.get(element, _MISSING), rhs.get(element, _MISSING), names, (*path, element))
            return value

        left = right = 0
        while left < len(lhs_order) or right < len(rhs_order):
            if left < len(lhs_order) and right < len(rhs_order):
                element = lhs_order[left]
                if element == rhs_order[right]:
                    done.add(element)
                    out.append(merged(element))
                    left += 1
                    right += 1
                    next_shared = shared.pop(0) if shared else None
                    continue
                if element in rhs and next_shared is not None and next_shared != element:
                    left += 1
                    continue
            if left < len(lhs_order):
                element = lhs_order[left]
                if element not in rhs:
                    out.append(merged(element))
                    left += 1
                    continue
                if element in done:
                    left += 1
                    continue
            if right < len(rhs_order):
                element = rhs_order[right]
                done.add(element)
                out.append(merged(element))
                right += 1
                if next_shared is not None and next_shared == element:
                    next_shared = shared.pop(0) if shared else None
        return out

    # ---- Compare (typed/compare.go): leaf paths added, modified, removed.

    def compare(self, old: Any, new: Any) -> tuple[set[FieldPath], set[FieldPath], set[FieldPath]]:
        added: set[FieldPath] = set()
        modified: set[FieldPath] = set()
        removed: set[FieldPath] = set()
        self._compare(old, new, (), (), added, modified, removed)
        return added, modified, removed

    def _compare(
        self,
        old: Any,
        new: Any,
        names: tuple[str, ...],
        path: FieldPath,
        added: set[FieldPath],
        modified: set[FieldPath],
        removed: set[FieldPath],
    ) -> None:
        def container(value: Any) -> bool:
            return isinstance(value, (dict, list)) and bool(value)

        if (
            old is not _MISSING
            and new is not _MISSING
            and _go_type(old) != _go_type(new)
            and (container(old) or container(new))
        ):
            modified.add(path)
            if container(old):
                self._compare(old, _MISSING, names, path, added, modified, removed)
            if container(new):
                self._compare(_MISSING, new, names, path, added, modified, removed)
            return
        sample = new if new is not _MISSING else old
        if isinstance(sample, dict) and (container(old) or container(new)):
            old_map = old if isinstance(old, dict) else {}
            new_map = new if isinstance(new, dict) else {}
            for key in dict.fromkeys([*old_map, *new_map]):
                self._compare(
                    old_map.get(key, _MISSING),
                    new_map.get(key, _MISSING),
                    (*names, key),
                    (*path, ("f", key)),
                    added,
                    modified,
                    removed,
                )
            return
        if isinstance(sample, list) and (container(old) or container(new)):
            semantics = self.list_semantics(names)
            if semantics.kind != "atomic":
                _, old_items = self.index_items(old if isinstance(old, list) else [], semantics, path, "live", True)
                _, new_items = self.index_items(new if isinstance(new, list) else [], semantics, path, "live", True)
                for element in dict.fromkeys([*old_items, *new_items]):
                    self._compare(
                        old_items.get(element, _MISSING),
                        new_items.get(element, _MISSING),
                        names,
                        (*path, element),
                        added,
                        modified,
                        removed,
                    )
                return
        if old is _MISSING:
            added.add(path)
        elif new is _MISSING:
            removed.add(path)
        elif not _json_equal(old, new):
            modified.add(path)

    # ---- Removal (typed/remove.go) of owned paths the manager stopped applying.

    def remove(self, value: Any, path: FieldPath, names: tuple[str, ...] = ()) -> bool:
        """Remove ``path`` from ``value`` in place; True when something was removed."""
        if not path:
            return False
        head, rest = path[0], path[1:]
        if head[0] == "f":
            if not isinstance(value, dict) or head[1] not in value:
                return False
            if not rest:
                del value[head[1]]
                return True
            child = value[head[1]]
            removed = self.remove(child, rest, (*names, head[1]))
            if removed and isinstance(child, (dict, list)) and not child:
                del value[head[1]]
            return removed
        if not isinstance(value, list):
            return False
        semantics = self.list_semantics(names)
        for index, item in enumerate(value):
            try:
                element = self.element(item, semantics, index, (), "live")
            except PatchError:
                continue
            if element != head:
                continue
            if not rest:
                del value[index]
                return True
            return self.remove(item, rest, names)
        return False


def _json_equal(left: Any, right: Any) -> bool:
    """structured-merge-diff value equality: numbers by value, booleans only with booleans."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_json_equal(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_json_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, (dict, list)) or isinstance(right, (dict, list)):
        return False
    return bool(left == right) and (left is None) == (right is None)


# ------------------------------------------------------------------------------------------------------------
# Server-side apply: FieldsV1 encoding and managedFields entries.


def _element_sort_key(element: PathElement) -> tuple[int, Any]:
    """``PathElement.Compare``: field names before keys before values; within a kind, by value."""
    kind, text = element
    if kind == "f":
        return (0, (0, text))
    if kind == "i":
        return (3, (0, int(text) if text.isdigit() else text))
    parsed = json.loads(text)
    if kind == "k":
        return (1, tuple((name, _value_sort_key(parsed[name])) for name in sorted(parsed)))
    return (2, _value_sort_key(parsed))


def _value_sort_key(value: Any) -> tuple[int, Any]:
    """A total order over scalars: null, bools, numbers, strings, then anything else by its JSON text."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (int, float)):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    return (4, _canonical(value))


class _Trie:
    """A field set as ``fieldpath.Set``: members and children per path element."""

    def __init__(self) -> None:
        self.member = False
        self.children: dict[PathElement, _Trie] = {}

    @classmethod
    def of(cls, paths: Iterable[FieldPath]) -> _Trie:
        root = cls()
        for path in paths:
            node = root
            for element in path:
                node = node.children.setdefault(element, cls())
            node.member = True
        return root

    def to_fields_v1(self) -> dict[str, Any]:
        """``Set.ToJSON``: ``"."`` when a path is both a member and has children, then elements in order."""
        out: dict[str, Any] = {}
        for element in sorted(self.children, key=_element_sort_key):
            child = self.children[element]
            kind, text = element
            name = f"{kind}:{text}"
            body = child.to_fields_v1()
            if child.member and child.children:
                body = {".": {}, **body}
            out[name] = body
        return out

    def iterate(self, prefix: FieldPath = ()) -> Iterator[FieldPath]:
        """``Set.Iterate``: at each level the members in order, then the children in order."""
        ordered = sorted(self.children, key=_element_sort_key)
        for element in ordered:
            if self.children[element].member:
                yield (*prefix, element)
        for element in ordered:
            yield from self.children[element].iterate((*prefix, element))


def _decode_fields_v1(fields: Any, prefix: FieldPath = ()) -> set[FieldPath]:
    """``SetFromValue`` over a FieldsV1 object."""
    if not isinstance(fields, dict):
        raise _unwrapped("failed to decode managed fields: FieldsV1 must be an object")
    paths: set[FieldPath] = set()
    for key, body in fields.items():
        if key == ".":
            paths.add(prefix)
            continue
        kind, colon, text = key.partition(":")
        if not colon or kind not in ("f", "k", "v", "i"):
            raise _unwrapped(f"failed to decode managed fields: unexpected path element {key!r}")
        if kind in ("f", "i"):  # list indices ("i:") never match a keyed or set item here
            element: PathElement = (kind, text)
        else:
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as error:
                raise _unwrapped(f"failed to decode managed fields: {error}") from error
            element = (kind, _canonical(parsed))
        child = (*prefix, element)
        if isinstance(body, dict) and body:
            paths |= _decode_fields_v1(body, child)
        else:
            paths.add(child)
    return paths


@dataclass
class _Manager:
    """One managedFields entry: its identity, the entry as stored and its decoded field set."""

    entry: dict[str, Any]
    fields: set[FieldPath]
    original: frozenset[FieldPath]


def _identity(entry: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """``BuildManagerIdentifier``: manager, operation, subresource, and apiVersion for updaters only."""
    operation = str(entry.get("operation", ""))
    version = "" if operation == "Apply" else str(entry.get("apiVersion", ""))
    return (str(entry.get("manager", "")), operation, str(entry.get("subresource", "") or ""), version)


def _print_manager(identity: tuple[str, str, str, str]) -> str:
    """``printManager`` of a manager identifier: quoted name, subresource, and for updaters the version.

    The identifier never holds a time (``BuildManagerIdentifier`` drops it), so none is printed.
    """
    manager, operation, subresource, version = identity
    text = json.dumps(manager, ensure_ascii=False)
    if subresource:
        text += f" with subresource {json.dumps(subresource, ensure_ascii=False)}"
    if operation == "Update":
        text += f" using {version}"
    return text


def _conflict_error(conflicts: Mapping[tuple[str, str, str, str], set[FieldPath]]) -> PatchError:
    """``NewConflictError``: 409 with one FieldManagerConflict cause per field."""
    listed: list[tuple[str, FieldPath]] = []
    for identity, paths in conflicts.items():
        name = _print_manager(identity)
        listed.extend((name, path) for path in _Trie.of(paths).iterate())
    causes = [
        {"reason": "FieldManagerConflict", "message": f"conflict with {name}", "field": _path_string(path)}
        for name, path in listed
    ]
    if len(listed) == 1:
        name, path = listed[0]
        message = f"Apply failed with 1 conflict: conflict with {name}: {_path_string(path)}"
    else:
        by_manager: dict[str, list[FieldPath]] = {}
        for name, path in listed:
            by_manager.setdefault(name, []).append(path)
        lines: list[str] = []
        for name in sorted(by_manager):
            lines.append(f"conflicts with {name}:")
            lines.extend(f"- {_path_string(path)}" for path in by_manager[name])
        message = f"Apply failed with {len(listed)} conflicts: " + "\n".join(lines)
    return PatchError(409, "Conflict", message, causes)


def _seconds(entry: Mapping[str, Any]) -> int:
    when = entry.get("time")
    if not isinstance(when, str) or not when:
        return 0
    try:
        return int(datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def _sort_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``sortEncodedManagedFields``: operation, time (seconds), manager, apiVersion, subresource."""
    return sorted(
        entries,
        key=lambda entry: (
            str(entry.get("operation", "")),
            _seconds(entry),
            str(entry.get("manager", "")),
            str(entry.get("apiVersion", "")),
            str(entry.get("subresource", "") or ""),
        ),
    )


def _decode_managers(entries: Any) -> dict[tuple[str, str, str, str], _Manager]:
    managers: dict[tuple[str, str, str, str], _Manager] = {}
    if entries is None:
        return managers
    if not isinstance(entries, list):
        raise _unwrapped("failed to decode managed fields: managedFields must be a list")
    for entry in entries:
        if not isinstance(entry, dict):
            raise _unwrapped("failed to decode managed fields: an entry is not an object")
        fields = _decode_fields_v1(entry.get("fieldsV1") or {})
        identity = _identity(entry)
        if identity in managers:
            managers[identity].fields |= fields
        else:
            managers[identity] = _Manager(dict(entry), set(fields), frozenset(fields))
    return managers


def _drop_paths(value: dict[str, Any], prefixes: Iterable[tuple[str, ...]]) -> None:
    """Remove the subtrees named by field-name prefixes (the strategy's reset fields) in place."""
    for prefix in prefixes:
        node: Any = value
        for name in prefix[:-1]:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict) and prefix:
            node.pop(prefix[-1], None)


def server_side_apply(
    live: Mapping[str, Any] | None,
    applied: Mapping[str, Any],
    manager: str,
    list_semantics: ListSemanticsFn,
    force: bool,
    subresource: str | None,
    now: str,
    *,
    reset_fields: Iterable[tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Server-side apply of ``applied`` by field manager ``manager``: the merged object, new managedFields.

    Semantics of structured-merge-diff: maps merge recursively; ``map`` lists merge by their keys (live order,
    shared items in the configuration's order, new items after); ``set`` lists form a union; atomic lists and
    scalars are replaced. Fields this manager owned after its previous apply (same manager, operation and
    subresource) and no longer applies are removed unless another manager owns them. A field another manager
    owns that this apply adds or changes is a 409 conflict unless ``force``, which takes it over. The
    manager's entry is ``operation: Apply`` in FieldsV1 form; its ``time`` becomes ``now`` only when the
    object changed (a no-op apply does not move it).

    ``reset_fields`` are the field-name prefixes the endpoint's strategy resets, which the configuration can
    neither set nor own: by default ``spec`` and ``metadata`` for ``subresource="status"`` (the custom
    resource status strategy) and nothing for the main resource (pass ``[("status",)]`` there for kinds with a
    status subresource).

    Known simplifications: non-apply writes (create, update, patch) are not tracked, so only existing
    managedFields entries own fields; without a schema, maps are never atomic and a ``null`` in the
    configuration counts as a scalar (it sets the field to null and owns it) unless the live value there is a
    non-empty map or list, which it leaves alone. ``now`` is an RFC 3339 timestamp.
    """
    if not manager:
        message = "is required for apply patch"
        raise PatchError(
            422,
            "Invalid",
            f'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: {message}',
            [
                {
                    "reason": "FieldValueRequired",
                    "message": f"Required value: {message}",
                    "field": "fieldManager",
                }
            ],
        )
    if not isinstance(applied, Mapping):
        raise _bad_request(
            f"error decoding YAML: json: cannot unmarshal {go_json_kind(applied)} into Go value of type "
            "map[string]interface {}"
        )
    config = copy.deepcopy(dict(applied))
    metadata = config.get("metadata")
    if isinstance(metadata, dict) and metadata.get("managedFields") is not None:
        raise _bad_request("metadata.managedFields must be nil")
    if live is not None and config.get("apiVersion") != live.get("apiVersion"):
        raise _bad_request(
            "Incorrect version specified in apply patch. "
            f"Specified patch version: {config.get('apiVersion')}, expected: {live.get('apiVersion')}"
        )
    if reset_fields is None:
        reset_fields = [("spec",), ("metadata",)] if subresource == "status" else []
    _drop_paths(config, reset_fields)

    body = copy.deepcopy(dict(live)) if live is not None else {}
    live_metadata = body.get("metadata")
    entries = live_metadata.pop("managedFields", None) if isinstance(live_metadata, dict) else None
    managers = _decode_managers(entries)

    walker = _Walker(list_semantics)
    me = (manager, "Apply", subresource or "", "")
    previous = managers.get(me)
    last = previous.fields if previous is not None else set()
    applied_set = {path for path in walker.field_set(config, body) if path not in _STRIPPED}
    merged = walker.merge(body, config)
    assert isinstance(merged, dict)

    others = [identity for identity in managers if identity != me]
    owned_by_others: set[FieldPath] = set().union(*(managers[identity].fields for identity in others))
    keep = applied_set | owned_by_others
    # prune: what this manager applied last time, no longer applies and nobody else owns. Removing an item
    # removes what is inside it (RemoveItems), so only the outermost such paths are removed.
    doomed = last - keep
    for path in sorted(doomed, key=len):
        if not any(path[:cut] in doomed for cut in range(1, len(path))):
            walker.remove(merged, path)

    added, modified, removed = walker.compare(body, merged)
    changes = added | modified
    conflicts = {
        identity: managers[identity].fields & changes for identity in others if managers[identity].fields & changes
    }
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for identity in others:
        managers[identity].fields -= changes if identity in conflicts else set()
        managers[identity].fields -= removed

    changed = not _json_equal(body, merged)
    entry = _entry(me, str(config.get("apiVersion", "")), changed, now, previous)
    managers[me] = _Manager(entry, applied_set, frozenset())
    _store_managers(merged, managers, me, previous)
    return merged


def _entry(
    me: tuple[str, str, str, str], api_version: str, changed: bool, now: str, previous: _Manager | None
) -> dict[str, Any]:
    """The managedFields entry of the writing manager `me` (manager, operation, subresource): its `time` is now
    when the write changed the object, else the time it had (`managedfieldsupdater.go`)."""
    manager, operation, subresource, _ = me
    entry: dict[str, Any] = {"manager": manager, "operation": operation, "apiVersion": api_version}
    if changed:
        entry["time"] = now
    elif previous is not None and previous.entry.get("time"):
        entry["time"] = previous.entry["time"]
    entry["fieldsType"] = "FieldsV1"
    if subresource:
        entry["subresource"] = subresource
    return entry


def _store_managers(
    obj: dict[str, Any],
    managers: Mapping[tuple[str, str, str, str], _Manager],
    me: tuple[str, str, str, str],
    previous: _Manager | None,
) -> None:
    """Encode `managers` into `obj`'s managedFields: entries that own nothing are dropped, a field set that did
    not change keeps its stored encoding, the entries sorted as `sortEncodedManagedFields` sorts them."""
    encoded: list[dict[str, Any]] = []
    for identity, state in managers.items():
        if not state.fields:
            continue
        stored = dict(state.entry)
        if identity == me and previous is not None and previous.original == state.fields:
            stored["fieldsV1"] = previous.entry.get("fieldsV1")  # an unchanged set keeps its stored encoding
        elif identity == me or state.fields != state.original:
            stored["fieldsV1"] = _Trie.of(state.fields).to_fields_v1()
        if identity == me and "subresource" in stored:
            stored["subresource"] = stored.pop("subresource")
        encoded.append(stored)
    metadata_out = obj.setdefault("metadata", {})
    if encoded:
        metadata_out["managedFields"] = _sort_entries(encoded)
    else:
        metadata_out.pop("managedFields", None)
