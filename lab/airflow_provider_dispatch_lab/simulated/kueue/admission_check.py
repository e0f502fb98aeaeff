"""dispatch's own Kueue admission check controller (`kueue/`) hosted in the lab: a `ControllerFactory` that
`AsyncLab(controllers=[...])` runs like its simulated controllers::

    AsyncLab(controllers=[*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *KUEUE_CONTROLLERS, lab_admission_controller()])

Unlike its neighbours it simulates nothing: it is the same `AdmissionController` that `dispatch
admission-controller` runs, given the lab's URL and clock. It lives on the lab's side because the dependency
points one way (docs/architecture.md, "The import rule"): the lab runs the provider, the provider never imports
the lab.

It reaches the lab over HTTP with the lab's controller token, or with `token` (a service account's, to run it
with exactly the RBAC of `deploy/admission-controller`), and runs every timer on the lab clock, so backoffs and
resyncs pass at lab speed and with `advance()`. With `election` it is one replica of several, as
`dispatch admission-controller --leader-elect` runs (`kueue.runner.run_terms`): its Lease is timed on the lab
clock too, and `running` says whether it leads and which controller its current term runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_provider_dispatch.kueue.clock import as_datetime
from airflow_provider_dispatch.kueue.connection import ControllerAdapter
from airflow_provider_dispatch.kueue.controller import AdmissionController, ControllerOptions
from airflow_provider_dispatch.kueue.leader import ElectionConfig
from airflow_provider_dispatch.kueue.metrics import ControllerMetrics
from airflow_provider_dispatch.kueue.runner import Running, run_terms
from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext, Controller, ControllerFactory


def lab_kubeconfig(url: str, token: str, ca_file: str | None = None) -> dict[str, Any]:
    """A kubeconfig as a dict for a server and a bearer token (the lab's); `ca_file` verifies an https server
    (`dispatch lab serve --tls`, the real control plane)."""
    cluster = {"server": url} if ca_file is None else {"server": url, "certificate-authority": ca_file}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": cluster}],
        "users": [{"name": "dispatch-admission-controller", "user": {"token": token}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "dispatch-admission-controller"}}],
        "current-context": "lab",
    }


class LabAdmissionController:
    name = "dispatch-admission-controller"

    def __init__(
        self,
        context: ClusterContext,
        options: ControllerOptions,
        token: str | None = None,
        election: ElectionConfig | None = None,
    ) -> None:
        self.context = context
        self.options = options
        self.token = token or context.token
        self.election = election
        self.running = Running(ControllerMetrics(leader=election is None), monotonic=context.clock.now)
        #: set once `controller` exists, or with `election` once the candidate runs (`running.controller` is
        #: then its current term's controller, None while it does not lead)
        self.started = asyncio.Event()

    @property
    def controller(self) -> AdmissionController | None:
        return self.running.controller

    async def run(self) -> None:
        clock = self.context.clock
        adapter = await ControllerAdapter.from_config_dict(
            lab_kubeconfig(self.context.url, self.token, self.context.ca_file), clock=lambda: as_datetime(clock.now())
        )
        try:
            if self.election is None:
                self.running.controller = AdmissionController(
                    adapter, clock, self.options, metrics=self.running.metrics
                )
                self.running.term.set()  # without election it leads for as long as it runs
                self.started.set()
                await self.running.controller.run()
            else:
                self.started.set()
                await run_terms(adapter, clock, self.election, self.options, asyncio.Event(), 0.0, self.running)
        finally:
            await adapter.close()


def lab_admission_controller(
    options: ControllerOptions | None = None, *, token: str | None = None, election: ElectionConfig | None = None
) -> ControllerFactory:
    def build(context: ClusterContext) -> Controller:
        return LabAdmissionController(context, options or ControllerOptions(), token, election)

    return build


__all__ = ["LabAdmissionController", "lab_admission_controller", "lab_kubeconfig"]
