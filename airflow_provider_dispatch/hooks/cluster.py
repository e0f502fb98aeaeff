"""Which cluster a task acts on, said in its log: the API server, the context, the identity, and where they came from.

A task that writes must say where it wrote (issue 17 item 5): the API server URL, the kubeconfig context and user
(the identity the API server sees, as far as the kubeconfig names it), the namespace, and the source of all that,
the connection and which of its settings chose it, or the ambient configuration when the DAG asked for it with
`kubernetes_conn_id=None`. Nothing here reads a credential: the names come from the kubeconfig's `contexts`, and
only `server` and names are ever put in a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ClusterTarget:
    """Where a hook's client points, and why."""

    server: str
    source: str
    """How the configuration was chosen, e.g. `connection kubernetes_default (kube_config_path /etc/kube.yaml)`."""
    context: str | None = None
    user: str | None = None
    """The kubeconfig user of the context, or `in-cluster service account`."""

    def describe(self, namespace: str | None = None) -> str:
        who = ", ".join(
            part
            for part in (f"context {self.context}" if self.context else "", f"as {self.user}" if self.user else "")
            if part
        )
        where = f" ({who})" if who else ""
        scope = f", namespace {namespace}" if namespace else ""
        return f"Acting on the cluster at {self.server}{where}{scope}; configuration from {self.source}"


def kubeconfig_names(config: Mapping[str, Any] | None, context: str | None) -> tuple[str | None, str | None]:
    """(context name, user name) that a kubeconfig uses for `context` (None: its `current-context`)."""
    if not isinstance(config, Mapping):
        return context, None
    name = context or config.get("current-context")
    contexts = config.get("contexts")
    for entry in contexts if isinstance(contexts, list) else ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get("context")
            user = body.get("user") if isinstance(body, Mapping) else None
            return str(name), str(user) if isinstance(user, str) else None
    return (str(name) if isinstance(name, str) else None), None


__all__ = ["ClusterTarget", "kubeconfig_names"]
