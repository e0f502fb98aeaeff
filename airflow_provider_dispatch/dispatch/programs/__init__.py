"""Sans-I/O programs: release, hold, open, inspect, find, remaining_pods, ceased, kueue_admit, drain.

A program is a generator that yields requests and receives their answers; the sync and async adapters carry them
out and never decide (docs/architecture.md). One module per operation, each readable on a screen or two:

* `protocol`: the requests, the answers (`ApiFailure`), the drivers (`drive`, `drive_async`) and their contract;
* `reads`: one call and its failure classified, paged lists, and the reads of single objects and of the clock;
* `pods`: the consistent read of the namespace's pods, the Nodes fencing needs, and `drain`, the one drain check;
* `record`: the hold's evidence, the pod fence, and the record of the execution's pods;
* `releasing`: `release` and `kueue_admit`, and the checks before an admission they share;
* `holding` (`hold`), `opening` (`open` and `prepare_manifest`), and `queries`: the read-only programs.

Dependencies point down that list (`opening` uses `releasing`, `releasing` uses `holding`'s Workload switch),
never up. A module is not named after its program (`releasing`, not `release`), so that importing it never
hides the program: `programs.release` is the program, `programs.releasing` its module.
This module gathers their public names so that a shell, a test or a hook imports them from one place:
`from airflow_provider_dispatch.dispatch import programs; programs.release(...)`. The only clock is the `now`
parameter, used in explanations; all names that reach a request were validated first (validation.py).
"""

from __future__ import annotations

from airflow_provider_dispatch.dispatch.programs.holding import hold
from airflow_provider_dispatch.dispatch.programs.opening import open, prepare_manifest
from airflow_provider_dispatch.dispatch.programs.pods import MAX_LOOKUPS, Drain, PodRead, drain, read_nodes, read_pods
from airflow_provider_dispatch.dispatch.programs.protocol import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_POD_READ,
    EXACT_REFUSED,
    MAX_LIST_RESTARTS,
    ApiFailure,
    CreateObject,
    GetNode,
    GetObject,
    ListObjects,
    PodReadStrategy,
    Program,
    ReplaceObject,
    Request,
    Response,
    ServerTime,
    drive,
    drive_async,
)
from airflow_provider_dispatch.dispatch.programs.queries import (
    Listed,
    ceased,
    find,
    inspect,
    list_managed,
    remaining_pods,
)
from airflow_provider_dispatch.dispatch.programs.reads import (
    call,
    read_jobset,
    read_runtime,
    read_trainjob,
    read_workloads,
    server_time,
)
from airflow_provider_dispatch.dispatch.programs.record import (
    ensure_record,
    hold_evidence,
    read_fence,
    read_jobs,
    read_lineage,
    read_predecessors,
)
from airflow_provider_dispatch.dispatch.programs.releasing import Checked, kueue_admit, release

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_POD_READ",
    "EXACT_REFUSED",
    "MAX_LIST_RESTARTS",
    "MAX_LOOKUPS",
    "ApiFailure",
    "Checked",
    "CreateObject",
    "Drain",
    "GetNode",
    "GetObject",
    "ListObjects",
    "Listed",
    "PodRead",
    "PodReadStrategy",
    "Program",
    "ReplaceObject",
    "Request",
    "Response",
    "ServerTime",
    "call",
    "ceased",
    "drain",
    "drive",
    "drive_async",
    "ensure_record",
    "find",
    "hold",
    "hold_evidence",
    "inspect",
    "kueue_admit",
    "list_managed",
    "open",
    "prepare_manifest",
    "read_fence",
    "read_jobs",
    "read_jobset",
    "read_lineage",
    "read_nodes",
    "read_pods",
    "read_predecessors",
    "read_runtime",
    "read_trainjob",
    "read_workloads",
    "release",
    "remaining_pods",
    "server_time",
]
