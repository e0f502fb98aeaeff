"""The synchronous adapter: the programs of `programs/`, carried out with the official `kubernetes` client.

It decides nothing. Each method runs one program; each request the program yields becomes one REST call
through `ApiClient.call_api` (so the client's authentication, TLS, proxy and token refresh apply unchanged),
with `_preload_content=False`: the answer's bytes are decoded once with `json.loads`, and no client model is
ever built, which matters for a list of 50,000 pods. The HTTP form of each request and the decoding of each
answer are `transport.py`'s, shared with the async adapter.

Failures are values for the program (`ApiFailure`), never exceptions into it: an HTTP error with its status
and decoded Status body, and anything that got no HTTP answer (urllib3 `MaxRetryError`, `ProtocolError`,
`ReadTimeoutError`, a TLS failure, which the client reports as status 0) with status None, which the program
classifies as `UnreachableError`.

Retries are the program's and the caller's, never the transport's: an adapter built by `from_kubeconfig` or
`from_config_dict` turns urllib3's own retries off (`Configuration.retries = False`). A client passed in keeps
its own setting; urllib3 retries only idempotent methods by default, and the admitting PUT is conditional on the
resourceVersion that was checked, so a PUT repeated by urllib3 is answered 409 and never admits twice.

A read-only adapter refuses hold, release and open before anything is sent, and refuses any write request
outright should one reach it; inspect, find, remaining_pods and ceased work with it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

from airflow_provider_dispatch.dispatch.assessment import DrainReport, Execution, Status
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
    drive,
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

#: exceptions that mean "no HTTP answer": urllib3's (MaxRetryError, ProtocolError, timeouts, NewConnectionError)
#: and the OS's (a reset while the answer is read)
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (urllib3.exceptions.HTTPError, OSError)


class DispatchAdapter(AdapterBase[kubernetes.client.ApiClient]):
    """Hold, release, open, inspect, find, remaining_pods and ceased against one cluster, synchronously.

    `api_client` is a `kubernetes.client.ApiClient` (e.g. `KubernetesHook().api_client`); it is used as given
    and closed only when the adapter created it. `pod_read` and `page_size` choose how the drain check reads
    the pods (programs/pods.py: `"pinned"` per-selector lists at one resourceVersion, or the `"full"` namespace
    list). `request_timeout` is (connect, read) seconds per call. `clock` gives `now` for explanations (how far
    a grace period's deadline is) when a call does not pass one. `settle_seconds` is how long a hold settles
    before an admission (evidence.py; 90 s by default), and `accepted_risks` names the runtime risks a platform
    team accepts (policy.py: `pod-replacement`, `jobset-restart`): such runtimes are then admitted, and every
    admission of one is logged with the risk. `conflict_attempts` (5 by default, 1 to 20) is how many times
    hold, release and open run from their first read when they meet a conflict (409, or the execution changed
    while the pods were read; conflicts.py): each retry is told to `on_conflict` (by default logged), and a
    conflict on every attempt raises `PersistentConflictError` (retryable).
    """

    # --- construction and lifetime -------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, *, context: str | None = None, **options: Any
    ) -> DispatchAdapter:
        """An adapter with its own client from a kubeconfig file (None: `$KUBECONFIG` or `~/.kube/config`)."""
        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config(
                config_file=None if path is None else os.fspath(path),
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except Exception as error:
            raise kubeconfig_refusal(str(path or "($KUBECONFIG or ~/.kube/config)"), error) from None
        return cls._owning(configuration, options)

    @classmethod
    def from_config_dict(
        cls, config: Mapping[str, Any], *, context: str | None = None, **options: Any
    ) -> DispatchAdapter:
        """An adapter with its own client from a kubeconfig given as a dict (e.g. a connection's extras)."""
        configuration = kubernetes.client.Configuration()
        try:
            kubernetes.config.load_kube_config_from_dict(
                config_dict=dict(config),
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except Exception as error:
            raise kubeconfig_refusal("given as a dict", error) from None
        return cls._owning(configuration, options)

    @classmethod
    def _owning(cls, configuration: Any, options: dict[str, Any]) -> DispatchAdapter:
        configuration.retries = False  # the program decides about retries: urllib3 never repeats a call
        return cls(kubernetes.client.ApiClient(configuration), owns_client=True, **options)

    def close(self) -> None:
        """Release the client's connections when the adapter created it; a client passed in stays open."""
        if self._owns_client:
            self.api_client.close()
            self.api_client.rest_client.pool_manager.clear()

    def __enter__(self) -> DispatchAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the operations (operations.py builds each program) ------------------------------------------------

    def hold(self, ref: str | Ref) -> Execution:
        """Keep the object from running; idempotent. Returns the current execution identity."""
        return self.run(self.operations.hold(ref))

    def release(self, ref: str | Ref, *, now: datetime | None = None) -> Execution:
        """Admit a new execution after the drain check (DESIGN §3); a running object returns its execution."""
        return log_accepted_risks(logger, self.run(self.operations.release(ref, now=now)), ref)

    def open(
        self, manifest: Mapping[str, Any], *, ref: str | Ref | None = None, now: datetime | None = None
    ) -> Execution:
        """Create the TrainJob held, then release it; a retried open of the same object continues it."""
        execution = self.run(self.operations.open(manifest, ref=ref, now=now))
        return log_accepted_risks(logger, execution, ref if ref is not None else manifest_ref(manifest))

    def kueue_admit(self, ref: str | Ref, *, admission_key: str, now: datetime | None = None) -> Execution:
        """Kueue mode (the admission check controller): the drain check, then A+1; idempotent per admission."""
        execution = self.run(self.operations.kueue_admit(ref, admission_key=admission_key, now=now))
        return log_accepted_risks(logger, execution, ref)

    def inspect(self, ref: str | Ref, *, now: datetime | None = None) -> Status:
        """The status of one object (DESIGN §7). Writes nothing."""
        return self.run(self.operations.inspect(ref, now=now))

    def find(self, namespace: str, job_id: str, *, now: datetime | None = None) -> Status:
        """The status of the newest TrainJob of that job id in the namespace. Writes nothing."""
        return self.run(self.operations.find(namespace, job_id, now=now))

    def list_managed(self, namespace: str | None = None, *, now: datetime | None = None) -> tuple[Listed, ...]:
        """Every TrainJob dispatch manages in the namespace (None: all), each with its status. Writes nothing."""
        return self.run(self.operations.list_managed(namespace, now=now))

    def remaining_pods(
        self,
        ref: str | Ref,
        *,
        job_id: str | None = None,
        submission: str | None = None,
        now: datetime | None = None,
    ) -> DrainReport:
        """The object's remaining pods and their nodes' states. Writes nothing."""
        return self.run(self.operations.remaining_pods(ref, job_id=job_id, submission=submission, now=now))

    def ceased(self, ref: str | Ref, *, job_id: str | None = None, submission: str | None = None) -> bool:
        """Every remaining pod's processes are proven gone (DESIGN §4); True when none remains. Writes nothing."""
        return self.run(self.operations.ceased(ref, job_id=job_id, submission=submission))

    def run(self, program: Program[_T]) -> _T:
        """Carry out any program of `programs/` with this adapter's client."""
        return drive(program, self.respond)

    # --- I/O -----------------------------------------------------------------------------------------------

    def respond(self, request: Request) -> Response:
        """One request as one REST call; every failure of the call is returned as an `ApiFailure`."""
        if self.read_only and request.verb in WRITE_VERBS:
            raise read_only_refusal(request.describe())
        call = http_call(request)
        logger.debug("dispatch: %s", request.describe())
        try:
            response = self.api_client.call_api(
                call.path,
                call.method,
                query_params=list(call.query),
                header_params=dict(HEADERS),
                body=call.body,
                auth_settings=list(AUTH_SETTINGS),
                _preload_content=False,
                _request_timeout=self.operations.request_timeout,
            )
        except ApiException as error:
            if not error.status:  # the client's status 0: a TLS failure, or a request it could not send
                return transport_failure(request, error)
            return decode_answer(error.status, error.body)
        except TRANSPORT_ERRORS as error:
            return transport_failure(request, error)
        try:
            data = response.data
        except TRANSPORT_ERRORS as error:
            return transport_failure(request, error)
        finally:
            response.release_conn()
        if isinstance(request, ServerTime):
            return server_time(response.status, response.headers.get("Date"))
        return decode_answer(response.status, data)


__all__ = ["DispatchAdapter"]
