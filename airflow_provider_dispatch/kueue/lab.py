"""The controller inside the lab: a `ControllerFactory` that `AsyncLab(controllers=[...])` runs like its own::

    AsyncLab(controllers=[*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *KUEUE_CONTROLLERS, lab_admission_controller()])

It reaches the lab over HTTP with the lab's controller token, or with `token` (a service account's, to run it
with exactly the RBAC of `deploy/admission-controller`), and runs every timer on the lab clock, so backoffs and
resyncs pass at lab speed and with `advance()`. It is the same `AdmissionController` the CLI runs.
"""

from __future__ import annotations

import asyncio

from airflow_provider_dispatch.kueue.clock import as_datetime
from airflow_provider_dispatch.kueue.connection import lab_kubeconfig
from airflow_provider_dispatch.kueue.controller import AdmissionController, ControllerOptions
from airflow_provider_dispatch.lab.cluster import ClusterContext, Controller, ControllerFactory


class LabAdmissionController:
    name = "dispatch-admission-controller"

    def __init__(self, context: ClusterContext, options: ControllerOptions, token: str | None = None) -> None:
        self.context = context
        self.options = options
        self.token = token or context.token
        self.controller: AdmissionController | None = None
        #: set once `controller` exists (its own `ready` says when its caches are filled)
        self.started = asyncio.Event()

    async def run(self) -> None:
        from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter

        clock = self.context.clock
        adapter = await AsyncDispatchAdapter.from_config_dict(
            lab_kubeconfig(self.context.url, self.token, self.context.ca_file), clock=lambda: as_datetime(clock.now())
        )
        try:
            self.controller = AdmissionController(adapter, clock, self.options)
            self.started.set()
            await self.controller.run()
        finally:
            await adapter.close()


def lab_admission_controller(
    options: ControllerOptions | None = None, *, token: str | None = None
) -> ControllerFactory:
    def build(context: ClusterContext) -> Controller:
        return LabAdmissionController(context, options or ControllerOptions(), token)

    return build


__all__ = ["LabAdmissionController", "lab_admission_controller"]
