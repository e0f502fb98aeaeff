"""Measure, on the real kubelet, when a returned node stops the containers of pods deleted while it was away.

    python -m tests.real.relist_measurement [--nodes 4] [--away 60 --away 180] [--mode cut --mode refuse --mode frozen]

The number behind `RETURN_MARGIN_SECONDS` (dispatch/nodes.py, docs/promise.md): a node is away (its path to the API
server cut as a partition drops packets, `cut`; or reset and refused, `refuse`; or its machine stopped, `frozen`)
for `--away` seconds, long enough for the node lifecycle controller to mark it `Ready=Unknown`, and meanwhile the
pod running on it is force-deleted. Then the node returns, and this records, per node, by the host's one clock
(the kubelets, the controllers and the machines share it):

- `ready`: the Ready=True transition the returned kubelet wrote (`lastTransitionTime`, whole seconds), after the
  return;
- `stop`: when the kubelet stopped the pod's container (the process ends at the StopContainer call: the pod stops
  in 0 s after SIGTERM);

and prints `stop - ready` (what the margin must cover: the rule counts from the kubelet's Ready report) and
`stop - return`. Several nodes are away at once in each round, each its own kubelet, so one round gives that many
runs. Not a test: it asserts nothing, and takes minutes; docs/fidelity.md keeps its results.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import kubernetes

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.processes import wait_for
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.nodes.workload import TERMINATION_SECONDS


@dataclass(frozen=True)
class Run:
    mode: str
    away: float
    node: str
    ready_after_return: float
    stop_after_return: float
    stop_after_ready: float


def _ready_transition(core: Any, node: str, after: float) -> float | None:
    for condition in core.read_node(node).status.conditions or ():
        if condition.type == "Ready" and condition.status == "True":
            moment = condition.last_transition_time
            stamp = moment.timestamp() if isinstance(moment, datetime) else None
            return stamp if stamp is not None and stamp >= after - 1 else None
    return None


def _stop_of(cluster: RealCluster, uid: str) -> float | None:
    async def read() -> float | None:
        for record in cluster.machines.recorder.records:
            if record.pod_uid == uid:
                return record.stop
        return None

    return cluster.run(read)


def _leave(cluster: RealCluster, node: str, mode: str) -> None:
    if mode == "frozen":
        cluster.set_node_state(node, "frozen")
        return

    async def cut() -> None:
        cluster.machines.machine(node).relay.cut(refuse=mode == "refuse")

    cluster.run(cut)


def _return(cluster: RealCluster, node: str, mode: str) -> None:
    if mode == "frozen":
        cluster.set_node_state(node, "ready")
        return

    async def heal() -> None:
        cluster.machines.machine(node).relay.heal()

    cluster.run(heal)


def one_round(cluster: RealCluster, core: Any, mode: str, away: float, count: int) -> list[Run]:
    nodes = [f"m-{uuid.uuid4().hex[:6]}" for _ in range(count)]
    namespace = f"relist-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        pods: dict[str, str] = {}
        for node in nodes:
            cluster.add_node(node)
            body = manifests.pod(f"p-{node}", node_name=node, grace_seconds=30)
            body["metadata"]["annotations"] = {TERMINATION_SECONDS: "0"}
            pods[node] = core.create_namespaced_pod(namespace, body).metadata.uid
        for node in nodes:
            wait_for(
                f"the process on {node}",
                lambda n=node: cluster.run(_running(cluster, pods[n])) or None,
                timeout=120,
                programs=cluster.programs,
            )
        left = time.time()
        for node in nodes:
            _leave(cluster, node, mode)
        for node in nodes:
            wait_for(
                f"{node} Ready=Unknown",
                lambda n=node: _status(core, n) == "Unknown" or None,
                timeout=120,
                programs=cluster.programs,
            )
            core.delete_namespaced_pod(f"p-{node}", namespace, grace_period_seconds=0)
        remaining = left + away - time.time()
        if remaining > 0:
            time.sleep(remaining)  # the measured partition's length: the subject of the measurement, not a wait
        returned = time.time()
        for node in nodes:
            _return(cluster, node, mode)
        runs = []
        for node in nodes:
            ready = wait_for(
                f"{node} Ready again",
                lambda n=node: _ready_transition(core, n, returned),
                timeout=300,
                programs=cluster.programs,
            )
            stop = wait_for(
                f"the returned kubelet of {node} stops the pod",
                lambda n=node: _stop_of(cluster, pods[n]),
                timeout=600,
                programs=cluster.programs,
            )
            runs.append(Run(mode, away, node, ready - returned, stop - returned, stop - ready))
        return runs
    finally:
        for node in nodes:
            cluster.remove_node(node)
        core.delete_namespace(namespace)


def _running(cluster: RealCluster, uid: str) -> Any:
    async def read() -> bool | None:
        return any(r.pod_uid == uid and r.running for r in cluster.machines.recorder.records) or None

    return read


def _status(core: Any, node: str) -> str | None:
    for condition in core.read_node(node).status.conditions or ():
        if condition.type == "Ready":
            return str(condition.status)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=4, help="nodes away at once in each round")
    parser.add_argument("--away", type=float, action="append", help="seconds away (repeatable; default 60 and 180)")
    parser.add_argument("--mode", action="append", choices=["cut", "refuse", "frozen"], help="how the node is away")
    options = parser.parse_args()
    aways = options.away or [60.0, 180.0]
    modes = options.mode or ["cut", "refuse", "frozen"]
    runs: list[Run] = []
    with RealCluster(nodes=()) as cluster:
        api = kubernetes.config.new_client_from_config(config_file=str(cluster.kubeconfig("admin")))
        core = kubernetes.client.CoreV1Api(api)
        for mode in modes:
            for away in aways:
                found = one_round(cluster, core, mode, away, options.nodes)
                for run in found:
                    print(
                        f"{run.mode:7} away {run.away:5.0f} s  {run.node}: Ready {run.ready_after_return:6.1f} s"
                        f" after the return, container stopped {run.stop_after_return:6.1f} s after it,"
                        f" {run.stop_after_ready:6.1f} s after Ready",
                        flush=True,
                    )
                runs.extend(found)
        api.close()
    print("\nstop - Ready, by mode and time away (seconds): min / median / max (n)")
    for mode in modes:
        for away in aways:
            values = [r.stop_after_ready for r in runs if r.mode == mode and r.away == away]
            if values:
                print(
                    f"{mode:7} {away:5.0f} s: {min(values):6.1f} / {statistics.median(values):6.1f} /"
                    f" {max(values):6.1f} ({len(values)})"
                )
    every = [r.stop_after_ready for r in runs]
    print(f"all: {min(every):.1f} / {statistics.median(every):.1f} / {max(every):.1f} ({len(every)})")


if __name__ == "__main__":
    main()
