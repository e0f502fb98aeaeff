"""Schemas of the built-in kinds the lab serves: pods, nodes, namespaces, events, jobs, leases, reviews.

Field names and types come from the official `kubernetes` client's generated models
(`kubernetes.client.models.V1Pod.openapi_types` / `attribute_map`, recursively), which mirror the upstream
OpenAPI. They decide pruning (the apiserver decodes JSON into Go structs, so unknown fields are dropped,
`null` is the zero value) and type checks (a mismatch is a decode error there: the apiserver answers 400
BadRequest `<Kind> in version "v1" cannot be handled as a <Kind>: json: cannot unmarshal ...`; `decode_error`
gives that text, and `validate` also reports it as a FieldValueTypeInvalid cause).

Defaulting follows `pkg/apis/core/v1/defaults.go` (`SetDefaults_Pod`, `SetDefaults_PodSpec`,
`SetDefaults_Container`, `SetDefaults_Probe`, `SetDefaults_HTTPGetAction`, `SetDefaults_Volume`, the volume
sources' `DefaultMode`, `SetDefaults_ObjectFieldSelector`, `SetDefaults_Namespace`,
`SetDefaults_NamespaceStatus`, `SetDefaults_NodeStatus`, `ContainerPort.Protocol` `+default="TCP"`) and
`pkg/apis/batch/v1/defaults.go` (`SetDefaults_Job`), with `JobPodReplacementPolicy` on (GA in 1.34, the
version the lab reports). The generated defaulters apply the nested functions wherever the type occurs, so a
Job's pod template gets the PodSpec and Container defaults too.

Validation is the part of `pkg/apis/core/validation/validation.go` (`ValidatePodCreate`, `ValidatePodSpec`,
`validateContainers`, `ValidateTolerations`, `ValidatePodUpdate`, `validateOnlyAddedTolerations`,
`validateOnlyDeletedSchedulingGates`, `ValidateNamespace`, `ValidateNode`) and
`pkg/apis/batch/validation/validation.go` (`ValidateJob`, `validateJobSpec`, `ValidateJobTemplateSpec`,
`ValidateJobSpecUpdate`) that the lab's controllers and tests exercise; what is left out is said at each
function.

List semantics come from the `+listType`/`+listMapKey` markers (server-side apply) and `patchStrategy`/
`patchMergeKey` tags (strategic merge patch) of `kubernetes/api core/v1/types.go` and `batch/v1/types.go`, as
published in `kubernetes/kubernetes:api/openapi-spec/v3/api__v1_openapi.json` (`x-kubernetes-list-type`,
`x-kubernetes-list-map-keys`, `x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`); the pod-spec
entries agree with the PodSpec schemas controller-gen copied into the JobSet and Trainer CRDs.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kubernetes import client as k8s_client

from airflow_provider_dispatch_lab.apiserver.auth import rbac_validation as rbac
from airflow_provider_dispatch_lab.apiserver.registry.patching import ATOMIC, ListSemantics
from airflow_provider_dispatch_lab.apiserver.validation import schema_fields as f
from airflow_provider_dispatch_lab.apiserver.validation import schema_meta
from airflow_provider_dispatch_lab.apiserver.validation.schema_fields import FieldCause

Obj = dict[str, Any]

# ---------------------------------------------------------------------------------------------- the type tree


@dataclass(frozen=True)
class FieldType:
    """A field's type as the client models spell it: `str`, `int`, `list[V1Container]`, `dict[str, str]`."""

    kind: str  # "scalar" | "list" | "map" | "model" | "any"
    name: str = ""  # scalar name or model name
    element: FieldType | None = None
    quantity: bool = False


_SCALARS = {"str", "int", "bool", "float", "datetime", "date"}


def _parse(spelled: str, quantity: bool = False) -> FieldType:
    spelled = spelled.strip()
    if spelled.startswith("list[") and spelled.endswith("]"):
        return FieldType("list", element=_parse(spelled[5:-1], quantity))
    for opener, closer in (("dict[", "]"), ("dict(", ")")):
        if spelled.startswith(opener) and spelled.endswith(closer):
            value = spelled[len(opener) : -1].split(",", 1)[1]
            return FieldType("map", element=_parse(value, quantity))
    if spelled == "object":
        return FieldType("any")
    if spelled in _SCALARS:
        return FieldType("scalar", spelled, quantity=quantity)
    return FieldType("model", spelled)


_QUANTITIES = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1VolumeResourceRequirements", "limits"),
    ("V1VolumeResourceRequirements", "requests"),
    ("V1PodSpec", "overhead"),
    ("V1NodeStatus", "capacity"),
    ("V1NodeStatus", "allocatable"),
    ("V1ContainerStatus", "allocatedResources"),
    ("V1EmptyDirVolumeSource", "sizeLimit"),
    ("V1ResourceFieldSelector", "divisor"),
}
"""`resource.Quantity` fields: the models say `str`, but the API accepts a JSON number too
(`apimachinery/pkg/api/resource/quantity.go` `UnmarshalJSON`) and serializes the canonical string."""


@cache
def model_fields(model: str) -> dict[str, FieldType]:
    """JSON field name -> type, for one generated model class."""
    cls = getattr(k8s_client, model, None)
    if cls is None:
        return {}
    return {
        cls.attribute_map[attr]: _parse(spelled, (model, cls.attribute_map[attr]) in _QUANTITIES)
        for attr, spelled in cls.openapi_types.items()
    }


def _go_type(t: FieldType) -> str:
    if t.kind == "scalar":
        return {"str": "string", "int": "int64", "bool": "bool", "float": "float64"}.get(t.name, "string")
    if t.kind == "list":
        assert t.element is not None
        return "[]" + _go_type(t.element)
    if t.kind == "map":
        assert t.element is not None
        return "map[string]" + _go_type(t.element)
    return "v1." + t.name.removeprefix("V1").removeprefix("CoreV1")


def _fits(value: Any, t: FieldType) -> bool:
    if t.kind == "any":
        return True
    if t.kind == "list":
        return isinstance(value, list)
    if t.kind in ("map", "model"):
        return isinstance(value, dict)
    if t.quantity:
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if t.name == "bool":
        return isinstance(value, bool)
    if t.name == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if t.name == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str)


def _prune_model(value: Any, t: FieldType) -> None:
    """Decoding into the Go types: unknown fields and nulls vanish (null is the zero value, then omitted)."""
    if t.kind == "model" and isinstance(value, dict):
        fields = model_fields(t.name)
        for k in list(value):
            sub = fields.get(k)
            if sub is None or value[k] is None:
                del value[k]
            else:
                _prune_model(value[k], sub)
    elif t.kind == "list" and isinstance(value, list):
        assert t.element is not None
        for item in value:
            _prune_model(item, t.element)
    elif t.kind == "map" and isinstance(value, dict):
        assert t.element is not None
        for k in [k for k, v in value.items() if v is None]:
            del value[k]
        for item in value.values():
            _prune_model(item, t.element)


def _type_errors(value: Any, t: FieldType, path: str, struct: str, out: list[tuple[str, str, str]]) -> None:
    """(path, json kind, Go decode message) for every value the Go types cannot hold."""
    if value is None:
        return
    if not _fits(value, t):
        kind = f.go_json_kind(value)
        out.append(
            (
                path,
                kind,
                f"json: cannot unmarshal {kind} into Go struct field {struct}.{path} of type {_go_type(t)}",
            )
        )
        return
    if t.kind == "model":
        fields = model_fields(t.name)
        struct_name = t.name.removeprefix("V1").removeprefix("CoreV1")
        for k, v in value.items():
            sub = fields.get(k)
            if sub is not None:
                _type_errors(v, sub, f.child(path, k), struct_name, out)
    elif t.kind == "list":
        assert t.element is not None
        for i, item in enumerate(value):
            _type_errors(item, t.element, f.index(path, i), struct, out)
    elif t.kind == "map":
        assert t.element is not None
        for k, item in value.items():
            _type_errors(item, t.element, f.child(path, str(k)), struct, out)


def _canonical_quantity(value: Any) -> Any:
    """A JSON number given for a quantity is stored as its canonical string (`Quantity.String`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    milli = value * 1000
    if math.isclose(milli, round(milli)):
        return f"{round(milli)}m"
    return repr(float(value))


def _canonicalize_quantities(value: Any, t: FieldType) -> None:
    if t.kind == "model" and isinstance(value, dict):
        fields = model_fields(t.name)
        for k, v in value.items():
            sub = fields.get(k)
            if sub is None:
                continue
            if sub.quantity and sub.kind == "scalar":
                value[k] = _canonical_quantity(v)
            elif sub.kind == "map" and sub.element is not None and sub.element.quantity and isinstance(v, dict):
                for name in v:
                    v[name] = _canonical_quantity(v[name])
            else:
                _canonicalize_quantities(v, sub)
    elif t.kind in ("list", "map") and t.element is not None:
        items = value if isinstance(value, list) else list(value.values()) if isinstance(value, dict) else []
        for item in items:
            _canonicalize_quantities(item, t.element)


# --------------------------------------------------------------------------------------------- list semantics


def _keyed(*keys: str) -> ListSemantics:
    return ListSemantics("map", keys)


_SET = ListSemantics("set")
_BY_NAME = _keyed("name")
_BY_TYPE = _keyed("type")

_CONTAINER_LISTS: dict[str, tuple[ListSemantics, ListSemantics]] = {
    "env": (_BY_NAME, _BY_NAME),
    "ports": (_keyed("containerPort", "protocol"), _keyed("containerPort")),
    "volumeMounts": (_keyed("mountPath"), _keyed("mountPath")),
    "volumeDevices": (_keyed("devicePath"), _keyed("devicePath")),
}

LIST_SEMANTICS: dict[tuple[str, str], tuple[ListSemantics, ListSemantics]] = {
    **{("V1ObjectMeta", name): (s, s) for name, s in schema_meta.OBJECT_META_LISTS.items()},
    ("V1PodSpec", "containers"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "initContainers"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "ephemeralContainers"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "volumes"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "imagePullSecrets"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "schedulingGates"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "resourceClaims"): (_BY_NAME, _BY_NAME),
    ("V1PodSpec", "hostAliases"): (_keyed("ip"), _keyed("ip")),
    ("V1PodSpec", "topologySpreadConstraints"): (
        _keyed("topologyKey", "whenUnsatisfiable"),
        _keyed("topologyKey"),
    ),
    ("V1PodSpec", "tolerations"): (ATOMIC, ATOMIC),
    **{("V1Container", name): s for name, s in _CONTAINER_LISTS.items()},
    **{("V1EphemeralContainer", name): s for name, s in _CONTAINER_LISTS.items()},
    ("V1ResourceRequirements", "claims"): (_BY_NAME, _BY_NAME),
    ("V1PodStatus", "conditions"): (_BY_TYPE, _BY_TYPE),
    ("V1PodStatus", "podIPs"): (_keyed("ip"), _keyed("ip")),
    ("V1PodStatus", "hostIPs"): (ATOMIC, _keyed("ip")),
    ("V1PodStatus", "resourceClaimStatuses"): (_BY_NAME, _BY_NAME),
    ("V1NodeSpec", "taints"): (ATOMIC, ATOMIC),
    ("V1NodeSpec", "podCIDRs"): (_SET, _SET),
    ("V1NodeStatus", "addresses"): (_BY_TYPE, _BY_TYPE),
    ("V1NodeStatus", "conditions"): (_BY_TYPE, _BY_TYPE),
    ("V1NamespaceStatus", "conditions"): (_BY_TYPE, _BY_TYPE),
    ("V1JobStatus", "conditions"): (ATOMIC, _BY_TYPE),
}
"""(model, field) -> (server-side apply, strategic merge patch). Every other list is atomic under both
(`+listType=atomic`, or no marker: structured-merge-diff and strategic merge patch both replace such lists).
`JobStatus.conditions` is `+listType=atomic` with `patchMergeKey=type`; `PodStatus.hostIPs` the same with
`ip`; container `ports` are keyed by `containerPort`+`protocol` for apply but merge by `containerPort`
alone."""


def _lookup(model: str, path: tuple[str, ...]) -> tuple[ListSemantics, ListSemantics]:
    t = FieldType("model", model)
    for depth, name in enumerate(path):
        while t.kind == "list" and t.element is not None:
            t = t.element
        if t.kind == "map" and t.element is not None:
            t = t.element  # `name` is a map key
            continue
        if t.kind != "model":
            return (ATOMIC, ATOMIC)
        if depth == len(path) - 1:
            return LIST_SEMANTICS.get((t.name, name), (ATOMIC, ATOMIC))
        sub = model_fields(t.name).get(name)
        if sub is None:
            return (ATOMIC, ATOMIC)
        t = sub
    return (ATOMIC, ATOMIC)


# ------------------------------------------------------------------------------------------------- defaulting


def _image_pull_policy(image: str) -> str:
    """`SetDefaults_Container` via `parsers.ParseImageName`: `:latest` or no tag and no digest -> Always."""
    reference, _, digest = image.partition("@")
    last = reference.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    if not tag and not digest:
        tag = "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


def _items(value: Any) -> list[Any]:
    """A list field as defaulting walks it; anything else (a malformed body) has no items to default."""
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    for name, value in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        if not probe.get(name):
            probe[name] = value
    http = probe.get("httpGet")
    if isinstance(http, dict):
        if not http.get("path"):
            http["path"] = "/"
        if not http.get("scheme"):
            http["scheme"] = "HTTP"


def _default_container(container: Any) -> None:
    if not isinstance(container, dict):
        return
    if not container.get("imagePullPolicy"):
        container["imagePullPolicy"] = _image_pull_policy(str(container.get("image") or ""))
    if not container.get("terminationMessagePath"):
        container["terminationMessagePath"] = "/dev/termination-log"
    if not container.get("terminationMessagePolicy"):
        container["terminationMessagePolicy"] = "File"
    for port in _items(container.get("ports")):
        if isinstance(port, dict) and not port.get("protocol"):
            port["protocol"] = "TCP"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(container.get(probe))
    for env in _items(container.get("env")):
        field_ref = _mapping(_mapping(env).get("valueFrom")).get("fieldRef")
        if isinstance(field_ref, dict) and not field_ref.get("apiVersion"):
            field_ref["apiVersion"] = "v1"


_VOLUME_SOURCES = frozenset(model_fields("V1Volume")) - {"name"}
_DEFAULT_MODE_SOURCES = ("secret", "configMap", "downwardAPI", "projected")


def _default_volume(volume: Any) -> None:
    if not isinstance(volume, dict):
        return
    if not any(volume.get(source) is not None for source in _VOLUME_SOURCES):
        volume["emptyDir"] = {}  # SetDefaults_Volume: no source means EmptyDir
    for source in _DEFAULT_MODE_SOURCES:
        if isinstance(volume.get(source), dict) and volume[source].get("defaultMode") is None:
            volume[source]["defaultMode"] = 420  # 0644
    if isinstance(volume.get("hostPath"), dict) and volume["hostPath"].get("type") is None:
        volume["hostPath"]["type"] = ""


def default_pod_spec(spec: Any) -> None:
    """`SetDefaults_PodSpec` and the nested defaulters, for pods and pod templates alike."""
    if not isinstance(spec, dict):
        return
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    for group in ("containers", "initContainers", "ephemeralContainers"):
        for container in _items(spec.get(group)):
            _default_container(container)
    for volume in _items(spec.get("volumes")):
        _default_volume(volume)


def _default_pod(pod: Obj) -> None:
    """`SetDefaults_Pod`: requests default to limits (pods only, not templates), service links on."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    for group in ("containers", "initContainers"):
        for container in _items(spec.get(group)):
            resources = _mapping(container).get("resources")
            if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
                requests = resources.setdefault("requests", {})
                if not isinstance(requests, dict):
                    continue
                for name, value in resources["limits"].items():
                    requests.setdefault(name, copy.deepcopy(value))
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    default_pod_spec(spec)


def _default_job(job: Obj) -> None:
    """`SetDefaults_Job`, then the pod template's PodSpec defaults."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    template = spec.get("template")
    template_labels = _mapping(_mapping(template).get("metadata")).get("labels")
    meta = job.setdefault("metadata", {})
    if isinstance(meta, dict) and template_labels is not None and not meta.get("labels"):
        meta["labels"] = copy.deepcopy(template_labels)
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    policy = spec.get("podFailurePolicy")
    if isinstance(policy, dict):
        for rule in _items(policy.get("rules")):
            for pattern in _items(_mapping(rule).get("onPodConditions")):
                if isinstance(pattern, dict) and not pattern.get("status"):
                    pattern["status"] = "True"
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if policy is not None else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    if isinstance(template, dict):
        default_pod_spec(template.get("spec"))


def _default_namespace(ns: Obj) -> None:
    """`SetDefaults_Namespace` (the name label), `SetDefaults_NamespaceStatus`, and the `kubernetes` finalizer
    the namespace strategy's `PrepareForCreate` sets (`pkg/registry/core/namespace/strategy.go`)."""
    meta = ns.setdefault("metadata", {})
    if isinstance(meta, dict) and isinstance(meta.get("name"), str) and meta["name"]:
        labels = meta.get("labels")
        if not isinstance(labels, dict):
            labels = meta["labels"] = {}
        labels["kubernetes.io/metadata.name"] = meta["name"]
    spec = ns.setdefault("spec", {})
    if isinstance(spec, dict) and not spec.get("finalizers"):
        spec["finalizers"] = ["kubernetes"]
    status = ns.setdefault("status", {})
    if isinstance(status, dict) and not status.get("phase"):
        status["phase"] = "Active"


def _default_node(node: Obj) -> None:
    """`SetDefaults_NodeStatus`: allocatable defaults to capacity."""
    status = node.get("status")
    if isinstance(status, dict) and status.get("allocatable") is None and isinstance(status.get("capacity"), dict):
        status["allocatable"] = copy.deepcopy(status["capacity"])


# ------------------------------------------------------------------------------------------ admission helpers


DEFAULT_TOLERATION_SECONDS = 300
_LIFECYCLE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


def apply_pod_create_admission(pod: Obj) -> None:
    """What the default admission plugins add to a new pod, for the server to call on pod CREATE only.

    - `DefaultTolerationSeconds` (`plugin/pkg/admission/defaulttolerationseconds/admission.go`): tolerate the
      not-ready and unreachable NoExecute taints for 300 s unless the pod already tolerates them; this is what
      makes the node lifecycle controller evict pods five minutes after a node stops reporting;
    - `Priority` (`plugin/pkg/admission/priority/admission.go`): without a priority class, priority 0 and
      preemption policy PreemptLowerPriority.
    """
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    for taint in _LIFECYCLE_TAINTS:
        if not any(_tolerates_no_execute(t, taint) for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {
                    "key": taint,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    spec["tolerations"] = tolerations
    if not spec.get("priorityClassName"):
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _tolerates_no_execute(toleration: Obj, key: str) -> bool:
    effect_ok = toleration.get("effect") in (None, "", "NoExecute")
    if not toleration.get("key"):
        return toleration.get("operator") == "Exists" and effect_ok
    return toleration.get("key") == key and effect_ok


def generate_job_selector(job: Obj) -> None:
    """The job strategy's `generateSelectorIfNeeded` (`pkg/registry/batch/job/strategy.go`), for
    `PrepareForCreate` once the uid is known: unless `manualSelector` is true, select on
    `batch.kubernetes.io/controller-uid` and put that and the job-name labels (and their legacy unprefixed
    forms) on the pod template."""
    spec = job.get("spec")
    meta = _mapping(job.get("metadata"))
    if not isinstance(spec, dict) or spec.get("manualSelector") is True or not meta.get("uid"):
        return
    uid, name = str(meta["uid"]), str(meta.get("name", ""))
    template = spec.setdefault("template", {})
    template_meta = template.setdefault("metadata", {}) if isinstance(template, dict) else None
    labels = template_meta.setdefault("labels", {}) if isinstance(template_meta, dict) else None
    if not isinstance(labels, dict):
        return  # a malformed template: validation reports it
    labels.update(
        {
            "batch.kubernetes.io/controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "controller-uid": uid,
            "job-name": name,
        }
    )
    if spec.get("selector") is None:
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}


# ------------------------------------------------------------------------------------------------- validation


_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MAX_INT32 = 2147483647


def _range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def _nonnegative(value: Any, path: str) -> list[FieldCause]:
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [f.invalid(path, value, "must be greater than or equal to 0")]
    return []


def _validate_tolerations(tolerations: Any, path: str) -> list[FieldCause]:
    """`ValidateTolerations`."""
    causes: list[FieldCause] = []
    for i, t in enumerate(tolerations if isinstance(tolerations, list) else ()):
        if not isinstance(t, dict):
            continue
        at = f.index(path, i)
        key, operator = t.get("key") or "", t.get("operator") or ""
        if key:
            causes.extend(f.invalid(f.child(at, "key"), key, msg) for msg in schema_meta.qualified_name(key))
        elif operator != "Exists":
            causes.append(
                f.invalid(
                    f.child(at, "operator"),
                    operator,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                )
            )
        if t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute":
            causes.append(
                f.invalid(
                    f.child(at, "effect"),
                    t.get("effect") or "",
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator in ("", "Equal"):
            causes.extend(
                f.invalid(f.child(at, "value"), t.get("value"), msg)
                for msg in schema_meta.label_value(t.get("value") or "")
            )
        elif operator == "Exists":
            if t.get("value"):
                causes.append(
                    f.invalid(
                        f.child(at, "operator"),
                        t.get("value"),
                        "value must be empty when `operator` is 'Exists'",
                    )
                )
        else:
            causes.append(f.not_supported(f.child(at, "operator"), operator, ["Equal", "Exists"]))
        effect = t.get("effect") or ""
        if effect and effect not in _TAINT_EFFECTS:
            causes.append(f.not_supported(f.child(at, "effect"), effect, list(_TAINT_EFFECTS)))
    return causes


def _validate_containers(spec: Obj, path: str) -> list[FieldCause]:
    """`validateContainers` and `validateInitContainers`: names, images, pull and message policies, ports."""
    causes: list[FieldCause] = []
    names: set[str] = set()
    if not spec.get("containers"):
        causes.append(f.required(f.child(path, "containers")))
    for group in ("initContainers", "containers"):
        group_path = f.child(path, group)
        for i, container in enumerate(spec.get(group) or ()):
            if not isinstance(container, dict):
                continue
            at = f.index(group_path, i)
            name = container.get("name") or ""
            if not name:
                causes.append(f.required(f.child(at, "name")))
            else:
                causes.extend(f.invalid(f.child(at, "name"), name, m) for m in schema_meta.dns1123_label(name))
                if name in names:
                    causes.append(f.duplicate(f.child(at, "name"), name))
                names.add(name)
            if not container.get("image"):
                causes.append(f.required(f.child(at, "image")))
            policy = container.get("imagePullPolicy") or ""
            if policy not in _PULL_POLICIES:
                causes.append(f.not_supported(f.child(at, "imagePullPolicy"), policy, list(_PULL_POLICIES)))
            message_policy = container.get("terminationMessagePolicy") or ""
            if message_policy not in _MESSAGE_POLICIES:
                causes.append(
                    f.not_supported(f.child(at, "terminationMessagePolicy"), message_policy, list(_MESSAGE_POLICIES))
                )
            for j, port in enumerate(container.get("ports") or ()):
                if not isinstance(port, dict):
                    continue
                port_path = f.index(f.child(at, "ports"), j)
                number = port.get("containerPort")
                if not isinstance(number, int) or not 1 <= number <= 65535:
                    causes.append(f.invalid(f.child(port_path, "containerPort"), number, _range_error(1, 65535)))
                protocol = port.get("protocol") or ""
                if protocol not in _PROTOCOLS:
                    causes.append(f.not_supported(f.child(port_path, "protocol"), protocol, list(_PROTOCOLS)))
    return causes


def validate_pod_spec(spec: Any, path: str) -> list[FieldCause]:
    """`ValidatePodSpec`, the parts the lab needs. Not checked: volume sources, security contexts, affinity
    terms, probes, resources, env names, DNS config, overhead, topology spread, resource claims."""
    if not isinstance(spec, dict):
        return [f.required(path)]
    causes = _validate_containers(spec, path)
    volume_names: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or ()):
        name = (volume or {}).get("name") or "" if isinstance(volume, dict) else ""
        at = f.child(f.index(f.child(path, "volumes"), i), "name")
        if not name:
            causes.append(f.required(at))
            continue
        causes.extend(f.invalid(at, name, m) for m in schema_meta.dns1123_label(name))
        if name in volume_names:
            causes.append(f.duplicate(at, name))
        volume_names.add(name)
    restart = spec.get("restartPolicy") or ""
    if not restart:
        causes.append(f.required(f.child(path, "restartPolicy")))
    elif restart not in _RESTART_POLICIES:
        causes.append(f.not_supported(f.child(path, "restartPolicy"), restart, list(_RESTART_POLICIES)))
    dns = spec.get("dnsPolicy") or ""
    if dns not in _DNS_POLICIES:
        causes.append(f.not_supported(f.child(path, "dnsPolicy"), dns, list(_DNS_POLICIES)))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= _MAX_INT32:
        causes.append(f.invalid(f.child(path, "activeDeadlineSeconds"), deadline, _range_error(1, _MAX_INT32)))
    causes.extend(
        _nonnegative(spec.get("terminationGracePeriodSeconds"), f.child(path, "terminationGracePeriodSeconds"))
    )
    node_name = spec.get("nodeName")
    if node_name:
        causes.extend(
            f.invalid(f.child(path, "nodeName"), node_name, m) for m in schema_meta.dns1123_subdomain(str(node_name))
        )
    for field_name in ("hostname", "subdomain"):
        value = spec.get(field_name)
        if value:
            causes.extend(f.invalid(f.child(path, field_name), value, m) for m in schema_meta.dns1123_label(str(value)))
    causes.extend(_validate_tolerations(spec.get("tolerations"), f.child(path, "tolerations")))
    gate_names: set[str] = set()
    for i, gate in enumerate(spec.get("schedulingGates") or ()):
        name = gate.get("name") or "" if isinstance(gate, dict) else ""
        at = f.child(f.index(f.child(path, "schedulingGates"), i), "name")
        causes.extend(f.invalid(at, name, m) for m in schema_meta.qualified_name(name))
        if name in gate_names:
            causes.append(f.duplicate(at, name))
        gate_names.add(name)
    return causes


def _semantic(value: Any) -> Any:
    """`apiequality.Semantic.DeepEqual` treats nil and empty slices and maps alike: drop them before
    comparing."""
    if isinstance(value, dict):
        normalized = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in normalized.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


_POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def validate_pod_update(new: Obj, old: Obj) -> list[FieldCause]:
    """`ValidatePodUpdate`: a pod's spec is fixed once created, except container images, a shorter
    `activeDeadlineSeconds`, added tolerations, removed scheduling gates, and (for gated pods) added node
    selectors. `nodeName` changes only through the binding subresource, which does not come through here.
    In-place resize (`InPlacePodVerticalScaling`) is not reproduced."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if not isinstance(spec, dict) or not isinstance(old_spec, dict):
        return []
    causes: list[FieldCause] = []
    for group in ("containers", "initContainers"):
        if len(spec.get(group) or ()) != len(old_spec.get(group) or ()):
            causes.append(f.forbidden(f.child("spec", group), "pod updates may not add or remove containers"))
            return causes
        for i, container in enumerate(spec.get(group) or ()):
            if isinstance(container, dict) and not container.get("image"):
                causes.append(f.required(f.child(f.index(f.child("spec", group), i), "image")))
    deadline, old_deadline = spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if deadline is not None:
        if not isinstance(deadline, int) or not 0 <= deadline <= _MAX_INT32:
            return [*causes, f.invalid("spec.activeDeadlineSeconds", deadline, _range_error(0, _MAX_INT32))]
        if isinstance(old_deadline, int) and old_deadline < deadline:
            return [
                *causes,
                f.invalid("spec.activeDeadlineSeconds", deadline, "must be less than or equal to previous value"),
            ]
    elif old_deadline is not None:
        causes.append(
            f.invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value")
        )
    causes.extend(_only_added_tolerations(spec.get("tolerations"), old_spec.get("tolerations")))
    causes.extend(_only_deleted_gates(spec.get("schedulingGates"), old_spec.get("schedulingGates")))
    if _semantic(spec) == _semantic(old_spec):
        return causes
    munged = copy.deepcopy(spec)
    for group in ("containers", "initContainers"):
        for container, old_container in zip(munged.get(group) or (), old_spec.get(group) or (), strict=False):
            if isinstance(container, dict) and isinstance(old_container, dict):
                container["image"] = old_container.get("image")
    for name in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        munged.pop(name, None)
        if name in old_spec:
            munged[name] = copy.deepcopy(old_spec[name])
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if old_spec.get("schedulingGates"):
        causes.extend(_node_selector_additions(munged.get("nodeSelector"), old_spec.get("nodeSelector")))
        munged["nodeSelector"] = copy.deepcopy(old_spec.get("nodeSelector"))
    if _semantic(munged) != _semantic(old_spec):
        causes.append(f.forbidden("spec", _POD_UPDATE_FORBIDDEN))
    return causes


def _only_added_tolerations(new: Any, old: Any) -> list[FieldCause]:
    """`validateOnlyAddedTolerations`: every old toleration must remain, up to its `tolerationSeconds`."""
    new_list = [t for t in new or () if isinstance(t, dict)]
    for toleration in old or ():
        if not isinstance(toleration, dict):
            continue
        bare = {k: v for k, v in toleration.items() if k != "tolerationSeconds"}
        if not any({k: v for k, v in t.items() if k != "tolerationSeconds"} == bare for t in new_list):
            return [
                f.forbidden("spec.tolerations", "existing toleration can not be modified except its tolerationSeconds")
            ]
    return _validate_tolerations(new, "spec.tolerations")


def _only_deleted_gates(new: Any, old: Any) -> list[FieldCause]:
    """`validateOnlyDeletedSchedulingGates`."""
    old_names = {g.get("name") for g in old or () if isinstance(g, dict)}
    return [
        f.forbidden(
            f.child(f.index("spec.schedulingGates", i), "name"),
            f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'",
        )
        for i, g in enumerate(new or ())
        if isinstance(g, dict) and g.get("name") not in old_names
    ]


def _node_selector_additions(new: Any, old: Any) -> list[FieldCause]:
    """`validateNodeSelectorMutation`: a gated pod may gain node selectors, not lose or change them."""
    new_map, old_map = new if isinstance(new, dict) else {}, old if isinstance(old, dict) else {}
    return [
        f.invalid(f.key("spec.nodeSelector", k), new_map.get(k), "field is immutable")
        for k, v in old_map.items()
        if new_map.get(k) != v
    ]


def selector_matches(selector: Obj, labels: Obj) -> bool:
    """`metav1.LabelSelectorAsSelector` matched against a set of labels (a template's, a pod's)."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for requirement in selector.get("matchExpressions") or ():
        if not isinstance(requirement, dict):
            continue
        key = str(requirement.get("key"))
        op, values = requirement.get("operator"), requirement.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def validate_job(job: Obj) -> list[FieldCause]:
    """`validateJobSpec` and `ValidateJobTemplateSpec`. Not checked: success and pod-failure policy rules,
    backoffLimitPerIndex, maxFailedIndexes, ttlSecondsAfterFinished, managedBy syntax, elastic indexed
    jobs."""
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return [f.required("spec")]
    causes: list[FieldCause] = []
    for name in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"):
        causes.extend(_nonnegative(spec.get(name), f.child("spec", name)))
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        causes.append(f.not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(f.required("spec.completions", "when completion mode is Indexed"))
    replacement = spec.get("podReplacementPolicy")
    if spec.get("podFailurePolicy") is not None and replacement not in (None, "Failed"):
        causes.append(f.not_supported("spec.podReplacementPolicy", replacement, ["Failed"]))
    elif replacement is not None and replacement not in ("Failed", "TerminatingOrFailed"):
        causes.append(f.not_supported("spec.podReplacementPolicy", replacement, ["Failed", "TerminatingOrFailed"]))
    template = spec.get("template")
    if not isinstance(template, dict):
        template = {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    if selector is None:
        # The strategy generates it before validation unless `manualSelector` is true
        # (`generate_job_selector`).
        if spec.get("manualSelector") is True:
            causes.append(f.required("spec.selector"))
    elif isinstance(selector, dict) and not selector_matches(selector, labels):
        causes.append(f.invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    template_spec = template.get("spec")
    causes.extend(schema_meta.validate_labels(labels, "spec.template.metadata.labels"))
    causes.extend(validate_pod_spec(template_spec, "spec.template.spec"))
    restart = (template_spec or {}).get("restartPolicy") if isinstance(template_spec, dict) else None
    causes = [c for c in causes if c.field != "spec.template.spec.restartPolicy"]
    if restart in (None, "", "Always"):
        # SetDefaults_PodSpec turns an absent restartPolicy into Always, so both read as unset here.
        causes.append(f.required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        causes.append(f.not_supported("spec.template.spec.restartPolicy", restart, ["OnFailure", "Never"]))
    return causes


_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def validate_job_update(new: Obj, old: Obj) -> list[FieldCause]:
    """`ValidateJobSpecUpdate`: selector, completion mode, pod failure policy and managedBy are immutable;
    `completions` too (elastic indexed jobs aside); the pod template is immutable except that a suspended job
    that has not started (`status.startTime` unset; `validationOptionsForJob`
    `AllowMutableSchedulingDirectives`) may change the template's node selector, tolerations, affinity,
    scheduling gates, labels and annotations, which is how JobSet and Kueue inject placement before
    resuming."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    if not isinstance(spec, dict) or not isinstance(old_spec, dict):
        return []
    causes: list[FieldCause] = []
    for name in (
        "selector",
        "completions",
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
    ):
        if _semantic(spec.get(name)) != _semantic(old_spec.get(name)):
            causes.append(f.invalid(f.child("spec", name), spec.get(name), "field is immutable"))
    template, old_template = copy.deepcopy(spec.get("template") or {}), old_spec.get("template") or {}
    suspended = old_spec.get("suspend") is True
    not_started = not ((old.get("status") or {}).get("startTime"))
    if suspended and not_started and isinstance(template, dict) and isinstance(old_template, dict):
        template_meta = template.setdefault("metadata", {})
        old_meta = old_template.get("metadata") or {}
        for name in ("labels", "annotations"):
            template_meta.pop(name, None)
            if name in old_meta:
                template_meta[name] = copy.deepcopy(old_meta[name])
        template_spec = template.setdefault("spec", {})
        old_template_spec = old_template.get("spec") or {}
        for name in _SCHEDULING_DIRECTIVES:
            template_spec.pop(name, None)
            if name in old_template_spec:
                template_spec[name] = copy.deepcopy(old_template_spec[name])
    if _semantic(template) != _semantic(old_template):
        causes.append(f.invalid("spec.template", "object", "field is immutable"))
    return causes


def validate_node(node: Obj) -> list[FieldCause]:
    """`ValidateNode`, taints only (`validateNodeTaints`): key syntax, known effect, unique key+effect."""
    causes: list[FieldCause] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate((node.get("spec") or {}).get("taints") or ()):
        if not isinstance(taint, dict):
            continue
        at = f.index("spec.taints", i)
        key, effect = str(taint.get("key") or ""), str(taint.get("effect") or "")
        causes.extend(f.invalid(f.child(at, "key"), key, m) for m in schema_meta.qualified_name(key))
        if not effect:
            causes.append(f.required(f.child(at, "effect")))
        elif effect not in _TAINT_EFFECTS:
            causes.append(f.not_supported(f.child(at, "effect"), effect, list(_TAINT_EFFECTS)))
        if (key, effect) in seen:
            causes.append(f.duplicate(at, f"{key}:{effect}"))
        seen.add((key, effect))
    return causes


def validate_lease(lease: Obj) -> list[FieldCause]:
    """`ValidateLeaseSpec`: positive duration, non-negative transitions."""
    spec = lease.get("spec") or {}
    causes: list[FieldCause] = []
    duration = spec.get("leaseDurationSeconds") if isinstance(spec, dict) else None
    if isinstance(duration, int) and duration <= 0:
        causes.append(f.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    if isinstance(spec, dict):
        causes.extend(_nonnegative(spec.get("leaseTransitions"), "spec.leaseTransitions"))
    return causes


def validate_access_review(review: Obj) -> list[FieldCause]:
    """`ValidateSelfSubjectAccessReviewSpec` (k8s.io/kubernetes v1.36.3 `pkg/apis/authorization/validation`):
    exactly one of resourceAttributes and nonResourceAttributes. Both: `spec.nonResourceAttributes` is invalid;
    neither: `spec.resourceAttributes` is, its value printed being the (nil) non-resource attributes, `null`. The
    value is the internal type's, which has no JSON tags: Go's encoder names its fields `Path` and `Verb`."""
    spec = review.get("spec") or {}
    resource = spec.get("resourceAttributes") if isinstance(spec, dict) else None
    non_resource = spec.get("nonResourceAttributes") if isinstance(spec, dict) else None
    if resource is not None and non_resource is not None:
        value = {"Path": non_resource.get("path") or "", "Verb": non_resource.get("verb") or ""}
        return [
            f.invalid("spec.nonResourceAttributes", value, "cannot be specified in combination with resourceAttributes")
        ]
    if resource is None and non_resource is None:
        detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        return [f.invalid("spec.resourceAttributes", None, detail)]
    return []


# ------------------------------------------------------------------------------------------- the kind schemas


Validator = Callable[[Obj], list[FieldCause]]
UpdateValidator = Callable[[Obj, Obj], list[FieldCause]]


def _no_checks(_obj: Obj) -> list[FieldCause]:
    return []


def _no_update_checks(_new: Obj, _old: Obj) -> list[FieldCause]:
    return []


@dataclass(frozen=True)
class KindRules:
    model: str
    namespaced: bool
    name_check: schema_meta.NameCheck = schema_meta.dns1123_subdomain
    defaulter: Callable[[Obj], None] | None = None
    validator: Validator = _no_checks
    update_validator: UpdateValidator = _no_update_checks
    metadata_required: bool = True


def _validate_pod(pod: Obj) -> list[FieldCause]:
    causes = validate_pod_spec(pod.get("spec"), "spec")
    spec = pod.get("spec") or {}
    if isinstance(spec, dict) and spec.get("schedulingGates") and spec.get("nodeName"):
        causes.append(f.forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return causes


def _default_match_resources(match: object) -> None:
    """`SetDefaults_MatchResources` and the rules' `Scope` default (`pkg/apis/admissionregistration/v1/defaults.go`)."""
    if not isinstance(match, dict):
        return
    match.setdefault("matchPolicy", "Equivalent")
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or ():
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def _default_admission_policy(policy: Obj) -> None:
    """`SetDefaults_ValidatingAdmissionPolicySpec`: `failurePolicy: Fail`; the match constraints' defaults."""
    spec = policy.get("spec")
    if isinstance(spec, dict):
        spec.setdefault("failurePolicy", "Fail")
        _default_match_resources(spec.get("matchConstraints"))


def _default_admission_policy_binding(binding: Obj) -> None:
    spec = binding.get("spec")
    if isinstance(spec, dict):
        _default_match_resources(spec.get("matchResources"))


def _validate_admission_policy_binding(binding: Obj) -> list[FieldCause]:
    """The two required fields of `ValidateValidatingAdmissionPolicyBinding` (the rest is not checked)."""
    raw = binding.get("spec")
    spec: Obj = raw if isinstance(raw, dict) else {}
    causes = []
    if not spec.get("policyName"):
        causes.append(f.required("spec.policyName"))
    if not spec.get("validationActions"):
        causes.append(f.required("spec.validationActions"))
    return causes


KIND_RULES: dict[str, KindRules] = {
    "Pod": KindRules(
        "V1Pod", True, defaulter=_default_pod, validator=_validate_pod, update_validator=validate_pod_update
    ),
    "Node": KindRules("V1Node", False, defaulter=_default_node, validator=validate_node),
    "Namespace": KindRules("V1Namespace", False, schema_meta.dns1123_label, defaulter=_default_namespace),
    "Event": KindRules("CoreV1Event", True),
    "Job": KindRules(
        "V1Job", True, defaulter=_default_job, validator=validate_job, update_validator=validate_job_update
    ),
    "Lease": KindRules("V1Lease", True, validator=validate_lease),
    "SelfSubjectAccessReview": KindRules(
        "V1SelfSubjectAccessReview", False, validator=validate_access_review, metadata_required=False
    ),
    "SelfSubjectRulesReview": KindRules("V1SelfSubjectRulesReview", False, metadata_required=False),
    "SelfSubjectReview": KindRules("V1SelfSubjectReview", False, metadata_required=False),
    "CustomResourceDefinition": KindRules("V1CustomResourceDefinition", False),
    # RBAC and service accounts (lab.rbac_validation: `pkg/apis/rbac/validation`, `pkg/apis/rbac/v1/defaults.go`)
    "ServiceAccount": KindRules("V1ServiceAccount", True),
    "Role": KindRules("V1Role", True, rbac.path_segment_name, validator=rbac.validate_role),
    "ClusterRole": KindRules("V1ClusterRole", False, rbac.path_segment_name, validator=rbac.validate_cluster_role),
    "RoleBinding": KindRules(
        "V1RoleBinding",
        True,
        rbac.path_segment_name,
        defaulter=rbac.default_binding,
        validator=rbac.validate_role_binding,
        update_validator=rbac.validate_binding_update,
    ),
    "ClusterRoleBinding": KindRules(
        "V1ClusterRoleBinding",
        False,
        rbac.path_segment_name,
        defaulter=rbac.default_binding,
        validator=rbac.validate_cluster_role_binding,
        update_validator=rbac.validate_binding_update,
    ),
    # in-process admission policies (registry/admission_policies.py); only the defaults and the binding's two
    # required fields of `pkg/apis/admissionregistration/validation` are reproduced
    "ValidatingAdmissionPolicy": KindRules("V1ValidatingAdmissionPolicy", False, defaulter=_default_admission_policy),
    "ValidatingAdmissionPolicyBinding": KindRules(
        "V1ValidatingAdmissionPolicyBinding",
        False,
        defaulter=_default_admission_policy_binding,
        validator=_validate_admission_policy_binding,
    ),
}


class BuiltinSchema:
    """`TypeSchema` for one built-in kind."""

    def __init__(self, kind: str, api_version: str) -> None:
        self.kind = kind
        self.api_version = api_version
        self.rules = KIND_RULES[kind]
        self._root = FieldType("model", self.rules.model)

    def __repr__(self) -> str:
        return f"BuiltinSchema({self.kind})"

    def default(self, obj: Obj) -> None:
        if self.rules.defaulter is not None:
            self.rules.defaulter(obj)
        _canonicalize_quantities(obj, self._root)

    def prune(self, obj: Obj) -> None:
        _prune_model(obj, self._root)

    def decode_error(self, obj: Obj) -> str | None:
        """The 400 the apiserver sends when the JSON does not fit the Go types, or None."""
        found: list[tuple[str, str, str]] = []
        _type_errors(obj, self._root, f.ROOT, self.kind, found)
        if not found:
            return None
        version = self.api_version.split("/")[-1]
        return f'{self.kind} in version "{version}" cannot be handled as a {self.kind}: {found[0][2]}'

    def validate(self, obj: Obj, old: Obj | None = None) -> list[FieldCause]:
        found: list[tuple[str, str, str]] = []
        _type_errors(obj, self._root, f.ROOT, self.kind, found)
        if found:
            return [f.type_invalid(path, kind, message) for path, kind, message in found]
        causes: list[FieldCause] = []
        if self.rules.metadata_required:
            causes.extend(
                schema_meta.validate_object_meta(obj.get("metadata"), self.rules.namespaced, self.rules.name_check)
            )
        if old is None:
            causes.extend(self.rules.validator(obj))
        else:
            if self.rules.metadata_required:
                causes.extend(schema_meta.validate_object_meta_update(obj.get("metadata"), old.get("metadata")))
            causes.extend(self.rules.validator(obj))
            causes.extend(self.rules.update_validator(obj, old))
        return _unique(causes)

    def list_semantics(self, path: tuple[str, ...]) -> ListSemantics:
        return _lookup(self.rules.model, path)[0]

    def strategic_list_semantics(self, path: tuple[str, ...]) -> ListSemantics:
        return _lookup(self.rules.model, path)[1]


def _unique(causes: list[FieldCause]) -> list[FieldCause]:
    """`ErrorList.ToAggregate` drops repeated messages; the update checks can repeat a create check."""
    seen: set[FieldCause] = set()
    out = []
    for cause in causes:
        if cause not in seen:
            seen.add(cause)
            out.append(cause)
    return out
