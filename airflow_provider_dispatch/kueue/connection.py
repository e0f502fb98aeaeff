"""Where the controller's API client comes from: a kubeconfig, or the Pod's service account.

In a cluster the Deployment gives no kubeconfig: the controller then uses the service account token the kubelet
mounts (`kubernetes_asyncio` `load_incluster_config`, which re-reads the token as it is rotated). Outside one,
`--kubeconfig` (or `$KUBECONFIG`, or `~/.kube/config`) is read as `AsyncDispatchAdapter.from_kubeconfig` reads
it. Either way the controller ends up with one `AsyncDispatchAdapter` (a `ControllerAdapter`): the drain check runs
through it, and the controller's own calls share its client and connections. `ControllerAdapter` adds one thing:
each write it would send asks the controller's write permit first (leader.py: only the leader writes), so the
admitting PUT of a replica that is no longer surely the leader is never sent.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import kubernetes_asyncio

from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
from airflow_provider_dispatch.dispatch.errors import RefusedError
from airflow_provider_dispatch.dispatch.programs import Request, Response
from airflow_provider_dispatch.dispatch.transport import WRITE_VERBS, kubeconfig_refusal

IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


class ControllerAdapter(AsyncDispatchAdapter):
    """The dispatch adapter, asking `write_permit` (when set) before it sends any write; the permit raises an
    `UnreachableError` to stop it, which the program reports as a call that got no answer: nothing decided."""

    write_permit: Callable[[str], None] | None = None

    async def respond(self, request: Request) -> Response:
        if self.write_permit is not None and request.verb in WRITE_VERBS:
            self.write_permit(request.describe())
        return await super().respond(request)


def in_cluster(environ: Mapping[str, str] | None = None) -> bool:
    return bool((environ if environ is not None else os.environ).get(IN_CLUSTER_ENV))


async def connect(
    kubeconfig: Path | None,
    *,
    context: str | None = None,
    clock: Callable[[], datetime] | None = None,
    **adapter_options: Any,
) -> AsyncDispatchAdapter:
    """A writer adapter: from `kubeconfig` when given, else in-cluster when in a Pod, else the default file.
    `adapter_options` go to the adapter (`settle_seconds`, `accepted_risks`)."""
    options: dict[str, Any] = dict(adapter_options) if clock is None else {**adapter_options, "clock": clock}
    if kubeconfig is None and in_cluster():
        configuration = kubernetes_asyncio.client.Configuration()
        try:
            await asyncio.to_thread(kubernetes_asyncio.config.load_incluster_config, configuration)
        except Exception as error:
            raise RefusedError(
                f"the in-cluster configuration could not be loaded ({type(error).__name__}: {error}). Run the "
                "controller in a Pod with a service account token, or give --kubeconfig."
            ) from None
        return ControllerAdapter(kubernetes_asyncio.client.ApiClient(configuration), owns_client=True, **options)
    try:
        return await ControllerAdapter.from_kubeconfig(kubeconfig, context=context, **options)
    except RefusedError:
        raise
    except Exception as error:
        raise kubeconfig_refusal(str(kubeconfig), error) from None


__all__ = ["ControllerAdapter", "connect", "in_cluster"]
