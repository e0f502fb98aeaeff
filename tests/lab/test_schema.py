"""Defaulting, pruning, validation and list semantics of the lab's schemas, called as the server calls them.

Pure functions, no lab: each case builds an object, runs `prune` and `default` the way a write does, and
checks what `validate(obj, old)` answers (`old` None on create).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from celpy import celtypes

from airflow_provider_dispatch_lab.apiserver.registry.patching import ATOMIC, ListSemantics
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType, default_registry, load_crds
from airflow_provider_dispatch_lab.apiserver.validation import schema_cel
from airflow_provider_dispatch_lab.apiserver.validation.schema import CrdSchema, FieldCause, TypeSchema
from airflow_provider_dispatch_lab.apiserver.validation.schema_builtin import (
    BuiltinSchema,
    apply_pod_create_admission,
    generate_job_selector,
)
from airflow_provider_dispatch_lab.apiserver.validation.schema_structural import Structural, compile_schema, iter_rules

Obj = dict[str, Any]
Change = Callable[[Obj], None]


def _type(api_version: str, kind: str) -> ResourceType:
    resource = default_registry().by_kind(api_version, kind)
    assert resource is not None, f"{api_version} {kind} is not served"
    return resource


TRAINJOB = _type("trainer.kubeflow.org/v1alpha1", "TrainJob").schema
WORKLOAD = _type("kueue.x-k8s.io/v1beta2", "Workload").schema
ADMISSION_CHECK = _type("kueue.x-k8s.io/v1beta2", "AdmissionCheck").schema
CLUSTER_QUEUE = _type("kueue.x-k8s.io/v1beta2", "ClusterQueue").schema
POD = _type("v1", "Pod").schema
JOB = _type("batch/v1", "Job").schema
NAMESPACE = _type("v1", "Namespace").schema
NODE = _type("v1", "Node").schema


def written(schema: TypeSchema, obj: Obj) -> Obj:
    """The object as a write stores it: a copy, pruned and defaulted."""
    out = copy.deepcopy(obj)
    schema.prune(out)
    schema.default(out)
    return out


def updated(schema: TypeSchema, old: Obj, change: Change) -> tuple[Obj, Obj]:
    new = copy.deepcopy(old)
    change(new)
    return written(schema, new), old


def fields(causes: list[FieldCause]) -> list[str]:
    return [c.field for c in causes]


def messages(causes: list[FieldCause]) -> list[str]:
    return [c.message for c in causes]


# --------------------------------------------------------------------------------------------------- TrainJob


def trainjob(name: str = "ft-7", **spec: Any) -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}, **spec},
    }


def runtime_patch(manager: str, containers: list[Obj] | None = None, node_selector: Obj | None = None) -> Obj:
    pod_spec: Obj = {}
    if containers is not None:
        pod_spec["containers"] = containers
    if node_selector is not None:
        pod_spec["nodeSelector"] = node_selector
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}
            }
        },
    }


@pytest.mark.parametrize(
    ("spec", "path", "expected"),
    [
        ({}, ("runtimeRef", "apiGroup"), "trainer.kubeflow.org"),
        ({}, ("runtimeRef", "kind"), "ClusterTrainingRuntime"),
        ({}, ("managedBy",), "trainer.kubeflow.org/trainjob-controller"),
        ({}, ("suspend",), False),
        ({"suspend": True}, ("suspend",), True),
        ({"runtimeRef": {"name": "r", "kind": "TrainingRuntime"}}, ("runtimeRef", "kind"), "TrainingRuntime"),
        ({"managedBy": "kueue.x-k8s.io/multikueue"}, ("managedBy",), "kueue.x-k8s.io/multikueue"),
        ({"suspend": None}, ("suspend",), False),
    ],
)
def test_trainjob_defaulting(spec: Obj, path: tuple[str, ...], expected: Any) -> None:
    obj = written(TRAINJOB, trainjob(**spec))
    value: Any = obj["spec"]
    for name in path:
        value = value[name]
    assert value == expected
    assert TRAINJOB.validate(obj) == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ft-7", []),
        ("a" * 63, []),
        ("a,b", ["metadata.name must match RFC 1035 DNS label format"]),
        ("7ft", ["metadata.name must match RFC 1035 DNS label format"]),
        ("a" * 64, ["metadata.name must be no more than 63 characters"]),
    ],
)
def test_trainjob_name_rules(name: str, expected: list[str]) -> None:
    causes = TRAINJOB.validate(written(TRAINJOB, trainjob(name)))
    cel = [c for c in causes if c.field == "<nil>"]
    assert [c.message for c in cel] == [f'Invalid value: "object": {m}' for m in expected]
    if name == "a,b":  # the generic custom-resource name check (DNS-1123 subdomain) reports too
        assert "metadata.name" in fields(causes)


@pytest.mark.parametrize(
    ("change", "refused_at"),
    [
        (lambda o: o["spec"]["trainer"].update(numNodes=3), "spec.trainer"),
        (lambda o: o["spec"]["runtimeRef"].update(name="other"), "spec.runtimeRef"),
        (lambda o: o["spec"].update(managedBy="kueue.x-k8s.io/multikueue"), "spec.managedBy"),
        (lambda o: o["spec"].update(activeDeadlineSeconds=60), None),  # unset before: nothing to compare
        (lambda o: o["spec"].update(suspend=True), None),
        (lambda o: o["metadata"].update(labels={"a": "b"}), None),
    ],
)
def test_trainjob_immutable_fields(change: Change, refused_at: str | None) -> None:
    old = written(TRAINJOB, trainjob())
    causes = TRAINJOB.validate(*updated(TRAINJOB, old, change))
    if refused_at is None:
        assert causes == []
    else:
        assert causes == [
            FieldCause(
                refused_at,
                "FieldValueInvalid",
                f'Invalid value: "{_type_of(refused_at)}": field is immutable',
            )
        ]


def _type_of(field: str) -> str:
    return "string" if field == "spec.managedBy" else "object"


def test_trainjob_transition_rules_do_not_run_on_create() -> None:
    assert TRAINJOB.validate(written(TRAINJOB, trainjob(activeDeadlineSeconds=5))) == []


CONTAINERS_AT = (
    "spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
    ".template.spec.template.spec.containers"
)


@pytest.mark.parametrize(
    ("before", "after", "refused_at"),
    [
        # Same manager: the entry correlates, its immutable pod-spec fields are compared.
        (
            [runtime_patch("a.io/m", containers=[{"name": "node"}])],
            [runtime_patch("a.io/m", containers=[{"name": "node", "env": [{"name": "X", "value": "1"}]}])],
            [CONTAINERS_AT.format(i=0)],
        ),
        # Mutable fields of the same entry may change.
        (
            [runtime_patch("a.io/m", node_selector={"a": "1"})],
            [runtime_patch("a.io/m", node_selector={"a": "2"})],
            [],
        ),
        # Correlation is by the `manager` key, not by position.
        (
            [runtime_patch("a.io/m", containers=[{"name": "node"}]), runtime_patch("b.io/m")],
            [
                runtime_patch("b.io/m"),
                runtime_patch("a.io/m", containers=[{"name": "node", "env": [{"name": "X"}]}]),
            ],
            [CONTAINERS_AT.format(i=1)],
        ),
        # A renamed manager is a new entry: nothing old to compare, so `manager: self == oldSelf` never fires.
        (
            [runtime_patch("a.io/m", containers=[{"name": "node"}])],
            [runtime_patch("c.io/m", containers=[{"name": "other"}])],
            [],
        ),
    ],
)
def test_runtime_patch_entries_are_immutable_per_manager(
    before: list[Obj], after: list[Obj], refused_at: list[str]
) -> None:
    old = written(TRAINJOB, trainjob(suspend=True, runtimePatches=before))
    assert TRAINJOB.validate(old) == []
    causes = TRAINJOB.validate(*updated(TRAINJOB, old, lambda o: o["spec"].update(runtimePatches=after)))
    assert fields(causes) == refused_at
    assert all(m == 'Invalid value: "array": field is immutable' for m in messages(causes))


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (16, []),
        (
            17,
            [
                FieldCause("spec.runtimePatches", "FieldValueTooMany", "Too many: 17: must have at most 16 items"),
                FieldCause(
                    "<nil>",
                    "FieldValueInvalid",
                    "Invalid value: null: some validation rules were not checked because the object was "
                    "invalid; correct the existing errors to complete validation",
                ),
            ],
        ),
    ],
)
def test_runtime_patches_at_most_sixteen(count: int, expected: list[FieldCause]) -> None:
    patches = [runtime_patch(f"m{i}.example.com/x") for i in range(count)]
    assert TRAINJOB.validate(written(TRAINJOB, trainjob(runtimePatches=patches))) == expected


def test_runtime_patch_managers_are_unique() -> None:
    patches = [runtime_patch("a.io/m"), runtime_patch("b.io/m"), runtime_patch("a.io/m")]
    causes = TRAINJOB.validate(written(TRAINJOB, trainjob(runtimePatches=patches)))
    assert causes == [
        FieldCause(
            "spec.runtimePatches[2]",
            "FieldValueDuplicate",
            'Duplicate value: {"manager":"a.io/m"}',
        )
    ]


# ---------------------------------------------------------------------------------------------------- pruning


def test_pruning_drops_unknown_fields_and_keeps_known_ones() -> None:
    obj = trainjob()
    obj["metadata"]["bogus"] = 1
    obj["spec"]["bogus"] = {"deep": True}
    obj["spec"]["trainer"]["alsoBogus"] = "x"
    obj["status"] = {
        "conditions": [
            {
                "type": "Suspended",
                "status": "True",
                "reason": "Suspended",
                "message": "m",
                "lastTransitionTime": "2026-08-21T10:00:00Z",
                "extra": 1,
            }
        ]
    }
    TRAINJOB.prune(obj)
    assert "bogus" not in obj["metadata"]
    assert set(obj["spec"]) == {"runtimeRef", "trainer"}
    assert obj["spec"]["trainer"] == {"numNodes": 2}
    assert "extra" not in obj["status"]["conditions"][0]
    assert obj["status"]["conditions"][0]["type"] == "Suspended"
    assert obj["apiVersion"] == "trainer.kubeflow.org/v1alpha1"


def test_pruning_keeps_embedded_pod_template_metadata() -> None:
    wl = workload()
    wl["spec"]["podSets"][0]["template"]["metadata"] = {"labels": {"a": "b"}, "unknown": 1}
    WORKLOAD.prune(wl)
    assert wl["spec"]["podSets"][0]["template"]["metadata"] == {"labels": {"a": "b"}}


# ------------------------------------------------------------------------------------------------------ Kueue


def workload(reserved: bool = True, assignments: int = 1, queue: str = "user-queue") -> Obj:
    """Shaped like the Workload Kueue makes for a TrainJob (research k8s-apis.md 4.2)."""
    conditions = [
        {
            "type": "QuotaReserved",
            "status": "True" if reserved else "False",
            "reason": "QuotaReserved",
            "message": "Quota reserved in ClusterQueue cq",
            "lastTransitionTime": "2026-08-21T10:00:00Z",
        },
        {
            "type": "Admitted",
            "status": "False",
            "reason": "UnsatisfiedAdmissionChecks",
            "message": "The workload has not all checks ready",
            "lastTransitionTime": "2026-08-21T10:00:00Z",
        },
    ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "trainjob-ft-7-3f9a1",
            "namespace": "ml",
            "labels": {"kueue.x-k8s.io/job-uid": "0b7e"},
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": "ft-7",
                    "uid": "0b7e",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": queue,
            "active": True,
            "priority": 0,
            "podSets": [
                {
                    "name": "node",
                    "count": 2,
                    "template": {"spec": {"containers": [{"name": "node", "image": "i"}]}},
                }
            ],
        },
        "status": {
            "conditions": conditions,
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": f"ps{i}",
                        "count": 2,
                        "flavors": {"cpu": "default"},
                        "resourceUsage": {"cpu": "8"},
                    }
                    for i in range(assignments)
                ],
            },
            "admissionChecks": [
                {
                    "name": "dispatch-readmit",
                    "state": "Pending",
                    "lastTransitionTime": "2026-08-21T10:00:00Z",
                    "message": "waiting",
                }
            ],
        },
    }


@pytest.mark.parametrize(
    ("obj", "expected_fields", "expected_message"),
    [
        (workload(), [], None),
        (
            workload(assignments=2),
            ["<nil>"],
            "podSetAssignments must have the same number of podSets as the spec",
        ),
        (workload(reserved=False, assignments=2), [], None),  # the rule holds only while quota is reserved
    ],
)
def test_workload_podset_count(obj: Obj, expected_fields: list[str], expected_message: str | None) -> None:
    causes = WORKLOAD.validate(written(WORKLOAD, obj))
    assert fields(causes) == expected_fields
    if expected_message:
        assert causes[0].message == f'Invalid value: "object": {expected_message}'


@pytest.mark.parametrize(
    ("change", "expected_reason", "expected_field"),
    [
        (lambda o: o["spec"].update(podSets=[]), "FieldValueInvalid", "spec.podSets"),
        (
            lambda o: o["status"]["admissionChecks"][0].update(state="Bogus"),
            "FieldValueNotSupported",
            "status.admissionChecks[0].state",
        ),
        (
            lambda o: o["status"]["admissionChecks"][0].update(lastTransitionTime="yesterday"),
            "FieldValueTypeInvalid",
            "status.admissionChecks[0].lastTransitionTime",
        ),
        (
            lambda o: o["status"]["admissionChecks"][0].pop("message"),
            "FieldValueRequired",
            "status.admissionChecks[0].message",
        ),
        (
            lambda o: o["spec"]["podSets"][0].update(count="two"),
            "FieldValueTypeInvalid",
            "spec.podSets[0].count",
        ),
    ],
)
def test_workload_openapi_validation(change: Change, expected_reason: str, expected_field: str) -> None:
    obj = written(WORKLOAD, workload())
    change(obj)
    causes = WORKLOAD.validate(obj)
    assert (expected_field, expected_reason) in [(c.field, c.reason) for c in causes]


@pytest.mark.parametrize(
    ("reserved", "refused"),
    [(True, ["queueName is immutable while workload quota reserved"]), (False, [])],
)
def test_workload_queue_name_immutable_while_reserved(reserved: bool, refused: list[str]) -> None:
    old = written(WORKLOAD, workload(reserved=reserved, assignments=1))
    causes = WORKLOAD.validate(*updated(WORKLOAD, old, lambda o: o["spec"].update(queueName="other")))
    assert messages(causes) == [f'Invalid value: "object": {m}' for m in refused]


def admission_check(controller: str | None = "dispatch.example.com/readmit") -> Obj:
    spec = {"controllerName": controller} if controller is not None else {}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "dispatch-readmit"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (None, admission_check(), []),
        (
            None,
            admission_check(None),
            [("spec.controllerName", "FieldValueRequired"), ("<nil>", "FieldValueInvalid")],
        ),
        (
            None,
            admission_check("x" * 254),
            [("spec.controllerName", "FieldValueTooLong"), ("<nil>", "FieldValueInvalid")],
        ),
        (
            admission_check(),
            admission_check("other.example.com/c"),
            [("spec.controllerName", "FieldValueInvalid")],
        ),
        (admission_check(), admission_check(), []),
    ],
)
def test_admission_check(old: Obj | None, new: Obj, expected: list[tuple[str, str]]) -> None:
    stored_old = written(ADMISSION_CHECK, old) if old is not None else None
    causes = ADMISSION_CHECK.validate(written(ADMISSION_CHECK, new), stored_old)
    assert [(c.field, c.reason) for c in causes] == expected


def cluster_queue(**spec: Any) -> Obj:
    base: Obj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
            }
        ],
        "admissionChecksStrategy": {"admissionChecks": [{"name": "dispatch-readmit"}]},
    }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {**base, **spec},
    }


def test_cluster_queue_with_admission_checks_strategy_is_valid_and_defaulted() -> None:
    obj = written(CLUSTER_QUEUE, cluster_queue())
    assert CLUSTER_QUEUE.validate(obj) == []
    assert obj["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "dispatch-readmit"}]}
    assert obj["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert obj["spec"]["stopPolicy"] == "None"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"admissionChecksStrategy": {"admissionChecks": [{"name": "a"}, {"name": "a"}]}},
            [("spec.admissionChecksStrategy.admissionChecks[1]", "FieldValueDuplicate")],
        ),
        (
            {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": "default",
                                "resources": [{"name": "cpu", "nominalQuota": 8, "borrowingLimit": 1}],
                            }
                        ],
                    }
                ]
            },
            [("spec", "FieldValueInvalid")],
        ),
        (
            {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 8}]}],
                    }
                ]
            },
            [("spec.resourceGroups[0]", "FieldValueInvalid")],
        ),
        (
            {"queueingStrategy": "Random"},
            [("spec.queueingStrategy", "FieldValueNotSupported"), ("<nil>", "FieldValueInvalid")],
        ),
    ],
)
def test_cluster_queue_refusals(spec: Obj, expected: list[tuple[str, str]]) -> None:
    causes = CLUSTER_QUEUE.validate(written(CLUSTER_QUEUE, cluster_queue(**spec)))
    assert [(c.field, c.reason) for c in causes] == expected


def test_cluster_queue_v1beta1_admission_checks_field_is_pruned() -> None:
    obj = written(CLUSTER_QUEUE, cluster_queue(admissionChecks=["dispatch-readmit"]))
    assert "admissionChecks" not in obj["spec"]


# -------------------------------------------------------------------------------------------------------- CEL


def test_every_cel_rule_in_the_crds_compiles_and_evaluates() -> None:
    """Each rule of every version of the eight CRDs, evaluated on a filled-in sample of its node."""
    checked = 0
    for crd in load_crds():
        for version in crd["spec"]["versions"]:
            root = compile_schema(version["schema"]["openAPIV3Schema"])
            for path, node, rule in _rules_with_nodes(root, ""):
                compiled = schema_cel.compile_expression(rule.rule)
                assert compiled.runner is not None, f"{path}: {rule.rule}: {compiled.error}"
                value = _sample(node, 0)
                if not path:
                    value["metadata"] = {"name": "abc"}
                converted = schema_cel.to_cel(value, node, not path)
                result = compiled.runner.evaluate({"self": converted, "oldSelf": converted})
                assert isinstance(result, celtypes.BoolType), f"{path}: {rule.rule} gave {result!r}"
                checked += 1
    assert checked == _count_raw_rules([crd["spec"] for crd in load_crds()]) > 90


def _count_raw_rules(value: Any) -> int:
    """The `x-kubernetes-validations` entries in the YAML itself, counted without the schema compiler."""
    if isinstance(value, list):
        return sum(_count_raw_rules(v) for v in value)
    if not isinstance(value, dict):
        return 0
    own = len(value.get("x-kubernetes-validations") or ())
    return own + sum(_count_raw_rules(v) for k, v in value.items() if k != "x-kubernetes-validations")


def _rules_with_nodes(node: Structural, path: str) -> list[tuple[str, Structural, Any]]:
    found = [(path, node, rule) for rule in node.rules]
    for name, prop in node.properties.items():
        if prop.rules_below:
            found.extend(_rules_with_nodes(prop, f"{path}.{name}"))
    for sub, suffix in ((node.items, "[]"), (node.additional, "{}")):
        if sub is not None and sub.rules_below:
            found.extend(_rules_with_nodes(sub, path + suffix))
    return found


def _sample(node: Structural, depth: int) -> Any:
    """A value with every declared field present, so that a rule's field accesses all resolve."""
    if node.int_or_string:
        return 1
    if node.enum:
        return node.enum[0]
    if node.type == "object":
        if depth > 8:
            return {}
        if node.properties:
            return {k: _sample(v, depth + 1) for k, v in node.properties.items()}
        return {"k": _sample(node.additional, depth + 1)} if node.additional is not None else {}
    if node.type == "array":
        return [_sample(node.items, depth + 1)] if node.items is not None else []
    if node.type == "string":
        return "2026-01-01T00:00:00Z" if node.format == "date-time" else "a"
    if node.type == "integer":
        return int(max(1, node.minimum or 1))
    if node.type == "number":
        return 1.5
    return True if node.type == "boolean" else {}


def test_rule_inventory_matches_the_crds() -> None:
    served = sum(len(r.schema.rules()) for r in default_registry().all() if isinstance(r.schema, CrdSchema))
    assert served == sum(
        len(iter_rules(compile_schema(v["schema"]["openAPIV3Schema"])))
        for crd in load_crds()
        for v in crd["spec"]["versions"]
        if v.get("storage")
    )


def synthetic(properties: Obj, rules: list[Obj] | None = None) -> CrdSchema:
    """A one-off CRD schema, for CEL behaviour no shipped CRD happens to use."""
    openapi: Obj = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": properties},
        },
    }
    if rules:
        openapi["properties"]["spec"]["x-kubernetes-validations"] = rules
    return CrdSchema("example.com", "v1", "Thing", True, openapi)


def thing(**spec: Any) -> Obj:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "namespace": "n"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (
            {"rule": "self.n > 1", "message": "n too small"},
            FieldCause("spec", "FieldValueInvalid", 'Invalid value: "object": n too small'),
        ),
        (
            {"rule": "self.n > 1"},
            FieldCause("spec", "FieldValueInvalid", 'Invalid value: "object": failed rule: self.n > 1'),
        ),
        (
            {"rule": "self.n > 1", "message": "m", "messageExpression": "'n is ' + string(self.n)"},
            FieldCause("spec", "FieldValueInvalid", 'Invalid value: "object": n is 1'),
        ),
        (
            {"rule": "self.n > 1", "message": "fallback", "messageExpression": "self.missing"},
            FieldCause("spec", "FieldValueInvalid", 'Invalid value: "object": fallback'),
        ),
        (
            {"rule": "self.n > 1", "message": "no", "reason": "FieldValueForbidden", "fieldPath": ".n"},
            FieldCause("spec.n", "FieldValueForbidden", "Forbidden: no"),
        ),
        (
            {
                "rule": "self.n > 1",
                "message": "no",
                "reason": "FieldValueRequired",
                "fieldPath": ".labels['a.b']",
            },
            FieldCause("spec.labels[a.b]", "FieldValueRequired", "Required value: no"),
        ),
        (
            {"rule": "self.missing > 1"},
            FieldCause(
                "spec",
                "FieldValueInvalid",
                'Invalid value: "object": no such key: missing evaluating rule: self.missing > 1',
            ),
        ),
        (
            {"rule": "self.n >"},
            FieldCause("spec", "FieldValueInvalid", 'Invalid value: "object": rule compile error: ...'),
        ),
    ],
)
def test_cel_failure_reporting(rule: Obj, expected: FieldCause) -> None:
    schema = synthetic(
        {"n": {"type": "integer"}, "labels": {"type": "object", "additionalProperties": {"type": "string"}}},
        [rule],
    )
    causes = schema.validate(written(schema, thing(n=1, labels={"a.b": "x"})))
    assert len(causes) == 1
    if expected.message.endswith("..."):
        assert causes[0].message.startswith(expected.message[:-3])
    else:
        assert causes[0] == expected


@pytest.mark.parametrize(
    ("list_type", "old", "new", "refused"),
    [
        ("set", ["a", "b"], ["b", "a"], False),
        ("atomic", ["a", "b"], ["b", "a"], True),
        ("set", ["a", "b"], ["a", "c"], True),
    ],
)
def test_cel_equality_of_sets_ignores_order(list_type: str, old: list[str], new: list[str], refused: bool) -> None:
    schema = synthetic(
        {
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "x-kubernetes-list-type": list_type,
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "frozen"}],
            }
        }
    )
    causes = schema.validate(written(schema, thing(tags=new)), written(schema, thing(tags=old)))
    assert bool(causes) is refused


@pytest.mark.parametrize(
    ("list_type", "old", "new", "refused"),
    [
        ("map", [{"name": "a", "v": 1}], [{"name": "a", "v": 2}], True),
        ("map", [{"name": "a", "v": 1}], [{"name": "b", "v": 2}], False),  # new key: no oldSelf
        (
            "map",
            [{"name": "a", "v": 1}, {"name": "b", "v": 1}],
            [{"name": "b", "v": 1}, {"name": "a", "v": 1}],
            False,
        ),
        ("atomic", [{"name": "a", "v": 1}], [{"name": "a", "v": 2}], False),  # atomic items never correlate
    ],
)
def test_cel_old_self_correlation_in_lists(list_type: str, old: list[Obj], new: list[Obj], refused: bool) -> None:
    items: Obj = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "v": {"type": "integer", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
        },
    }
    entries: Obj = {"type": "array", "items": items, "x-kubernetes-list-type": list_type}
    if list_type == "map":
        entries["x-kubernetes-list-map-keys"] = ["name"]
    schema = synthetic({"entries": entries})
    causes = schema.validate(written(schema, thing(entries=new)), written(schema, thing(entries=old)))
    assert bool(causes) is refused


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("'AbC-1'.lowerAscii()", "abc-1"),
        ("'abc'.upperAscii()", "ABC"),
        ("'  x '.trim()", "x"),
        ("'a,b,c'.split(',')", ["a", "b", "c"]),
        ("'a,b,c'.split(',', 2)", ["a", "b,c"]),
        ("['a', 'b'].join('-')", "a-b"),
        ("'hello mellow'.indexOf('ello')", 1),
        ("'hello mellow'.indexOf('ello', 6)", 7),
        ("'hello mellow'.lastIndexOf('ello')", 7),
        ("[1, 2, 2, 3].indexOf(2)", 1),
        ("[1, 2, 2, 3].lastIndexOf(2)", 2),
        ("'tacocat'.substring(4)", "cat"),
        ("'tacocat'.charAt(3)", "o"),
        ("'a.b.c'.replace('.', '/')", "a/b/c"),
        ("[1, 2, 3].isSorted()", True),
        ("[3, 1].isSorted()", False),
        ("[1, 3].sum()", 4),
        ("[1, 3].max()", 3),
        ("[1, 3].min()", 1),
        ("[1, 2].includes(2)", True),
        ("'abc 123'.find('[0-9]+')", "123"),
        ("'a1b22'.findAll('[0-9]+')", ["1", "22"]),
        ("'example.com/x'.matches('^[a-z.]+/[a-z]+$')", True),
    ],
)
def test_kubernetes_cel_library_functions(expression: str, expected: Any) -> None:
    compiled = schema_cel.compile_expression(expression)
    assert compiled.runner is not None, compiled.error
    assert compiled.runner.evaluate({}) == expected


@pytest.mark.parametrize(
    ("name", "escaped"),
    [
        ("foo", "foo"),
        ("namespace", "__namespace__"),
        ("x-y", "x__dash__y"),
        ("a.b/c", "a__dot__b__slash__c"),
        ("a__b", "a__underscores__b"),
        ("1x", None),
        ("a b", None),
    ],
)
def test_cel_property_escaping(name: str, escaped: str | None) -> None:
    assert schema_cel.escape(name) == escaped


# ------------------------------------------------------------------------------------------------------- pods


def pod(**spec: Any) -> Obj:
    base: Obj = {"containers": [{"name": "main", "image": "busybox:1.36"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {**base, **spec},
    }


@pytest.mark.parametrize(
    ("obj", "path", "expected"),
    [
        (pod(), ("spec", "terminationGracePeriodSeconds"), 30),
        (pod(terminationGracePeriodSeconds=5), ("spec", "terminationGracePeriodSeconds"), 5),
        (pod(), ("spec", "restartPolicy"), "Always"),
        (pod(), ("spec", "schedulerName"), "default-scheduler"),
        (pod(), ("spec", "dnsPolicy"), "ClusterFirst"),
        (pod(), ("spec", "enableServiceLinks"), True),
        (pod(), ("spec", "securityContext"), {}),
        (pod(), ("spec", "containers", 0, "terminationMessagePath"), "/dev/termination-log"),
        (pod(), ("spec", "containers", 0, "terminationMessagePolicy"), "File"),
        (pod(), ("spec", "containers", 0, "imagePullPolicy"), "IfNotPresent"),
        (
            pod(containers=[{"name": "c", "image": "busybox"}]),
            ("spec", "containers", 0, "imagePullPolicy"),
            "Always",
        ),
        (
            pod(containers=[{"name": "c", "image": "r.io/b:latest"}]),
            ("spec", "containers", 0, "imagePullPolicy"),
            "Always",
        ),
        (
            pod(containers=[{"name": "c", "image": "r.io:5000/b@sha256:ab"}]),
            ("spec", "containers", 0, "imagePullPolicy"),
            "IfNotPresent",
        ),
        (
            pod(containers=[{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]),
            ("spec", "containers", 0, "ports", 0, "protocol"),
            "TCP",
        ),
        (
            pod(containers=[{"name": "c", "image": "i", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]),
            ("spec", "containers", 0, "resources", "requests"),
            {"cpu": "1", "memory": "1Gi"},
        ),
        (pod(volumes=[{"name": "scratch"}]), ("spec", "volumes", 0, "emptyDir"), {}),
    ],
)
def test_pod_defaulting(obj: Obj, path: tuple[str | int, ...], expected: Any) -> None:
    value: Any = written(POD, obj)
    for step in path:
        value = value[step]
    assert value == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod(), []),
        (pod(containers=[]), [("spec.containers", "FieldValueRequired")]),
        (pod(containers=[{"image": "i"}]), [("spec.containers[0].name", "FieldValueRequired")]),
        (
            pod(containers=[{"name": "Main", "image": "i"}]),
            [("spec.containers[0].name", "FieldValueInvalid")],
        ),
        (
            pod(containers=[{"name": "a", "image": "i"}, {"name": "a", "image": "i"}]),
            [("spec.containers[1].name", "FieldValueDuplicate")],
        ),
        (pod(containers=[{"name": "a"}]), [("spec.containers[0].image", "FieldValueRequired")]),
        (pod(restartPolicy="Sometimes"), [("spec.restartPolicy", "FieldValueNotSupported")]),
        (pod(activeDeadlineSeconds=0), [("spec.activeDeadlineSeconds", "FieldValueInvalid")]),
        (pod(nodeName="n1", schedulingGates=[{"name": "g"}]), [("spec.nodeName", "FieldValueForbidden")]),
        (
            pod(tolerations=[{"operator": "Equal", "value": "x"}]),
            [("spec.tolerations[0].operator", "FieldValueInvalid")],
        ),
        (
            pod(terminationGracePeriodSeconds="30"),
            [("spec.terminationGracePeriodSeconds", "FieldValueTypeInvalid")],
        ),
    ],
)
def test_pod_create_validation(obj: Obj, expected: list[tuple[str, str]]) -> None:
    causes = POD.validate(written(POD, obj))
    assert [(c.field, c.reason) for c in causes] == expected


def test_pod_type_error_reads_as_a_decode_error() -> None:
    assert isinstance(POD, BuiltinSchema)
    assert POD.decode_error(pod(terminationGracePeriodSeconds="30")) == (
        'Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field '
        "PodSpec.spec.terminationGracePeriodSeconds of type int64"
    )


def _set_image(o: Obj) -> None:
    o["spec"]["containers"][0]["image"] = "busybox:1.37"


@pytest.mark.parametrize(
    ("old", "change", "refused_at"),
    [
        (pod(), _set_image, None),
        (pod(), lambda o: o["spec"].update(activeDeadlineSeconds=100), None),
        (pod(activeDeadlineSeconds=100), lambda o: o["spec"].update(activeDeadlineSeconds=50), None),
        (
            pod(activeDeadlineSeconds=100),
            lambda o: o["spec"].update(activeDeadlineSeconds=200),
            "spec.activeDeadlineSeconds",
        ),
        (pod(), lambda o: o["spec"].update(tolerations=[{"key": "k", "operator": "Exists"}]), None),
        (
            pod(tolerations=[{"key": "k", "operator": "Exists"}]),
            lambda o: o["spec"].update(tolerations=[]),
            "spec.tolerations",
        ),
        (pod(schedulingGates=[{"name": "g"}]), lambda o: o["spec"].update(schedulingGates=[]), None),
        (pod(), lambda o: o["spec"].update(schedulingGates=[{"name": "g"}]), "spec.schedulingGates[0].name"),
        (pod(schedulingGates=[{"name": "g"}]), lambda o: o["spec"].update(nodeSelector={"zone": "a"}), None),
        (pod(), lambda o: o["spec"].update(nodeSelector={"zone": "a"}), "spec"),
        (pod(), lambda o: o["spec"].update(nodeName="n1"), "spec"),
        (pod(), lambda o: o["spec"].update(restartPolicy="Never"), "spec"),
        (pod(), lambda o: o["spec"]["containers"].append({"name": "b", "image": "i"}), "spec.containers"),
        (pod(), lambda o: o["metadata"].update(labels={"a": "b"}), None),
        (pod(), lambda o: o.update(status={"phase": "Running"}), None),
    ],
)
def test_pod_spec_is_immutable_except_what_the_apiserver_allows(
    old: Obj, change: Change, refused_at: str | None
) -> None:
    stored = written(POD, old)
    causes = POD.validate(*updated(POD, stored, change))
    assert fields(causes) == ([] if refused_at is None else [refused_at])


@pytest.mark.parametrize(
    ("existing", "added"),
    [
        ([], 2),
        ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}], 1),
        ([{"operator": "Exists"}], 0),
    ],
)
def test_pod_create_admission_adds_default_toleration_seconds(existing: list[Obj], added: int) -> None:
    obj = written(POD, pod(tolerations=existing))
    apply_pod_create_admission(obj)
    assert len(obj["spec"]["tolerations"]) == len(existing) + added
    assert all(t.get("tolerationSeconds") == 300 for t in obj["spec"]["tolerations"][len(existing) :])
    assert obj["spec"]["priority"] == 0
    assert POD.validate(obj) == []


# ------------------------------------------------------------------------------------------------------- jobs


def job(restart: str | None = "Never", suspend: bool | None = None, **spec: Any) -> Obj:
    pod_spec: Obj = {"containers": [{"name": "main", "image": "i"}]}
    if restart is not None:
        pod_spec["restartPolicy"] = restart
    body: Obj = {"template": {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec}, **spec}
    if suspend is not None:
        body["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml", "uid": "u-1"},
        "spec": body,
    }


@pytest.mark.parametrize(
    ("obj", "field", "expected"),
    [
        (job(), "parallelism", 1),
        (job(), "completions", 1),
        (job(parallelism=3), "completions", None),
        (job(), "backoffLimit", 6),
        (job(backoffLimitPerIndex=1, completionMode="Indexed", completions=2), "backoffLimit", 2147483647),
        (job(), "completionMode", "NonIndexed"),
        (job(), "suspend", False),
        (job(), "podReplacementPolicy", "TerminatingOrFailed"),
        (job(podFailurePolicy={"rules": []}), "podReplacementPolicy", "Failed"),
        (job(), "manualSelector", False),
    ],
)
def test_job_defaulting(obj: Obj, field: str, expected: Any) -> None:
    stored = written(JOB, obj)
    assert stored["spec"].get(field) == expected
    assert stored["metadata"]["labels"] == {"app": "x"}  # copied from the template when the job has none
    assert stored["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 30


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (job(), []),
        (job(restart=None), [("spec.template.spec.restartPolicy", "FieldValueRequired")]),
        (job(restart="Always"), [("spec.template.spec.restartPolicy", "FieldValueRequired")]),
        (
            job(podFailurePolicy={"rules": []}, podReplacementPolicy="TerminatingOrFailed"),
            [("spec.podReplacementPolicy", "FieldValueNotSupported")],
        ),
        (job(completionMode="Indexed"), []),  # completions defaulted to 1
        (
            job(selector={"matchLabels": {"app": "y"}}, manualSelector=True),
            [("spec.template.metadata.labels", "FieldValueInvalid")],
        ),
        (job(manualSelector=True), [("spec.selector", "FieldValueRequired")]),
    ],
)
def test_job_create_validation(obj: Obj, expected: list[tuple[str, str]]) -> None:
    causes = JOB.validate(written(JOB, obj))
    assert [(c.field, c.reason) for c in causes] == expected


def test_generated_job_selector_matches_the_template() -> None:
    stored = written(JOB, job())
    generate_job_selector(stored)
    assert stored["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert stored["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"
    assert JOB.validate(stored) == []


def _add_node_selector(o: Obj) -> None:
    o["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}


def _change_image(o: Obj) -> None:
    o["spec"]["template"]["spec"]["containers"][0]["image"] = "other"


@pytest.mark.parametrize(
    ("suspended", "started", "change", "refused_at"),
    [
        (True, False, _add_node_selector, []),
        (False, False, _add_node_selector, ["spec.template"]),
        (True, True, _add_node_selector, ["spec.template"]),
        (True, False, _change_image, ["spec.template"]),
        (False, False, lambda o: o["spec"].update(suspend=True), []),
        (False, False, lambda o: o["spec"].update(completions=5), ["spec.completions"]),
    ],
)
def test_job_template_is_mutable_only_while_suspended_and_not_started(
    suspended: bool, started: bool, change: Change, refused_at: list[str]
) -> None:
    old = written(JOB, job(suspend=suspended))
    generate_job_selector(old)
    if started:
        old["status"] = {"startTime": "2026-08-21T10:00:00Z"}
    causes = JOB.validate(*updated(JOB, old, change))
    assert fields(causes) == refused_at


# ------------------------------------------------------------------------------------------------- namespaces


@pytest.mark.parametrize(("name", "valid"), [("ml", True), ("a.b", False), ("A", False), ("x" * 64, False)])
def test_namespace_names_are_dns_labels(name: str, valid: bool) -> None:
    obj = written(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert (NAMESPACE.validate(obj) == []) is valid


def test_namespace_defaults() -> None:
    obj = written(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    assert obj["spec"] == {"finalizers": ["kubernetes"]}
    assert obj["status"] == {"phase": "Active"}
    assert obj["metadata"]["labels"] == {"kubernetes.io/metadata.name": "ml"}


# ------------------------------------------------------------------------------------------------------ lists


@pytest.mark.parametrize(
    ("schema", "path", "apply", "strategic"),
    [
        (POD, ("spec", "containers"), ListSemantics("map", ("name",)), ListSemantics("map", ("name",))),
        (POD, ("spec", "initContainers"), ListSemantics("map", ("name",)), ListSemantics("map", ("name",))),
        (
            POD,
            ("spec", "containers", "env"),
            ListSemantics("map", ("name",)),
            ListSemantics("map", ("name",)),
        ),
        (
            POD,
            ("spec", "containers", "ports"),
            ListSemantics("map", ("containerPort", "protocol")),
            ListSemantics("map", ("containerPort",)),
        ),
        (
            POD,
            ("spec", "containers", "volumeMounts"),
            ListSemantics("map", ("mountPath",)),
            ListSemantics("map", ("mountPath",)),
        ),
        (POD, ("spec", "volumes"), ListSemantics("map", ("name",)), ListSemantics("map", ("name",))),
        (POD, ("spec", "imagePullSecrets"), ListSemantics("map", ("name",)), ListSemantics("map", ("name",))),
        (POD, ("spec", "tolerations"), ATOMIC, ATOMIC),
        (POD, ("spec", "containers", "command"), ATOMIC, ATOMIC),
        (POD, ("status", "conditions"), ListSemantics("map", ("type",)), ListSemantics("map", ("type",))),
        (
            POD,
            ("metadata", "ownerReferences"),
            ListSemantics("map", ("uid",)),
            ListSemantics("map", ("uid",)),
        ),
        (POD, ("metadata", "finalizers"), ListSemantics("set"), ListSemantics("set")),
        (POD, ("metadata", "managedFields"), ATOMIC, ATOMIC),
        (NODE, ("spec", "taints"), ATOMIC, ATOMIC),
        (NODE, ("status", "addresses"), ListSemantics("map", ("type",)), ListSemantics("map", ("type",))),
        (NODE, ("status", "conditions"), ListSemantics("map", ("type",)), ListSemantics("map", ("type",))),
        (JOB, ("status", "conditions"), ATOMIC, ListSemantics("map", ("type",))),
        (
            JOB,
            ("spec", "template", "spec", "containers"),
            ListSemantics("map", ("name",)),
            ListSemantics("map", ("name",)),
        ),
        (
            TRAINJOB,
            ("spec", "runtimePatches"),
            ListSemantics("map", ("manager",)),
            ListSemantics("map", ("manager",)),
        ),
        (
            TRAINJOB,
            ("status", "conditions"),
            ListSemantics("map", ("type",)),
            ListSemantics("map", ("type",)),
        ),
        (TRAINJOB, ("metadata", "finalizers"), ListSemantics("set"), ListSemantics("set")),
        (TRAINJOB, ("spec", "trainer", "command"), ATOMIC, ATOMIC),
        (
            WORKLOAD,
            ("status", "admissionChecks"),
            ListSemantics("map", ("name",)),
            ListSemantics("map", ("name",)),
        ),
        (
            WORKLOAD,
            ("spec", "podSets", "template", "spec", "containers"),
            ListSemantics("map", ("name",)),
            ListSemantics("map", ("name",)),
        ),
        (WORKLOAD, ("spec", "podSets", "template", "metadata", "finalizers"), ATOMIC, ATOMIC),
        (WORKLOAD, ("spec", "nothing", "here"), ATOMIC, ATOMIC),
    ],
)
def test_list_semantics(
    schema: TypeSchema, path: tuple[str, ...], apply: ListSemantics, strategic: ListSemantics
) -> None:
    assert schema.list_semantics(path) == apply
    assert schema.strategic_list_semantics(path) == strategic


# ------------------------------------------------------------------------------------------ malformed input


MALFORMED: list[Obj] = [
    {},
    {"metadata": "x"},
    {"metadata": {"name": 5, "labels": "x", "annotations": [1], "finalizers": {}, "ownerReferences": "y"}},
    {"metadata": {"name": "n"}, "spec": []},
    {"metadata": {"name": "n"}, "spec": {"containers": 5, "template": "t", "volumes": {"a": 1}}},
    {
        "metadata": {"name": "n"},
        "spec": {"containers": [5, {"env": "e", "ports": 3, "resources": {"limits": 1}}]},
    },
    {"metadata": {"name": "n"}, "spec": {"template": {"metadata": 1, "spec": {"containers": "c"}}}},
    {"metadata": {"name": "n"}, "spec": {"runtimePatches": [None, 1], "trainer": []}, "status": "s"},
]


@pytest.mark.parametrize("body", MALFORMED)
@pytest.mark.parametrize("resource", default_registry().all(), ids=lambda r: r.qualified)
def test_malformed_bodies_get_field_errors_not_exceptions(resource: ResourceType, body: Obj) -> None:
    obj = {"apiVersion": resource.api_version, "kind": resource.kind, **copy.deepcopy(body)}
    resource.schema.default(obj)
    resource.schema.prune(obj)
    causes = resource.schema.validate(obj)
    assert all(isinstance(c, FieldCause) and c.message for c in causes)
    if body.get("metadata") != {"name": "n"} and not resource.review_only:  # a review needs no metadata
        assert causes, f"{resource.kind} accepted {body}"
