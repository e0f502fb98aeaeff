"""The names dispatch reads and writes, and the API coordinates of the kinds it touches.

Every label, annotation, taint and condition name lives here once, so that code, docs and messages cannot
drift apart. The dispatch keys are exactly the seed's (DESIGN §2), so objects stay interoperable with the
original Go dispatch. The upstream names are cited to research/k8s-apis.md.

The small accessors at the end read those names off plain JSON objects as the API returns them. They never
raise on a missing or ill-typed field: a missing field reads as absent, which every caller treats as "not
proven" rather than as "fine".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

# --- dispatch's own names (DESIGN §2) -----------------------------------------------------------------------

DISPATCH_DOMAIN: Final = "dispatch.phpboyscout.uk"

#: label on the TrainJob and, through the dispatch runtime patch, on every pod
LABEL_JOB_ID: Final = "dispatch.phpboyscout.uk/job-id"
#: label on the TrainJob and, through the dispatch runtime patch, on every pod
LABEL_SUBMISSION: Final = "dispatch.phpboyscout.uk/submission"
#: the admission number A: a per-object counter, raised by exactly one in the write that admits
ANNOTATION_ADMISSION: Final = "dispatch.phpboyscout.uk/admission"
#: A again, as a pod label put by the dispatch runtime patch (the pod side of the execution identity)
POD_LABEL_ADMISSION: Final = "dispatch.phpboyscout.uk/admission"
#: the `manager` of the one runtime patch entry dispatch owns on a TrainJob (k8s-apis §1.2)
RUNTIME_PATCH_MANAGER: Final = "dispatch.phpboyscout.uk/dispatch"
#: the pod-template labels the dispatch runtime patch puts, in this order
POD_LABELS: Final = (LABEL_JOB_ID, LABEL_SUBMISSION, POD_LABEL_ADMISSION)
#: Kueue mode: the AdmissionCheck `spec.controllerName` of dispatch's admission check controller (DESIGN §6)
ADMISSION_CHECK_CONTROLLER: Final = "dispatch.phpboyscout.uk/drained"
#: Kueue mode: which Workload admission raised A last, so that raising A is idempotent per Workload admission.
#: Not in the seed; the value is an opaque key chosen by the admission check controller.
ANNOTATION_ADMISSION_KEY: Final = "dispatch.phpboyscout.uk/admission-key"
#: plain mode: the pods of execution A that were not finished when dispatch held it, by node (fencing.py);
#: what lets a drain check see a pod whose object vanished while its node was lost (anchors §8.1)
ANNOTATION_EXECUTION_PODS: Final = "dispatch.phpboyscout.uk/execution-pods"
#: plain mode: the server time at which dispatch's admitting write started the current execution (the `Date` of
#: the API server's last answer before that write); what lets a hold long after the start skip the settle
#: (evidence.py). Not in the seed.
ANNOTATION_ADMITTED_AT: Final = "dispatch.phpboyscout.uk/admitted-at"
#: the runtime risks (policy.py) a platform team accepted for the current execution, written by the admitting
#: write so that `dispatch status` can show them. Not in the seed.
ANNOTATION_ACCEPTED_RISKS: Final = "dispatch.phpboyscout.uk/accepted-risks"
#: the pod fence's identity (uids and generations of its policy and binding) when the current execution was
#: admitted, or the TrainJob opened: what lets the next admission tell that it stayed in force (fence.py). Not in
#: the seed.
ANNOTATION_POD_FENCE: Final = "dispatch.phpboyscout.uk/pod-fence"
#: a restart chain's submission k+1 (restarts.py): which submission it follows and how that one's pods went
#: (`{"submission": k, "drained": "drained" | "ceased"}`), written in the create, so that a new try of the chain
#: reads its history back from the cluster. Not in the seed.
ANNOTATION_FOLLOWS: Final = "dispatch.phpboyscout.uk/follows"

# --- upstream names -----------------------------------------------------------------------------------------

#: JobSet puts it on child Jobs and pods; the value is the JobSet name, which is the TrainJob name
#: (k8s-apis §1.4, §2.1; Kueue's own TrainJob PodLabelSelector uses it)
LABEL_JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
#: JobSet puts these on child Jobs and pods (k8s-apis §2.1): the replicated job's name and the Job's index in it
LABEL_JOBSET_REPLICATED_JOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
#: the Job controller puts it on its pods; the value is the Job's name (k8s-apis §3)
LABEL_JOB_NAME: Final = "batch.kubernetes.io/job-name"
#: the Job controller's pod annotation and label for an Indexed Job's completion index (k8s-apis §3)
ANNOTATION_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
#: non-graceful node shutdown taint; any value, any effect (k8s-apis §5.4)
TAINT_OUT_OF_SERVICE: Final = "node.kubernetes.io/out-of-service"
#: the value the Kubernetes docs use for the out-of-service taint (k8s-apis §5.4)
TAINT_OUT_OF_SERVICE_VALUE: Final = "nodeshutdown"
#: a TrainJob with this label is managed by Kueue: Kueue owns `spec.suspend` (k8s-apis §4.3, DESIGN §6)
LABEL_KUEUE_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
#: the runtime patch manager Kueue appends on create and rewrites on admission (k8s-apis §4.6)
KUEUE_RUNTIME_PATCH_MANAGER: Final = "kueue.x-k8s.io/manager"
#: label Kueue puts on a Workload: the UID of the job that owns it (k8s-apis §4.2)
LABEL_KUEUE_JOB_UID: Final = "kueue.x-k8s.io/job-uid"
#: pod annotation that opts a pod into Kueue's failure recovery, which marks it Failed and force-deletes it
#: without proof that its containers stopped (k8s-apis §4.7); dispatch refuses runtimes that set it
ANNOTATION_SAFE_TO_FORCEFULLY_DELETE: Final = "kueue.x-k8s.io/safe-to-forcefully-delete"
#: `spec.managedBy` of a TrainJob Trainer's own controller runs (the CRD's default; the only other value it admits,
#: `kueue.x-k8s.io/multikueue`, hands the TrainJob to MultiKueue, which runs it on another cluster: Trainer v2.3.0
#: `trainer.kubeflow.org_trainjobs.yaml`)
TRAINER_MANAGED_BY: Final = "trainer.kubeflow.org/trainjob-controller"

# --- condition types ----------------------------------------------------------------------------------------

#: pod condition Kueue's failure recovery adds when it writes phase Failed (k8s-apis §4.7)
CONDITION_KUEUE_FAILURE_RECOVERY: Final = "KueueFailureRecovery"
#: pod condition PodGC adds (reason DeletionByPodGC) before it deletes a pod of a deleted node (k8s-apis §5.5)
CONDITION_DISRUPTION_TARGET: Final = "DisruptionTarget"
#: TrainJob conditions (k8s-apis §1.3)
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_COMPLETE: Final = "Complete"
CONDITION_FAILED: Final = "Failed"
#: Node condition (k8s-apis §5.3)
CONDITION_READY: Final = "Ready"
#: Workload condition (k8s-apis §4.2)
CONDITION_ADMITTED: Final = "Admitted"

# --- pod phases (k8s-apis §5.1) -----------------------------------------------------------------------------

PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_FAILED: Final = "Failed"
TERMINAL_PHASES: Final = frozenset({PHASE_SUCCEEDED, PHASE_FAILED})


# --- API coordinates ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiCoordinates:
    """Where a kind lives in the REST API: enough for a driver to build the URL or pick a client call."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """`apiVersion` as objects carry it: `v1` for the core group, `group/version` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """The resource as RBAC and error messages name it: `nodes`, `trainjobs.trainer.kubeflow.org`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path. Callers pass only validated names (validation.py); nothing here quotes."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        scope = f"/namespaces/{namespace}" if self.namespaced and namespace is not None else ""
        tail = f"/{name}" if name is not None else ""
        return f"{prefix}{scope}/{self.plural}{tail}"


TRAINJOB: Final = ApiCoordinates("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", namespaced=True)
TRAINING_RUNTIME: Final = ApiCoordinates(
    "trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", namespaced=True
)
CLUSTER_TRAINING_RUNTIME: Final = ApiCoordinates(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", namespaced=False
)
JOBSET: Final = ApiCoordinates("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", namespaced=True)
JOB: Final = ApiCoordinates("batch", "v1", "jobs", "Job", namespaced=True)
WORKLOAD: Final = ApiCoordinates("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", namespaced=True)
POD: Final = ApiCoordinates("", "v1", "pods", "Pod", namespaced=True)
NODE: Final = ApiCoordinates("", "v1", "nodes", "Node", namespaced=False)
VALIDATING_ADMISSION_POLICY: Final = ApiCoordinates(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", namespaced=False
)
VALIDATING_ADMISSION_POLICY_BINDING: Final = ApiCoordinates(
    "admissionregistration.k8s.io",
    "v1",
    "validatingadmissionpolicybindings",
    "ValidatingAdmissionPolicyBinding",
    namespaced=False,
)

#: `spec.runtimeRef` defaults (k8s-apis §1.2)
RUNTIME_REF_DEFAULT_API_GROUP: Final = "trainer.kubeflow.org"
RUNTIME_REF_DEFAULT_KIND: Final = "ClusterTrainingRuntime"
RUNTIME_KINDS: Final = {r.kind: r for r in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)}


# --- reading the names off plain JSON objects ---------------------------------------------------------------


def field(obj: Mapping[str, Any] | None, *path: str) -> Any:
    """`obj[path[0]][path[1]]...`, or None where any step is missing or not a mapping."""
    current: Any = obj
    for key in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(key)
    return current


def string_map(obj: Mapping[str, Any] | None, *path: str) -> dict[str, str]:
    """A `map[string]string` field such as labels; entries whose value is not a string are dropped."""
    value = field(obj, *path)
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def labels_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return string_map(obj, "metadata", "labels")


def annotations_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    return string_map(obj, "metadata", "annotations")


def object_list(obj: Mapping[str, Any] | None, *path: str) -> list[Mapping[str, Any]]:
    """A list-of-objects field; entries that are not objects are dropped."""
    value = field(obj, *path)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def condition(obj: Mapping[str, Any] | None, condition_type: str) -> Mapping[str, Any] | None:
    """The `status.conditions[]` entry of that type, if any."""
    for entry in object_list(obj, "status", "conditions"):
        if entry.get("type") == condition_type:
            return entry
    return None


def condition_is_true(obj: Mapping[str, Any] | None, condition_type: str) -> bool:
    return bool(field(condition(obj, condition_type), "status") == "True")


def parse_time(text: object) -> datetime | None:
    """A `metav1.Time` as the API writes it (RFC 3339, `Z` or an offset), or None for anything else, a time
    without a zone included (the API never writes one). The one parser of the API's times in the provider."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def uid_of(obj: Mapping[str, Any] | None) -> str | None:
    value = field(obj, "metadata", "uid")
    return value if isinstance(value, str) and value else None


def controller_uid(obj: Mapping[str, Any] | None) -> str | None:
    """The uid of the object's controller ownerReference (`controller: true`), if any."""
    for reference in object_list(obj, "metadata", "ownerReferences"):
        if reference.get("controller") is True:
            uid = reference.get("uid")
            return uid if isinstance(uid, str) and uid else None
    return None


def name_of(obj: Mapping[str, Any] | None) -> str:
    value = field(obj, "metadata", "name")
    return value if isinstance(value, str) else ""


def namespace_of(obj: Mapping[str, Any] | None) -> str:
    value = field(obj, "metadata", "namespace")
    return value if isinstance(value, str) else ""
