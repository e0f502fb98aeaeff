"""What the real tier puts between its clients and the real kube-apiserver, on loopback only, to stage what one API
server on loopback does not do by itself (tests/real/test_real_lost_pods.py, case 2 and finding 5):

* `ClockAheadReplica`: a second API server replica whose clock runs ahead, as a load balancer would expose it.
  A reverse proxy on 127.0.0.1 (TLS with the cluster's serving pair, which names 127.0.0.1: `real/pki.py`) that
  forwards every request to the real kube-apiserver unchanged (TLS verified with the cluster's CA; the caller's
  bearer token passes through, so the API server authenticates and authorizes the caller, not the proxy) and
  returns its answer unchanged, except that the answer to `GET /version` carries a `Date` header `ahead` seconds
  after the API server's own. A replica writes its own clock into `Date` (Go's `net/http` `Server` sets it on
  every response), and that header of `GET /version` is the one dispatch reads as the API server's time
  (`transport.py` `server_time`; the `ServerTime` request is `GET /version`), so it is the one moved, as the
  lab's `CLOCK_OFFSET_KEY` is set for `/version` only (tests/reliability/test_lost_pods.py `_fast_replica`).
  Every write still lands on the one kube-apiserver, so the times it writes into objects (`managedFields`,
  conditions) stay its own: the fast replica answers the release's clock reading, not the hold's record.
* `HeldCreations`: a validating admission webhook that holds its answer until the test lets it go. A write whose
  admission waits on a webhook is a request in flight in the API server: the real API server calls it for up to
  the webhook's `timeoutSeconds` (at most 30 s, `admissionregistration.k8s.io/v1`), then fails the request under
  `failurePolicy: Fail`. It serves HTTPS on 127.0.0.1 with a CA of its own, made for it (`real/pki.py`
  `make_pki`), which its configuration carries as the `caBundle`. Dry-run requests are answered at once: they
  are how the test learns that the API server calls it (`install`).

Both run on an event loop of their own, on a thread of their own, so that a test blocked in a synchronous wait
(`RealSteps.wait`) does not stop them answering.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import ssl
import threading
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import kubernetes
from aiohttp import web
from kubernetes.client import ApiException

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.cluster import write_kubeconfig
from airflow_provider_dispatch_lab.real.pki import make_pki
from airflow_provider_dispatch_lab.real.processes import wait_for

T = TypeVar("T")
S = TypeVar("S", bound="_LoopbackServer")
Obj = dict[str, Any]
TIMEOUT_SECONDS = 30
"""The webhook's `timeoutSeconds`: the most `admissionregistration.k8s.io/v1` allows (1 to 30, default 10)."""

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
"""Headers of one connection, not of the request (RFC 9110 §7.6.1), which a proxy does not forward; `Host` and
`Content-Length` are written again for the upstream connection."""


class LoopThread:
    """An event loop running on a daemon thread of its own; `run` calls a coroutine function on it and waits."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, function: Callable[[], Coroutine[Any, Any, T]], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(function(), self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _serve(app: web.Application, context: ssl.SSLContext) -> tuple[web.AppRunner, int]:
    """`app` over HTTPS on 127.0.0.1, a port the kernel picks; returns the runner and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    host, port = runner.addresses[0][:2]
    assert host == "127.0.0.1", runner.addresses
    return runner, int(port)


class _LoopbackServer:
    """An HTTPS server on 127.0.0.1 served from a loop thread of its own, for the length of a `with` block: a
    subclass's `_start` serves it (`_serve`) and returns the port, `_url` names it, `_stop` cleans up."""

    def __init__(self, thread_name: str) -> None:
        self.url = ""
        self._thread = LoopThread(thread_name)
        self._runner: web.AppRunner | None = None

    def __enter__(self: S) -> S:
        try:
            port = self._thread.run(self._start)
        except BaseException:
            self._thread.close()
            raise
        self.url = self._url(port)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._thread.run(self._stop)
        finally:
            self._thread.close()

    async def _start(self) -> int:
        raise NotImplementedError

    def _url(self, port: int) -> str:
        return f"https://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def _serving_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    return context


def later_date(date: str, seconds: float) -> str:
    """An HTTP `Date` (RFC 9110 §5.6.7, IMF-fixdate) `seconds` later."""
    return email.utils.format_datetime(email.utils.parsedate_to_datetime(date) + timedelta(seconds=seconds), True)


class ClockAheadReplica(_LoopbackServer):
    """The real API server as a second replica whose clock runs `ahead` seconds ahead (module docstring). Use as a
    context manager; `kubeconfig(identity, namespace)` reaches the API server through it."""

    def __init__(self, cluster: RealCluster, ahead: float) -> None:
        if cluster.pki is None:
            raise RuntimeError("the real cluster is not started")
        self.cluster = cluster
        self.ahead = ahead
        self.version_answers = 0
        """How many `GET /version` answers it moved (a test's check that its caller went through it)."""
        self._serving = _serving_context(cluster.pki.serving_cert, cluster.pki.serving_key)
        self._upstream = ssl.create_default_context(cafile=str(cluster.ca_file))
        self._session: aiohttp.ClientSession | None = None
        super().__init__("clock-ahead-replica")

    def kubeconfig(self, identity: str, namespace: str) -> Path:
        """The identity's kubeconfig (`RealCluster.kubeconfig`), its server this replica."""
        path = self.cluster.workdir / "kubeconfigs" / f"{identity}-{namespace}-ahead.yaml"
        return write_kubeconfig(
            path, self.url, self.cluster.ca_file, self.cluster.token_for(identity), identity, namespace
        )

    async def _start(self) -> int:
        # bytes pass through as the API server sent them (a gzipped answer stays gzipped, with its header)
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner, port = await _serve(app, self._serving)
        return port

    async def _stop(self) -> None:
        await super()._stop()
        if self._session is not None:
            await self._session.close()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        async with self._session.request(
            request.method,
            f"{self.cluster.url}{request.rel_url}",
            headers=headers,
            data=body if body else None,
            ssl=self._upstream,
            allow_redirects=False,
        ) as upstream:
            answer = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP:
                    answer.headers.add(key, value)
            date = upstream.headers.get("Date")
            if request.method == "GET" and request.path == "/version" and date is not None:
                answer.headers["Date"] = later_date(date, self.ahead)
                self.version_answers += 1
            if upstream.content_length is not None:
                answer.content_length = upstream.content_length
            else:
                answer.enable_chunked_encoding()
            await answer.prepare(request)
            async for chunk in upstream.content.iter_any():
                await answer.write(chunk)
            await answer.write_eof()
            return answer


class HeldCreations(_LoopbackServer):
    """A validating webhook on 127.0.0.1 that allows every request it is sent; between `hold()` and `let_go()`
    it holds its answer to each (not dry-run) request until `let_go()` (module docstring). `install` registers it
    for the pod creations of one user in one namespace."""

    def __init__(self, workdir: Path) -> None:
        self.pki = make_pki(workdir)
        self.held: list[Obj] = []
        """The admission requests it held (or holds), in arrival order."""
        self.dry_runs = 0
        self._arrived: list[float] = []
        self._lock = threading.Lock()
        self._released: asyncio.Event | None = None
        super().__init__("held-creations")

    def _url(self, port: int) -> str:
        return f"https://127.0.0.1:{port}/validate"

    def __exit__(self, *exc: object) -> None:
        try:
            self.let_go()
        finally:
            super().__exit__(*exc)

    def requests(self) -> list[Obj]:
        with self._lock:
            return list(self.held)

    def hold(self) -> None:
        """From now on, hold each request until `let_go()`."""

        async def hold() -> None:
            assert self._released is not None
            self._released.clear()

        self._thread.run(hold)

    def let_go(self) -> float:
        """Every held request is answered (allowed), and those that come later are answered at once. Returns how
        long the oldest of them was held: past the configuration's 30 s, the API server had already failed it."""

        async def release() -> float:
            assert self._released is not None
            self._released.set()
            now = self._thread.loop.time()
            with self._lock:
                return max((now - since for since in self._arrived), default=0.0)

        return self._thread.run(release)

    async def _start(self) -> int:
        self._released = asyncio.Event()
        self._released.set()
        app = web.Application()
        app.router.add_post("/validate", self._review)
        self._runner, port = await _serve(app, _serving_context(self.pki.serving_cert, self.pki.serving_key))
        return port

    async def _review(self, request: web.Request) -> web.Response:
        """An `AdmissionReview` (admission.k8s.io/v1): allowed, once let go (a dry run at once)."""
        assert self._released is not None
        review = await request.json()
        asked: Obj = review["request"]
        if asked.get("dryRun"):
            with self._lock:
                self.dry_runs += 1
        elif not self._released.is_set():
            with self._lock:
                self.held.append(asked)
                self._arrived.append(asyncio.get_running_loop().time())
            await self._released.wait()
            with self._lock:
                self._arrived.clear()
        answer = {"uid": asked["uid"], "allowed": True}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer})

    # --- its registration ------------------------------------------------------------------------------------

    def configuration(self, name: str, namespace: str, user: str) -> Obj:
        """A ValidatingWebhookConfiguration that sends this webhook every pod creation by `user` in `namespace`
        (the namespace's `kubernetes.io/metadata.name` label, which the API server sets; the user in a
        `matchConditions` CEL expression, admissionregistration.k8s.io/v1 since Kubernetes 1.30), waits for its
        answer up to 30 s, and fails the creation without one."""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": "held-creations.real-tier.dispatch.test",
                    "clientConfig": {"url": self.url, "caBundle": base64.b64encode(self.pki.ca_bundle).decode()},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                            "scope": "Namespaced",
                        }
                    ],
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                    "matchConditions": [{"name": "the-user", "expression": f"request.userInfo.username == '{user}'"}],
                    "failurePolicy": "Fail",
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                    "timeoutSeconds": TIMEOUT_SECONDS,
                }
            ],
        }

    def install(self, cluster: RealCluster, admin: kubernetes.client.ApiClient, namespace: str, user: str) -> str:
        """Register the webhook (`configuration`) and wait until the API server calls it: the API server
        loads webhook configurations from a watch, so a creation right after the write may not be sent yet. A
        dry-run pod creation as `user` (impersonated by the admin, with `user`'s group `system:masters`) reaches
        it once it is loaded. Returns the configuration's name, for `uninstall`."""
        name = f"held-creations-{namespace}"
        registration = kubernetes.client.AdmissionregistrationV1Api(admin)
        registration.create_validating_webhook_configuration(self.configuration(name, namespace, user))
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "webhook-probe-"},
            "spec": {"containers": [{"name": "probe", "image": "probe"}], "automountServiceAccountToken": False},
        }
        impersonating = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig("admin")))
        impersonating.set_default_header("Impersonate-User", user)
        impersonating.set_default_header("Impersonate-Group", "system:masters")
        core = kubernetes.client.CoreV1Api(impersonating)

        def reached() -> bool | None:
            # refused while the namespace's ServiceAccount is not made yet (the ServiceAccount admission plugin)
            with contextlib.suppress(ApiException):
                core.create_namespaced_pod(namespace, probe, dry_run="All")
            with self._lock:
                return self.dry_runs > 0 or None

        try:
            wait_for(f"the API server calls webhook {name}", reached, timeout=60, programs=cluster.programs)
        finally:
            impersonating.close()
        return name

    @staticmethod
    def uninstall(admin: kubernetes.client.ApiClient, name: str) -> None:
        kubernetes.client.AdmissionregistrationV1Api(admin).delete_validating_webhook_configuration(name)


__all__ = ["TIMEOUT_SECONDS", "ClockAheadReplica", "HeldCreations", "LoopThread", "later_date"]
