"""The restart chain's read of the cluster: its TrainJobs, and what they say the chain does next (sans I/O).

A new try of `TrainJobRestartOperator` (a retry, a Clear, a try Airflow failed while it ran) knows nothing of
what earlier tries did; the cluster does. `read_chain` lists the TrainJobs of the chain's job id in its namespace
(one quorum list by the job id label, paged), and `resume` hands them to the pure decision
(`chain.from_cluster`). Before it opens a submission the chain reads again (`read_chain`), so that a submission
another try of the same task opened meanwhile (a zombie and its retry alive at once) is taken as it is rather
than opened again: the create of `<name>-<k>` is the fence, and whoever loses it adopts the winner's work.

Programs in the `programs` style: the sync adapter (the worker) and the async one (a trigger) run them alike.
Both write nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.chain import Chain, from_cluster
from airflow_provider_dispatch.dispatch.programs import Program
from airflow_provider_dispatch.dispatch.programs.reads import _list_all
from airflow_provider_dispatch.dispatch.restarts import RestartState
from airflow_provider_dispatch.dispatch.validation import validate_job_id, validate_namespace


def read_chain(chain: Chain) -> Program[list[Mapping[str, Any]]]:
    """Every TrainJob of the chain's job id in its namespace (a quorum read), by name. Writes nothing."""
    namespace = validate_namespace(chain.namespace)
    job_id = validate_job_id(chain.job_id)
    items = yield from _list_all(v.TRAINJOB, namespace, f"{v.LABEL_JOB_ID}={job_id}", f"{namespace}/{chain.base}-*")
    # the server's selector is an equality on the label: filtered again here, as every list of dispatch is
    return sorted((t for t in items if v.labels_of(t).get(v.LABEL_JOB_ID) == job_id), key=v.name_of)


def resume(chain: Chain, max_restarts: int, now: float) -> Program[RestartState]:
    """The chain's state as the cluster shows it (`chain.from_cluster`), `now` its stage's start."""
    trainjobs = yield from read_chain(chain)
    return from_cluster(max_restarts, chain, trainjobs, now)


__all__ = ["read_chain", "resume"]
