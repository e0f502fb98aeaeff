"""The lab's simulated cluster controllers, as factories `(ClusterContext) -> Controller` for `AsyncLab`.

`WORKLOAD_CONTROLLERS` runs the workload side: Trainer (with its webhooks), JobSet (with its webhooks), the
batch/v1 Job controller and the garbage collector.

`NODE_CONTROLLERS` runs the node side: a kubelet per Node (with the overlap recorder), the scheduler, the node
lifecycle controller, the taint eviction controller and PodGC.
"""

from __future__ import annotations

from airflow_provider_dispatch_lab.simulated.cluster import ControllerFactory
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_manager import KubeletManager
from airflow_provider_dispatch_lab.simulated.nodes.node_lifecycle import NodeLifecycleController
from airflow_provider_dispatch_lab.simulated.nodes.podgc import PodGarbageCollector
from airflow_provider_dispatch_lab.simulated.nodes.scheduler import Scheduler
from airflow_provider_dispatch_lab.simulated.nodes.taint_eviction import TaintEvictionController
from airflow_provider_dispatch_lab.simulated.workloads.garbage_collector import GarbageCollector
from airflow_provider_dispatch_lab.simulated.workloads.job import JobController
from airflow_provider_dispatch_lab.simulated.workloads.jobset import JobSetController
from airflow_provider_dispatch_lab.simulated.workloads.trainer import TrainerController

WORKLOAD_CONTROLLERS: list[ControllerFactory] = [TrainerController, JobSetController, JobController, GarbageCollector]
NODE_CONTROLLERS: list[ControllerFactory] = [
    KubeletManager,
    Scheduler,
    NodeLifecycleController,
    TaintEvictionController,
    PodGarbageCollector,
]
