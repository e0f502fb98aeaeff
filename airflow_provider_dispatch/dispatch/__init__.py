"""The rule: which pods of a TrainJob remain, when they ceased, and the one write that admits.

Pure and sans-I/O: no Airflow import, no network, no Kubernetes client. The programs in `programs` yield
requests that an adapter carries out (`sync_adapter`, `async_adapter`), so the sync and async paths decide
alike.

The two adapters, `DispatchAdapter` (sync, `kubernetes`) and `AsyncDispatchAdapter` (`kubernetes_asyncio`), are
exported lazily: importing the rule must not load a Kubernetes client (tests/dispatch/test_purity.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_dispatch.dispatch.assessment import (
    AdmissionCheckState,
    DrainReport,
    Execution,
    ManagedObject,
    Mode,
    State,
    Status,
    assess,
    hold_observed,
    managed,
)
from airflow_provider_dispatch.dispatch.blocking import Blocking, RemainingPod
from airflow_provider_dispatch.dispatch.errors import (
    AlreadyExistsError,
    ConflictError,
    DispatchError,
    FinishedError,
    ForbiddenError,
    InvalidNameError,
    NotFoundError,
    NotManagedError,
    PersistentConflictError,
    PodFenceError,
    PodsRemainError,
    RefusedError,
    SpecRejectedError,
    SuspensionNotObservedError,
    UnreachableError,
    classify_api_failure,
)
from airflow_provider_dispatch.dispatch.nodes import NodeRead, NodeState, Presence, Readiness
from airflow_provider_dispatch.dispatch.programs import (
    ApiFailure,
    CreateObject,
    GetNode,
    GetObject,
    ListObjects,
    Program,
    ReplaceObject,
    Request,
    Response,
    drive,
    drive_async,
)
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.dispatch.validation import Ref, parse_ref

if TYPE_CHECKING:
    from airflow_provider_dispatch.dispatch.async_adapter import AsyncDispatchAdapter
    from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter

_ADAPTERS = {
    "DispatchAdapter": "airflow_provider_dispatch.dispatch.sync_adapter",
    "AsyncDispatchAdapter": "airflow_provider_dispatch.dispatch.async_adapter",
}


def __getattr__(name: str) -> Any:
    """The adapters, imported on first use (PEP 562)."""
    if name in _ADAPTERS:
        import importlib

        return getattr(importlib.import_module(_ADAPTERS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AdmissionCheckState",
    "AlreadyExistsError",
    "ApiFailure",
    "AsyncDispatchAdapter",
    "Blocking",
    "ConflictError",
    "CreateObject",
    "DispatchAdapter",
    "DispatchError",
    "DrainReport",
    "Execution",
    "FinishedError",
    "ForbiddenError",
    "GetNode",
    "GetObject",
    "InvalidNameError",
    "ListObjects",
    "ManagedObject",
    "Mode",
    "NodeRead",
    "NodeState",
    "NotFoundError",
    "NotManagedError",
    "PersistentConflictError",
    "PodFenceError",
    "PodsRemainError",
    "Presence",
    "Program",
    "Readiness",
    "Ref",
    "RefusedError",
    "RemainingPod",
    "ReplaceObject",
    "Request",
    "Response",
    "Selection",
    "SpecRejectedError",
    "State",
    "Status",
    "SuspensionNotObservedError",
    "UnreachableError",
    "assess",
    "classify_api_failure",
    "drive",
    "drive_async",
    "hold_observed",
    "managed",
    "parse_ref",
]
