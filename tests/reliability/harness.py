"""The reliability lab: the whole simulated cluster, stopped in time, and what the reliability tests observe.

A lab of its own rather than the session lab, for five reasons:

* lab time stands still (speed 0) and moves only when a test calls `Scenario.advance`, so a schedule's timing
  (grace periods, the 50 s node monitor grace, PodGC's 20 s loop, the 300 s tolerations) is a function of the
  schedule, not of how busy the machine is;
* `settle()` waits until the lab's event loop has nothing left to do: every controller reaction to the last
  step has happened, so the next step meets one well-defined state (no wall-clock sleeps: the loop is asked);
* identities by bearer token: the lab's admin (its controllers and the scenario), `caller-0` ... `caller-5`
  (dispatch adapters, one identity each so that one caller's requests can be told apart from another's) and
  `hostile` (a user who edits TrainJobs by hand); everyone may do everything, RBAC is the security tests' own;
* the journal: every caller request after authentication, with its answer (status, resourceVersion, continue
  token), and the hooks: faults and other interference for callers' requests only;
* the delays (`lab.apiserver.delays`): controllers' requests held in flight and released later, or answered 504
unapplied
  once kube-apiserver's request timeout (60 s of lab time) has passed; a held request is not work in flight for
  `settle()` (the lab is idle around it until the model releases it or time passes its deadline);
* the ledger: a listener on the lab's store that sees every write as it is applied: each TrainJob change with
  the admission number A and `spec.suspend` before and after and the request that made it, and each pod's
  creation revision. It is the ground truth of what was admitted, whatever the callers were told.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes
from aiohttp import web
from dispatch_lab.middleware import Handler, Hook, Hooks, failure_status, user_name

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch_lab.apiserver.auth.auth import Decision, UserInfo
from airflow_provider_dispatch_lab.apiserver.delays import RequestDelays
from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultKind, FaultRule
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo
from airflow_provider_dispatch_lab.apiserver.server import INFO_KEY
from airflow_provider_dispatch_lab.apiserver.storage.store import WatchEvent
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, Lab
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.cluster import ControllerFactory
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS, WORKLOAD_CONTROLLERS
from airflow_provider_dispatch_lab.truth.overlap import PodIdentity

Obj = dict[str, Any]

ADMIN = "lab-admin"
HOSTILE = "hostile"
ADMISSION_CONTROLLER = "dispatch-admission-controller"
"""dispatch's admission check controller in Kueue mode, as an identity of its own (its writes are told apart)."""
KUEUE_USER = ADMIN
"""The lab's controllers, Kueue's included, use the lab's controller token."""
CALLERS = tuple(f"caller-{i}" for i in range(6))
TOKENS = {
    DEFAULT_TOKEN: ADMIN,
    "hostile-token": HOSTILE,
    "admission-controller-token": ADMISSION_CONTROLLER,
    **{f"{c}-token": c for c in CALLERS},
}
CLUSTER: tuple[ControllerFactory, ...] = (*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS)
POD_RESOURCE = "pods"
SETTLE_ROUNDS = 30

#: the request being served (user, journal serial), for the store listener that runs inside it
_SERVING: contextvars.ContextVar[tuple[str, int]] = contextvars.ContextVar("serving", default=(ADMIN, -1))


def token_of(user: str) -> str:
    return next(token for token, name in TOKENS.items() if name == user)


class Identities:
    """Bearer tokens to users; everyone may do everything (the lab without RBAC, with names)."""

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        user = TOKENS.get(authorization.removeprefix("Bearer "))
        if user is None:
            return None
        groups = ("system:masters", "system:authenticated") if user == ADMIN else ("system:authenticated",)
        return UserInfo(user, groups)

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        return Decision(True, "the reliability lab lets everyone do everything")


# --- the journal ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One caller request and its answer (`dropped`: no answer reached the client)."""

    serial: int
    user: str
    method: str
    path: str
    query: Mapping[str, str]
    verb: str
    resource: str
    name: str | None
    status: int | str
    answer_rv: str | None = None
    answer_continue: str | None = None
    body_rv: str | None = None

    @property
    def ok(self) -> bool:
        return isinstance(self.status, int) and 200 <= self.status < 300

    @property
    def writes(self) -> bool:
        return self.method in ("PUT", "POST", "PATCH", "DELETE")

    def describe(self) -> str:
        query = "&".join(f"{k}={val}" for k, val in sorted(self.query.items()) if k != "continue")
        more = " (continued)" if "continue" in self.query else ""
        return f"{self.user} {self.method} {self.path}{'?' + query if query else ''}{more} -> {self.status}"


def _answer_metadata(response: web.StreamResponse) -> tuple[str | None, str | None]:
    """(resourceVersion, continue) of a JSON answer; nothing for a stream (a watch)."""
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray) or not body:
        return None, None
    try:
        decoded = json.loads(body)
    except ValueError:
        return None, None
    metadata = decoded.get("metadata") if isinstance(decoded, dict) else None
    if not isinstance(metadata, dict):
        return None, None
    rv, token = metadata.get("resourceVersion"), metadata.get("continue")
    return (rv if isinstance(rv, str) else None), (token if isinstance(token, str) and token else None)


@dataclass
class Journal:
    """Every request of a watched user (the callers, by default) after authentication; also counts every
    request in flight (for `settle`)."""

    calls: list[Call] = field(default_factory=list)
    in_flight: int = 0
    watched: Callable[[str], bool] = lambda user: user in CALLERS
    _serial: int = 0

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        name = user_name(request)
        info = request.get(INFO_KEY)
        counted = info is None or info.verb != "watch"  # a watch is open for minutes: it is not work in flight
        self.in_flight += counted
        serial = self._serial
        self._serial += 1
        token = _SERVING.set((name, serial))
        try:
            if not self.watched(name):
                return await handler(request)
            return await self._recorded(request, handler, name, serial)
        finally:
            _SERVING.reset(token)
            self.in_flight -= counted

    async def _recorded(self, request: web.Request, handler: Handler, user: str, serial: int) -> web.StreamResponse:
        info = request.get(INFO_KEY)
        body_rv: str | None = None
        if request.method == "PUT" and request.can_read_body:
            try:
                body = json.loads(await request.read())
                rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
                body_rv = rv if isinstance(rv, str) else None
            except ValueError:
                body_rv = None

        def log(status: int | str, rv: str | None = None, token: str | None = None) -> None:
            self.calls.append(
                Call(
                    serial,
                    user,
                    request.method,
                    request.path,
                    dict(request.query),
                    info.verb if info else "",
                    info.qualified_resource if info else "",
                    info.name if info else None,
                    status,
                    rv,
                    token,
                    body_rv,
                )
            )

        try:
            response = await handler(request)
        except BaseException as error:
            log(failure_status(error))
            raise
        log(response.status, *_answer_metadata(response))
        return response

    def mark(self) -> int:
        return len(self.calls)

    def since(self, mark: int, user: str | None = None) -> list[Call]:
        return [c for c in self.calls[mark:] if user is None or c.user == user]

    def serial(self) -> int:
        """The serial the next request will get: with `between`, what arrived in a span of time."""
        return self._serial

    def between(self, first: int, end: int, user: str) -> list[Call]:
        """`user`'s requests that arrived at serials first..end-1, in arrival order.

        By arrival, not by the order of their answers: a request a client gave up on (a hang past its read
        timeout) is answered, and journaled, only later, in the middle of the next operation's requests; read by
        position it would belong to that operation and split a dropped request from aiohttp's re-send."""
        return sorted((c for c in self.calls if first <= c.serial < end and c.user == user), key=lambda c: c.serial)


# --- the hooks: interference with callers' requests only ---------------------------------------------------


def info_of(request: web.Request) -> RequestInfo | None:
    return request.get(INFO_KEY)


def is_trainjob_put(request: web.Request) -> bool:
    info = info_of(request)
    return request.method == "PUT" and info is not None and info.resource == "trainjobs" and not info.subresource


async def lose_the_answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The request is applied, then the connection is reset before the answer leaves: a lost response."""
    await handler(request)
    if request.transport is not None:
        request.transport.abort()
    raise ConnectionResetError("the answer was lost after the write was applied (reliability test)")


class WriteBarrier:
    """Holds every caller's admitting PUT until each of `parties` callers has either reached its PUT or
    returned without one, then lets them all through together: both checks passed, the writes race."""

    def __init__(self, lab: Lab, parties: int) -> None:
        self._lab = lab
        self.parties = parties
        self.arrived: set[str] = set()
        self.done: set[str] = set()
        self._open = lab.call(asyncio.Event)

    def _check(self) -> None:
        if len(self.arrived | self.done) >= self.parties:
            self._open.set()

    async def hook(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.arrived.add(user_name(request))
        self._check()
        async with asyncio.timeout(30):  # a bound, not a synchronisation
            await self._open.wait()
        return await handler(request)

    def finished(self, caller: str) -> None:
        """Called from a caller's thread as it returns."""

        def mark() -> None:
            self.done.add(caller)
            self._check()

        self._lab.call(mark)


@dataclass
class FaultAt:
    """The lab's own fault (`lab.apiserver.faults`) on exactly the `index`-th request (0-based) of one user, or `lost`:
    the request is applied and its answer lost. Counts that user's requests as they arrive."""

    user: str
    index: int
    kind: FaultKind | str
    hang_seconds: float = 0.5
    seen: int = 0
    fired: Call | None = None
    fired_on: str = ""

    def __post_init__(self) -> None:
        self._injector: FaultInjector | None = None
        if self.kind != "lost":
            rule = FaultRule(self.kind, count=1, hang_seconds=self.hang_seconds)  # type: ignore[arg-type]
            self._injector = FaultInjector(seed=0, rules=[rule])

    def when(self, request: web.Request) -> bool:
        return user_name(request) == self.user

    async def hook(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        position = self.seen
        self.seen += 1
        if position != self.index:
            return await handler(request)
        self.fired_on = f"{request.method} {request.path}{'?' + request.query_string if request.query_string else ''}"
        if self._injector is None:
            return await lose_the_answer(request, handler)
        return await self._injector.middleware(request, handler)


# --- the ledger: what the store applied --------------------------------------------------------------------


def _admission(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return None
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(v.ANNOTATION_ADMISSION)
    return value if isinstance(value, str) else None


def _suspend(obj: Mapping[str, Any] | None) -> bool | None:
    if obj is None:
        return None
    value = (obj.get("spec") or {}).get("suspend")
    return value if isinstance(value, bool) else None


@dataclass(frozen=True)
class TrainJobWrite:
    """One applied change of a TrainJob, as the store saw it."""

    revision: int
    kind: str
    namespace: str
    name: str
    uid: str
    user: str
    serial: int
    old_admission: str | None
    new_admission: str | None
    old_suspend: bool | None
    new_suspend: bool | None
    lab_time: float

    @property
    def admitted(self) -> bool:
        """The hold was lifted: a new execution was admitted."""
        return self.kind == "MODIFIED" and self.old_suspend is True and self.new_suspend is False

    def describe(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name} by {self.user} at rv {self.revision}: "
            f"A {self.old_admission}->{self.new_admission}, suspend {self.old_suspend}->{self.new_suspend}"
        )


@dataclass(frozen=True)
class PodCreated:
    revision: int
    namespace: str
    name: str
    uid: str
    trainjob: str
    identity: PodIdentity | None = None
    """The pod as created: its rank keys and identity labels (labels edited later do not change it)."""


@dataclass
class Ledger:
    """Store listener: TrainJob writes and pod creations, in the order the store applied them."""

    clock: Callable[[], float]
    trainjob_resource: str
    writes: list[TrainJobWrite] = field(default_factory=list)
    pods: dict[str, PodCreated] = field(default_factory=dict)

    def __call__(self, event: WatchEvent) -> None:
        if event.resource == self.trainjob_resource:
            user, serial = _SERVING.get()
            metadata = event.obj.get("metadata") or {}
            self.writes.append(
                TrainJobWrite(
                    event.revision,
                    event.type,
                    event.key[0],
                    event.key[1],
                    str(metadata.get("uid") or ""),
                    user,
                    serial,
                    _admission(event.old),
                    _admission(event.obj) if event.type != "DELETED" else _admission(event.old),
                    _suspend(event.old),
                    _suspend(event.obj) if event.type != "DELETED" else _suspend(event.old),
                    self.clock(),
                )
            )
        elif event.resource == POD_RESOURCE and event.type == "ADDED":
            metadata = event.obj.get("metadata") or {}
            uid = str(metadata.get("uid") or "")
            identity = PodIdentity.of(metadata.get("labels") or {}, metadata.get("annotations") or {})
            self.pods[uid] = PodCreated(event.revision, event.key[0], event.key[1], uid, identity.trainjob, identity)

    def admissions(self, namespace: str, name: str) -> list[TrainJobWrite]:
        return [w for w in self.writes if w.admitted and (w.namespace, w.name) == (namespace, name)]


# --- the lab ---------------------------------------------------------------------------------------------


async def _quiet(lab: Lab, journal: Journal, delays: RequestDelays, rounds: int, bound: float) -> int:
    """On the lab's loop: return once `rounds` consecutive loop iterations found nothing else to run, no
    request in flight (but those the delays hold) and no write to the store. Lab time stands still, so the lab
    is then idle until the next step: every reaction to the last one (a watch event, a reconcile, a status
    write) has happened."""
    loop = asyncio.get_running_loop()
    store = lab.inner.store
    started = time.monotonic()
    revision, idle, iterations = store.revision, 0, 0
    while idle < rounds:
        await asyncio.sleep(0)
        iterations += 1
        ready = getattr(loop, "_ready", ())  # the loop's runnable callbacks (CPython's BaseEventLoop)
        busy = bool(ready) or journal.in_flight > len(delays.held) or store.revision != revision
        idle = 0 if busy else idle + 1
        revision = store.revision
        if time.monotonic() - started > bound:
            raise TimeoutError(f"the lab did not settle within {bound} s ({iterations} loop iterations)")
    return iterations


class ReliabilityLab:
    """The simulated cluster at speed 0 with identities, journal, hooks and ledger (module docstring)."""

    def __init__(self, *, controllers: Sequence[ControllerFactory] = CLUSTER, speed: float = 0.0) -> None:
        self.journal = Journal()
        self.hooks = Hooks(bypass=lambda user: user not in CALLERS)  # never the admin's or the hostile user's
        self.delays = RequestDelays()
        """The requests held in flight (`lab.apiserver.delays`); its methods run on the lab's loop (`lab.call`)."""
        identities = Identities()
        self.lab = Lab(
            speed=speed,
            controllers=tuple(controllers),
            authenticator=identities,
            authorizer=identities,
            middlewares=(self.journal.middleware, self.delays.middleware, self.hooks.middleware),
        )
        self._api: dict[str, kubernetes.client.ApiClient] = {}
        self.scenario: Scenario | None = None
        self.ledger: Ledger | None = None

    def start(self) -> ReliabilityLab:
        self.lab.start()
        inner = self.lab.inner
        self.delays.clock = inner.clock
        ledger = Ledger(inner.clock.now, v.TRAINJOB.resource)
        self.lab.call(lambda: inner.store.add_listener(ledger))
        self.ledger = ledger
        self.scenario = Scenario(self.lab)
        return self

    def stop(self) -> None:
        for client in self._api.values():
            client.close()
        self._api.clear()
        if self.scenario is not None:
            self.scenario.close()
        self.lab.stop()

    def __enter__(self) -> ReliabilityLab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def sc(self) -> Scenario:
        assert self.scenario is not None, "the lab is not started"
        return self.scenario

    @property
    def book(self) -> Ledger:
        assert self.ledger is not None, "the lab is not started"
        return self.ledger

    def kubeconfig(self, user: str) -> Path:
        return self.lab.kubeconfig(user, token=token_of(user), user=user)

    def api(self, user: str = ADMIN) -> kubernetes.client.ApiClient:
        """An official client as `user` (the admin by default), kept for the lab's lifetime."""
        if user not in self._api:
            self._api[user] = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig(user)))
        return self._api[user]

    def settle(self, timeout: float = 20.0) -> int:
        """Wait until the lab is idle (see `_quiet`); returns how many loop iterations that took."""
        return self.lab.run(lambda: _quiet(self.lab, self.journal, self.delays, SETTLE_ROUNDS, timeout), timeout + 5)

    def now(self) -> float:
        return self.sc.now()

    def crashes(self) -> list[tuple[str, BaseException | None]]:
        return self.lab.call(lambda: list(self.lab.inner.crashes))

    def revision(self) -> int:
        return self.lab.call(lambda: self.lab.inner.store.revision)

    @contextmanager
    def hooked(self, hook: Hook, when: Callable[[web.Request], bool] = lambda request: True) -> Iterator[None]:
        self.hooks.add(hook, when)
        try:
            yield
        finally:
            self.hooks.remove(hook)
