"""Kueue in the lab: the TrainJob integration, the workload controller, the scheduler and queue status.

`KUEUE_CONTROLLERS` are the factories `(ClusterContext) -> Controller` of one Kueue installation with the
defaults of Kueue v0.19.2 (`config.py`: waitForPodsReady on); `kueue_controllers(config)` builds them with
another `KueueConfig`. The webhooks order themselves by configuration name as the apiserver does
(`lab/apiserver/registry/admission.py`, `webhook.py`), so any list order works:

    AsyncLab(controllers=[*WORKLOAD_CONTROLLERS, *NODE_CONTROLLERS, *KUEUE_CONTROLLERS])

What each reproduces, with its upstream source, is in the module docstrings; k8s-apis.md §4 and §6 rule 10 are
the spec. Kueue writes Workload status by server-side apply as `kueue-admission` with ForceOwnership; it only
reads AdmissionChecks, whose `Active` condition their own controller keeps (dispatch's, or `lab/scenario/kueue.py`).
"""

from __future__ import annotations

import functools

from airflow_provider_dispatch_lab.simulated.cluster import ClusterContext, Controller, ControllerFactory
from airflow_provider_dispatch_lab.simulated.kueue.config import (
    DEFAULT_CONFIG,
    KueueConfig,
    RequeuingStrategy,
    WaitForPodsReady,
)
from airflow_provider_dispatch_lab.simulated.kueue.job_reconciler import KueueJobReconciler
from airflow_provider_dispatch_lab.simulated.kueue.queue_status import KueueQueueStatusController
from airflow_provider_dispatch_lab.simulated.kueue.scheduler import KueueScheduler
from airflow_provider_dispatch_lab.simulated.kueue.webhook_server import KueueWebhookServer
from airflow_provider_dispatch_lab.simulated.kueue.workload_controller import KueueWorkloadController


def _with_config(
    cls: type[KueueJobReconciler | KueueWorkloadController | KueueScheduler], config: KueueConfig
) -> ControllerFactory:
    def build(context: ClusterContext) -> Controller:
        return cls(context, config)

    return functools.update_wrapper(build, cls)


def kueue_controllers(config: KueueConfig = DEFAULT_CONFIG) -> list[ControllerFactory]:
    return [
        KueueWebhookServer,
        _with_config(KueueJobReconciler, config),
        _with_config(KueueWorkloadController, config),
        _with_config(KueueScheduler, config),
        KueueQueueStatusController,
    ]


KUEUE_CONTROLLERS: list[ControllerFactory] = kueue_controllers()

__all__ = [
    "KUEUE_CONTROLLERS",
    "KueueConfig",
    "KueueJobReconciler",
    "KueueQueueStatusController",
    "KueueScheduler",
    "KueueWebhookServer",
    "KueueWorkloadController",
    "RequeuingStrategy",
    "WaitForPodsReady",
    "kueue_controllers",
]
