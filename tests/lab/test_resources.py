"""The registry: what the lab serves, at which paths, and how fast the CRDs load."""

from __future__ import annotations

import pytest

from airflow_provider_dispatch_lab.apiserver.registry.resources import (
    STANDARD_VERBS,
    Registry,
    builtin_types,
    crd_types,
    default_registry,
    load_crds,
)
from airflow_provider_dispatch_lab.apiserver.validation.schema import CrdSchema, TypeSchema
from airflow_provider_dispatch_lab.apiserver.validation.schema_builtin import BuiltinSchema

NO_DELETECOLLECTION = tuple(v for v in STANDARD_VERBS if v != "deletecollection")


@pytest.mark.parametrize(
    ("group", "version", "plural", "kind", "namespaced", "subresources", "short_names", "verbs"),
    [
        ("", "v1", "namespaces", "Namespace", False, {"status"}, ("ns",), NO_DELETECOLLECTION),
        ("", "v1", "pods", "Pod", True, {"status", "binding"}, ("po",), STANDARD_VERBS),
        ("", "v1", "nodes", "Node", False, {"status"}, ("no",), STANDARD_VERBS),
        ("", "v1", "events", "Event", True, set(), ("ev",), STANDARD_VERBS),
        ("batch", "v1", "jobs", "Job", True, {"status"}, (), STANDARD_VERBS),
        ("coordination.k8s.io", "v1", "leases", "Lease", True, set(), (), STANDARD_VERBS),
        (
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            False,
            set(),
            (),
            ("create",),
        ),
        ("", "v1", "serviceaccounts", "ServiceAccount", True, set(), ("sa",), STANDARD_VERBS),
        ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, set(), (), STANDARD_VERBS),
        ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, set(), (), STANDARD_VERBS),
        ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, set(), (), STANDARD_VERBS),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            False,
            set(),
            (),
            STANDARD_VERBS,
        ),
        ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True, {"status"}, (), STANDARD_VERBS),
        (
            "trainer.kubeflow.org",
            "v1alpha1",
            "trainingruntimes",
            "TrainingRuntime",
            True,
            set(),
            (),
            STANDARD_VERBS,
        ),
        (
            "trainer.kubeflow.org",
            "v1alpha1",
            "clustertrainingruntimes",
            "ClusterTrainingRuntime",
            False,
            set(),
            (),
            STANDARD_VERBS,
        ),
        ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True, {"status"}, (), STANDARD_VERBS),
        (
            "kueue.x-k8s.io",
            "v1beta2",
            "workloads",
            "Workload",
            True,
            {"status"},
            ("kwl", "kueueworkload", "kueueworkloads"),
            STANDARD_VERBS,
        ),
        (
            "kueue.x-k8s.io",
            "v1beta2",
            "admissionchecks",
            "AdmissionCheck",
            False,
            {"status"},
            ("ac",),
            STANDARD_VERBS,
        ),
        (
            "kueue.x-k8s.io",
            "v1beta2",
            "clusterqueues",
            "ClusterQueue",
            False,
            {"status"},
            ("cq",),
            STANDARD_VERBS,
        ),
        (
            "kueue.x-k8s.io",
            "v1beta2",
            "localqueues",
            "LocalQueue",
            True,
            {"status"},
            ("queue", "queues", "lq"),
            STANDARD_VERBS,
        ),
    ],
)
def test_served_resources(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool,
    subresources: set[str],
    short_names: tuple[str, ...],
    verbs: tuple[str, ...],
) -> None:
    resource = default_registry().by_path(group, version, plural)
    assert resource is not None
    assert (resource.kind, resource.namespaced, set(resource.subresources)) == (
        kind,
        namespaced,
        subresources,
    )
    assert resource.short_names == short_names
    assert resource.verbs == verbs
    assert default_registry().by_kind(resource.api_version, kind) is resource
    assert isinstance(resource.schema, TypeSchema)


def test_exactly_the_expected_resources_are_served() -> None:
    # 23, and the admission policies and their bindings (registry/admission_policies.py: dispatch's pod fence)
    assert len(default_registry().all()) == 25


@pytest.mark.parametrize("version", ["v1beta1", "v1beta3"])
def test_only_the_kueue_storage_version_is_served(version: str) -> None:
    registry = default_registry()
    assert registry.by_path("kueue.x-k8s.io", version, "workloads") is None
    assert registry.by_kind(f"kueue.x-k8s.io/{version}", "Workload") is None
    assert registry.groups()["kueue.x-k8s.io"] == ["v1beta2"]


def test_groups_list_built_in_groups_first() -> None:
    groups = default_registry().groups()
    assert list(groups)[:4] == ["", "batch", "coordination.k8s.io", "authorization.k8s.io"]
    assert groups[""] == ["v1"]
    assert groups["trainer.kubeflow.org"] == ["v1alpha1"]
    assert groups["jobset.x-k8s.io"] == ["v1alpha2"]


@pytest.mark.parametrize(
    ("group", "plural", "api_version", "qualified", "builtin", "unconditional"),
    [
        ("", "pods", "v1", "pods", True, True),
        ("batch", "jobs", "batch/v1", "jobs.batch", True, True),
        (
            "trainer.kubeflow.org",
            "trainjobs",
            "trainer.kubeflow.org/v1alpha1",
            "trainjobs.trainer.kubeflow.org",
            False,
            False,
        ),
    ],
)
def test_naming_properties(
    group: str, plural: str, api_version: str, qualified: str, builtin: bool, unconditional: bool
) -> None:
    resource = next(r for r in default_registry().all() if r.group == group and r.plural == plural)
    assert resource.api_version == resource.group_version == api_version
    assert resource.qualified == qualified
    assert resource.is_builtin is builtin
    assert resource.allows_unconditional_update is unconditional
    assert isinstance(resource.schema, BuiltinSchema if builtin else CrdSchema)


def test_the_reviews_are_marked_review_only() -> None:
    reviews = [r for r in default_registry().all() if r.review_only]
    assert [r.plural for r in reviews] == ["selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"]


def test_default_registry_is_cached() -> None:
    assert default_registry() is default_registry()


def test_registry_refuses_a_resource_twice() -> None:
    pods = builtin_types()[1]
    with pytest.raises(ValueError, match="registered twice"):
        Registry([pods, pods])


def test_eight_crds_are_loaded_as_package_data() -> None:
    kinds = sorted(crd["spec"]["names"]["kind"] for crd in load_crds())
    assert kinds == [
        "AdmissionCheck",
        "ClusterQueue",
        "ClusterTrainingRuntime",
        "JobSet",
        "LocalQueue",
        "TrainJob",
        "TrainingRuntime",
        "Workload",
    ]
    assert [r.kind for r in crd_types()] == [
        "JobSet",
        "AdmissionCheck",
        "ClusterQueue",
        "LocalQueue",
        "Workload",
        "ClusterTrainingRuntime",
        "TrainingRuntime",
        "TrainJob",
    ]
