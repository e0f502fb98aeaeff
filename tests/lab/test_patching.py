"""The four patch kinds against their upstream behaviour: evanphx/json-patch v4 (merge and JSON patch),
apimachinery strategicpatch (several cases restate upstream's own ``patch_test.go`` expectations), and
structured-merge-diff server-side apply. Pure functions: no server here."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from api_answers import expect_answer

from airflow_provider_dispatch_lab.apiserver.registry.patching import (
    ATOMIC,
    ListSemantics,
    PatchError,
    json_patch,
    merge_patch,
    server_side_apply,
    strategic_merge_patch,
    unsupported_media_type,
)

GENERIC_422 = "the server rejected our request due to an error in our request"

# The list semantics of the core and Kueue fields these tests touch (the schema module owns the real tables).
LISTS: dict[tuple[str, ...], ListSemantics] = {
    ("metadata", "finalizers"): ListSemantics("set"),
    ("metadata", "ownerReferences"): ListSemantics("map", ("uid",)),
    ("spec", "containers"): ListSemantics("map", ("name",)),
    ("spec", "containers", "env"): ListSemantics("map", ("name",)),
    ("spec", "containers", "ports"): ListSemantics("map", ("containerPort", "protocol")),
    ("spec", "volumes"): ListSemantics("map", ("name",)),
    ("spec", "tolerations"): ATOMIC,
    ("spec", "ints"): ListSemantics("set"),
    ("spec", "lists"): ListSemantics("set"),
    ("status", "conditions"): ListSemantics("map", ("type",)),
    ("status", "admissionChecks"): ListSemantics("map", ("name",)),
}


def semantics(path: tuple[str, ...]) -> ListSemantics:
    return LISTS.get(path, ATOMIC)


def raises_patch_error(function: Any, *args: Any) -> PatchError:
    with pytest.raises(PatchError) as raised:
        function(*args)
    return raised.value


# ------------------------------------------------------------------------------------------------------------
# JSON merge patch


@pytest.mark.parametrize(
    ("obj", "patch", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": None}, {"b": 2}),  # null deletes
        ({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}, {"a": {"c": 2, "d": 3}}),  # objects merge
        ({"a": [1, 2]}, {"a": [3]}, {"a": [3]}),  # arrays replace
        (
            {},
            {"a": {"b": None, "c": {"d": None, "e": 1}}},
            {"a": {"c": {"e": 1}}},
        ),  # nulls pruned from new values
        ({}, {"a": [None, {"b": None}]}, {"a": [None, {}]}),  # array nulls stay, their objects are pruned
        (
            {"a": {"x": 1}},
            {"a": [{"b": None}]},
            {"a": [{"b": None}]},
        ),  # an object replaced by an array: unpruned
        ({"a": "s"}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),
        ({"a": 1}, {}, {"a": 1}),
        ({"a": None}, {"a": {"b": None}}, {"a": {}}),
    ],
)
def test_merge_patch(obj: dict[str, Any], patch: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy((obj, patch))
    assert merge_patch(obj, patch) == expected
    assert (obj, patch) == before


@pytest.mark.parametrize(
    ("patch", "code", "reason"),
    [(None, 400, "BadRequest"), ("x", 400, "BadRequest"), (3, 400, "BadRequest"), ([1], 422, "Invalid")],
)
def test_merge_patch_that_is_not_an_object(patch: Any, code: int, reason: str) -> None:
    error = raises_patch_error(merge_patch, {"a": 1}, patch)
    expect_answer(error, code, reason)
    if code == 400:
        assert error.message == "Invalid JSON Patch"


# ------------------------------------------------------------------------------------------------------------
# JSON patch


@pytest.mark.parametrize(
    ("obj", "ops", "expected"),
    [
        ({"a": 1}, [{"op": "replace", "path": "/a", "value": 2}], {"a": 2}),
        (
            {"a": [1, 3]},
            [{"op": "add", "path": "/a/1", "value": 2}, {"op": "add", "path": "/a/-", "value": 4}],
            {"a": [1, 2, 3, 4]},
        ),
        ({"a": {"b": 1}}, [{"op": "move", "from": "/a/b", "path": "/c"}], {"a": {}, "c": 1}),
        ({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": 1}, "c": {"b": 1}}),
        (
            {"a": 1, "m": {"resourceVersion": "7"}},
            [{"op": "test", "path": "/m/resourceVersion", "value": "7"}, {"op": "remove", "path": "/a"}],
            {"m": {"resourceVersion": "7"}},
        ),
        ({"m": {}}, [{"op": "test", "path": "/m/x", "value": None}], {"m": {}}),  # v4: null tests absence
        ({"m": {}}, [{"op": "add", "path": "/m/x"}], {"m": {"x": None}}),  # v4: no value adds null
        ({"a~b": {"c/d": 1}}, [{"op": "replace", "path": "/a~0b/c~1d", "value": 2}], {"a~b": {"c/d": 2}}),
        ({"a": 1}, [], {"a": 1}),
        ({"a": 1}, None, {"a": 1}),  # a null body decodes to an empty patch
    ],
)
def test_json_patch(obj: dict[str, Any], ops: Any, expected: dict[str, Any]) -> None:
    before = copy.deepcopy((obj, ops))
    assert json_patch(obj, ops) == expected
    assert (obj, ops) == before


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/a", "value": 2}],  # a failed test is 422, not 409
        [{"op": "test", "path": "/a", "value": True}],  # 1 is not true
        [{"op": "test", "path": "/missing/x", "value": None}],  # absence is testable only in an existing object
        [{"op": "test", "path": "/a", "value": None}],
        [{"op": "remove", "path": "/missing"}],
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/x/y", "value": 1}],
        [{"op": "frobnicate", "path": "/a"}],
        [{"op": "add", "value": 1}],
        [{"op": "add", "path": "", "value": {}}],  # the root is not addressable in v4
        [None],
        [
            {"op": "replace", "path": "/a", "value": 5},
            {"op": "test", "path": "/a", "value": 1},
        ],  # tests see earlier ops
    ],
)
def test_json_patch_failures_are_the_generic_422(ops: list[Any]) -> None:
    error = raises_patch_error(json_patch, {"a": 1}, ops)
    assert (error.code, error.reason, error.message, error.causes) == (422, "Invalid", GENERIC_422, None)


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ({"op": "add"}, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"),
        ("[]", "json: cannot unmarshal string into Go value of type jsonpatch.Patch"),
        (["add"], "json: cannot unmarshal string into Go value of type jsonpatch.Operation"),
        ([[]], "json: cannot unmarshal array into Go value of type jsonpatch.Operation"),
    ],
)
def test_json_patch_that_does_not_decode_is_400(ops: Any, message: str) -> None:
    error = raises_patch_error(json_patch, {"a": 1}, ops)
    assert (error.code, error.reason, error.message) == (400, "BadRequest", message)


# ------------------------------------------------------------------------------------------------------------
# Strategic merge patch

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"app": "x"}, "finalizers": ["a", "b"]},
    "spec": {
        "containers": [
            {
                "name": "main",
                "image": "img:1",
                "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
            },
            {"name": "side", "image": "side:1"},
        ],
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    result = copy.deepcopy(POD)
    node = result
    for name in path[:-1]:
        node = node[name]
    node[path[-1]] = value
    return result


def _without(path: tuple[str, ...]) -> dict[str, Any]:
    result = copy.deepcopy(POD)
    node = result
    for name in path[:-1]:
        node = node[name]
    del node[path[-1]]
    return result


MAIN = POD["spec"]["containers"][0]
SIDE = POD["spec"]["containers"][1]


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "side", "image": "side:2"}, {"name": "new", "image": "n:1"}]}},
            _with(
                ("spec", "containers"),
                [MAIN, {"name": "side", "image": "side:2"}, {"name": "new", "image": "n:1"}],
            ),
            id="containers merge by name; a new one follows the patch",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "main", "env": [{"name": "X", "value": "9"}]}]}},
            _with(
                ("spec", "containers"),
                [{**MAIN, "env": [{"name": "X", "value": "9"}, {"name": "Y", "value": "2"}]}, SIDE],
            ),
            id="env merges by name inside a container",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "main", "env": [{"name": "Y", "$patch": "delete"}]}]}},
            _with(("spec", "containers"), [{**MAIN, "env": [{"name": "X", "value": "1"}]}, SIDE]),
            id="$patch delete removes an env entry",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}},
            _with(("spec", "containers"), [MAIN]),
            id="$patch delete removes a container",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "only", "image": "o:1"}, {"$patch": "replace"}]}},
            _with(("spec", "containers"), [{"name": "only", "image": "o:1"}]),
            id="$patch replace replaces a merging list",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "k2", "operator": "Exists"}]}},
            _with(("spec", "tolerations"), [{"key": "k2", "operator": "Exists"}]),
            id="tolerations are atomic: replaced",
        ),
        pytest.param(
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "Initialized", "status": "True"},
                    ]
                }
            },
            _with(
                ("status", "conditions"),
                [
                    {"type": "Ready", "status": "True"},
                    {"type": "Initialized", "status": "True"},
                    {"type": "PodScheduled", "status": "True"},
                ],
            ),
            id="conditions merge by type; patch items keep the patch's order before later live items",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["c", "a"]}},
            _with(("metadata", "finalizers"), ["c", "a", "b"]),
            id="finalizers merge as a set in the patch's order",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "zzz"]}},
            _with(("metadata", "finalizers"), ["b"]),
            id="$deleteFromPrimitiveList removes finalizers",
        ),
        pytest.param(
            {"spec": {"$deleteFromPrimitiveList/absent": ["x"]}},
            POD,
            id="a delete list for a missing field adds nothing",
        ),
        pytest.param(
            {"metadata": {"labels": {"app": None, "tier": "web"}}},
            _with(("metadata", "labels"), {"tier": "web"}),
            id="null deletes a key",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "delete"}}},
            _with(("metadata", "labels"), {}),
            id="$patch delete empties a map",
        ),
        pytest.param(
            {"metadata": {"labels": {"$patch": "replace", "new": "1"}}},
            _with(("metadata", "labels"), {"new": "1"}),
            id="$patch replace replaces a map",
        ),
        pytest.param(
            {
                "spec": {
                    "$retainKeys": ["containers", "volumes"],
                    "volumes": [{"name": "data", "hostPath": {"path": "/x"}}],
                }
            },
            {
                **POD,
                "spec": {
                    "containers": POD["spec"]["containers"],
                    "volumes": [{"name": "data", "emptyDir": {}, "hostPath": {"path": "/x"}}],
                },
            },
            id="$retainKeys clears the fields it does not list",
        ),
        pytest.param(
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                    "containers": [{"name": "main", "image": "img:2"}],
                }
            },
            _with(("spec", "containers"), [SIDE, {**MAIN, "image": "img:2"}]),
            id="$setElementOrder reorders",
        ),
        pytest.param(
            {"spec": {"nodeSelector": {"zone": "a", "gone": None}}},
            _with(("spec", "nodeSelector"), {"zone": "a"}),
            id="a value taken whole loses its nulls",
        ),
        pytest.param(
            {
                "spec": {
                    "initContainers": [
                        {"name": "i", "$patch": "delete"},
                        {"name": "j", "env": [{"name": "E", "$patch": "delete"}]},
                    ]
                }
            },
            _with(("spec", "initContainers"), [{"name": "j", "env": []}]),
            id="a list taken whole loses the maps that carry $patch",
        ),
        pytest.param(None, POD, id="null patch"),
        pytest.param({}, POD, id="empty patch"),
    ],
)
def test_strategic_merge_patch(patch: Any, expected: dict[str, Any]) -> None:
    before = copy.deepcopy((POD, patch))
    assert strategic_merge_patch(POD, patch, semantics) == expected
    assert (POD, patch) == before


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [
        # Upstream patch_test.go: "preserve the order from the patch in a merging list 2".
        (
            [{"name": "1"}, {"name": "2", "value": "b"}, {"name": "3"}],
            {"containers": [{"name": "3", "value": "c"}, {"name": "1", "value": "a"}]},
            [{"name": "2", "value": "b"}, {"name": "3", "value": "c"}, {"name": "1", "value": "a"}],
        ),
        # "merge lists of maps" (three-way result): $setElementOrder places new and live items.
        (
            [{"name": "1", "other": "a"}, {"name": "2", "value": "2", "other": "b"}],
            {
                "$setElementOrder/containers": [{"name": "4"}, {"name": "1"}, {"name": "2"}, {"name": "3"}],
                "containers": [{"name": "4", "value": "4"}, {"name": "3", "value": "3"}],
            },
            [
                {"name": "4", "value": "4"},
                {"name": "1", "other": "a"},
                {"name": "2", "value": "2", "other": "b"},
                {"name": "3", "value": "3"},
            ],
        ),
        # "$setElementOrder contains item that is not present in the list to be merged".
        (
            [{"name": "1"}, {"name": "3"}],
            {
                "$setElementOrder/containers": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
                "containers": [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}],
            },
            [{"name": "3", "value": "3"}, {"name": "1", "value": "1"}],
        ),
        # "nested patch merge with empty list": a new item goes before the live-only one.
        (
            [{"name": "hello2"}],
            {
                "$setElementOrder/containers": [{"name": "hello"}, {"name": "doesntexist"}],
                "containers": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}],
            },
            [{"name": "hello"}, {"name": "hello2"}],
        ),
        # "delete all duplicate entries in a merging list".
        (
            [{"name": "1"}, {"name": "1"}, {"name": "2", "value": "a"}, {"name": "3"}, {"name": "3"}],
            {"containers": [{"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}]},
            [{"name": "2", "value": "a"}],
        ),
    ],
)
def test_strategic_merge_patch_list_order_matches_upstream_cases(
    original: list[Any], patch: dict[str, Any], expected: list[Any]
) -> None:
    assert strategic_merge_patch({"spec": {"containers": original}}, {"spec": patch}, semantics) == {
        "spec": {"containers": expected}
    }


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [
        ([1, 2], {"ints": [2, 3]}, [1, 2, 3]),  # "unique scalars when merging lists"
        (
            [1, 2, 3],
            {"ints": [3, 1, 2]},
            [3, 1, 2],
        ),  # "preserve the order from the patch in a merging int list"
        ([1, 2, 3], {"ints": [3, 1]}, [2, 3, 1]),
        (
            [1, 2, 3, 4],
            {"$setElementOrder/ints": [1, 2], "$deleteFromPrimitiveList/ints": [3]},
            [1, 2, 4],
        ),  # "delete items in lists of scalars"
        ([1, 2, 3, 3, 4], {"$setElementOrder/ints": [1, 2], "$deleteFromPrimitiveList/ints": [3]}, [1, 2, 4]),
        ([1, 3], {"$setElementOrder/ints": [3, 2, 1]}, [3, 1]),
        ([1, 2, 3], {"$deleteFromPrimitiveList/tolerations": [2], "tolerations": None}, None),
    ],
)
def test_strategic_merge_patch_scalar_lists_match_upstream_cases(
    original: list[Any], patch: dict[str, Any], expected: Any
) -> None:
    result = strategic_merge_patch({"spec": {"ints": original, "tolerations": [1, 2, 3]}}, {"spec": patch}, semantics)
    if expected is None:  # a delete list for an atomic list still deletes; the null then removes the field
        assert result == {"spec": {"ints": original}}
    else:
        assert result["spec"]["ints"] == expected


def test_strategic_merge_patch_delete_list_on_an_atomic_list_still_deletes() -> None:
    # Upstream: "$deleteFromPrimitiveList should delete item from a list without merge patch strategy".
    patched = strategic_merge_patch(
        {"spec": {"tolerations": [1, 2, 3]}},
        {"spec": {"$deleteFromPrimitiveList/tolerations": [2]}},
        semantics,
    )
    assert patched == {"spec": {"tolerations": [1, 3]}}


@pytest.mark.parametrize(
    ("patch", "code", "reason", "message"),
    [
        (
            {"spec": {"$retainKeys": ["volumes"], "containers": []}},
            400,
            "BadRequest",
            "invalid patch format of retainKeys",
        ),
        ({"spec": {"$retainKeys": "volumes"}}, 400, "BadRequest", "invalid patch format of retainKeys"),
        (
            {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}},
            400,
            "BadRequest",
            "invalid patch format of primitive list",
        ),
        (
            {"spec": {"$setElementOrderX/containers": []}},
            400,
            "BadRequest",
            "invalid patch format of setElementOrder list",
        ),
        (
            {"spec": {"containers": [{"image": "x"}]}},
            500,
            "",
            "map: map[image:x] does not contain declared merge key: name",
        ),
        (
            {"spec": {"containers": [{"name": "main", "$patch": "merge"}]}},
            500,
            "",
            "merging lists cannot yet be specified in the patch",
        ),
        (
            {"spec": {"containers": [{"name": "main", "$patch": "explode"}]}},
            500,
            "",
            "unknown patch type: explode in map: map[$patch:explode name:main]",
        ),
        (
            {"metadata": {"labels": {"$patch": "explode"}}},
            500,
            "",
            "unknown patch type: explode in map: map[$patch:explode]",
        ),
        ({"spec": {"lists": [[1]]}}, 422, "Invalid", GENERIC_422),  # lists of lists are not supported
        # a delete list of maps takes the map path, which an atomic list (no merge key) cannot take
        (
            {"spec": {"$deleteFromPrimitiveList/tolerations": [{"key": "k1"}]}},
            500,
            "",
            "cannot merge lists without merge key for type struct",
        ),
        (
            ["x"],
            400,
            "BadRequest",
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
    ],
)
def test_strategic_merge_patch_errors(patch: Any, code: int, reason: str, message: str) -> None:
    obj = _with(("spec", "lists"), [[0]])
    error = raises_patch_error(strategic_merge_patch, obj, patch, semantics)
    assert (error.code, error.reason, error.message) == (code, reason, message)


def test_strategic_merge_patch_set_element_order_must_agree_with_the_patch() -> None:
    # Upstream: "should check if order in $setElementOrder and patch list match".
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
            "containers": [{"name": "3"}, {"name": "1"}],
        }
    }
    obj = {"spec": {"containers": [{"name": "1"}, {"name": "3"}, {"name": "2"}]}}
    error = raises_patch_error(strategic_merge_patch, obj, patch, semantics)
    expect_answer(error, 500)
    assert "doesn't match $setElementOrder list" in error.message


# ------------------------------------------------------------------------------------------------------------
# Server-side apply

API = "kueue.x-k8s.io/v1beta1"
T0, T1, T2, T3, T4 = (f"2026-01-01T00:00:0{second}Z" for second in range(5))


def workload(checks: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "10",
            "labels": {"l": "1"},
        },
        "spec": {"queueName": "q"},
        "status": {"admissionChecks": checks, **status},
    }


def status_apply(*checks: dict[str, Any], **status: Any) -> dict[str, Any]:
    """What a Kueue-style controller applies to /status: identity plus the entries it owns."""
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "status": {"admissionChecks": list(checks), **status},
    }


def apply(
    live: dict[str, Any] | None, applied: dict[str, Any], manager: str, now: str, force: bool = False
) -> dict[str, Any]:
    return server_side_apply(live, applied, manager, semantics, force, "status", now)


def owned(obj: dict[str, Any]) -> dict[str, Any]:
    return {entry["manager"]: entry["fieldsV1"] for entry in obj["metadata"]["managedFields"]}


def check_fields(*names: str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """FieldsV1 of entries of status.admissionChecks owned with name, state and ``extra`` fields."""
    return {
        "f:status": {
            "f:admissionChecks": {
                f'k:{{"name":"{name}"}}': {
                    ".": {},
                    **{f"f:{field}": {} for field in sorted(("name", "state", *extra))},
                }
                for name in names
            }
        }
    }


LIVE = workload([{"name": "a", "state": "Pending"}, {"name": "b", "state": "Pending"}])


def test_apply_one_admission_check_entry_through_status() -> None:
    result = apply(LIVE, status_apply({"name": "a", "state": "Ready", "message": "ok"}), "acc-a", T1)
    assert result["status"]["admissionChecks"] == [
        {"name": "a", "state": "Ready", "message": "ok"},
        {"name": "b", "state": "Pending"},
    ]
    assert result["metadata"]["managedFields"] == [
        {
            "manager": "acc-a",
            "operation": "Apply",
            "apiVersion": API,
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": check_fields("a", extra=("message",)),
            "subresource": "status",
        }
    ]
    assert {key: value for key, value in result.items() if key != "status"} == {
        **{key: value for key, value in LIVE.items() if key != "status"},
        "metadata": {**LIVE["metadata"], "managedFields": result["metadata"]["managedFields"]},
    }


def test_two_managers_one_list_conflict_force_and_removal() -> None:
    first = apply(LIVE, status_apply({"name": "a", "state": "Ready"}), "acc-a", T1)
    second = apply(first, status_apply({"name": "b", "state": "Retry"}), "acc-b", T2)
    assert second["status"]["admissionChecks"] == [
        {"name": "a", "state": "Ready"},
        {"name": "b", "state": "Retry"},
    ]
    assert owned(second) == {"acc-a": check_fields("a"), "acc-b": check_fields("b")}

    # acc-b changing acc-a's entry conflicts, with the apiserver's message and causes
    error = raises_patch_error(
        apply,
        second,
        status_apply({"name": "b", "state": "Retry"}, {"name": "a", "state": "Rejected"}),
        "acc-b",
        T3,
    )
    expect_answer(error, 409, "Conflict")
    assert (
        error.message == 'Apply failed with 1 conflict: conflict with "acc-a" with subresource "status": '
        '.status.admissionChecks[name="a"].state'
    )
    assert error.causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "acc-a" with subresource "status"',
            "field": '.status.admissionChecks[name="a"].state',
        }
    ]

    # with force it takes the field over: acc-a keeps only what was not taken; shared items follow the
    # applied order (structured-merge-diff visitListItems)
    forced = apply(
        second,
        status_apply({"name": "b", "state": "Retry"}, {"name": "a", "state": "Rejected"}),
        "acc-b",
        T3,
        force=True,
    )
    assert forced["status"]["admissionChecks"] == [
        {"name": "b", "state": "Retry"},
        {"name": "a", "state": "Rejected"},
    ]
    a_only_name: dict[str, Any] = {"f:status": {"f:admissionChecks": {'k:{"name":"a"}': {".": {}, "f:name": {}}}}}
    assert owned(forced) == {"acc-a": a_only_name, "acc-b": check_fields("a", "b")}

    # acc-b stops applying entry b: nobody else owns it, so it is removed
    dropped = apply(forced, status_apply({"name": "a", "state": "Rejected"}), "acc-b", T4)
    assert dropped["status"]["admissionChecks"] == [{"name": "a", "state": "Rejected"}]
    assert owned(dropped) == {"acc-a": a_only_name, "acc-b": check_fields("a")}


def test_applying_an_equal_value_co_owns_without_conflict() -> None:
    first = apply(LIVE, status_apply({"name": "a", "state": "Ready"}), "acc-a", T1)
    shared = apply(first, status_apply({"name": "a", "state": "Ready"}), "acc-b", T2)
    assert shared["status"] == first["status"]
    assert owned(shared) == {"acc-a": check_fields("a"), "acc-b": check_fields("a")}
    # acc-a stopping does not remove what acc-b still owns
    left = apply(shared, status_apply(), "acc-a", T3)
    assert left["status"]["admissionChecks"] == first["status"]["admissionChecks"]
    assert owned(left) == {"acc-b": check_fields("a")}


def test_a_field_the_manager_stopped_applying_is_removed() -> None:
    first = apply(LIVE, status_apply({"name": "a", "state": "Retry", "message": "later"}), "acc-a", T1)
    second = apply(first, status_apply({"name": "a", "state": "Retry"}), "acc-a", T2)
    assert second["status"]["admissionChecks"] == [
        {"name": "a", "state": "Retry"},
        {"name": "b", "state": "Pending"},
    ]
    assert owned(second) == {"acc-a": check_fields("a")}
    assert second["metadata"]["managedFields"][0]["time"] == T2


def test_a_no_op_apply_changes_nothing() -> None:
    first = apply(LIVE, status_apply({"name": "a", "state": "Ready"}), "acc-a", T1)
    again = apply(first, status_apply({"name": "a", "state": "Ready"}), "acc-a", T2)
    assert again == first  # the time stays T1: managedFieldsUpdater moves it only on a change


def test_conditions_merge_by_type_and_the_main_resource_is_another_manager() -> None:
    live = workload([], conditions=[{"type": "QuotaReserved", "status": "True"}])
    applied = status_apply(conditions=[{"type": "Admitted", "status": "False"}])
    del applied["status"]["admissionChecks"]
    result = apply(live, applied, "kueue", T1)
    assert result["status"]["conditions"] == [
        {"type": "QuotaReserved", "status": "True"},
        {"type": "Admitted", "status": "False"},
    ]
    # the same manager through the main resource is a different identity (BuildManagerIdentifier)
    main = server_side_apply(
        result,
        {**applied, "metadata": {"name": "w", "labels": {"m": "1"}}, "status": {}},
        "kueue",
        semantics,
        False,
        None,
        T2,
    )
    assert main["metadata"]["labels"] == {"l": "1", "m": "1"}
    assert [(entry["manager"], entry.get("subresource")) for entry in main["metadata"]["managedFields"]] == [
        ("kueue", "status"),
        ("kueue", None),
    ]


def test_status_apply_ignores_spec_and_metadata() -> None:
    applied = status_apply({"name": "a", "state": "Ready"})
    applied["spec"] = {"queueName": "other"}
    applied["metadata"]["labels"] = {"x": "y"}
    result = apply(LIVE, applied, "acc-a", T1)
    assert result["spec"] == LIVE["spec"]
    assert result["metadata"]["labels"] == LIVE["metadata"]["labels"]
    assert owned(result) == {"acc-a": check_fields("a")}


def test_create_sets_lists_and_sets_and_owns_them() -> None:
    applied: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "finalizers": ["x"]},
        "spec": {
            "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
            "tolerations": [{"key": "k"}],
        },
    }
    result = server_side_apply(None, applied, "me", semantics, False, None, T0)
    assert {key: value for key, value in result.items()} == {
        **applied,
        "metadata": {**applied["metadata"], "managedFields": result["metadata"]["managedFields"]},
    }
    assert owned(result) == {
        "me": {
            "f:metadata": {"f:finalizers": {'v:"x"': {}}},
            "f:spec": {
                "f:containers": {
                    'k:{"name":"c"}': {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                            'k:{"containerPort":80,"protocol":"TCP"}': {
                                ".": {},
                                "f:containerPort": {},
                                "f:protocol": {},
                            }
                        },
                    }
                },
                "f:tolerations": {},
            },
        }
    }


def test_sets_union_atomic_lists_conflict_and_force() -> None:
    live = server_side_apply(
        None,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "finalizers": ["x"]},
            "spec": {"tolerations": [{"key": "k"}]},
        },
        "one",
        semantics,
        False,
        None,
        T0,
    )
    merged = server_side_apply(
        live,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": ["y"]}},
        "two",
        semantics,
        False,
        None,
        T1,
    )
    assert merged["metadata"]["finalizers"] == ["x", "y"]
    error = raises_patch_error(
        server_side_apply,
        merged,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"tolerations": []}},
        "two",
        semantics,
        False,
        None,
        T2,
    )
    assert error.message == 'Apply failed with 1 conflict: conflict with "one": .spec.tolerations'
    taken = server_side_apply(
        merged,
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"tolerations": []}},
        "two",
        semantics,
        True,
        None,
        T2,
    )
    assert taken["spec"]["tolerations"] == []
    assert taken["metadata"]["finalizers"] == ["x"]  # two stopped applying "y", which only it owned
    assert owned(taken) == {
        "one": {"f:metadata": {"f:finalizers": {'v:"x"': {}}}},
        "two": {"f:spec": {"f:tolerations": {}}},
    }


def test_conflicts_with_several_managers_and_an_updater() -> None:
    live = copy.deepcopy(LIVE)
    live["spec"]["queueName"] = "q"
    live["metadata"]["managedFields"] = [
        {
            "manager": "kube-controller",
            "operation": "Update",
            "apiVersion": API,
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:queueName": {}}, "f:metadata": {"f:labels": {"f:l": {}}}},
        },
        {
            "manager": "acc-a",
            "operation": "Apply",
            "apiVersion": API,
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:priority": {}}},
        },
    ]
    live["spec"]["priority"] = 1
    applied = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": "w", "labels": {"l": "2"}},
        "spec": {"queueName": "r", "priority": 2},
    }
    error = raises_patch_error(server_side_apply, live, applied, "me", semantics, False, None, T1)
    assert error.message == (
        "Apply failed with 3 conflicts: "
        'conflicts with "acc-a":\n- .spec.priority\n'
        f'conflicts with "kube-controller" using {API}:\n- .metadata.labels.l\n- .spec.queueName'
    )
    # upstream lists the causes in map order, so compare them as a set
    assert {(cause["message"], cause["field"]) for cause in error.causes or []} == {
        ('conflict with "acc-a"', ".spec.priority"),
        (f'conflict with "kube-controller" using {API}', ".metadata.labels.l"),
        (f'conflict with "kube-controller" using {API}', ".spec.queueName"),
    }
    assert all(cause["reason"] == "FieldManagerConflict" for cause in error.causes or [])


def test_apply_decodes_existing_fields_v1_to_prune() -> None:
    live = copy.deepcopy(LIVE)
    live["status"]["admissionChecks"][0]["message"] = "m"
    live["metadata"]["managedFields"] = [
        {
            "manager": "acc-a",
            "operation": "Apply",
            "apiVersion": API,
            "time": T0,
            "fieldsType": "FieldsV1",
            "subresource": "status",
            "fieldsV1": check_fields("a", extra=("message",)),
        }
    ]
    result = apply(live, status_apply({"name": "a", "state": "Pending"}), "acc-a", T1)
    assert result["status"]["admissionChecks"][0] == {"name": "a", "state": "Pending"}


@pytest.mark.parametrize(
    ("live", "applied", "manager", "code", "reason", "message"),
    [
        (
            LIVE,
            status_apply({"name": "a"}),
            "",
            422,
            "Invalid",
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
        ),
        (
            LIVE,
            {**status_apply(), "metadata": {"name": "w", "managedFields": []}},
            "m",
            400,
            "BadRequest",
            "metadata.managedFields must be nil",
        ),
        (
            LIVE,
            {**status_apply(), "apiVersion": "kueue.x-k8s.io/v1beta2"},
            "m",
            400,
            "BadRequest",
            "Incorrect version specified in apply patch. "
            f"Specified patch version: kueue.x-k8s.io/v1beta2, expected: {API}",
        ),
        (
            LIVE,
            status_apply({"state": "Ready"}),
            "m",
            500,
            "",
            "failed to create typed patch object: .status.admissionChecks: element 0: associative list "
            'with keys has an element that omits key field "name" (and doesn\'t have default value)',
        ),
        (
            LIVE,
            status_apply({"name": "a"}, {"name": "a"}),
            "m",
            500,
            "",
            'failed to create typed patch object: .status.admissionChecks: duplicate entries for key [name="a"]',
        ),
    ],
)
def test_apply_errors(
    live: dict[str, Any], applied: dict[str, Any], manager: str, code: int, reason: str, message: str
) -> None:
    error = raises_patch_error(apply, live, applied, manager, T1)
    assert (error.code, error.reason, error.message) == (code, reason, message)


def test_apply_does_not_mutate_its_inputs() -> None:
    live = apply(LIVE, status_apply({"name": "a", "state": "Ready"}), "acc-a", T1)
    applied = status_apply({"name": "b", "state": "Ready"})
    before = copy.deepcopy((live, applied))
    apply(live, applied, "acc-b", T2)
    assert (live, applied) == before


def test_null_over_a_live_map_changes_and_owns_nothing() -> None:
    live = copy.deepcopy(LIVE)
    live["spec"]["podSets"] = {"main": {"count": 1}}
    applied = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"podSets": None, "active": None},
    }
    result = server_side_apply(live, applied, "me", semantics, False, None, T1)
    assert result["spec"] == {**live["spec"], "active": None}  # a null scalar is set (and owned)
    assert owned(result) == {"me": {"f:spec": {"f:active": {}}}}


def test_an_unchanged_field_set_keeps_its_stored_encoding() -> None:
    # the same set as check_fields("a"), written with its keys in another order
    stored: dict[str, Any] = {
        "f:status": {"f:admissionChecks": {'k:{"name":"a"}': {"f:state": {}, "f:name": {}, ".": {}}}}
    }
    live = copy.deepcopy(LIVE)
    live["metadata"]["managedFields"] = [
        {
            "manager": "acc-a",
            "operation": "Apply",
            "apiVersion": API,
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": stored,
            "subresource": "status",
        }
    ]
    again = apply(live, status_apply({"name": "a", "state": "Pending"}), "acc-a", T1)
    assert again == live


def test_reset_fields_are_neither_applied_nor_owned() -> None:
    applied = {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"queueName": "r"},
        "status": {"admissionChecks": []},
    }
    result = server_side_apply(LIVE, applied, "me", semantics, False, None, T1, reset_fields=[("status",)])
    assert result["status"] == LIVE["status"]
    assert result["spec"] == {"queueName": "r"}
    assert owned(result) == {"me": {"f:spec": {"f:queueName": {}}}}


def test_unsupported_media_type_lists_the_accepted_types() -> None:
    error = unsupported_media_type(
        ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
    )
    expect_answer(error, 415, "UnsupportedMediaType")
    assert error.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )
