"""The scenario controls of a served lab over its HTTP API: what `dispatch lab node|pod|clock|verdict` call.

`dispatch lab serve` adds this middleware to its lab. A command that rehearses a failure against that lab
reaches it with the lab's kubeconfig, as every other request does; the controls are the lab's own, under paths
no Kubernetes API server serves (beside `/lab/metrics` and `/lab/seed`):

    GET  /lab/nodes                                       every node: its machine's state, Ready, fencing
    POST /lab/nodes/NODE/state         {"state": S}       put the machine in state S (`MachineState`)
    POST /lab/nodes/NODE/fencing       {"afterSeconds": N|null}   arm (or disarm) the fencing agent for NODE
    POST /lab/pods/NS/POD/exit         {"code": C}        the pod's running process exits now with C
    POST /lab/pods/NS/POD/termination-seconds {"seconds": N}  how long its process takes to stop after SIGTERM
    GET  /lab/clock                                       lab time and speed
    POST /lab/clock/advance            {"seconds": N}     move lab time forward, healthy kubelets heartbeating
    POST /lab/clock/speed              {"speed": X}       run lab time X times faster than real time (0 stops it)
    GET  /lab/verdict[?namespace=NS[&name=NAME]]          the overlap recorder's verdict (`truth/verdict.py`)

Each control is `AsyncScenario`'s (`scenario.py`), so it answers once the lab has carried it out: a node's
kubelet has taken on its new state (and heartbeated, if it can reach the API), lab time has moved. Only the
lab's admin may use them: the request must come from a loopback address and its user must be in
`system:masters` (the admin's token; a lab without `--rbac` treats every request as its admin, as it does for
the whole API). The server's authorizer has already been asked about the path, as for any non-resource path: with
RBAC only `cluster-admin` grants `/lab/*`. Errors are `Status` bodies, as the API's: 400 for a bad body, 404 for a
node without a kubelet or a pod without a running process, 409 for a machine that cannot act (frozen, powered
off), 504 when the lab did not carry a control out within 30 s of wall time.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, TypeVar

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.auth.rbac import PRIVILEGED_GROUP
from airflow_provider_dispatch_lab.apiserver.errors import ApiError
from airflow_provider_dispatch_lab.apiserver.server import USER_KEY
from airflow_provider_dispatch_lab.client import ApiStatusError
from airflow_provider_dispatch_lab.clock import format_timestamp
from airflow_provider_dispatch_lab.kinds import NODE
from airflow_provider_dispatch_lab.runtime import AsyncLab
from airflow_provider_dispatch_lab.scenario.scenario import AsyncScenario
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FENCE_AFTER_SECONDS, FencingAgent
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import MachineState, MachineUnavailable
from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger, OverlapRecorder
from airflow_provider_dispatch_lab.truth.verdict import VERDICT_KIND, trainjobs_seen, verdicts

T = TypeVar("T")
Obj = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CONTROL_TIMEOUT: Final = 30.0
"""Wall seconds a control may take before the answer is 504 (advancing far takes longer: see `_advance`)."""
_ROUTES: Final = {
    ("GET", ("nodes",)),
    ("POST", ("nodes", None, "state")),
    ("POST", ("nodes", None, "fencing")),
    ("POST", ("pods", None, None, "exit")),
    ("POST", ("pods", None, None, "termination-seconds")),
    ("GET", ("clock",)),
    ("POST", ("clock", "advance")),
    ("POST", ("clock", "speed")),
    ("GET", ("verdict",)),
}
"""(method, path after `/lab/`); None matches any one segment (a name)."""


def _route(method: str, path: str) -> tuple[tuple[str, ...], bool] | None:
    """(the path's segments after `/lab/`, whether the method fits) for a control path, else None."""
    if not path.startswith("/lab/"):
        return None
    parts = tuple(p for p in path.removeprefix("/lab/").split("/") if p)
    shapes = [
        (m, shape)
        for m, shape in _ROUTES
        if len(shape) == len(parts) and all(want is None or want == got for want, got in zip(shape, parts, strict=True))
    ]
    if not shapes:
        return None
    return parts, any(m == method for m, _ in shapes)


def _number(body: Mapping[str, Any], key: str, *, minimum: float = 0.0, nullable: bool = False) -> float | None:
    value = body.get(key)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < minimum:
        raise errors.bad_request(f"{key} must be a number of at least {minimum:g}, not {value!r}")
    return float(value)


def _is_loopback(remote: str | None) -> bool:
    try:
        return remote is not None and ipaddress.ip_address(remote).is_loopback
    except ValueError:
        return False


def _machine_unavailable(node: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f"node {node}: {why}", {"name": node, "kind": "nodes"})


class LabControls:
    """The control paths, as a middleware of the lab's server; `bind(lab)` once the lab has started."""

    def __init__(self) -> None:
        self._lab: AsyncLab | None = None
        self._scenario: AsyncScenario | None = None

    def bind(self, lab: AsyncLab) -> LabControls:
        self._lab = lab
        self._scenario = AsyncScenario(lab)
        return self

    async def close(self) -> None:
        if self._scenario is not None:
            await self._scenario.close()

    @property
    def lab(self) -> AsyncLab:
        if self._lab is None:
            raise RuntimeError("LabControls.bind(lab) was not called")
        return self._lab

    @property
    def scenario(self) -> AsyncScenario:
        if self._scenario is None:
            raise RuntimeError("LabControls.bind(lab) was not called")
        return self._scenario

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        found = _route(request.method, request.path)
        if found is None:
            return await handler(request)
        parts, method_fits = found
        if not _is_loopback(request.remote):
            raise ApiError(403, "Forbidden", "forbidden: the lab's controls answer loopback clients only")
        user = request[USER_KEY]
        if PRIVILEGED_GROUP not in user.groups:
            raise ApiError(
                403,
                "Forbidden",
                f'forbidden: User "{user.name}" cannot use the lab\'s controls: they are for its admin identity '
                f"(group {PRIVILEGED_GROUP})",
            )
        if not method_fits:
            raise errors.method_not_supported("lab/" + parts[0], "", request.method.lower())
        body: Obj = {}
        if request.method == "POST":
            try:
                decoded = await request.json() if await request.read() else {}
            except ValueError as error:
                raise errors.bad_request(f"the body of {request.path} is not JSON: {error}") from error
            if not isinstance(decoded, dict):
                raise errors.bad_request(f"the body of {request.path} must be a JSON object")
            body = decoded
        return web.json_response(await self._answer(parts, body, request.query))

    async def _answer(self, parts: tuple[str, ...], body: Obj, query: Mapping[str, str]) -> Obj:
        match parts:
            case ("nodes",):
                return {"kind": "LabNodeList", "items": await self._nodes()}
            case ("nodes", node, "state"):
                return await self._bounded(self._set_state(node, body.get("state")))
            case ("nodes", node, "fencing"):
                return await self._fencing(node, _number(body, "afterSeconds", nullable=True))
            case ("pods", namespace, pod, "exit"):
                return await self._exit(namespace, pod, body.get("code"))
            case ("pods", namespace, pod, "termination-seconds"):
                seconds = _number(body, "seconds")
                assert seconds is not None
                await self._api(self.scenario.set_termination_seconds(namespace, pod, seconds))
                return {"kind": "LabPod", "namespace": namespace, "name": pod, "terminationSeconds": seconds}
            case ("clock",):
                return self._clock()
            case ("clock", "advance"):
                seconds = _number(body, "seconds")
                assert seconds is not None
                await self._advance(seconds)
                return self._clock()
            case ("clock", "speed"):
                speed = _number(body, "speed")
                assert speed is not None
                self.lab.clock.set_speed(speed)
                return self._clock()
            case ("verdict",):
                return self._verdict(query.get("namespace") or None, query.get("name") or None)
        raise AssertionError(f"unrouted lab control {parts}")

    @staticmethod
    async def _bounded(work: Awaitable[T], seconds: float = CONTROL_TIMEOUT) -> T:
        try:
            async with asyncio.timeout(seconds):
                return await work
        except TimeoutError:
            raise errors.timeout(f"the lab did not carry the control out within {seconds:g} s") from None

    @staticmethod
    async def _api(work: Awaitable[Any]) -> Any:
        """An API call of the scenario, its refusal answered as the API answered it."""
        try:
            return await work
        except ApiStatusError as error:
            status = error.status
            raise ApiError(
                error.code, error.reason, str(status.get("message", "")), status.get("details") or {}
            ) from None

    # ----------------------------------------------------------------------------------------------- nodes

    async def _nodes(self) -> list[Obj]:
        listed = await self._api(self.scenario.client.list(NODE, None))
        return [self._node(node) for node in listed.get("items") or []]

    def _node(self, node: Obj) -> Obj:
        metadata = node.get("metadata") or {}
        name = str(metadata.get("name") or "")
        kubelet = self._kubelet(name)
        ready = next(
            (c.get("status") for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
            None,
        )
        raw_fence = (metadata.get("annotations") or {}).get(FENCE_AFTER_SECONDS)
        fenced = any(name in c.fenced for c in self.lab.controllers if isinstance(c, FencingAgent))
        return {
            "kind": "LabNode",
            "name": name,
            "machine": None if kubelet is None else kubelet.state.value,
            "ready": ready,
            "taints": [
                f"{t.get('key')}{'=' + str(t['value']) if t.get('value') else ''}:{t.get('effect')}"
                for t in (node.get("spec") or {}).get("taints") or []
            ],
            "fenceAfterSeconds": raw_fence,
            "fenced": fenced,
        }

    def _kubelet(self, node: str) -> Any:
        try:
            return self.scenario.kubelet(node)
        except (LookupError, RuntimeError):
            return None

    async def _set_state(self, node: str, state: Any) -> Obj:
        allowed = [s.value for s in MachineState]
        if state not in allowed:
            raise errors.bad_request(f"state must be one of {', '.join(allowed)}, not {state!r}")
        if self._kubelet(node) is None:
            raise ApiError(404, "NotFound", f'node "{node}" has no simulated kubelet in this lab', {"name": node})
        await self._api(self.scenario.set_state(node, state))
        return self._node(await self._api(self.scenario.client.get(NODE, None, node)))

    async def _fencing(self, node: str, seconds: float | None) -> Obj:
        value = None if seconds is None else f"{seconds:g}"
        patch = {"metadata": {"annotations": {FENCE_AFTER_SECONDS: value}}}
        return self._node(await self._api(self.scenario.client.patch(NODE, None, node, patch)))

    # ------------------------------------------------------------------------------------------------ pods

    async def _exit(self, namespace: str, pod: str, code: Any) -> Obj:
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
            raise errors.bad_request(f"code must be an exit code from 0 to 255, not {code!r}")
        try:
            if code == 0:
                await self.scenario.complete(namespace, pod)
            else:
                await self.scenario.fail(namespace, pod, code)
        except MachineUnavailable as error:
            raise ApiError(409, "Conflict", str(error), {"name": pod, "kind": "pods"}) from None
        except LookupError as error:
            raise ApiError(404, "NotFound", str(error), {"name": pod, "kind": "pods"}) from None
        return {"kind": "LabPod", "namespace": namespace, "name": pod, "exitCode": code}

    # ----------------------------------------------------------------------------------------------- time

    def _clock(self) -> Obj:
        clock = self.lab.clock
        return {"kind": "LabClock", "now": format_timestamp(clock.now()), "speed": clock.speed}

    async def _advance(self, seconds: float) -> None:
        """`AsyncScenario.advance`: in steps of the lease renewal, the healthy kubelets heartbeating at each;
        bounded like the synchronous scenario bounds it (at least 120 s, a tenth of the lab seconds)."""
        await self._bounded(self.scenario.advance(seconds), max(120.0, seconds / 10))

    # -------------------------------------------------------------------------------------------- verdict

    def _truth(self) -> tuple[OverlapRecorder, AdmissionLedger]:
        """The machines' recorder (an empty one in a lab without kubelets) and the store's admission ledger."""
        try:
            recorder = self.scenario.recorder
        except RuntimeError:
            recorder = OverlapRecorder(ledger=self.lab.ledger)
        return recorder, self.lab.ledger

    def _verdict(self, namespace: str | None, name: str | None) -> Obj:
        if name is not None and namespace is None:
            raise errors.bad_request("a verdict on one TrainJob needs its namespace as well as its name")
        recorder, ledger = self._truth()
        keys = [(namespace, name)] if namespace and name else trainjobs_seen(recorder, ledger, namespace)
        found = verdicts(recorder, ledger, keys)
        return {
            "kind": VERDICT_KIND,
            "items": [verdict.as_json() for verdict in found],
            "promiseKept": all(verdict.kept for verdict in found),
        }


__all__ = ["CONTROL_TIMEOUT", "LabControls"]
