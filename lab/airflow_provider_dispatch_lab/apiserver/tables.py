"""`kubectl get`'s server-side printing: the `Table` (meta.k8s.io/v1) the API server answers to `Accept:
application/json;as=Table;v=v1;g=meta.k8s.io`.

The built-in kinds' columns and cells are those of `k8s.io/kubernetes` v1.36.3 `pkg/printers/internalversion/
printers.go` (`AddHandlers`: `podColumnDefinitions`, `nodeColumnDefinitions`, `jobColumnDefinitions`,
`eventColumnDefinitions`; `printPod`, `printNode`, `printJob`, `printEvent`), column descriptions as that server
sends them. The server always prints wide (`pkg/printers/storage/storage.go` `ConvertToTable`: `Wide: true`) and
kubectl hides the columns of priority 1 unless `-o wide`. Custom resources get their CRD's
`additionalPrinterColumns` (`apiextensions-apiserver/pkg/registry/customresource/tableconvertor/tableconvertor.go`),
or Name and Age when it has none. Ages are measured on the lab clock, as a real server measures them on its own.
Each row carries the object's metadata (`includeObject=Metadata`, the default), the whole object
(`includeObject=Object`, what kubectl asks for with `--sort-by`) or nothing (`None`), as
`apiserver/pkg/endpoints/handlers/response.go` `asTable` does. Kinds the lab serves without a printer (leases,
RBAC kinds) get the default Name and Age table, as `rest.NewDefaultTableConvertor` gives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from airflow_provider_dispatch.cli.status_view import human_duration
from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType

Obj = dict[str, Any]
Row = list[Any]

TABLE_MEDIA = re.compile(r"application/json\s*;(?=.*\bas=Table\b)(?=.*\bg=meta\.k8s\.io\b)(?=.*\bv=(v1|v1beta1)\b)")
"""An `Accept` entry asking for a Table (kubectl asks for v1, then v1beta1, then plain JSON)."""

_NAME = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. "
    "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
    "updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It "
    "is not guaranteed to be set in happens-before order across separate operations. Clients may not "
    "set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
    "Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)

# The longer descriptions, named so that each table below reads one column a line; Internal-IP and External-IP
# share one, as upstream does (both describe `NodeStatus.addresses`).
_EVENT_REASON = (
    "This should be a short, machine understandable string that gives the reason for the transition into the "
    "object's current status."
)
_EVENT_SUBOBJECT = (
    "If referring to a piece of an object instead of an entire object, this string should contain a valid "
    "JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object "
    'reference is to a container within a pod, this would take on a value like: "spec.containers{name}" (where '
    '"name" refers to the name of the container that triggered the event) or if no container name is specified '
    '"spec.containers[2]" (container with index 2 in this pod). This syntax is chosen only to have some '
    "well-defined way of referencing a part of an object."
)
_JOB_COMPLETIONS = (
    "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. "
    "However, it may decrease in reaction to scale down of elastic indexed jobs."
)
_JOB_SELECTOR = (
    "A label query over pods that should match the pod count. Normally, the system sets this field for you. More "
    "info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"
)
_NODE_ADDRESSES = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
    "https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, "
    "but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers "
    "should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should "
    "assume that addresses can change during the lifetime of a Node. However, there are some exceptions where "
    "this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the "
    "downward API (status.hostIP)."
)
_NODE_CONTAINER_RUNTIME = (
    "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."
)
_POD_RESTARTS = (
    "The number of times the containers in this pod have been restarted and when the last container in this pod "
    "has restarted."
)
_POD_IP = "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."
_POD_NODE = (
    "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by "
    "the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes "
    "responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to "
    "be scheduled on a specific node. "
    "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"
)
_POD_NOMINATED_NODE = (
    "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled "
    "right away as preemption victims receive their graceful termination periods. This field does not guarantee "
    "that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes "
    "become available sooner. Scheduler may also decide to give the resources on this node to a higher priority "
    "pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when "
    "the pod is scheduled."
)
_POD_READINESS_GATES = (
    "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its "
    'containers are ready AND all conditions specified in the readiness gates have status equal to "True" More '
    "info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"
)

EVENT_COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("Last Seen", "", 0, "The time at which the most recent occurrence of this event was recorded."),
    ("Type", "", 0, "Type of this event (Normal, Warning), new types could be added in the future"),
    ("Reason", "", 0, _EVENT_REASON),
    ("Object", "", 0, "The object that this event is about."),
    ("Subobject", "", 1, _EVENT_SUBOBJECT),
    ("Source", "", 1, "The component reporting this event. Should be a short machine understandable string."),
    ("Message", "", 0, "A human-readable description of the status of this operation."),
    ("First Seen", "", 1, "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    ("Count", "", 1, "The number of times this event has occurred."),
    ("Name", "name", 1, _NAME),
)

JOB_COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("Name", "name", 0, _NAME),
    ("Status", "", 0, "Status of the job."),
    ("Completions", "", 0, _JOB_COMPLETIONS),
    ("Duration", "", 0, "Time required to complete the job."),
    ("Age", "", 0, _AGE),
    ("Containers", "", 1, "Names of each container in the template."),
    ("Images", "", 1, "Images referenced by each container in the template."),
    ("Selector", "", 1, _JOB_SELECTOR),
)

NODE_COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("Name", "name", 0, _NAME),
    ("Status", "", 0, "The status of the node"),
    ("Roles", "", 0, "The roles of the node"),
    ("Age", "", 0, _AGE),
    ("Version", "", 0, "Kubelet Version reported by the node."),
    ("Internal-IP", "", 1, _NODE_ADDRESSES),
    ("External-IP", "", 1, _NODE_ADDRESSES),
    ("OS-Image", "", 1, "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    ("Kernel-Version", "", 1, "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    ("Container-Runtime", "", 1, _NODE_CONTAINER_RUNTIME),
)

POD_COLUMNS: tuple[tuple[str, str, int, str], ...] = (
    ("Name", "name", 0, _NAME),
    ("Ready", "", 0, "The aggregate readiness state of this pod for accepting traffic."),
    ("Status", "", 0, "The aggregate status of the containers in this pod."),
    ("Restarts", "", 0, _POD_RESTARTS),
    ("Age", "", 0, _AGE),
    ("IP", "", 1, _POD_IP),
    ("Node", "", 1, _POD_NODE),
    ("Nominated Node", "", 1, _POD_NOMINATED_NODE),
    ("Readiness Gates", "", 1, _POD_READINESS_GATES),
)
_DEFAULT_COLUMNS = (("Name", "name", 0, _NAME), ("Created At", "date", 0, _AGE))
"""`rest.NewDefaultTableConvertor` (apiserver/pkg/registry/rest/table.go): Name and Created At."""


def _seconds(timestamp: str | None) -> float | None:
    if not timestamp:
        return None
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _since(timestamp: str | None, now: float) -> str:
    """`translateTimestampSince`: `<unknown>` for no time, else `duration.HumanDuration` of the time since."""
    seconds = _seconds(timestamp)
    if seconds is None:
        return "<unknown>"
    return human_duration(now - seconds)


# ------------------------------------------------------------------------------------------- built-in printers


def _has_condition(obj: Obj, kind: str, status: str = "True") -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == status for c in conditions)


def _restartable(container: Obj | None) -> bool:
    return bool(container) and (container or {}).get("restartPolicy") == "Always"


def _terminated_reason(terminated: Obj, prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def _later(current: float | None, terminated: Obj | None) -> float | None:
    finished = _seconds((terminated or {}).get("finishedAt"))
    if finished is None:
        return current
    return finished if current is None or finished > current else current


def print_pod(pod: Obj, now: float) -> Row:
    """`printPod` (printers.go, v1.36.3)."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    containers = spec.get("containers") or []
    init_containers = {c.get("name"): c for c in spec.get("initContainers") or []}
    total = len(containers) + sum(1 for c in init_containers.values() if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last_restart: float | None = None
    last_sidecar_restart: float | None = None
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for index, container in enumerate(init_statuses):
        state = container.get("state") or {}
        restarts += int(container.get("restartCount") or 0)
        last_restart = _later(last_restart, (container.get("lastState") or {}).get("terminated"))
        sidecar = _restartable(init_containers.get(container.get("name")))
        if sidecar:
            sidecar_restarts += int(container.get("restartCount") or 0)
            last_sidecar_restart = _later(last_sidecar_restart, (container.get("lastState") or {}).get("terminated"))
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and container.get("started"):
            ready += 1 if container.get("ready") else 0
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{index}/{len(init_containers)}"
        initializing = True
        break
    if not initializing or _has_condition(pod, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running, error_reason = False, ""
        for container in reversed(status.get("containerStatuses") or []):
            state = container.get("state") or {}
            restarts += int(container.get("restartCount") or 0)
            last_restart = _later(last_restart, (container.get("lastState") or {}).get("terminated"))
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None:
                reason = _terminated_reason(terminated)
                if terminated.get("exitCode", 0) != 0:
                    error_reason = reason
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed":
            if has_running and _has_condition(pod, "Ready"):
                reason = "Running"
            elif error_reason:
                reason = error_reason
            elif has_running:
                reason = "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    shown_restarts = str(restarts)
    if restarts and last_restart is not None:
        shown_restarts = f"{restarts} ({human_duration(now - last_restart)} ago)"
    pod_ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    readiness = "<none>"
    if gates:
        conditions = {c.get("type"): c.get("status") for c in reversed(status.get("conditions") or [])}
        true = sum(1 for gate in gates if conditions.get(gate.get("conditionType")) == "True")
        readiness = f"{true}/{len(gates)}"
    return [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        shown_restarts,
        _since(meta.get("creationTimestamp"), now),
        (pod_ips[0].get("ip") if pod_ips else "") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        readiness,
    ]


_NODE_ROLE_PREFIX = "node-role.kubernetes.io/"


def print_node(node: Obj, now: float) -> Row:
    """`printNode` (printers.go, v1.36.3): Ready/NotReady/Unknown, SchedulingDisabled, roles from labels."""
    spec, status, meta = node.get("spec") or {}, node.get("status") or {}, node.get("metadata") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}.get("Ready")
    shown = ["Unknown"] if ready is None else ["Ready" if ready == "True" else "NotReady"]
    if spec.get("unschedulable"):
        shown.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in (meta.get("labels") or {}).items():
        if key.startswith(_NODE_ROLE_PREFIX) and key[len(_NODE_ROLE_PREFIX) :]:
            roles.add(key[len(_NODE_ROLE_PREFIX) :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")

    kernel = info.get("kernelVersion") or "<unknown>"
    if info.get("architecture"):
        kernel += f" ({info['architecture']})"
    return [
        meta.get("name", ""),
        ",".join(shown),
        ",".join(sorted(roles)) or "<none>",
        _since(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        kernel,
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def _label_selector(selector: Obj | None) -> str:
    """`metav1.FormatLabelSelector`: the requirements sorted by key, set values sorted; `<none>` for none."""
    if selector is None:
        return "<none>"
    parts = [(key, f"{key}={value}") for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        operator, key = expression.get("operator", ""), expression.get("key", "")
        values = ",".join(sorted(set(expression.get("values") or [])))
        shown = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key}
        parts.append((key, shown.get(operator, f"!{key}")))
    return ",".join(text for _, text in sorted(parts)) or "<none>"


def print_job(job: Obj, now: float) -> Row:
    """`printJob` (printers.go, v1.36.3)."""
    spec, status, meta = job.get("spec") or {}, job.get("status") or {}, job.get("metadata") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif int(spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    started, finished = _seconds(status.get("startTime")), _seconds(status.get("completionTime"))
    duration = ""
    if started is not None:
        duration = human_duration((now if finished is None else finished) - started)
    shown = "Running"
    for condition, name in (("Complete", "Complete"), ("Failed", "Failed")):
        if _has_condition(job, condition):
            shown = name
            break
    else:
        if meta.get("deletionTimestamp"):
            shown = "Terminating"
        else:
            for condition in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
                if _has_condition(job, condition):
                    shown = condition
                    break
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [
        meta.get("name", ""),
        shown,
        completions,
        duration,
        _since(meta.get("creationTimestamp"), now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        _label_selector(spec.get("selector")),
    ]


def print_event(event: Obj, now: float) -> Row:
    """`printEvent` (printers.go, v1.36.3), wide."""
    first = _since(event.get("firstTimestamp"), now)
    if not event.get("firstTimestamp"):
        first = _since(event.get("eventTime"), now)
    last = _since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series is not None:
        last = _since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        f"{component}, {instance}" if instance else component,
        str(event.get("message", "")).strip(),
        first,
        count,
        (event.get("metadata") or {}).get("name", ""),
    ]


Printer = Callable[[Obj, float], Row]
BUILTIN_PRINTERS: dict[str, tuple[tuple[tuple[str, str, int, str], ...], Printer]] = {
    "pods": (POD_COLUMNS, print_pod),
    "nodes": (NODE_COLUMNS, print_node),
    "batch/jobs": (JOB_COLUMNS, print_job),
    "events": (EVENT_COLUMNS, print_event),
}


# ------------------------------------------------------------------------------------ custom resource columns

_SEGMENT = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)
    |\[(?P<index>-?\d+)\]
    |\[(?P<start>-?\d*):(?P<end>-?\d*)\]
    |\[\*\]
    |\[\?\(@(?P<path>(?:\.[A-Za-z0-9_\-]+)+)\s*==\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\)\]""",
    re.VERBOSE,
)


def compile_path(expression: str) -> list[re.Match[str]]:
    """The part of client-go's JSONPath (`util/jsonpath`) that printer columns use: fields, indexes, slices,
    `[*]` and `[?(@.a.b=="v")]` filters. Anything else is refused, as a CRD with an unparsable column is."""
    segments, position = [], 0
    while position < len(expression):
        found = _SEGMENT.match(expression, position)
        if found is None:
            raise ValueError(f"unrecognized column definition {expression!r}")
        segments.append(found)
        position = found.end()
    return segments


def find_results(obj: Any, segments: Iterable[re.Match[str]]) -> list[Any]:
    """Every value the path reaches; missing keys give none (`AllowMissingKeys(true)`)."""
    values = [obj]
    for segment in segments:
        step: list[Any] = []
        for value in values:
            if segment.group("field") is not None:
                if isinstance(value, dict) and segment.group("field") in value:
                    step.append(value[segment.group("field")])
            elif not isinstance(value, list):
                continue
            elif segment.group("index") is not None:
                index = int(segment.group("index"))
                if -len(value) <= index < len(value):
                    step.append(value[index])
            elif segment.group("path") is not None:
                wanted = segment.group("dq") if segment.group("dq") is not None else segment.group("sq")
                keys = segment.group("path").split(".")[1:]
                for item in value:
                    found = find_results(item, compile_path("".join(f".{key}" for key in keys)))
                    if found and _text(found[0]) == wanted:
                        step.append(item)
            elif segment.group(0) == "[*]":
                step.extend(value)
            else:
                start = int(segment.group("start")) if segment.group("start") else None
                end = int(segment.group("end")) if segment.group("end") else None
                step.extend(value[start:end])
        values = step
    return values


def _text(value: Any) -> str:
    """How JSONPath prints one value: strings as they are, other scalars as Go prints them, the rest as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _cell(kind: str, value: Any, now: float) -> Any:
    """`cellForJSONValue` (and JSONPath printing for `string` columns); None where the type does not fit."""
    if kind == "string":
        return _text(value)
    if value is None or isinstance(value, bool) is not (kind == "boolean"):
        return None
    if kind == "integer" and isinstance(value, int | float):
        return int(value)
    if kind == "number" and isinstance(value, int | float):
        return float(value)
    if kind == "boolean":
        return value
    if kind == "date" and isinstance(value, str):
        seconds = _seconds(value)
        return "<invalid>" if seconds is None else human_duration(now - seconds)
    return None


def custom_columns(resource: ResourceType) -> list[tuple[Obj, list[re.Match[str]]]]:
    """The CRD version's `additionalPrinterColumns`, or Age alone when it declares none."""
    declared = resource.printer_columns or (
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": _AGE},
    )
    return [(column, compile_path(column["jsonPath"])) for column in declared]


def _custom_definitions(resource: ResourceType) -> list[Obj]:
    definitions = [_definition(("Name", "name", 0, _NAME), "string")]
    for column, _ in custom_columns(resource):
        description = column.get("description") or (
            f"Custom resource definition column (in JSONPath format): {column['jsonPath']}"
        )
        definitions.append(
            {
                "name": column["name"],
                "type": column["type"],
                "format": column.get("format", ""),
                "description": description,
                "priority": int(column.get("priority", 0)),
            }
        )
    return definitions


def _custom_row(resource: ResourceType, obj: Obj, now: float) -> Row:
    cells: Row = [(obj.get("metadata") or {}).get("name", "")]
    for column, path in custom_columns(resource):
        found = find_results(obj, path)
        cells.append(None if not found else _cell(column["type"], found[0], now))
    return cells


# ------------------------------------------------------------------------------------------------------ tables


def _definition(column: tuple[str, str, int, str], kind: str = "string") -> Obj:
    name, form, priority, description = column
    return {"name": name, "type": kind, "format": form, "description": description, "priority": priority}


def wants_table(accept: str) -> str | None:
    """The meta.k8s.io version of the Table an `Accept` header asks for first, or None for plain JSON."""
    for entry in accept.split(","):
        found = TABLE_MEDIA.match(entry.strip() + ";")
        if found is not None:
            return found.group(1)
        if entry.strip().split(";")[0] in ("application/json", "*/*"):
            return None
    return None


def _row_object(obj: Obj, include: str, version: str) -> Obj | None:
    if include == "Object":
        return obj
    if include == "None":
        return None
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}", "metadata": obj["metadata"]}


def to_table(resource: ResourceType, body: Obj, now: float, *, version: str = "v1", include: str = "") -> Obj:
    """The Table for one object or a list (`body` as the server would send it), rows in the list's order."""
    if include not in ("", "Metadata", "Object", "None"):
        raise errors.bad_request(f'unrecognized includeObject value: "{include}"')
    items = body["items"] if "items" in body and body.get("kind", "").endswith("List") else [body]
    key = f"{resource.group}/{resource.plural}" if resource.group else resource.plural
    printer = BUILTIN_PRINTERS.get(key)
    if printer is not None:
        columns, print_row = printer
        definitions = [_definition(column) for column in columns]
        rows = [print_row(item, now) for item in items]
    elif not resource.is_builtin:
        definitions = _custom_definitions(resource)
        rows = [_custom_row(resource, item, now) for item in items]
    else:
        definitions = [_definition(_DEFAULT_COLUMNS[0]), _definition(_DEFAULT_COLUMNS[1], "date")]
        rows = [
            [(item.get("metadata") or {}).get("name", ""), (item.get("metadata") or {}).get("creationTimestamp")]
            for item in items
        ]
    metadata = {k: v for k, v in (body.get("metadata") or {}).items() if k in ("resourceVersion", "continue")}
    if "remainingItemCount" in (body.get("metadata") or {}):
        metadata["remainingItemCount"] = body["metadata"]["remainingItemCount"]
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": [
            {"cells": cells, "object": _row_object(item, include or "Metadata", version)}
            for cells, item in zip(rows, items, strict=True)
        ],
    }
