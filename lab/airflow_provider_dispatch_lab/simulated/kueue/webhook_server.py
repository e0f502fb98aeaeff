"""Kueue's webhook server as a lab controller: `mtrainjob.kb.io` is on the admission chain while it runs.

It registers when built (so a TrainJob created right after the lab starts is already mutated, as with a
webhook configuration installed before the workload) and unregisters when the lab stops it.
"""

from __future__ import annotations

import asyncio

from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext
from airflow_provider_dispatch_lab.simulated.kueue.webhook import TrainJobWebhook


class KueueWebhookServer:
    name = "kueue-webhook-server"

    def __init__(self, context: ClusterContext) -> None:
        self.admission = context.admission
        self.webhook = TrainJobWebhook()
        self.admission.register(self.webhook)

    async def run(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            self.admission.unregister(self.webhook)
