"""The pod fence: the admission policy that keeps every pod of a dispatch TrainJob in the API until it is proven
stopped, and whether it is in force for an execution (docs/decisions/pod-fence.md).

A listing of pods sees a pod only while its object exists. The object goes, while the process may still run,
when someone deletes it with a grace period of 0 (`kubectl delete pod --force --grace-period=0`, a cleaner, the
second half of Kueue's failure recovery, an eviction with a grace of 0): every other deletion keeps it, with a
deletionTimestamp, until its kubelet reports it stopped, and every component that deletes with grace 0 on its
own first writes a terminal phase (the kubelet deletes only a pod whose phase is terminal, `canBeDeleted` in
`pkg/kubelet/status/status_manager.go`; PodGC patches `Failed` first, `markFailedAndDeletePodWithCondition` in
`pkg/controller/podgc/gc_controller.go`; Kubernetes v1.36.3). And a pod whose identity labels someone removes
drops out of dispatch's label selections and out of its Job, which then replaces it beside it.

So dispatch ships a `ValidatingAdmissionPolicy` (`admissionregistration.k8s.io/v1`, GA since Kubernetes 1.30)
and its binding, both named `POLICY_NAME` and installed once by a cluster administrator. It refuses:

* a DELETE whose effective grace period is 0 (the deletion's `gracePeriodSeconds`, else the pod's own
  `terminationGracePeriodSeconds`, else the API's default 30) of a pod that carries dispatch's job-id label, is
  scheduled, and may still run (its phase is not terminal, or it is `Failed` with Kueue's `KueueFailureRecovery`
  condition, which is no proof: blocking.py);
* an eviction (`pods/eviction`) whose grace period is 0, of any pod: an Eviction does not carry the pod's
  labels, so the policy cannot tell whose pod it is;
* an UPDATE (of the pod or its status) that adds, changes or removes one of `PROTECTED_LABELS` on a pod that
  carries dispatch's job-id label and may still run.

The policy reads the deletion's options as `request.options` (`k8s.io/apiserver` v0.36.3,
`pkg/admission/plugin/cel/condition.go` `CreateAdmissionRequest`) and the pod as stored as `oldObject`. Its
denial is the API server's `<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with
binding '<binding>' denied request: <message>`, reason Forbidden (`validating/dispatcher.go`), where the message
names the pod, its node and what to do instead.

dispatch verifies the fence rather than assuming it (`judge_fence`): the policy and binding must exist and be
dispatch's (the same rules, match conditions, variables and validations; `failurePolicy: Fail`; the binding's
actions include `Deny`; nothing narrows what they match). The admitting write records their uids and
generations (`FenceIdentity`, annotation `dispatch.phpboyscout.uk/pod-fence`, tagged with the admission number
it was recorded for), and the next admission's check requires the same (`in_force_throughout`): then the fence
was in force, unchanged, for the whole execution it ends, and none of that execution's pods can have left the
API unseen. Neither a uid nor a generation can be set by a client; removing and re-creating either object changes
its uid, and any change of its spec its generation.

Decisions and their limits:

* The check reads the fence last, after the pods (programs/releasing.py, `_check_before_admission`): the identity
  it compares must be newer than the listing it vouches for. Read before the listing, a fence removed between the
  two reads, and a pod force-deleted meanwhile, would pass unseen.
* The eviction rule applies to every pod in every namespace. An eviction's `oldObject` is null and the deletion it
  makes passes no validating admission, so the policy cannot see whose pod it is; narrowing it by namespace would
  make the namespaces' labels, which neither uid nor generation covers, part of what the fence relies on
  (docs/decisions/pod-fence.md, "The fence's scope").

* The API servers load a new or changed policy from their watch, which takes a moment: a fence installed a
  second before an admission may not yet stop a deletion of that execution's first pods. Pods take longer than
  that to be created and started; nothing here waits for it.
* A pod whose own `terminationGracePeriodSeconds` is 0 cannot be deleted while it is scheduled and may run: every
  deletion of it would remove it at once. A runtime with grace 0 cannot be held under the fence.
* PodGC's removal of the pods of a deleted Node passes (they are `Failed` first): deleting a Node is the
  operator's assertion that its machine is gone (nodes.py, fencing.py).
* A person who may update `pods/status` can write a terminal phase the kubelet did not report, and then delete
  the pod; the API gives that right to whoever holds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from airflow_provider_dispatch.dispatch.nodes import NodeRead
from airflow_provider_dispatch.dispatch.vocabulary import (
    ANNOTATION_POD_FENCE,
    CONDITION_KUEUE_FAILURE_RECOVERY,
    LABEL_JOB_ID,
    LABEL_JOB_NAME,
    LABEL_JOBSET_NAME,
    LABEL_SUBMISSION,
    POD_LABEL_ADMISSION,
    TAINT_OUT_OF_SERVICE,
    TAINT_OUT_OF_SERVICE_VALUE,
    annotations_of,
    field,
    object_list,
    uid_of,
)

#: the name of the policy and of its binding (both cluster-scoped)
POLICY_NAME: Final = "pod-fence.dispatch.phpboyscout.uk"
BINDING_NAME: Final = POLICY_NAME
#: the labels that say which TrainJob, execution and Job a pod belongs to: dispatch's, JobSet's and the Job's
#: (`job-name` and `controller-uid` are the Job's legacy spellings, still set in v1.36)
PROTECTED_LABELS: Final = (
    LABEL_JOB_ID,
    LABEL_SUBMISSION,
    POD_LABEL_ADMISSION,
    LABEL_JOBSET_NAME,
    LABEL_JOB_NAME,
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "controller-uid",
)

_LABELS = "[" + ", ".join(f"'{key}'" for key in PROTECTED_LABELS) + "]"
_OLD_HAS = "(has(oldObject.metadata.labels) && k in oldObject.metadata.labels)"
_NEW_HAS = "(has(object.metadata.labels) && k in object.metadata.labels)"

#: the policy's CEL, one place: the manifest below and the lab's evaluation of it use these texts
#: the request asks for an eviction (`pods/eviction`); an admission request leaves an empty `subResource` out
#: (`admission/v1` `AdmissionRequest`, `json:"subResource,omitempty"`), so its presence is tested first
EVICTION: Final = "has(request.subResource) && request.subResource == 'eviction'"
MATCH_CONDITION: Final = (
    f"({EVICTION}) || (has(oldObject.metadata.labels) && '{LABEL_JOB_ID}' in oldObject.metadata.labels)"
)
MAY_RUN: Final = (
    "!variables.eviction && !(has(oldObject.status) && has(oldObject.status.phase) && "
    "(oldObject.status.phase == 'Succeeded' || (oldObject.status.phase == 'Failed' && "
    "!(has(oldObject.status.conditions) && oldObject.status.conditions.exists(c, "
    f"c.type == '{CONDITION_KUEUE_FAILURE_RECOVERY}' && c.status == 'True')))))"
)
SCHEDULED: Final = "!variables.eviction && has(oldObject.spec.nodeName) && oldObject.spec.nodeName != ''"
GRACE: Final = (
    "has(request.options) && has(request.options.gracePeriodSeconds) ? int(request.options.gracePeriodSeconds) "
    ": (has(oldObject.spec.terminationGracePeriodSeconds) ? oldObject.spec.terminationGracePeriodSeconds : 30)"
)
NO_FORCE_DELETION: Final = (
    "request.operation != 'DELETE' || !variables.scheduled || !variables.mayRun || variables.grace != 0"
)
NO_FORCE_DELETION_MESSAGE: Final = (
    "'pod ' + oldObject.metadata.name + ' of a dispatch TrainJob may still run on node ' + oldObject.spec.nodeName"
    " + ': a deletion with grace period 0 would remove it before its kubelet confirms that it stopped, and hide "
    "the process from dispatch. Prove that the machine stopped instead: power it off, then kubectl taint node ' + "
    f"oldObject.spec.nodeName + ' {TAINT_OUT_OF_SERVICE}={TAINT_OUT_OF_SERVICE_VALUE}:NoExecute (PodGC then "
    "removes the pod); or delete the pod with a grace period'"
)
NO_RELABEL: Final = (
    f"request.operation != 'UPDATE' || !variables.mayRun || {_LABELS}.all(k, {_OLD_HAS} == {_NEW_HAS} && "
    f"(!{_OLD_HAS} || oldObject.metadata.labels[k] == object.metadata.labels[k]))"
)
NO_RELABEL_MESSAGE: Final = (
    "'pod ' + oldObject.metadata.name + ' of a dispatch TrainJob has not finished, so its labels "
    f"{', '.join(PROTECTED_LABELS)} cannot change until it has: dispatch and its Job find it by them, and a "
    "Job replaces a pod taken out of it beside it'"
)
NO_FORCE_EVICTION: Final = (
    "!variables.eviction || !(has(object.deleteOptions) && "
    "has(object.deleteOptions.gracePeriodSeconds) && object.deleteOptions.gracePeriodSeconds == 0)"
)
NO_FORCE_EVICTION_MESSAGE: Final = (
    "an eviction with grace period 0 removes the pod before its kubelet confirms that it stopped; dispatch's pod "
    "fence refuses it for every pod, since an Eviction does not say whose pod it is. Evict with the pod's own "
    "grace period"
)


def policy_manifest() -> dict[str, Any]:
    """The `ValidatingAdmissionPolicy`, as `kubectl apply` takes it (`dispatch pod-fence` prints it)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "labels": {"app.kubernetes.io/name": "airflow-provider-dispatch"}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["DELETE", "UPDATE"],
                        "resources": ["pods", "pods/status"],
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods/eviction"],
                    },
                ]
            },
            "matchConditions": [{"name": "dispatch-pod-or-eviction", "expression": MATCH_CONDITION}],
            "variables": [
                {"name": "eviction", "expression": EVICTION},
                {"name": "mayRun", "expression": MAY_RUN},
                {"name": "scheduled", "expression": SCHEDULED},
                {"name": "grace", "expression": GRACE},
            ],
            "validations": [
                {
                    "expression": NO_FORCE_DELETION,
                    "messageExpression": NO_FORCE_DELETION_MESSAGE,
                    "reason": "Forbidden",
                },
                {"expression": NO_RELABEL, "messageExpression": NO_RELABEL_MESSAGE, "reason": "Forbidden"},
                {"expression": NO_FORCE_EVICTION, "message": NO_FORCE_EVICTION_MESSAGE, "reason": "Forbidden"},
            ],
        },
    }


def binding_manifest() -> dict[str, Any]:
    """Its `ValidatingAdmissionPolicyBinding`: every namespace, action Deny."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": BINDING_NAME, "labels": {"app.kubernetes.io/name": "airflow-provider-dispatch"}},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }


def manifests() -> tuple[dict[str, Any], dict[str, Any]]:
    return policy_manifest(), binding_manifest()


# --- verification --------------------------------------------------------------------------------------------


class FenceState(StrEnum):
    """What the fence's objects showed."""

    IN_FORCE = "in force"
    ABSENT = "not installed"
    ALTERED = "not dispatch's"
    NOT_READABLE = "not readable"


@dataclass(frozen=True)
class FenceIdentity:
    """The policy's and the binding's uid and generation: what changes whenever either changes."""

    policy: str
    binding: str

    def to_annotation(self, admission: int) -> str:
        return json.dumps({"admission": admission, "policy": self.policy, "binding": self.binding}, sort_keys=True)


@dataclass(frozen=True)
class Fence:
    """The fence as read now: its state, its identity when in force, and why it is not when it is not."""

    state: FenceState
    identity: FenceIdentity | None = None
    problem: str = ""

    @property
    def in_force(self) -> bool:
        return self.state is FenceState.IN_FORCE


FenceLookup = Mapping[str, Any] | NodeRead


def _identity_of(obj: Mapping[str, Any]) -> str:
    generation = field(obj, "metadata", "generation")
    return f"{uid_of(obj) or '?'}/{generation if isinstance(generation, int) else '?'}"


def _rules(spec: Mapping[str, Any] | None, *path: str) -> list[tuple[frozenset[str], ...]]:
    """Resource rules as comparable sets (the API server adds `scope: "*"`, which is not compared)."""
    rules = []
    for rule in object_list(spec, *path):
        rules.append(
            tuple(
                frozenset(str(x) for x in value) if isinstance(value := rule.get(key), list) else frozenset()
                for key in ("apiGroups", "apiVersions", "operations", "resources")
            )
        )
    return sorted(rules, key=repr)


def _empty_selector(value: object) -> bool:
    return value is None or (
        isinstance(value, Mapping) and not value.get("matchLabels") and not value.get("matchExpressions")
    )


def _pairs(spec: Mapping[str, Any] | None, key: str, *fields: str) -> list[tuple[Any, ...]]:
    return [tuple(item.get(f) for f in fields) for item in object_list(spec, key)]


def policy_differences(policy: Mapping[str, Any]) -> list[str]:
    """How an installed policy differs from dispatch's in what the fence relies on (empty: it is dispatch's)."""
    mine = policy_manifest()["spec"]
    spec = field(policy, "spec")
    found: list[str] = []
    if field(spec, "failurePolicy") not in (None, "Fail"):
        found.append(f"failurePolicy is {field(spec, 'failurePolicy')}, not Fail")
    if field(spec, "paramKind") is not None:
        found.append("it takes parameters")
    constraints = field(spec, "matchConstraints")
    if _rules(constraints, "resourceRules") != _rules(mine["matchConstraints"], "resourceRules"):
        found.append("its resource rules differ")
    if object_list(constraints, "excludeResourceRules"):
        found.append("it excludes resources")
    for selector in ("namespaceSelector", "objectSelector"):
        if not _empty_selector(field(constraints, selector)):
            found.append(f"its {selector} narrows what it matches")
    for key, fields in (
        ("matchConditions", ("name", "expression")),
        ("variables", ("name", "expression")),
        ("validations", ("expression", "message", "messageExpression", "reason")),
    ):
        if _pairs(spec, key, *fields) != _pairs(mine, key, *fields):
            found.append(f"its {key} differ")
    return found


def binding_differences(binding: Mapping[str, Any]) -> list[str]:
    """How an installed binding differs from dispatch's in what the fence relies on."""
    spec = field(binding, "spec")
    found: list[str] = []
    if field(spec, "policyName") != POLICY_NAME:
        found.append(f"it binds policy {field(spec, 'policyName')!r}")
    actions = field(spec, "validationActions")
    if not isinstance(actions, list) or "Deny" not in actions:
        found.append("its validationActions do not include Deny")
    if field(spec, "paramRef") is not None:
        found.append("it passes parameters")
    resources = field(spec, "matchResources")
    if object_list(resources, "resourceRules") or object_list(resources, "excludeResourceRules"):
        found.append("its matchResources name resources")
    for selector in ("namespaceSelector", "objectSelector"):
        if not _empty_selector(field(resources, selector)):
            found.append(f"its matchResources.{selector} narrows what it matches")
    return found


def _install_hint() -> str:
    return "install it with `dispatch pod-fence | kubectl apply -f -` (docs/runbook.md, the pod fence)"


def judge_fence(policy: FenceLookup, binding: FenceLookup) -> Fence:
    """The fence as the two lookups show it (a lookup is the object, or NodeRead.GONE / NOT_READABLE)."""
    if NodeRead.NOT_READABLE in (policy, binding):
        return Fence(
            FenceState.NOT_READABLE,
            problem=(
                f"dispatch may not read the pod fence (ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding "
                f"{POLICY_NAME}): grant get on validatingadmissionpolicies and validatingadmissionpolicybindings "
                "(the dispatch-fence-reader ClusterRole, docs/rbac.md)"
            ),
        )
    missing = [kind for kind, found in (("policy", policy), ("binding", binding)) if found is NodeRead.GONE]
    if missing:
        return Fence(
            FenceState.ABSENT,
            problem=f"the pod fence {POLICY_NAME} is not installed (no {' or '.join(missing)}): {_install_hint()}",
        )
    assert isinstance(policy, Mapping)
    assert isinstance(binding, Mapping)
    differences = [f"policy: {d}" for d in policy_differences(policy)] + [
        f"binding: {d}" for d in binding_differences(binding)
    ]
    if differences:
        return Fence(
            FenceState.ALTERED,
            problem=(
                f"the installed pod fence {POLICY_NAME} is not dispatch's ({'; '.join(differences)}): {_install_hint()}"
            ),
        )
    return Fence(FenceState.IN_FORCE, FenceIdentity(_identity_of(policy), _identity_of(binding)))


def recorded_fence(trainjob: Mapping[str, Any], admission: int) -> FenceIdentity | None:
    """The fence identity recorded when execution `admission` was admitted (or opened, for 0); None when none
    was, or the annotation is of another execution or unreadable (then nothing is proven: never an error)."""
    raw = annotations_of(trainjob).get(ANNOTATION_POD_FENCE)
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("admission") != admission:
        return None
    policy, binding = body.get("policy"), body.get("binding")
    if not isinstance(policy, str) or not isinstance(binding, str):
        return None
    return FenceIdentity(policy, binding)


def in_force_throughout(fence: Fence, recorded: FenceIdentity | None) -> str | None:
    """None when the fence was in force, unchanged, since the execution's admission (its identity then is the
    one now); otherwise why that is not shown."""
    if not fence.in_force:
        return fence.problem
    if recorded is None:
        return (
            "the pod fence was not recorded when the execution was admitted or the TrainJob opened (the fence was "
            "not in force then, or an earlier version of dispatch wrote it), so a pod may have been force-deleted "
            "since"
        )
    if recorded != fence.identity:
        return (
            f"the pod fence changed during the execution (policy and binding uid/generation {recorded.policy}, "
            f"{recorded.binding} then, {fence.identity.policy if fence.identity else '?'}, "
            f"{fence.identity.binding if fence.identity else '?'} now), so a pod of it may have been force-deleted "
            "meanwhile"
        )
    return None


__all__ = [
    "BINDING_NAME",
    "POLICY_NAME",
    "PROTECTED_LABELS",
    "Fence",
    "FenceIdentity",
    "FenceLookup",
    "FenceState",
    "binding_differences",
    "binding_manifest",
    "in_force_throughout",
    "judge_fence",
    "manifests",
    "policy_differences",
    "policy_manifest",
    "recorded_fence",
]
