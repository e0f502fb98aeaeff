"""Admission: the webhooks and built-in plugins a write passes through before it is stored.

Order as in the apiserver's handler chain (`apiserver/pkg/endpoints/handlers/create.go`, `update.go`,
`patch.go`): the request is decoded and defaulted, mutating admission runs (mutating webhooks such as Trainer's
`/mutate-trainer-kubeflow-org-v1alpha1-trainjob` or Kueue's `mtrainjob.kb.io`), the object is defaulted again and
validated against its schema, then validating admission runs (Trainer's validating webhook on runtime patches,
JobSet's webhook). A plugin denies by raising `ApiError`; a mutating plugin changes `request.obj` in place.
The simulated controllers register their webhooks here.

Mutating webhooks run in the order of their webhook configurations' names, as the apiserver sorts them
(`apiserver/pkg/admission/configuration/mutating_webhook_manager.go`, `ByName`), so a plugin may name its
`configuration`; the order of registration breaks ties. With no `reinvocationPolicy` (default `Never`) none is
called twice. Validating webhooks run in parallel in the apiserver: their order does not matter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from airflow_provider_dispatch_lab.apiserver.auth.auth import UserInfo
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType

Operation = Literal["CREATE", "UPDATE", "DELETE"]


@dataclass
class AdmissionRequest:
    operation: Operation
    resource: ResourceType
    subresource: str | None
    namespace: str | None
    name: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    user: UserInfo
    dry_run: bool
    options: dict[str, Any] | None = None
    """The request's options as sent (`DeleteOptions` on DELETE, `UpdateOptions`, `CreateOptions`): what
    `request.options` is to an admission policy (`admission_policies.py`)."""


class AdmissionPlugin(Protocol):
    """One webhook or built-in plugin. `handles` is its rules (`webhooks[].rules` in a webhook configuration)."""

    name: str

    def handles(self, resource: ResourceType, subresource: str | None, operation: Operation) -> bool: ...

    async def mutate(self, request: AdmissionRequest) -> None: ...

    async def validate(self, request: AdmissionRequest) -> None: ...


class AdmissionChain:
    """The registered plugins, run in registration order."""

    def __init__(self) -> None:
        self._plugins: list[AdmissionPlugin] = []

    def register(self, plugin: AdmissionPlugin) -> None:
        self._plugins.append(plugin)

    def unregister(self, plugin: AdmissionPlugin) -> None:
        self._plugins.remove(plugin)

    def _mutation_order(self) -> list[AdmissionPlugin]:
        indexed = list(enumerate(self._plugins))
        indexed.sort(key=lambda pair: (getattr(pair[1], "configuration", pair[1].name), pair[0]))
        return [plugin for _, plugin in indexed]

    async def mutate(self, request: AdmissionRequest) -> None:
        for plugin in self._mutation_order():
            if plugin.handles(request.resource, request.subresource, request.operation):
                await plugin.mutate(request)

    async def validate(self, request: AdmissionRequest) -> None:
        for plugin in list(self._plugins):
            if plugin.handles(request.resource, request.subresource, request.operation):
                await plugin.validate(request)
