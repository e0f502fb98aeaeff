"""Requests held in flight: a controller's request that the API server answers late, or not at all.

A request can spend a long time inside kube-apiserver before it is applied: a slow admission webhook (Trainer's,
JobSet's, Kueue's), API Priority and Fairness queueing it behind other requests of its flow
(`apiserver/pkg/util/flowcontrol`), an overloaded etcd. Meanwhile its client waits, and the object it writes was
built from what the client saw when it sent it. The Job controller's pod POST started before a hold can land
after it; Trainer's server-side apply of a JobSet can land after the TrainJob was held again.

Every such request is bounded by the server's request timeout (kubernetes/kubernetes, v1.34):

- `--request-timeout`, default one minute (`staging/src/k8s.io/apiserver/pkg/server/config.go` `NewConfig`:
  `RequestTimeout: time.Duration(60) * time.Second`; the flag in `server/options/server_run_options.go`);
- `endpoints/filters/request_deadline.go` `WithRequestDeadline` puts that deadline on the request's context,
  which every later stage (admission webhooks, the flow-control queue, the etcd3 store's `Create` and
  `GuaranteedUpdate`) honours: a write that has not reached storage by then fails and is not applied;
- `server/filters/timeout.go` `WithTimeoutForNonLongRunningRequests` answers `504 Timeout` ("the server was
  unable to return a response in the time allotted, but may still be processing the request") once the
  deadline has passed. Watches are long-running and not bounded.

A request can also be late before it reaches the server: its client built it and then stopped (a process
stopped or starved of CPU, a virtual machine paused for live migration, a long garbage-collection pause). No
server deadline runs for it, since the server has not received it, and controllers' clients set no timeout of
their own (client-go `rest.Config.Timeout`, zero by default). A `DelayRule` with `before_the_server` holds such a
request with no deadline and carries it out, as built, when released.

So a held request here (one the server has received) ends in exactly one of two ways: it is released before
`REQUEST_TIMEOUT_SECONDS` of lab time have passed since it arrived, and is then carried out as sent (applied, or
refused as the server would refuse it then); or the deadline passes first, and it is answered 504 without being
carried out. The lab holds it before any handler runs (where APF and the admission chain sit), so a 504 here never
leaves a half-applied write. Which requests are held is decided by `DelayRule`s matching the client (its
`User-Agent`, which every simulated controller sets: `dispatch-lab/job-controller`, `kubelet`, ...; or the authenticated
user), the verb, the resource and the subresource, each rule catching at most `count` requests.
`RequestDelays.middleware` is an aiohttp middleware that goes after authentication (`Lab(middlewares=...)`); the
rest of the request path is untouched.

Lab time is the clock of the deadline: at speed 0 a held request stays held until it is released or until
`advance()` moves lab time past its deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo, parse_request
from airflow_provider_dispatch_lab.apiserver.server import USER_KEY
from airflow_provider_dispatch_lab.clock import LabClock

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

REQUEST_TIMEOUT_SECONDS = 60.0
"""kube-apiserver's `--request-timeout` default (module docstring)."""

TIMEOUT_MESSAGE = (
    "the server was unable to return a response in the time allotted, but may still be processing the request"
)
"""The 504's message, as `timeout.go` words it (the lab did not carry the request out)."""


@dataclass
class DelayRule:
    """Which requests to hold: empty match fields match everything; `count` requests at most (None: all)."""

    user_agent: str = ""
    """A prefix of the client's `User-Agent` (`dispatch-lab/job-controller` matches that controller only)."""
    verbs: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    subresource: str | None = None
    """`status` holds only status writes; `""` only requests to the main resource; None either."""
    namespace: str | None = None
    count: int | None = 1
    user: str | None = None
    """The authenticated user's name (None: anyone)."""
    before_the_server: bool = False
    """The client was paused before it sent the request (module docstring): no request timeout applies."""
    selected: bool | None = None
    """True holds only requests with a `labelSelector` (a list of one object's pods, say), False only those
    without (a whole namespace); None either."""
    caught: int = 0

    def matches(self, agent: str, user: str, info: RequestInfo, *, selected: bool = False) -> bool:
        if self.count is not None and self.caught >= self.count:
            return False
        if self.selected is not None and selected != self.selected:
            return False
        if not info.is_resource or info.verb == "watch" or not agent.startswith(self.user_agent):
            return False
        if self.user is not None and user != self.user:
            return False
        if self.verbs and info.verb not in self.verbs:
            return False
        if self.resources and info.resource not in self.resources and info.qualified_resource not in self.resources:
            return False
        if self.subresource is not None and (info.subresource or "") != self.subresource:
            return False
        return self.namespace is None or info.namespace == self.namespace


@dataclass
class HeldRequest:
    """One request the lab holds: what it was, when it arrived (lab time), and how it ended."""

    serial: int
    rule: DelayRule
    agent: str
    method: str
    path: str
    arrived: float
    deadline: float
    outcome: str = "held"
    """`held`, then `released` (carried out) or `timed out` (answered 504, not carried out)."""
    _release: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def describe(self) -> str:
        return f"{self.agent} {self.method} {self.path} ({self.outcome})"


@dataclass
class RequestDelays:
    """Holds matching requests until released or until the request timeout (module docstring). `clock` is the
    lab's (set it once the lab has started, if the middleware has to be given to `Lab` before that)."""

    clock: LabClock | None = None
    timeout: float = REQUEST_TIMEOUT_SECONDS
    rules: list[DelayRule] = field(default_factory=list)
    requests: list[HeldRequest] = field(default_factory=list)
    _serials: itertools.count[int] = field(default_factory=itertools.count)
    _arrivals: asyncio.Condition | None = field(default=None, init=False, repr=False)

    def _arrived(self) -> asyncio.Condition:
        if self._arrivals is None:
            self._arrivals = asyncio.Condition()  # on the lab's loop, where the middleware and waiters run
        return self._arrivals

    async def wait_held(self, count: int) -> None:
        """On the lab's loop: return once `count` requests are held (bound it with the caller's timeout)."""
        arrived = self._arrived()
        async with arrived:
            await arrived.wait_for(lambda: len(self.held) >= count)

    def add(self, rule: DelayRule) -> DelayRule:
        self.rules.append(rule)
        return rule

    def remove(self, rule: DelayRule) -> None:
        self.rules = [r for r in self.rules if r is not rule]

    @property
    def held(self) -> list[HeldRequest]:
        return [r for r in self.requests if r.outcome == "held"]

    def release(self, rule: DelayRule | None = None) -> int:
        """Let the held requests (of `rule`, or all) through, in arrival order; returns how many. A request whose
        deadline has passed is not released: it times out. On the lab's loop; the requests are carried out as
        the loop gets to them."""
        now = self._now()
        chosen = [r for r in self.held if (rule is None or r.rule is rule) and now < r.deadline]
        for request in chosen:
            request.outcome = "released"
            request._release.set()
        return len(chosen)

    def clear(self) -> int:
        """Stop holding anything new and release everything held."""
        self.rules.clear()
        return self.release()

    def _clock(self) -> LabClock:
        if self.clock is None:
            raise RuntimeError("RequestDelays has no clock: set it to the lab's clock")
        return self.clock

    def _now(self) -> float:
        return self._clock().now()

    def _match(self, agent: str, user: str, info: RequestInfo, *, selected: bool = False) -> DelayRule | None:
        for rule in self.rules:
            if rule.matches(agent, user, info, selected=selected):
                rule.caught += 1
                return rule
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        info = parse_request(request.method, request.path, request.query.get("watch", "").lower() in ("true", "1"))
        agent = request.headers.get("User-Agent", "")
        user = request.get(USER_KEY)
        selected = bool(request.query.get("labelSelector"))
        rule = self._match(agent, user.name if isinstance(user, UserInfo) else "", info, selected=selected)
        if rule is None:
            return await handler(request)
        now = self._now()
        deadline = math.inf if rule.before_the_server else now + self.timeout
        held = HeldRequest(next(self._serials), rule, agent, request.method, request.path, now, deadline)
        self.requests.append(held)
        arrived = self._arrived()
        async with arrived:
            arrived.notify_all()
        waiter: asyncio.Future[object] = asyncio.ensure_future(held._release.wait())
        waits = [waiter]
        if held.deadline != math.inf:
            waits.append(asyncio.ensure_future(self._clock().sleep_until(held.deadline)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            if held.outcome == "held":
                held.outcome = "timed out"  # the deadline passed, or the server is stopping
        if held.outcome != "released":
            raise errors.timeout(TIMEOUT_MESSAGE)
        return await handler(request)
