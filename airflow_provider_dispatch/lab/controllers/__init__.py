"""The lab's simulated cluster controllers, as factories `(ClusterContext) -> Controller` for `AsyncLab`.

`WORKLOAD_CONTROLLERS` runs the workload side: Trainer (with its webhooks), JobSet (with its webhooks), the
batch/v1 Job controller and the garbage collector.

`NODE_CONTROLLERS` runs the node side: a kubelet per Node (with the overlap recorder), the scheduler, the node
lifecycle controller, the taint eviction controller and PodGC.
"""

from __future__ import annotations

from airflow_provider_dispatch.lab.cluster import ControllerFactory
from airflow_provider_dispatch.lab.controllers.garbage_collector import GarbageCollector
from airflow_provider_dispatch.lab.controllers.job import JobController
from airflow_provider_dispatch.lab.controllers.jobset import JobSetController
from airflow_provider_dispatch.lab.controllers.kubelet_manager import KubeletManager
from airflow_provider_dispatch.lab.controllers.node_lifecycle import NodeLifecycleController
from airflow_provider_dispatch.lab.controllers.podgc import PodGarbageCollector
from airflow_provider_dispatch.lab.controllers.scheduler import Scheduler
from airflow_provider_dispatch.lab.controllers.taint_eviction import TaintEvictionController
from airflow_provider_dispatch.lab.controllers.trainer import TrainerController

WORKLOAD_CONTROLLERS: list[ControllerFactory] = [TrainerController, JobSetController, JobController, GarbageCollector]
NODE_CONTROLLERS: list[ControllerFactory] = [
    KubeletManager,
    Scheduler,
    NodeLifecycleController,
    TaintEvictionController,
    PodGarbageCollector,
]
