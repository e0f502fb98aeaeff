"""The scenario controls on an `AsyncLab`, driven from the test's own event loop with kubernetes_asyncio."""

from __future__ import annotations

import asyncio
from pathlib import Path

import kubernetes_asyncio

from airflow_provider_dispatch_lab.runtime import AsyncLab
from airflow_provider_dispatch_lab.scenario.scenario import AsyncScenario
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS

from .nodes_support import phase, pod


async def test_async_scenario_runs_a_pod_and_completes_it(tmp_path: Path) -> None:
    async with AsyncLab(speed=20.0, controllers=NODE_CONTROLLERS) as lab:
        scenario = AsyncScenario(lab)
        try:
            await scenario.add_node("n1")
            config = lab.kubeconfig(tmp_path / "kubeconfig")
            async with await kubernetes_asyncio.config.new_client_from_config(config_file=str(config)) as api:
                core = kubernetes_asyncio.client.CoreV1Api(api)
                await core.create_namespace({"metadata": {"name": "a"}})
                await core.create_namespaced_pod("a", pod("p", node="n1", termination_seconds=4))
            async with asyncio.timeout(30):
                await scenario.wait_for_pod("a", "p", lambda p: phase(p) == "Running")
                await scenario.set_termination_seconds("a", "p", 8)
                await scenario.complete("a", "p")
                done = await scenario.wait_for_pod("a", "p", lambda p: phase(p) == "Succeeded")
            assert done is not None
            assert done["metadata"]["annotations"]["lab.dispatch.phpboyscout.uk/termination-seconds"] == "8"
            (record,) = scenario.recorder.records
            assert record.stop is not None
            assert lab.crashes == []
        finally:
            await scenario.close()
