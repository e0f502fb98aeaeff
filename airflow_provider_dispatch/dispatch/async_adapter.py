"""The asynchronous adapter: the same programs as `sync_adapter`, carried out with `kubernetes_asyncio`.

It differs from the sync adapter only in I/O: the operations come from `operations.py`, the HTTP form of each
request and the decoding of each answer from `transport.py`, and the decisions from `programs/`. Each request
is one call through `ApiClient.call_api` with `_preload_content=False`, which hands back the aiohttp response
unread: its bytes are decoded once with `json.loads`, no client model is built. All calls go through the one
`ApiClient` the adapter was given (one aiohttp session, its connections reused), which is what a triggerer
needs: a trigger makes many calls and must not open a session per call.

Failures are values for the program: an HTTP error with its status and decoded Status body, and anything that
got no HTTP answer (aiohttp `ClientError` such as `ClientConnectorError` or `ServerDisconnectedError`,
`asyncio.TimeoutError`, an OS error) with status None, which the program classifies as `UnreachableError`.
`asyncio.CancelledError` is never caught: a cancelled trigger stops at once.

aiohttp re-sends an idempotent request (GET, PUT) once when a reused keep-alive connection drops before the
answer (`ClientSession._request`, `retry_persistent_connection`; there is no public switch). For the admitting
PUT that is harmless: the body carries the resourceVersion that was checked, so a repeat of a PUT the server
already applied is answered 409 (ConflictError: retry, and the check finds the object running), never a second
admission. POST (open's create) is never re-sent.

Nothing blocks the event loop beyond what the client library does: the kubeconfig file is read and parsed in
a worker thread, and only the library's own loading (token and certificate files it names, an exec plugin
run as an asyncio subprocess) happens on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Any, TypeVar

import aiohttp
import kubernetes_asyncio
from kubernetes_asyncio.config.kube_config import KUBE_CONFIG_DEFAULT_LOCATION, KubeConfigLoader, KubeConfigMerger

from airflow_provider_dispatch.dispatch.assessment import DrainReport, Execution, Status
from airflow_provider_dispatch.dispatch.errors import RefusedError
from airflow_provider_dispatch.dispatch.operations import (
    AdapterBase,
    log_accepted_risks,
    manifest_ref,
    read_only_refusal,
)
from airflow_provider_dispatch.dispatch.programs import (
    Listed,
    Program,
    Request,
    Response,
    ServerTime,
    drive_async,
)
from airflow_provider_dispatch.dispatch.transport import (
    AUTH_SETTINGS,
    HEADERS,
    WRITE_VERBS,
    decode_answer,
    http_call,
    kubeconfig_refusal,
    server_time,
    transport_failure,
)
from airflow_provider_dispatch.dispatch.validation import Ref

_T = TypeVar("_T")
logger = logging.getLogger(__name__)

#: exceptions that mean "no HTTP answer" (asyncio.TimeoutError is TimeoutError, an OSError, on Python 3.11)
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, asyncio.TimeoutError, OSError)


def client_timeout(request_timeout: tuple[float, float]) -> aiohttp.ClientTimeout:
    """(connect, read) seconds as aiohttp's timeout: no total, so a long list that keeps arriving completes."""
    connect, read = request_timeout
    return aiohttp.ClientTimeout(total=None, connect=connect, sock_connect=connect, sock_read=read)


async def read_kubeconfig(path: str | os.PathLike[str] | None) -> tuple[Any, str]:
    """The kubeconfig at `path` (None: `$KUBECONFIG` or `~/.kube/config`), merged as the library merges it, and
    how to name it in a message. Read and parsed in a worker thread (the library's `load_kube_config` would read
    it on the loop); relative paths in it resolve against its directory as the library resolves them. A file
    that cannot be read or parsed, or none at all, is a RefusedError that does not quote it."""
    location = KUBE_CONFIG_DEFAULT_LOCATION if path is None else os.fspath(path)
    source = str(path) if path is not None else "($KUBECONFIG or ~/.kube/config)"
    try:
        merger = await asyncio.to_thread(KubeConfigMerger, location)
    except Exception as error:
        raise kubeconfig_refusal(source, error) from None
    if merger.config is None:
        raise RefusedError(f"no kubeconfig was found at {source}. Give the connection a kubeconfig.")
    return merger.config, source


class AsyncDispatchAdapter(AdapterBase[kubernetes_asyncio.client.ApiClient]):
    """The operations of `DispatchAdapter`, awaitable, over one `kubernetes_asyncio.client.ApiClient`.

    Options as for `DispatchAdapter`. The client passed in is used as given and closed only when the adapter
    created it (`from_kubeconfig`, `from_config_dict`; use `async with` or `await adapter.close()`).
    """

    @cached_property
    def _timeout(self) -> aiohttp.ClientTimeout:
        """The adapter's (connect, read) timeout as aiohttp takes it, made once."""
        return client_timeout(self.operations.request_timeout)

    # --- construction and lifetime -------------------------------------------------------------------------

    @classmethod
    async def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, *, context: str | None = None, **options: Any
    ) -> AsyncDispatchAdapter:
        """An adapter with its own client from a kubeconfig file (None: `$KUBECONFIG` or `~/.kube/config`),
        read by `read_kubeconfig`."""
        config, source = await read_kubeconfig(path)
        return await cls._owning(config, context, source, options)

    @classmethod
    async def from_config_dict(
        cls, config: Mapping[str, Any], *, context: str | None = None, **options: Any
    ) -> AsyncDispatchAdapter:
        """An adapter with its own client from a kubeconfig given as a dict (e.g. a connection's extras)."""
        return await cls._owning(dict(config), context, "given as a dict", options)

    @classmethod
    async def _owning(
        cls, config: Any, context: str | None, source: str, options: dict[str, Any]
    ) -> AsyncDispatchAdapter:
        configuration = kubernetes_asyncio.client.Configuration()
        try:
            loader = KubeConfigLoader(config_dict=config, config_base_path=None, active_context=context)
            await loader.load_and_set(configuration)
        except Exception as error:
            raise kubeconfig_refusal(source, error) from None
        return cls(kubernetes_asyncio.client.ApiClient(configuration), owns_client=True, **options)

    async def close(self) -> None:
        """Close the client's session when the adapter created it; a client passed in stays open."""
        if self._owns_client:
            await self.api_client.close()

    async def __aenter__(self) -> AsyncDispatchAdapter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the operations (operations.py builds each program) ------------------------------------------------

    async def hold(self, ref: str | Ref) -> Execution:
        """Keep the object from running; idempotent. Returns the current execution identity."""
        return await self.run(self.operations.hold(ref))

    async def release(self, ref: str | Ref, *, now: datetime | None = None) -> Execution:
        """Admit a new execution after the drain check (DESIGN §3); a running object returns its execution."""
        return log_accepted_risks(logger, await self.run(self.operations.release(ref, now=now)), ref)

    async def open(
        self, manifest: Mapping[str, Any], *, ref: str | Ref | None = None, now: datetime | None = None
    ) -> Execution:
        """Create the TrainJob held, then release it; a retried open of the same object continues it."""
        execution = await self.run(self.operations.open(manifest, ref=ref, now=now))
        return log_accepted_risks(logger, execution, ref if ref is not None else manifest_ref(manifest))

    async def kueue_admit(self, ref: str | Ref, *, admission_key: str, now: datetime | None = None) -> Execution:
        """Kueue mode (the admission check controller): the drain check, then A+1; idempotent per admission."""
        execution = await self.run(self.operations.kueue_admit(ref, admission_key=admission_key, now=now))
        return log_accepted_risks(logger, execution, ref)

    async def inspect(self, ref: str | Ref, *, now: datetime | None = None) -> Status:
        """The status of one object (DESIGN §7). Writes nothing."""
        return await self.run(self.operations.inspect(ref, now=now))

    async def find(self, namespace: str, job_id: str, *, now: datetime | None = None) -> Status:
        """The status of the newest TrainJob of that job id in the namespace. Writes nothing."""
        return await self.run(self.operations.find(namespace, job_id, now=now))

    async def list_managed(self, namespace: str | None = None, *, now: datetime | None = None) -> tuple[Listed, ...]:
        """Every TrainJob dispatch manages in the namespace (None: all), each with its status. Writes nothing."""
        return await self.run(self.operations.list_managed(namespace, now=now))

    async def remaining_pods(
        self,
        ref: str | Ref,
        *,
        job_id: str | None = None,
        submission: str | None = None,
        now: datetime | None = None,
    ) -> DrainReport:
        """The object's remaining pods and their nodes' states. Writes nothing."""
        return await self.run(self.operations.remaining_pods(ref, job_id=job_id, submission=submission, now=now))

    async def ceased(self, ref: str | Ref, *, job_id: str | None = None, submission: str | None = None) -> bool:
        """Every remaining pod's processes are proven gone (DESIGN §4); True when none remains. Writes nothing."""
        return await self.run(self.operations.ceased(ref, job_id=job_id, submission=submission))

    async def run(self, program: Program[_T]) -> _T:
        """Carry out any program of `programs/` with this adapter's client."""
        return await drive_async(program, self.respond)

    # --- I/O -----------------------------------------------------------------------------------------------

    async def respond(self, request: Request) -> Response:
        """One request as one REST call; every failure of the call is returned as an `ApiFailure`."""
        if self.read_only and request.verb in WRITE_VERBS:
            raise read_only_refusal(request.describe())
        call = http_call(request)
        logger.debug("dispatch: %s", request.describe())
        try:
            response = await self.api_client.call_api(
                call.path,
                call.method,
                query_params=list(call.query),
                header_params=dict(HEADERS),
                body=call.body,
                auth_settings=list(AUTH_SETTINGS),
                _preload_content=False,
                _request_timeout=self._timeout,
            )
            async with response:
                data = await response.read()
                status = response.status
                date = response.headers.get("Date")
        except TRANSPORT_ERRORS as error:
            return transport_failure(request, error)
        if isinstance(request, ServerTime):
            return server_time(status, date)
        return decode_answer(status, data)


__all__ = ["AsyncDispatchAdapter", "read_kubeconfig"]
