"""A ready cluster: every simulated controller, a few nodes, and the default Trainer runtime.

What `dispatch lab serve`, the demo drill and the Airflow tests start from: the same shape a small training
cluster with Trainer v2 (and optionally Kueue) installed would have. Each piece is made through the lab's own API
(nodes register as kubelets do, the runtime is created as an administrator would apply it).

Besides the Kubernetes controllers, the cluster runs what a platform team would have deployed around them:

- a remediation agent (`simulated/nodes/fencing.py`) that fences a node left not Ready for the seconds its Node
  annotation `lab.dispatch.phpboyscout.uk/fence-after-seconds` says, and then taints it out-of-service; nodes
  without the annotation are never fenced;
- with Kueue, dispatch's own admission check controller (`kueue/`, hosted by `simulated/kueue/admission_check.py`),
  for every AdmissionCheck whose `controllerName` is `dispatch.phpboyscout.uk/drained` (none exist until someone
  creates one).
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_dispatch_lab.kinds import CLUSTER_TRAINING_RUNTIME
from airflow_provider_dispatch_lab.runtime import AsyncLab
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.scenario import AsyncScenario
from airflow_provider_dispatch_lab.simulated.cluster import ControllerFactory
from airflow_provider_dispatch_lab.simulated.controllers import NODE_CONTROLLERS, WORKLOAD_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.kueue import KUEUE_CONTROLLERS
from airflow_provider_dispatch_lab.simulated.kueue.admission_check import lab_admission_controller
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FencingAgent


def cluster_controllers(*, kueue: bool = True, admission_check: bool = True) -> list[ControllerFactory]:
    """Trainer, JobSet, Job, the garbage collector, the node side, the fencing agent and, unless told not to,
    Kueue with (unless told not to) dispatch's admission check controller."""
    extras: list[ControllerFactory] = [FencingAgent]
    if kueue:
        extras.extend(KUEUE_CONTROLLERS)
        if admission_check:
            extras.append(lab_admission_controller())
    return [*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *extras]


@dataclass(frozen=True)
class ClusterShape:
    nodes: int = 3
    node_prefix: str = "node"
    cpu: str = "32"
    memory: str = "128Gi"
    runtime_grace_seconds: int = 30

    def node_names(self) -> list[str]:
        return [f"{self.node_prefix}-{index}" for index in range(1, self.nodes + 1)]


async def provision(lab: AsyncLab, shape: ClusterShape = ClusterShape(), *, runtime: bool = True) -> AsyncScenario:
    """Register the nodes and (unless told not to) create the default ClusterTrainingRuntime.

    Returns the scenario controls; the caller closes them (their API client) when done.
    """
    scenario = AsyncScenario(lab)
    for name in shape.node_names():
        await scenario.add_node(name, cpu=shape.cpu, memory=shape.memory)
    if runtime:
        body = manifests.cluster_training_runtime(grace_seconds=shape.runtime_grace_seconds)
        await scenario.client.create(CLUSTER_TRAINING_RUNTIME, None, body)
    return scenario
