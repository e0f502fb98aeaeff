"""The restart chain's read of the cluster (dispatch/resume.py) through both adapters against the lab: the same
TrainJobs and the same decision from the sync adapter (a worker) and the async one (a trigger), read-only."""

from __future__ import annotations

from airflow_provider_dispatch.dispatch import restarts
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.chain import Chain
from airflow_provider_dispatch.dispatch.resume import read_chain, resume

from .cluster import Cluster
from .conftest import READER, MakeAdapter
from .either import Either


async def test_both_adapters_read_the_chain_and_decide_alike(
    adapter: Either, make_adapter: MakeAdapter, kind: str, cluster: Cluster
) -> None:
    runtime = cluster.runtime()
    cluster.trainjob("ft-1", runtime=runtime, job_id="ft", submission="1", admission=1)
    cluster.trainer_finishes("ft-1", "Failed")
    cluster.trainjob("ft-2", runtime=runtime, job_id="ft", submission="2", admission=1, suspend=False)
    cluster.trainjob("other-1", runtime=runtime, job_id="other", submission="1", admission=1)
    chain = Chain(cluster.namespace, "ft", "ft")
    found = await adapter.call("run", read_chain(chain))
    assert [v.name_of(t) for t in found] == ["ft-1", "ft-2"]
    reader = await make_adapter(kind, user=READER)  # a read: the read-only identity of a trigger suffices
    state = await reader.call("run", resume(chain, 3, 5.0))
    assert (state.stage, state.submission, state.restarts, state.stage_started) == (restarts.Stage.OUTCOME, 2, 1, 5.0)
    assert [(e.submission, e.outcome, e.admission) for e in state.history] == [(1, "Failed", 1), (2, None, 1)]
