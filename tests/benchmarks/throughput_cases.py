"""The admission check controller reconciling a cluster of pending Workloads (`python -m` this module: one case).

The worker starts the real `AdmissionController` (`kueue/controller.py`, the one `dispatch admission-controller`
runs: informers, work queue, workers, wall clock) against a lab whose Workloads all have quota reserved and our
check Pending, and measures from the moment it starts (client built, informers listing) until every Workload it
was given has been decided:

* admitted: no pod remained, A was raised on the TrainJob and the check set Ready;
* waiting: pods remain, the check stays Pending with its waiting message (what to do first, then
  `pods of the previous execution remain: ...`).

Figures: wall time (to the controller's caches synced, and to the last Workload decided, with the time the
first half took), Workloads per second, client CPU (`time.process_time` of this process, which runs only the
controller), API requests and bytes by verb and resource (the lab's meter), reconciles run.

The benchmark needs to know when each Workload was decided without adding load to the API: `CountingController`
is the controller unchanged, with `_reconcile` extended to note each verdict; the driver checks the cluster's
state afterwards through the API.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Final

from airflow_provider_dispatch.kueue.clock import WallClock
from airflow_provider_dispatch.kueue.connection import connect
from airflow_provider_dispatch.kueue.controller import AdmissionController, ControllerOptions
from airflow_provider_dispatch.kueue.reconciler import Outcome
from airflow_provider_dispatch.kueue.verdicts import Retry
from airflow_provider_dispatch.kueue.workloads import PENDING, READY

from .harness.lab_process import LabEndpoint
from .harness.series import by_verb_resource
from .harness.workers import serve

Key = tuple[str, str]
CASES: Final = ("controller",)


class CountingController(AdmissionController):
    """`AdmissionController` that notes when each expected Workload was first decided (admitted or waiting)."""

    def __init__(self, *args: Any, expected: set[Key], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.expected = expected
        self.decided: dict[Key, tuple[str, float]] = {}
        self.unexpected: dict[str, str] = {}
        self.all_decided = asyncio.Event()

    async def _reconcile(self, key: Key) -> Outcome:
        outcome = await super()._reconcile(key)
        verdict = outcome.verdict
        if key in self.expected and key not in self.decided and verdict is not None and verdict.state is not None:
            if verdict.state == READY and outcome.retry is Retry.NONE:
                self.decided[key] = ("admitted", time.perf_counter())
            elif verdict.state == PENDING and outcome.retry is Retry.WAITING:
                self.decided[key] = ("waiting", time.perf_counter())
            else:
                self.unexpected["/".join(key)] = f"{verdict.state} ({outcome.retry.value}): {verdict.message}"
            if len(self.decided) == len(self.expected):
                self.all_decided.set()
        return outcome


async def measure(payload: dict[str, Any]) -> dict[str, Any]:
    lab = LabEndpoint(payload["labUrl"], payload["token"])
    expected = {(namespace, name) for namespace, name in payload["workloads"]}
    options = ControllerOptions(workers=payload["workers"], seed=7)
    before = await asyncio.to_thread(lab.meter)
    stop = asyncio.Event()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    adapter = await connect(Path(payload["kubeconfig"]))
    controller = CountingController(adapter, WallClock(), options, expected=expected)
    running = asyncio.get_running_loop().create_task(controller.run_until(stop))
    try:
        await asyncio.wait_for(controller.ready.wait(), payload["timeout"])
        ready_at = time.perf_counter()
        await asyncio.wait_for(controller.all_decided.wait(), payload["timeout"])
    except TimeoutError:
        raise SystemExit(
            f"only {len(controller.decided)} of {len(expected)} Workloads decided within {payload['timeout']} s; "
            f"unexpected verdicts: {list(controller.unexpected.items())[:5]}"
        ) from None
    cpu1, wall1 = time.process_time(), time.perf_counter()
    after = await asyncio.to_thread(lab.meter)
    reconciles = controller.reconciles
    stop.set()
    await running
    await adapter.close()
    times = sorted(at - wall0 for _, at in controller.decided.values())
    kinds = [kind for kind, _ in controller.decided.values()]
    return {
        "workloads": len(expected),
        "workers": payload["workers"],
        "wallSeconds": wall1 - wall0,
        "readySeconds": ready_at - wall0,
        "halfSeconds": times[(len(times) - 1) // 2],
        "cpuSeconds": cpu1 - cpu0,
        "reconciles": reconciles,
        "admitted": kinds.count("admitted"),
        "waiting": kinds.count("waiting"),
        "unexpected": controller.unexpected,
        "traffic": by_verb_resource(after - before),
    }


def run_case(payload: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(measure(payload))


if __name__ == "__main__":
    serve(run_case)
