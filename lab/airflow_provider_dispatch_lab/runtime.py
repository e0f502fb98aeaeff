"""Running the lab: the API server on a loopback port, on its own event loop, with kubeconfigs to reach it.

`Lab` runs everything on a background thread's event loop, so that synchronous code (the `kubernetes` client, a
pytest test, Airflow's `dag.test()`) and asynchronous code (`kubernetes_asyncio`, a triggerer) reach it over real
HTTP exactly as they would reach a cluster. `AsyncLab` runs it on the caller's loop instead. Both write
kubeconfig files whose `server:` is the lab's `http://127.0.0.1:<port>` and whose user carries a bearer token.

With `tls_dir` the lab serves https instead, with a CA made at start by the real control plane's PKI code
(`lab.real.pki.make_pki`, one CA generator for both): kubectl reads a kubeconfig's credentials only for a server
reached over TLS (`client-go/tools/clientcmd/client_config.go` `ClientConfig`: "only try to read the auth
information if we are secure"), so over plain http it sends no token. The kubeconfigs carry the CA inline
(`certificate-authority-data`).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import shutil
import ssl
import tempfile
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web

from airflow_provider_dispatch_lab.apiserver.auth.auth import Authenticator, Authorizer
from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import LabRbac
from airflow_provider_dispatch_lab.apiserver.impersonation import refuse_impersonation
from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionChain
from airflow_provider_dispatch_lab.apiserver.registry.admission_policies import AdmissionPolicies
from airflow_provider_dispatch_lab.apiserver.registry.crd_objects import CrdObjects
from airflow_provider_dispatch_lab.apiserver.registry.resources import Registry, default_registry
from airflow_provider_dispatch_lab.apiserver.registry.strategy import prepare_create
from airflow_provider_dispatch_lab.apiserver.server import LabApiServer
from airflow_provider_dispatch_lab.apiserver.storage.store import Store
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext, Controller, ControllerFactory
from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger

T = TypeVar("T")
logger = logging.getLogger(__name__)

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""The namespaces a new cluster has (`pkg/controlplane/controller/systemnamespaces`)."""

DEFAULT_TOKEN = "lab-admin-token"


def write_kubeconfig(
    path: Path,
    server: str,
    token: str | None,
    user: str = "lab-admin",
    namespace: str = "default",
    *,
    ca_file: Path | None = None,
    cluster: str = "lab",
    inline_ca: bool = True,
    client_pair: tuple[Path, Path] | None = None,
) -> Path:
    """A kubeconfig for `server` with a bearer token; what `kubernetes.config.load_kube_config` reads.

    The lab and the real control plane (`real/cluster.py`) both write theirs here; what differs is a parameter.
    `cluster` names the cluster entry and prefixes the context (`lab-<user>`, `real-<user>`), so a kubeconfig
    says which of the two it reaches. `ca_file` (an https lab) goes in inline by default, so the kubeconfig stays
    valid on its own; `inline_ca=False` names the file instead (`certificate-authority`), as the real cluster
    does: its kubeconfigs live in its workdir beside its CA file and are removed with it. `client_pair` (a
    certificate and its key, `real/pki.py` `client_pair`) is the credential instead of a token (`token=None`): a
    real cluster's kubelets authenticate so."""
    if (token is None) == (client_pair is None):
        raise ValueError("a kubeconfig needs exactly one credential: a token or a client certificate pair")
    credential = (
        {"token": token}
        if client_pair is None
        else {"client-certificate": str(client_pair[0]), "client-key": str(client_pair[1])}
    )
    entry: dict[str, str] = {"server": server}
    if ca_file is not None:
        if inline_ca:
            entry["certificate-authority-data"] = base64.b64encode(ca_file.read_bytes()).decode()
        else:
            entry["certificate-authority"] = str(ca_file)
    context = f"{cluster}-{user}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": user, "user": credential}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user, "namespace": namespace}}],
        "current-context": context,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


class AsyncLab:
    """The lab on the current event loop: `async with AsyncLab() as lab: ... lab.url ...`."""

    def __init__(
        self,
        *,
        speed: float = 100.0,
        host: str = "127.0.0.1",
        port: int = 0,
        registry: Registry | None = None,
        authenticator: Authenticator | None = None,
        authorizer: Authorizer | None = None,
        middlewares: tuple[Any, ...] = (),
        bookmark_interval: float = 60.0,
        controllers: Sequence[ControllerFactory] = (),
        controller_token: str = DEFAULT_TOKEN,
        rbac: bool = False,
        tls_dir: Path | None = None,
    ) -> None:
        if host not in ("127.0.0.1", "::1", "localhost"):
            raise ValueError(f"the lab listens on loopback only, not on {host!r}")
        self.clock = LabClock(speed)
        self.store = Store()
        self.ledger = AdmissionLedger()
        self.store.add_listener(self.ledger.observe)
        self.admission = AdmissionChain()
        self.admission.register(AdmissionPolicies(self.store))
        self.registry = registry or default_registry()
        crds = CrdObjects(self.store, self.registry, self.clock)  # `kubectl get crd`: installed when first asked
        self.server = LabApiServer(
            self.registry,
            self.store,
            self.clock,
            admission=self.admission,
            authenticator=authenticator,
            authorizer=authorizer,
            middlewares=(*middlewares, refuse_impersonation, crds.middleware),
            bookmark_interval=bookmark_interval,
        )
        self._host, self._port = host, port
        self._tls_dir = tls_dir
        self.ca_file: Path | None = None
        """The CA that signed the serving certificate, when the lab serves https (`tls_dir`)."""
        self._runner: web.AppRunner | None = None
        self.url = ""
        self._background: set[asyncio.Task[Any]] = set()
        self._factories = list(controllers)
        self._controller_token = controller_token
        self.controllers: list[Controller] = []
        self.crashes: list[tuple[str, BaseException | None]] = []
        # --- RBAC by token (lab.rbac_setup): the admin and controller tokens are system:masters ------------
        self.rbac: LabRbac | None = None
        if rbac:
            if authenticator is not None or authorizer is not None:
                raise ValueError("rbac=True brings its own authenticator and authorizer; pass either, not both")
            self.rbac = LabRbac(self.store, self.clock, self.registry, admin_tokens=(DEFAULT_TOKEN, controller_token))
            self.server.authenticator = self.rbac.authenticator
            self.server.authorizer = self.rbac.authorizer

    async def start(self) -> AsyncLab:
        self._bootstrap()
        self._runner = web.AppRunner(
            self.server.application(), access_log=None, handle_signals=False, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, ssl_context=self._serving_context())
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            self._runner = None
            raise
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else self._port
        scheme = "http" if self.ca_file is None else "https"
        self.url = f"{scheme}://{self._host}:{port}"
        self.spawn(self.clock.run(), name="lab-clock")
        if self.rbac is not None:
            # RBAC objects and identity tokens, before any controller runs
            await self.rbac.provision(self.url, self.ca_file)
        self.start_controllers(self._factories)
        return self

    def _serving_context(self) -> ssl.SSLContext | None:
        """With `tls_dir`: a new CA and a loopback serving certificate there (`make_pki`), served over TLS."""
        if self._tls_dir is None:
            return None
        from airflow_provider_dispatch_lab.real.pki import make_pki

        pki = make_pki(self._tls_dir, ca_name="dispatch lab CA")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(pki.serving_cert, pki.serving_key)
        self.ca_file = pki.ca_file
        return context

    def context(self) -> ClusterContext:
        ca_file = None if self.ca_file is None else str(self.ca_file)
        return ClusterContext(self.url, self.clock, self.admission, self._controller_token, self.ledger, ca_file)

    def start_controllers(self, factories: Sequence[ControllerFactory]) -> list[Controller]:
        """Build and run controllers; they stop with the lab."""
        started = [factory(self.context()) for factory in factories]
        for controller in started:
            self.spawn(controller.run(), name=controller.name)
        self.controllers.extend(started)
        return started

    def _bootstrap(self) -> None:
        namespaces = self.registry.by_path("", "v1", "namespaces")
        assert namespaces is not None
        for name in BOOTSTRAP_NAMESPACES:
            if self.store.get(namespaces.qualified, ("", name)) is None:
                obj = {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": name},
                    "spec": {"finalizers": ["kubernetes"]},
                }
                created = prepare_create(namespaces, obj, None, self.clock)
                namespaces.schema.default(created)
                self.store.put(namespaces.qualified, ("", name), created)

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]:
        """Run a background task (a simulated controller) that stops with the lab."""
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        """A background task that ends by an exception is a lab bug: keep it for tests to see, and log it."""
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.crashes.append((task.get_name(), task.exception()))
            logger.error("lab task %s crashed", task.get_name(), exc_info=task.exception())

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        self.store.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> AsyncLab:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def kubeconfig(self, path: Path, token: str = DEFAULT_TOKEN, user: str = "lab-admin") -> Path:
        return write_kubeconfig(path, self.url, token, user, ca_file=self.ca_file)

    def kubeconfig_for(self, identity: str, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig as one of the RBAC identities (`lab.apiserver.auth.rbac_setup.IDENTITIES`); needs
        `rbac=True`."""
        if self.rbac is None:
            raise RuntimeError("the lab runs without RBAC: start it with rbac=True to get its identities")
        return write_kubeconfig(
            path, self.url, self.rbac.token_for(identity), identity, namespace, ca_file=self.ca_file
        )


class Lab:
    """The lab on a background thread, for synchronous callers: `with Lab() as lab: ... lab.url ...`."""

    def __init__(self, *, tls: bool = False, **options: Any) -> None:
        """`options` are `AsyncLab`'s; `tls=True` serves https with a CA made in the lab's own temporary folder."""
        self._options = options
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="dispatch-lab", daemon=True)
        self._async: AsyncLab | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="dispatch-lab-"))
        if tls:
            self._options["tls_dir"] = self._workdir / "tls"

    @property
    def inner(self) -> AsyncLab:
        if self._async is None:
            raise RuntimeError("the lab is not started")
        return self._async

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def clock(self) -> LabClock:
        return self.inner.clock

    def start(self) -> Lab:
        self._thread.start()

        async def boot() -> AsyncLab:
            return await AsyncLab(**self._options).start()

        self._async = self.run(boot)
        return self

    def run(self, function: Callable[[], Awaitable[T]], timeout: float | None = 60.0) -> T:
        """Run `function()` on the lab's loop and wait for its result."""

        async def call() -> T:
            return await function()

        future: Future[T] = asyncio.run_coroutine_threadsafe(call(), self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(
                f"the lab's loop did not finish {getattr(function, '__qualname__', function)!r} within {timeout} s\n"
                + self._loop_state()
            ) from None

    def _loop_state(self) -> str:
        """What the lab's loop was doing when a call timed out: its thread's stack (a loop blocked by synchronous
        work shows there) and the stack of every unfinished task (one awaiting forever shows there). Read from
        another thread, so only for a failure message."""
        import sys
        import traceback

        lines = []
        frame = sys._current_frames().get(self._thread.ident or -1)
        if frame is not None:
            lines.append("loop thread:\n" + "".join(traceback.format_stack(frame)[-12:]))
        try:
            tasks = list(asyncio.all_tasks(self._loop))
        except RuntimeError:  # the set changed while it was read from this thread
            tasks = []
        for task in tasks[:40]:
            stack = task.get_stack(limit=6)
            where = " <- ".join(f"{f.f_code.co_name} ({Path(f.f_code.co_filename).name}:{f.f_lineno})" for f in stack)
            lines.append(f"task {task.get_name()}: {where}")
        return "\n".join(lines)

    def call(self, function: Callable[[], T], timeout: float | None = 60.0) -> T:
        """Run a synchronous `function()` on the lab's loop (where the store and the clock live)."""

        async def call() -> T:
            return function()

        return self.run(call, timeout)

    def stop(self) -> None:
        if self._async is not None:
            self.run(self._async.stop)
            self._async = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()
        shutil.rmtree(self._workdir, ignore_errors=True)  # the kubeconfigs it wrote (they carry tokens)

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, name: str = "admin", token: str = DEFAULT_TOKEN, user: str = "lab-admin") -> Path:
        return self.inner.kubeconfig(self._workdir / f"kubeconfig-{name}.yaml", token, user)

    def kubeconfig_for(self, identity: str, namespace: str = "default") -> Path:
        """A kubeconfig as one of the RBAC identities (admin, writer, reader, no-nodes, controller)."""
        return self.inner.kubeconfig_for(identity, self._workdir / f"kubeconfig-rbac-{identity}.yaml", namespace)
