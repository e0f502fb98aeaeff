"""What the admission check controller tests share: the controller's traffic, the controller itself, the steps.

* `ControllerTraffic`: an aiohttp middleware on the lab (after authentication) that sees only the requests of
  the controller's identity. It records each (method, path, status), injects the lab's seeded faults into
  them (`lab.apiserver.faults`), can lose the answer of a write the server applied, and can hold a request at a `Gate`
  until the test has killed the controller, then drop it unapplied. Nothing of the lab's own controllers or of
  the test's admin client is touched.
* `RunningController`: the controller on the lab's loop (`lab.simulated.kueue.admission_check.LabAdmissionController`,
  lab clock), as the lab's `controller` service account; `kill()` cancels it at once (a crash: nothing runs after
  it), `start()` again is a restart from nothing but the cluster's state.
* `Steps`: queues, a runtime whose pods take a whole 8-cpu node of the test's own zone, dispatch TrainJobs,
  their Workloads, and waits through the API (list then watch, `cluster.waiting`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import kubernetes
from aiohttp import web
from cluster.kueue_steps import KueueObjects, condition
from cluster.workload_steps import trainjob_selector, unique

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.kueue.controller import AdmissionController, ControllerOptions
from airflow_provider_dispatch.kueue.leader import ElectionConfig
from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import LabRbac
from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.apiserver.server import USER_KEY
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.kueue import QueueSetup, SyncKueueScenario
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.kueue.admission_check import LabAdmissionController

Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CONTROLLER_USER = LabRbac.username_of("controller")
ZONE_LABEL = "topology.kubernetes.io/zone"


# --- the controller's traffic ------------------------------------------------------------------------------------


@dataclass
class Call:
    """One request of the controller; `status` is "open" until it is answered (a watch stays open)."""

    method: str
    path: str
    query: dict[str, str]
    status: int | str = "open"
    #: for a write of a TrainJob: the admission number its body carries (what the write leaves A at)
    admission: str | None = None

    @property
    def writes(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class Gate:
    """Holds the first request matching (method, path prefix and suffix) until opened: then it goes through
    (`forward`) or fails without having been applied."""

    method: str
    path_prefix: str
    path_suffix: str = ""
    reached: threading.Event = field(default_factory=threading.Event)
    _release: asyncio.Event | None = None
    _forward: bool = False

    def matches(self, request: web.Request) -> bool:
        path = request.path
        return (
            not self.reached.is_set()
            and request.method == self.method
            and path.startswith(self.path_prefix)
            and path.endswith(self.path_suffix)
        )

    async def hold(self) -> bool:
        self._release = asyncio.Event()
        self.reached.set()
        await self._release.wait()
        return self._forward

    def open(self, forward: bool) -> None:
        """Let the held request through (`forward`) or fail it without applying it. On the lab's loop."""
        self._forward = forward
        if self._release is not None:
            self._release.set()


@dataclass
class LoseAnswer:
    """The first request matching (method, path) is applied, then its connection is dropped: the answer is lost."""

    method: str
    path: str
    applied: threading.Event = field(default_factory=threading.Event)

    def matches(self, request: web.Request) -> bool:
        return not self.applied.is_set() and request.method == self.method and request.path == self.path


@dataclass
class ControllerTraffic:
    user: str = CONTROLLER_USER
    calls: list[Call] = field(default_factory=list)
    injector: FaultInjector | None = None
    gates: list[Gate] = field(default_factory=list)
    losses: list[LoseAnswer] = field(default_factory=list)

    def reset(self) -> None:
        self.calls.clear()
        self.injector = None
        self.gates.clear()
        self.losses.clear()

    def faults(self, *rules: FaultRule, seed: int = 3) -> FaultInjector:
        injector = FaultInjector(seed=seed)
        for rule in rules:
            injector.add(rule)
        self.injector = injector
        return injector

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        user = request.get(USER_KEY)
        if user is None or user.name != self.user:
            return await handler(request)
        call = Call(request.method, request.path, dict(request.query))
        if request.method == "PUT" and "/trainjobs/" in request.path:
            body = json.loads(await request.read() or b"{}")  # aiohttp keeps the bytes for the handler
            call.admission = ((body.get("metadata") or {}).get("annotations") or {}).get(v.ANNOTATION_ADMISSION)
        self.calls.append(call)
        try:
            response = await self._handle(request, handler)
        except web.HTTPException as error:
            call.status = error.status
            raise
        except Exception as error:
            # the lab's ApiError carries the HTTP code it is answered with; anything else is named
            code = getattr(error, "code", None)
            call.status = code if isinstance(code, int) else type(error).__name__
            raise
        call.status = response.status
        return response

    async def _handle(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        gate = next((g for g in self.gates if g.matches(request)), None)
        if gate is not None:
            await request.read()  # the whole request has arrived (aiohttp keeps the bytes for the handler)
        if gate is not None and not await gate.hold():
            raise ConnectionResetError("dropped by the test after killing the controller")
        loss = next((g for g in self.losses if g.matches(request)), None)
        if loss is not None:
            response = await handler(request)
            loss.applied.set()
            if request.transport is not None:
                request.transport.abort()
            raise ConnectionResetError(f"answer ({response.status}) lost after the server applied the write")
        if self.injector is not None:
            return await self.injector.middleware(request, handler)
        return await handler(request)

    # --- what the controller did ---------------------------------------------------------------------------------

    def trainjob_writes(self, namespace: str, name: str) -> list[Call]:
        path = v.TRAINJOB.path(namespace, name)
        return [c for c in self.calls if c.writes and c.path == path]

    def trainjob_raises(self, namespace: str, name: str) -> list[Call]:
        """The controller's writes of the TrainJob that raised A (each carried another A than the write
        before it); the others wrote the record of an execution's pods (dispatch/fencing.py)."""
        raises: list[Call] = []
        current: str | None = None
        for call in self.trainjob_writes(namespace, name):
            if call.admission != current:
                raises.append(call)
            if call.status == 200:
                current = call.admission
        return raises

    def forbidden(self) -> list[Call]:
        return [c for c in self.calls if c.status in (401, 403)]


# --- the controller ----------------------------------------------------------------------------------------------


class RunningController:
    """The admission check controller on the lab's loop, as the lab's `controller` identity."""

    def __init__(
        self,
        lab: Lab,
        options: ControllerOptions,
        token: str | None = None,
        election: ElectionConfig | None = None,
    ) -> None:
        self.lab = lab
        self.options = options
        if token is None and lab.inner.rbac is not None:
            token = lab.inner.rbac.token_for("controller")
        self.token = token
        self.election = election
        self.instance: LabAdmissionController | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self, timeout: float = 30.0, *, leading: bool = True) -> RunningController:
        """Start it and return once its Workload and AdmissionCheck caches are filled; with `election`, once it
        leads and they are filled (`leading`), or at once (a standby)."""

        async def go() -> LabAdmissionController:
            instance = LabAdmissionController(self.lab.inner.context(), self.options, self.token, self.election)
            self._task = self.lab.inner.spawn(instance.run(), name="dispatch-admission-controller (test)")
            async with asyncio.timeout(timeout):
                await instance.started.wait()
                if leading:
                    await instance.running.term.wait()
                    assert instance.controller is not None
                    await instance.controller.ready.wait()
            return instance

        self.instance = self.lab.run(go, timeout + 5)
        return self

    def wait_leading(self, timeout: float = 30.0) -> None:
        """Return once this replica leads and its term's caches are filled."""
        instance = self.instance
        assert instance is not None

        async def leading() -> None:
            async with asyncio.timeout(timeout):
                await instance.running.term.wait()
                assert instance.controller is not None
                await instance.controller.ready.wait()

        self.lab.run(leading, timeout + 5)

    @property
    def leads(self) -> bool:
        assert self.instance is not None
        elector = self.instance.running.elector
        return self.lab.call(lambda: elector is not None and elector.leading)

    @property
    def controller(self) -> AdmissionController:
        assert self.instance is not None
        assert self.instance.controller is not None
        return self.instance.controller

    def kill(self) -> None:
        """Cancel it where it stands, as a crash or a SIGKILL would stop it."""

        async def cancel() -> None:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

        self.lab.run(cancel)
        self._task = None

    def open_gate(self, gate: Gate, *, forward: bool) -> None:
        self.lab.call(lambda: gate.open(forward))


def workload_status_prefix(namespace: str) -> str:
    return v.WORKLOAD.path(namespace) + "/"


# --- the steps ---------------------------------------------------------------------------------------------------


def is_true(obj: Obj | None, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def check_entry(workload: Obj | None, check: str) -> Obj:
    for entry in ((workload or {}).get("status") or {}).get("admissionChecks") or ():
        if entry.get("name") == check:
            return dict(entry)
    return {}


def admission_of(trainjob: Obj) -> str | None:
    return (trainjob["metadata"].get("annotations") or {}).get(v.ANNOTATION_ADMISSION)


class Steps(KueueObjects):
    """The official clients in one namespace, nodes of a zone of the test's own, and Kueue's scenario controls."""

    def __init__(self, api: kubernetes.client.ApiClient, namespace: str, lab: Lab, scenario: Scenario) -> None:
        super().__init__(api, namespace)
        self.lab = lab
        self.scenario = scenario
        self.kueue = SyncKueueScenario(lab)
        self.zone = unique("z")

    def close(self) -> None:
        self.kueue.close()

    def node(self, name: str) -> str:
        full = f"{self.zone}-{name}"
        self.scenario.add_node(full, cpu="8", labels={ZONE_LABEL: self.zone})
        return full

    def runtime(self, *, pod_replacement_policy: str | None = "Failed") -> str:
        """Pods of a whole 8-cpu node of this zone each, with a 30 s grace period (`zone_runtime`)."""
        return self.zone_runtime(self.zone, pod_replacement_policy=pod_replacement_policy)

    def queues(self, *, check: bool = True, activate: bool = False, **options: Any) -> QueueSetup:
        """A ClusterQueue with quota for one TrainJob of two pods and our AdmissionCheck (not Active unless
        `activate`: the controller is to make it so), and a LocalQueue here."""
        checks = (unique("drained"),) if check else ()
        return self.kueue.create_queues(
            self.namespace,
            cluster_queue=unique("cq"),
            local_queue=unique("lq"),
            admission_checks=checks,
            activate_checks=activate,
            cpu="16",
            **options,
        )

    def queued_trainjob(
        self, setup: QueueSetup, runtime: str, *, name: str | None = None, annotations: dict[str, str] | None = None
    ) -> str:
        """A dispatch TrainJob (job id = its name, submission 1) in the LocalQueue; Kueue's webhook suspends it."""
        name = name or unique("tj")
        body = manifests.trainjob(name, queue=setup.local_queue, runtime=runtime, num_nodes=2, suspend=False)
        if annotations:
            body["metadata"]["annotations"] = dict(annotations)
        self.create_trainjob(body)
        return name

    def update_trainjob_metadata(self, name: str, annotations: dict[str, str], attempts: int = 8) -> Obj:
        """Set annotations on the TrainJob (read, change, replace; again on a 409, as Trainer writes it too)."""
        for attempt in range(attempts):
            obj = self.trainjob(name)
            obj["metadata"].setdefault("annotations", {}).update(annotations)
            try:
                return self.replace_trainjob(obj)
            except kubernetes.client.ApiException as error:
                if error.status != 409 or attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def running_pods(self, trainjob: str, count: int = 2, timeout: float = 30.0) -> list[Any]:
        def running(pods: list[Any]) -> bool:
            live = [p for p in pods if not p.metadata.deletion_timestamp]
            return len(live) == count and all(p.status.phase == "Running" for p in live)

        pods = self.wait_pods(trainjob_selector(trainjob), running, timeout=timeout)
        return [p for p in pods if not p.metadata.deletion_timestamp]


def pending_with(check: str, prefix: str) -> Callable[[Obj | None], bool]:
    def holds(wl: Obj | None) -> bool:
        entry = check_entry(wl, check)
        return entry.get("state") == "Pending" and str(entry.get("message", "")).startswith(prefix)

    return holds


#: the line of our check's waiting message that lists the pods of the previous execution (below what to do first)
WAITING_LINE = "\npods of the previous execution remain: "


def waiting_message(check: str) -> Callable[[Obj | None], bool]:
    """Our check is Pending with its waiting message: what to do first, then the pods of the previous execution."""

    def holds(wl: Obj | None) -> bool:
        entry = check_entry(wl, check)
        return entry.get("state") == "Pending" and WAITING_LINE in str(entry.get("message", ""))

    return holds


def waiting_only_for(check: str, pod: str, node: str) -> Callable[[Obj | None], bool]:
    """Our check waits for exactly one pod: its message's pods line is `... remain: <pod> on <node> (<node
    state>)`, whatever state the node is in by then (a frozen node reads Ready=True until the node lifecycle
    controller marks it Unknown); what to do about that node comes first."""
    alone = f"{WAITING_LINE}{pod} on {node} (Ready="

    def holds(wl: Obj | None) -> bool:
        message = str(check_entry(wl, check).get("message", ""))
        _, found, listed = message.partition(alone)
        return bool(found) and message.endswith(")") and ", " not in listed and node in message.splitlines()[0]

    return holds


def ready(check: str) -> Callable[[Obj | None], bool]:
    return lambda wl: check_entry(wl, check).get("state") == "Ready"


def admitted(wl: Obj | None) -> bool:
    return is_true(wl, "Admitted")
