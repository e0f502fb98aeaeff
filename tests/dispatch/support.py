"""Builders for plain JSON objects and a dict-backed fake API to drive the sans-I/O programs.

The fake is not a mock of a client: the programs never touch one. It answers `Request` values the way the
Kubernetes API answers the corresponding REST calls (one global resourceVersion, conditional replace, paged
lists with continue tokens, `resourceVersionMatch=Exact`, Status bodies), which is all a program can observe.
The real clients against the lab are exercised by the adapter tests.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import managed
from airflow_provider_dispatch.dispatch.blocking import RemainingPod, remaining_pods
from airflow_provider_dispatch.dispatch.evidence import HoldEvidence
from airflow_provider_dispatch.dispatch.fencing import ExecutionPods
from airflow_provider_dispatch.dispatch.nodes import NodeRead
from airflow_provider_dispatch.dispatch.programs import (
    ApiFailure,
    CreateObject,
    GetNode,
    GetObject,
    ListObjects,
    ReplaceObject,
    Request,
    Response,
    ServerTime,
)
from airflow_provider_dispatch.dispatch.vocabulary import parse_time

NS = "ml"
NAME = "ft-7"
JOB_ID = "job-1"
SUBMISSION = "s1"
RUNTIME = "torch-distributed"
#: the fake API server's clock (`ServerTime`), and a record time long before it (a settled hold)
NOW = "2026-12-03T12:00:00Z"
LONG_AGO = "2026-12-01T00:00:00Z"


def at(text: str) -> datetime:
    """`text` as the API server's time (a test's own constants: never unparsable)."""
    parsed = parse_time(text)
    assert parsed is not None
    return parsed


#: the API server's clock at `NOW`, and a hold recorded a second before it
SERVER_NOW = at(NOW)
HOLD = SERVER_NOW - timedelta(seconds=1)

# --- builders -----------------------------------------------------------------------------------------------


def condition(kind: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def trainjob(
    *,
    name: str = NAME,
    namespace: str = NS,
    job_id: str | None = JOB_ID,
    submission: str | None = SUBMISSION,
    admission: str | None = None,
    suspend: bool | None = True,
    suspended_condition: str | None = "True",
    conditions: Iterable[dict[str, Any]] = (),
    patches: list[dict[str, Any]] | None = None,
    queue: str | None = None,
    rv: str | None = "10",
    uid: str = "uid-tj-1",
    runtime_kind: str | None = None,
    record: str | None = None,
) -> dict[str, Any]:
    """A TrainJob; `record` is the raw `execution-pods` annotation (`settled_record` builds one)."""
    labels: dict[str, str] = {}
    if job_id is not None:
        labels[v.LABEL_JOB_ID] = job_id
    if submission is not None:
        labels[v.LABEL_SUBMISSION] = submission
    if queue is not None:
        labels[v.LABEL_KUEUE_QUEUE_NAME] = queue
    annotations = {v.ANNOTATION_ADMISSION: admission} if admission is not None else {}
    if record is not None:
        annotations[v.ANNOTATION_EXECUTION_PODS] = record
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    if rv is not None:
        metadata["resourceVersion"] = rv
    spec: dict[str, Any] = {"runtimeRef": {"name": RUNTIME}}
    if runtime_kind is not None:
        spec["runtimeRef"]["kind"] = runtime_kind
    if suspend is not None:
        spec["suspend"] = suspend
    if patches is not None:
        spec["runtimePatches"] = patches
    all_conditions = list(conditions)
    if suspended_condition is not None:
        all_conditions.insert(0, condition(v.CONDITION_SUSPENDED, suspended_condition, "Suspended"))
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": metadata,
        "spec": spec,
        "status": {"conditions": all_conditions},
    }


def settled_record(admission: int | str | None = 0, *, since: str = LONG_AGO) -> str:
    """The record of an execution's pods (none left) written by a hold long before `NOW`: settled."""
    return json.dumps({"admission": int(admission or 0), "nodes": {}, "since": since})


def jobset(*, name: str = NAME, namespace: str = NS, suspend: bool | None = True) -> dict[str, Any]:
    spec: dict[str, Any] = {} if suspend is None else {"suspend": suspend}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def child_job(*, label: int | None, started: bool, suspended_condition: bool, finished: bool = False) -> dict[str, Any]:
    """A child Job `<NAME>-node-0` as the settle reads it (evidence.py, 4): `label` is the admission label in its
    pod template (what JobSet merged in when it last resumed it), `started` its `status.startTime`,
    `suspended_condition` the Job controller's `Suspended` condition."""
    labels = {} if label is None else {v.POD_LABEL_ADMISSION: str(label)}
    conditions = []
    if suspended_condition:
        conditions.append(condition(v.CONDITION_SUSPENDED))
    if finished:
        conditions.append(condition("Complete"))
    status: dict[str, Any] = {"conditions": conditions}
    if started:
        status["startTime"] = "2026-12-03T11:00:00Z"
    return {
        "metadata": {"name": f"{NAME}-node-0"},
        "spec": {"suspend": not finished, "template": {"metadata": {"labels": labels}}},
        "status": status,
    }


def runtime(
    *,
    name: str = RUNTIME,
    jobs: Iterable[str] = ("node",),
    pod_annotations: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    namespace: str | None = None,
    pod_replacement_policy: str | None = "Failed",
    failure_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    replicated = []
    for job in jobs:
        pod_template: dict[str, Any] = {
            "metadata": {},
            "spec": {"containers": [{"name": "node", "image": "x"}]},
        }
        if pod_annotations is not None:
            pod_template["metadata"]["annotations"] = dict(pod_annotations)
        if tolerations is not None:
            pod_template["spec"]["tolerations"] = tolerations
        job_spec: dict[str, Any] = {"template": pod_template}
        if pod_replacement_policy is not None:
            job_spec["podReplacementPolicy"] = pod_replacement_policy
        replicated.append({"name": job, "replicas": 1, "template": {"spec": job_spec}})
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime" if namespace is None else "TrainingRuntime",
        "metadata": metadata,
        "spec": {
            "template": {
                "spec": {"replicatedJobs": replicated, **({"failurePolicy": failure_policy} if failure_policy else {})}
            }
        },
    }


def patch(
    manager: str,
    *,
    pod_annotations: Mapping[str, str] | None = None,
    tolerations: list[Any] | None = None,
    job: str = "node",
) -> dict[str, Any]:
    pod_template: dict[str, Any] = {}
    if pod_annotations is not None:
        pod_template["metadata"] = {"annotations": dict(pod_annotations)}
    if tolerations is not None:
        pod_template["spec"] = {"tolerations": tolerations}
    spec: dict[str, Any] = {}
    if pod_template:
        spec = {"replicatedJobs": [{"name": job, "template": {"spec": {"template": pod_template}}}]}
    return {
        "manager": manager,
        "time": "2026-08-21T10:00:00Z",
        "trainingRuntimeSpec": {"template": {"spec": spec}},
    }


_uids = itertools.count(1)


def pod(
    name: str,
    *,
    namespace: str | None = NS,
    uid: str | None = "auto",
    jobset_name: str | None = NAME,
    job_id: str | None = JOB_ID,
    submission: str | None = SUBMISSION,
    admission: str | None = "1",
    phase: str | None = "Running",
    node: str | None = "n1",
    deletion: str | None = None,
    conditions: Iterable[dict[str, Any]] = (),
) -> dict[str, Any]:
    labels: dict[str, str] = {}
    if jobset_name is not None:
        labels[v.LABEL_JOBSET_NAME] = jobset_name
    if job_id is not None:
        labels[v.LABEL_JOB_ID] = job_id
    if submission is not None:
        labels[v.LABEL_SUBMISSION] = submission
    if admission is not None:
        labels[v.POD_LABEL_ADMISSION] = admission
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        metadata["namespace"] = namespace
    if uid == "auto":
        metadata["uid"] = f"uid-pod-{next(_uids)}"
    elif uid is not None:
        metadata["uid"] = uid
    if deletion is not None:
        metadata["deletionTimestamp"] = deletion
        metadata["deletionGracePeriodSeconds"] = 30
    status: dict[str, Any] = {"conditions": list(conditions)}
    if phase is not None:
        status["phase"] = phase
    spec: dict[str, Any] = {"containers": [{"name": "node"}]}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": metadata, "spec": spec, "status": status}


#: the kubelet's last status report of every node `node` builds (its Ready condition's lastHeartbeatTime)
REPORTED_AT = "2026-06-01T12:00:00Z"
#: how long a node `node` builds has been in its Ready state by default: a day (fencing.py counts it)
A_DAY = 86400


def node(
    name: str,
    *,
    ready: str | None = "True",
    taints: Iterable[dict[str, Any]] = (),
    ready_for: int | None = A_DAY,
) -> dict[str, Any]:
    """A Node as its kubelet reports it: the Ready condition `ready` (None: no condition) since `ready_for`
    seconds before its last report (None: without the two times)."""
    conditions = [] if ready is None else [condition(v.CONDITION_READY, ready)]
    if conditions and ready_for is not None:
        reported = parse_time(REPORTED_AT)
        assert reported is not None
        conditions[0]["lastHeartbeatTime"] = REPORTED_AT
        conditions[0]["lastTransitionTime"] = (reported - timedelta(seconds=ready_for)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"name": name},
        "spec": {"taints": list(taints)},
        "status": {"conditions": conditions},
    }


OUT_OF_SERVICE = {"key": v.TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}


#: how the first nodes of `remaining_across` are (every other node is Ready=True): one of each state that needs a
#: person, or that proves cessation; (Ready condition, out-of-service taint, deleted)
NODE_MIX: tuple[tuple[str | None, bool, bool], ...] = (
    ("Unknown", False, False),  # lost: needs the taint command
    ("False", False, False),
    ("Unknown", True, False),  # fenced: ceased
    ("True", False, True),  # deleted: gone, ceased
    ("True", True, False),  # a taint on a Ready node: a mistake
    ("Unknown", False, False),
)
#: every how-many-th pod of `remaining_across` was never scheduled
UNSCHEDULED_EVERY = 997


def across_nodes(pods: int, nodes: int, *, terminating: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """`pods` pods of the object spread over `nodes` nodes (pod i on node i % nodes; every `UNSCHEDULED_EVERY`-th
    never scheduled), Terminating unless `terminating` is False, and the node lookups: the first nodes in the
    states of `NODE_MIX`, the rest Ready=True. Names as a large TrainJob has them."""
    lookups: dict[str, Any] = {}
    for j in range(nodes):
        name = node_name(j)
        ready, out_of_service, deleted = NODE_MIX[j] if j < len(NODE_MIX) else ("True", False, False)
        lookups[name] = NodeRead.GONE if deleted else node(name, ready=ready, taints=[OUT_OF_SERVICE] * out_of_service)
    objects = [
        pod(
            f"{NAME}-node-0-{i}-{i * 7919 % 99991:05x}",
            node=None if i % UNSCHEDULED_EVERY == UNSCHEDULED_EVERY - 1 else node_name(i % nodes),
            deletion="2026-08-21T10:00:30Z" if terminating else None,
        )
        for i in range(pods)
    ]
    return objects, lookups


def node_name(j: int) -> str:
    return f"gpu-node-{j:05d}.cluster.internal"


def remaining_across(pods: int, nodes: int, *, terminating: bool = True) -> tuple[RemainingPod, ...]:
    """The remaining pods of `across_nodes`, judged as a drain check judges them."""
    objects, lookups = across_nodes(pods, nodes, terminating=terminating)
    return remaining_pods(objects, lookups)


def workload(*, uid: str = "uid-tj-1", active: bool = True, checks: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"trainjob-{NAME}-3f9a1",
            "namespace": NS,
            "labels": {v.LABEL_KUEUE_JOB_UID: uid},
        },
        "spec": {"active": active, "queueName": "user-queue"},
        "status": {"admissionChecks": list(checks)},
    }


def evidence(
    jobset_obj: dict[str, Any] | None,
    trainjob_obj: dict[str, Any] | None = None,
    *,
    jobs: Mapping[str, dict[str, Any] | None] | None = None,
    execution_pods: ExecutionPods | None = None,
) -> HoldEvidence:
    """What judging a hold needs (evidence.py): the JobSet, its Jobs, and by default a record of the
    TrainJob's current execution written long before `NOW` (a settled hold), at `NOW`."""
    admission = managed(trainjob_obj).admission if trainjob_obj is not None else 0
    record = execution_pods if execution_pods is not None else ExecutionPods(admission, {}, since=parse_time(LONG_AGO))
    return HoldEvidence(jobset_obj, dict(jobs or {}), record, parse_time(NOW))


# --- the fake API -------------------------------------------------------------------------------------------


def status_body(code: int, reason: str, message: str = "") -> dict[str, object]:
    """The Status object an API server answers a failed request with."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


def status(code: int, reason: str, message: str = "") -> ApiFailure:
    return ApiFailure(code, status_body(code, reason, message))


@dataclass
class FakeApi:
    """A tiny Kubernetes API over dicts: one global resourceVersion, conditional replace, paged lists."""

    objects: dict[tuple[str, str | None, str], dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes_forbidden: bool = False
    exact_supported: bool = True
    rv: int = 100
    #: what `ServerTime` answers: the API server's clock
    now: str = NOW
    requests: list[Request] = field(default_factory=list)
    #: a hook that may answer a request instead of the fake (fault injection); None lets the fake answer
    intercept: Callable[[Request], Response | None] | None = None
    #: called with each created object (e.g. to play Trainer and set the Suspended condition)
    on_create: Callable[[dict[str, Any]], None] | None = None

    # -- setup

    def add(self, coords: v.ApiCoordinates, obj: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(obj)
        self.rv += 1
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[(coords.plural, v.namespace_of(stored) or None, v.name_of(stored))] = stored
        return stored

    def get(self, coords: v.ApiCoordinates, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((coords.plural, namespace, name))

    def writes(self) -> list[Request]:
        return [r for r in self.requests if isinstance(r, ReplaceObject | CreateObject)]

    # -- answering

    def respond(self, request: Request) -> Response:
        self.requests.append(request)
        if self.intercept is not None:
            answer = self.intercept(request)
            if answer is not None:
                return answer
        if isinstance(request, GetNode):
            if self.nodes_forbidden:
                return status(
                    403,
                    "Forbidden",
                    f'nodes "{request.name}" is forbidden: User "ro" cannot get resource "nodes"',
                )
            found = self.nodes.get(request.name)
            return (
                copy.deepcopy(found)
                if found is not None
                else status(404, "NotFound", f'nodes "{request.name}" not found')
            )
        if isinstance(request, ServerTime):
            return {"date": self.now}
        if isinstance(request, GetObject) and request.coords is v.POD:
            pods = [
                p for p in self.pods if v.name_of(p) == request.name and v.namespace_of(p) in ("", request.namespace)
            ]
            return copy.deepcopy(pods[0]) if pods else status(404, "NotFound", f'pods "{request.name}" not found')
        if isinstance(request, GetObject):
            found = self.get(request.coords, request.namespace, request.name)
            if found is None:
                return status(404, "NotFound", f'{request.coords.plural} "{request.name}" not found')
            return copy.deepcopy(found)
        if isinstance(request, ListObjects):
            return self._list(request)
        if isinstance(request, ReplaceObject):
            return self._replace(request)
        return self._create(request)

    def _items(self, request: ListObjects) -> list[dict[str, Any]]:
        if request.coords is v.POD:
            items = [p for p in self.pods if v.namespace_of(p) in ("", request.namespace)]
        else:
            items = [
                o
                for (plural, ns, _), o in self.objects.items()
                if plural == request.coords.plural and ns == request.namespace
            ]
        terms = [t.split("=", 1) for t in request.label_selector.split(",")] if request.label_selector else []
        return [i for i in items if all(v.labels_of(i).get(k) == val for k, val in terms)]

    def _list(self, request: ListObjects) -> Response:
        if request.continue_ is not None:
            offset_text, rv = request.continue_.split("|")
            if rv != str(self.rv):
                return status(410, "Expired", "The provided continue parameter is too old")
            offset = int(offset_text)
        else:
            offset = 0
            if request.resource_version_match == "Exact":
                if not self.exact_supported:
                    return status(400, "BadRequest", "resourceVersionMatch is not supported")
                if request.resource_version != str(self.rv):
                    return status(410, "Expired", "too old resource version")
            rv = str(self.rv)
        items = self._items(request)
        limit = request.limit or len(items) or 1
        page = copy.deepcopy(items[offset : offset + limit])
        metadata: dict[str, Any] = {"resourceVersion": rv}
        if offset + limit < len(items):
            metadata["continue"] = f"{offset + limit}|{rv}"
        return {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": page}

    def _replace(self, request: ReplaceObject) -> Response:
        key = (request.coords.plural, request.namespace, request.name)
        live = self.objects.get(key)
        if live is None:
            return status(404, "NotFound")
        sent_rv = v.field(request.body, "metadata", "resourceVersion")
        if sent_rv != live["metadata"]["resourceVersion"]:
            return status(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version",
            )
        stored = copy.deepcopy(dict(request.body))
        stored["status"] = copy.deepcopy(live.get("status", {}))
        self.rv += 1
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def _create(self, request: CreateObject) -> Response:
        key = (request.coords.plural, request.namespace, v.name_of(request.body))
        if key in self.objects:
            return status(409, "AlreadyExists", f'trainjobs "{v.name_of(request.body)}" already exists')
        stored = copy.deepcopy(dict(request.body))
        self.rv += 1
        stored["metadata"]["resourceVersion"] = str(self.rv)
        stored["metadata"]["uid"] = f"uid-created-{self.rv}"
        self.objects[key] = stored
        if self.on_create is not None:
            self.on_create(stored)
        return copy.deepcopy(stored)


def standard_api(**kwargs: Any) -> FakeApi:
    """A held, observed, recorded (long ago: settled), drained TrainJob with its JobSet and runtime: release
    should admit it."""
    api = FakeApi()
    kwargs.setdefault("record", settled_record(kwargs.get("admission")))
    api.add(v.TRAINJOB, trainjob(**kwargs))
    api.add(v.JOBSET, jobset())
    api.add(v.CLUSTER_TRAINING_RUNTIME, runtime())
    api.nodes["n1"] = node("n1")
    return api


def record_writes(api: FakeApi) -> list[ReplaceObject]:
    """The writes that only grew the hold's record (fencing.grown): a TrainJob replace whose spec, admission
    number and every annotation but the record are as before. Anything else the caller must assert itself."""
    found = []
    for request in api.writes():
        if not isinstance(request, ReplaceObject) or request.coords is not v.TRAINJOB:
            continue
        annotations = v.annotations_of(request.body)
        if set(annotations) - {v.ANNOTATION_EXECUTION_PODS, v.ANNOTATION_ADMISSION, v.ANNOTATION_ADMITTED_AT}:
            continue
        found.append(request)
    return found


def assert_only_the_record_grew(api: FakeApi, before: dict[str, Any]) -> None:
    """A refusing writer's check wrote nothing but the record of what it saw (fencing.grown): the live TrainJob
    is `before` but for that annotation and its resourceVersion."""
    assert api.writes() == record_writes(api), [w.describe() for w in api.writes()]
    live = api.get(v.TRAINJOB, NS, NAME)
    assert live is not None

    def comparable(obj: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(obj)
        body["metadata"].pop("resourceVersion", None)
        body["metadata"].get("annotations", {}).pop(v.ANNOTATION_EXECUTION_PODS, None)
        return body

    assert comparable(live) == comparable(before)
