"""Installing dispatch's pod fence (dispatch/fence.py) in a cluster, as its administrator does once.

`kubectl apply -f` of `dispatch pod-fence`'s output does the same; the lab's API server evaluates the policy
(`apiserver/registry/admission_policies.py`), and so does a real kube-apiserver (tests/real).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch.fence import BINDING_NAME, POLICY_NAME, binding_manifest, policy_manifest


def install_pod_fence(api: kubernetes.client.ApiClient) -> tuple[dict[str, Any], dict[str, Any]]:
    """Create the fence's policy and binding (or leave them when they exist); returns both as stored."""
    admission = kubernetes.client.AdmissionregistrationV1Api(api)
    creates: tuple[Callable[[], object], ...] = (
        lambda: admission.create_validating_admission_policy(policy_manifest()),
        lambda: admission.create_validating_admission_policy_binding(binding_manifest()),
    )
    for create in creates:
        try:
            create()
        except ApiException as error:
            if error.status != 409:
                raise
    policy = api.sanitize_for_serialization(admission.read_validating_admission_policy(POLICY_NAME))
    binding = api.sanitize_for_serialization(admission.read_validating_admission_policy_binding(BINDING_NAME))
    return policy, binding


def remove_pod_fence(api: kubernetes.client.ApiClient) -> None:
    """Delete the binding and the policy (a 404 is fine)."""
    admission = kubernetes.client.AdmissionregistrationV1Api(api)
    deletes: tuple[Callable[[], object], ...] = (
        lambda: admission.delete_validating_admission_policy_binding(BINDING_NAME),
        lambda: admission.delete_validating_admission_policy(POLICY_NAME),
    )
    for delete in deletes:
        try:
            delete()
        except ApiException as error:
            if error.status != 404:
                raise
