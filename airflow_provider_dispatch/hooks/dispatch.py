"""`DispatchHook` and `AsyncDispatchHook`: the dispatch adapters on the cncf-kubernetes `kubernetes` connection.

The provider reuses the `kubernetes` connection type of apache-airflow-providers-cncf-kubernetes and never
declares its own (two providers declaring one type make one of them lose, research airflow.md §1): a DAG author
points dispatch at the same connection their KubernetesPodOperator tasks use, with the same extras
(`kube_config_path`, `kube_config`, `in_cluster`, `cluster_context`, `disable_verify_ssl`, and the legacy
`extra__kubernetes__` prefixes).

* `DispatchHook` (workers: operators and sensors) is a `KubernetesHook`: the connection is resolved exactly as
  cncf resolves it (`KubernetesHook.get_conn`), with one difference: a connection that does not exist is a
  refusal, `kubernetes_default` included (cncf falls back to the ambient configuration then); only
  `kubernetes_conn_id=None` asks for that on purpose. `get_adapter()` wraps the hook's one cached `ApiClient` in a
  `DispatchAdapter`, and `cluster_target()` says where it points (hooks/cluster.py), for the writers' logs.
  `trigger_connection_kwargs()` is what a deferring task hands its trigger: the connection's extras are resolved
  on the worker and travel in the trigger's kwargs (encrypted in the metadata database), as cncf's
  `KubernetesPodOperator.invoke_defer_method` does (apache/airflow#41706), so a triggerer works where the
  connection exists only in the workers' environment.
* `AsyncDispatchHook` (the triggerer) is an `AsyncKubernetesHook` built from those kwargs. When extras are given
  it touches neither the Airflow database nor the API server to resolve them. `get_adapter()` builds one
  `kubernetes_asyncio` client for an `AsyncDispatchAdapter`; it reads kubeconfig files in a worker thread, never
  on the event loop (cncf's async hook reads them on the loop).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Final

import kubernetes_asyncio
import yaml
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook
from airflow.providers.common.compat.sdk import AirflowFailException, AirflowNotFoundException, BaseHook, Connection
from kubernetes.config import kube_config as sync_kube_config
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from airflow_provider_dispatch import __version__
from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter, read_kubeconfig
from airflow_provider_dispatch.dispatch.errors import RefusedError
from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter
from airflow_provider_dispatch.dispatch.transport import kubeconfig_refusal
from airflow_provider_dispatch.hooks.cluster import ClusterTarget, kubeconfig_names

DEFAULT_CONN_ID: Final = "kubernetes_default"
#: the User-Agent of dispatch's clients, so that API server audit logs tell a worker's calls from a triggerer's
WORKER_USER_AGENT: Final = f"airflow-provider-dispatch/{__version__} (worker)"
TRIGGERER_USER_AGENT: Final = f"airflow-provider-dispatch/{__version__} (triggerer)"
#: the keys of `DispatchHook.trigger_connection_kwargs()`, which `AsyncDispatchHook` accepts
CONNECTION_KWARGS: Final = ("kubernetes_conn_id", "connection_extras", "cluster_context", "config_file", "in_cluster")


def _flag(value: object) -> bool | None:
    """An extra's boolean as cncf reads it (`_get_bool`): a bool, or the strings true/false; else unknown."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


class DispatchHook(KubernetesHook):
    """The sync dispatch adapter for operators and sensors, on a cncf-kubernetes `kubernetes` connection.

    :param kubernetes_conn_id: the `kubernetes` connection. A connection that does not exist is a refusal
        (AirflowFailException), `kubernetes_default` included: cncf's hook would fall back to the in-cluster
        configuration or `$KUBECONFIG` / `~/.kube/config` then, and dispatch never writes to a cluster nobody
        named. None asks for that ambient configuration explicitly, without any connection (cncf's convention).
    :param cluster_context: the kubeconfig context; overrides the connection's `cluster_context` extra.
    :param config_file: a kubeconfig path; overrides the connection's `kube_config_path` extra.
    :param in_cluster: use the pod's service account; overrides the connection's `in_cluster` extra.
    """

    conn_name_attr = "kubernetes_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "kubernetes"
    hook_name = "Kubernetes Cluster Connection (dispatch)"

    def __init__(
        self,
        kubernetes_conn_id: str | None = DEFAULT_CONN_ID,
        *,
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
    ) -> None:
        super().__init__(
            kubernetes_conn_id=kubernetes_conn_id,
            cluster_context=cluster_context,
            config_file=config_file,
            in_cluster=in_cluster,
        )

    @classmethod
    def get_connection(cls, conn_id: str) -> Connection:  # type: ignore[override]
        """The connection, or a refusal when it does not exist (no fall back for `kubernetes_default`)."""
        try:
            return BaseHook.get_connection(conn_id)
        except AirflowNotFoundException:
            raise AirflowFailException(
                f"The connection {conn_id!r} does not exist, so dispatch does not know which cluster to act on; "
                "nothing was sent. Create it (a connection of type kubernetes, e.g. with the extra "
                "kube_config_path or in_cluster), or pass kubernetes_conn_id=None to use the ambient configuration "
                "(in-cluster, else $KUBECONFIG or ~/.kube/config) on purpose."
            ) from None

    def extra(self, name: str) -> Any:
        """One connection extra (plain or `extra__kubernetes__`-prefixed), as cncf's hook reads it."""
        return self._get_field(name)  # type: ignore[no-untyped-call]

    def cluster_target(self) -> ClusterTarget:
        """Where this hook's client points (API server, context, user) and which setting chose it."""
        server = str(self.api_client.configuration.host)
        origin = f"connection {self.conn_id}" if self.conn_id else "no connection (kubernetes_conn_id=None)"
        if self.is_in_cluster:
            return ClusterTarget(server, f"{origin}: the in-cluster configuration", user="the pod's service account")
        context = _first(self.cluster_context, self.extra("cluster_context")) or None
        path = _first(self.config_file, self.extra("kube_config_path"))
        inline = self.extra("kube_config")
        if path:
            config, source = _merged_kubeconfig(str(path)), f"{origin} (kube_config_path {path})"
        elif inline:
            config, source = _parse_inline(inline), f"{origin} (its inline kube_config)"
        elif self.config_dict:
            config, source = self.config_dict, f"{origin} (a kubeconfig given as a dict)"
        else:
            location = sync_kube_config.KUBE_CONFIG_DEFAULT_LOCATION  # $KUBECONFIG when the worker started
            config = _merged_kubeconfig(location)
            source = f"{origin}: the ambient kubeconfig {location} (the connection names no configuration)"
        found_context, user = kubeconfig_names(config, context)
        return ClusterTarget(server, source, context=found_context, user=user)

    @cached_property
    def _adapters(self) -> dict[tuple[bool, tuple[tuple[str, Any], ...]], DispatchAdapter]:
        return {}

    def get_adapter(self, read_only: bool = False, **options: Any) -> DispatchAdapter:
        """A `DispatchAdapter` over the hook's one cached client (`KubernetesHook.api_client`).

        `options` are the adapter's (`pod_read`, `page_size`, `request_timeout`, `clock`); adapters asked for with
        the same arguments are the same object. The client stays the hook's: closing an adapter leaves it open.
        """
        key = (read_only, tuple(sorted(options.items())))
        adapter = self._adapters.get(key)
        if adapter is None:
            client = self.api_client
            client.user_agent = WORKER_USER_AGENT
            adapter = DispatchAdapter(client, read_only=read_only, **options)
            self._adapters[key] = adapter
        return adapter

    def trigger_connection_kwargs(self) -> dict[str, Any]:
        """What a trigger needs to reach the same cluster from the triggerer, as JSON-serializable kwargs.

        `connection_extras` is the connection's `extra_dejson` resolved here on the worker (None without a
        connection, `kubernetes_conn_id=None`; a connection that does not exist is refused). The dict's keys are
        `CONNECTION_KWARGS`; pass it to a trigger as `**kwargs`, and the trigger passes it to `AsyncDispatchHook`.
        """
        extras = dict(self.conn_extras) if self.conn_id else None  # a missing connection was refused before
        return {
            "kubernetes_conn_id": self.conn_id,
            "connection_extras": extras,
            "cluster_context": self.cluster_context,
            "config_file": self.config_file,
            "in_cluster": self.in_cluster,
        }


class AsyncDispatchHook(AsyncKubernetesHook):
    """The async dispatch adapter for triggers, from `DispatchHook.trigger_connection_kwargs()`.

    :param connection_extras: the connection's extras as the worker resolved them. When given (even `{}`), the
        Airflow database is never asked for the connection; when None, it is looked up through
        `get_async_connection` (cncf's `AsyncKubernetesHook.get_conn_extras`).

    Other parameters as for `DispatchHook`.
    """

    conn_name_attr = "kubernetes_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "kubernetes"
    hook_name = "Kubernetes Cluster Connection (dispatch, async)"

    def __init__(
        self,
        kubernetes_conn_id: str | None = DEFAULT_CONN_ID,
        *,
        connection_extras: Mapping[str, Any] | None = None,
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
    ) -> None:
        super().__init__(
            connection_extras=dict(connection_extras) if connection_extras is not None else None,
            kubernetes_conn_id=kubernetes_conn_id,
            cluster_context=cluster_context,
            config_file=config_file,
            in_cluster=in_cluster,
        )

    @classmethod
    def from_connection_kwargs(cls, kwargs: Mapping[str, Any]) -> AsyncDispatchHook:
        """The hook for a trigger's connection kwargs (the keys of `CONNECTION_KWARGS`, all optional)."""
        unknown = set(kwargs) - set(CONNECTION_KWARGS)
        if unknown:
            raise TypeError(f"unknown connection kwargs: {', '.join(sorted(unknown))}")
        return cls(
            kwargs.get("kubernetes_conn_id", DEFAULT_CONN_ID),
            connection_extras=kwargs.get("connection_extras"),
            cluster_context=kwargs.get("cluster_context"),
            config_file=kwargs.get("config_file"),
            in_cluster=kwargs.get("in_cluster"),
        )

    async def get_adapter(
        self, read_only: bool = True, *, connection_pool_maxsize: int | None = None, **options: Any
    ) -> AsyncDispatchAdapter:
        """A new `AsyncDispatchAdapter` with a client of its own (close it: `await adapter.close()`).

        Read-only by default: triggers never write. `connection_pool_maxsize` bounds the client's concurrent
        connections (0: no bound; the client's default is 100); `options` are the adapter's.
        """
        configuration = await self.load_configuration()
        if connection_pool_maxsize is not None:
            configuration.connection_pool_maxsize = connection_pool_maxsize
        client = kubernetes_asyncio.client.ApiClient(configuration)
        client.user_agent = TRIGGERER_USER_AGENT
        return AsyncDispatchAdapter(client, read_only=read_only, owns_client=True, **options)

    async def load_configuration(self) -> Any:
        """A `kubernetes_asyncio` Configuration by cncf's precedence; RefusedError when it cannot be loaded.

        Constructor arguments override the connection's extras. `in_cluster`, `kube_config` (inline, JSON or
        YAML) and the kubeconfig path are mutually exclusive, as in cncf's `_load_config`. With none of them the
        in-cluster configuration is used inside a pod, else the default kubeconfig (cncf's sync default).
        """
        in_cluster = _flag(_first(self.in_cluster, await self.extra("in_cluster")))
        context = _first(self.cluster_context, await self.extra("cluster_context")) or None
        path = _first(self.config_file, await self.extra("kube_config_path")) or None
        inline = await self.extra("kube_config") or None
        options = (("in_cluster", in_cluster), ("kube_config", inline), ("kube_config_path", path))
        chosen = [name for name, value in options if value]
        if len(chosen) > 1:
            raise RefusedError(
                f"the connection {self.conn_id} sets {' and '.join(chosen)}, which are mutually exclusive; keep one."
            )
        configuration = kubernetes_asyncio.client.Configuration()
        if in_cluster or (in_cluster is None and not chosen and os.environ.get("KUBERNETES_SERVICE_HOST")):
            await self._load_in_cluster(configuration)
        elif inline:
            await _load_dict(_parse_inline(inline), context, "given inline in the connection", configuration)
        else:
            config, source = await read_kubeconfig(path)
            await _load_dict(config, context, source, configuration)
        if _flag(await self.extra("disable_verify_ssl")) is True:
            configuration.verify_ssl = False
        return configuration

    async def extra(self, name: str) -> Any:
        """One connection extra (plain or `extra__kubernetes__`-prefixed), from the kwargs' extras if given."""
        return await self._get_field(name)  # type: ignore[no-untyped-call]

    @staticmethod
    async def _load_in_cluster(configuration: Any) -> None:
        try:
            await asyncio.to_thread(kubernetes_asyncio.config.load_incluster_config, client_configuration=configuration)
        except Exception as error:
            raise RefusedError(
                f"the in-cluster configuration could not be loaded ({type(error).__name__}); run the triggerer "
                "in a pod with a service account, or give the connection a kubeconfig."
            ) from None


def _first(*values: Any) -> Any:
    """The first value that is not None (cncf's `_coalesce_param`: constructor arguments beat extras)."""
    return next((value for value in values if value is not None), None)


def _merged_kubeconfig(paths: str) -> Mapping[str, Any] | None:
    """The kubeconfig the client loaded from `paths` (one path or a `$KUBECONFIG` list), for its names only."""
    try:
        merged = sync_kube_config.KubeConfigMerger(paths).config
    except Exception:
        return None
    value = getattr(merged, "value", None)
    if not isinstance(value, Mapping):
        return None
    contexts = value.get("contexts")  # the merger wraps each entry of a merged list in a ConfigNode
    unwrapped = [getattr(entry, "value", entry) for entry in contexts] if isinstance(contexts, list) else []
    return {"current-context": value.get("current-context"), "contexts": unwrapped}


def _parse_inline(text: object) -> Any:
    """The `kube_config` extra: a dict, or JSON/YAML text (JSON is YAML)."""
    if isinstance(text, Mapping):
        return dict(text)
    try:
        parsed = yaml.safe_load(str(text)) if not isinstance(text, bytes) else yaml.safe_load(text)
    except yaml.YAMLError:
        parsed = None
    if not isinstance(parsed, dict):
        raise RefusedError("the connection's kube_config extra is not a kubeconfig (JSON or YAML). Fix the connection.")
    return parsed


async def _load_dict(config: Any, context: str | None, source: str, configuration: Any) -> None:
    try:
        loader = KubeConfigLoader(config_dict=config, config_base_path=None, active_context=context)
        await loader.load_and_set(configuration)
    except Exception as error:
        raise kubeconfig_refusal(source, error) from None


def connection_key(kwargs: Mapping[str, Any]) -> str:
    """A stable text for connection kwargs: triggers with the same connection share one client (triggers.hub)."""
    return json.dumps({key: kwargs.get(key) for key in CONNECTION_KWARGS}, sort_keys=True, default=str)


__all__ = [
    "CONNECTION_KWARGS",
    "DEFAULT_CONN_ID",
    "TRIGGERER_USER_AGENT",
    "WORKER_USER_AGENT",
    "AsyncDispatchHook",
    "DispatchHook",
    "connection_key",
]
