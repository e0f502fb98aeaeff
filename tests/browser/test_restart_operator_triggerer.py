"""The restart operator on a real Airflow deployment: the real scheduler and triggerer carry the chain.

`dag.test()` (tests/airflow/test_example_dags.py) runs each trigger inline and hands the task only the event,
so there the chain resumes from its XCom. Here real processes (api-server, scheduler with the LocalExecutor,
dag-processor, triggerer) run `example_dags/restart_operator.py`: the task defers to the triggerer (no worker
slot while the training runs), the scheduler stores the deferral's `next_kwargs` with the chain's state, and
each resume is a new worker process that knows only what the deferral carried. Submission 1 fails (the lab's
`exit-code-by-submission`), submission 2 completes.

Then a small run of the restart soak (tests/benchmarks/restart_soak.py, whose lab this module uses: TLS, RBAC,
the fencing agent, and requests held on the soak's word): two chains with a lost node and faults at every stage
(the task's process killed while it opens, holds and drains; the task cleared while it runs; the triggerer
restarted while it waits; the task marked failed while it waits, then its failed run cleared), each ending green,
resumed from the cluster, its TrainJobs as it reports them, and no two executions at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from benchmarks.restart_soak import ChainPlan, Fault, SoakLab, SoakRest, run_chains, soak_lab
from browser_support import DrillLab
from deployment.airflow_stack import AirflowStack
from deployment.processes import wait_until

from airflow_provider_dispatch_lab.simulated.nodes.workload import EXIT_CODE_BY_SUBMISSION, RUN_SECONDS

pytestmark = [pytest.mark.browser, pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(1200)]

DAG_ID = "restart_operator"
LAB_SPEED = 10.0


@pytest.fixture(scope="module")
def drill_lab() -> Iterator[SoakLab]:
    """This module's lab: the soak's (`benchmarks.restart_soak.soak_lab`: TLS, RBAC, six nodes, the fencing agent,
    requests held on the test's word). The conftest's `airflow_stack` connects to it."""
    with soak_lab(speed=LAB_SPEED) as lab:
        yield lab


DAG_FILE = "restart_operator.py"
#: failure bounds, seconds
DEFERRED_BOUND = 300.0
FINISH_BOUND = 600.0


def failing_runtime(drill_lab: SoakLab) -> str:
    """A runtime whose submission 1 fails after 60 lab seconds (one failed pod fails the Job)."""
    lab = DrillLab(drill_lab.lab, drill_lab.scenario, drill_lab.kubeconfigs)  # the browser tests' runtime maker
    return lab.finite_runtime({RUN_SECONDS: "60", EXIT_CODE_BY_SUBMISSION: "1=3"})


def test_the_real_triggerer_carries_the_restart_chain(
    drill_lab: SoakLab, airflow_stack: AirflowStack, namespace: str
) -> None:
    rest = SoakRest(airflow_stack.base_url)  # calls made again when sqlite under load answers late or 5xx
    airflow_stack.wait_for_dag(DAG_ID, DAG_FILE)
    rest.unpause(DAG_ID)
    conf = {"namespace": namespace, "name": "job", "runtime": failing_runtime(drill_lab), "max_restarts": 2}
    run_id = rest.trigger_once(DAG_ID, conf, f"restart__{namespace}")

    def progress() -> str:
        return ", ".join(f"{t}={ti.get('state')}" for t, ti in sorted(rest.task_instances(DAG_ID, run_id).items()))

    def deferred_on(reason: str) -> dict[str, Any] | None:
        ti = rest.task_instance(DAG_ID, run_id, "train")
        shown = str((ti.get("rendered_fields") or {}).get("wait_reason", ""))
        return ti if ti.get("state") == "deferred" and reason in shown else None

    # while submission 1 runs the task is deferred (in the triggerer, not in a worker slot), saying so
    wait_until(
        "the task to defer on submission 1's outcome",
        lambda: deferred_on(f"TrainJob {namespace}/job-1 runs execution 1; waiting for execution 1 to finish"),
        bound=DEFERRED_BOUND,
        services=airflow_stack.services,
        describe=progress,
    )
    run = wait_until(
        "the run to finish",
        lambda: (found := rest.dag_run(DAG_ID, run_id)).get("state") in ("success", "failed") and found,
        bound=FINISH_BOUND,
        services=airflow_stack.services,
        describe=progress,
    )
    # Airflow 3.3's stale executor event may fail a try (apache/airflow#72716): the next one resumes the chain
    assert run["state"] == "success", progress()
    assert rest.xcom(DAG_ID, run_id, "train") == {
        "outcome": "Complete",
        "trainjob": f"{namespace}/job-2",
        "submission": 2,
        "restarts": 1,
        "execution": {"job_id": "job", "submission": "2", "admission": 1},
    }
    history = rest.xcom(DAG_ID, run_id, "train", key="restarts")["history"]
    assert [(h["submission"], h["outcome"]) for h in history] == [(1, "Failed"), (2, "Complete")]
    assert rest.xcom(DAG_ID, run_id, "report") == {"submissions": 2, "outcomes": ["Failed", "Complete"]}
    tries = rest.task_instance(DAG_ID, run_id, "train")["try_number"]
    logs = rest.try_logs(DAG_ID, run_id, "train", tries)
    assert "Resuming the restart chain from its next_kwargs" in "\n".join(logs.values())
    assert "Resuming the restart chain from its XCom" not in "\n".join(logs.values())
    # a try that ran after another had opened submission 1 (Airflow's stale executor event, apache/airflow#72716,
    # can fail one) resumed from the cluster
    started = [n for n, log in sorted(logs.items()) if "Restart chain " in log]
    assert all("the cluster shows submissions" in logs[n] for n in started[1:])
    runs = {n: drill_lab.scenario.processes(namespace, n) for n in ("job-1", "job-2")}
    assert max(r.stop or float("inf") for r in runs["job-1"]) <= min(r.start for r in runs["job-2"])


# --- the restart soak, small -------------------------------------------------------------------------------------

#: two chains, every fault at every stage it can meet: a chain whose submission 1 fails, and one whose submission 1
#: loses a node (fenced by the lab's agent) and fails
SOAK = (
    ChainPlan(
        index=0,
        namespace=f"soak-{uuid.uuid4().hex[:4]}-0",
        name="chain0",
        failures=1,
        lost_node=False,
        fast_failure=False,
        faults=(Fault("clear", "hold", 1), Fault("kill-worker", "open", 2), Fault("fail-clear", "outcome", 2)),
    ),
    ChainPlan(
        index=1,
        namespace=f"soak-{uuid.uuid4().hex[:4]}-1",
        name="chain1",
        failures=1,
        lost_node=True,
        fast_failure=False,
        faults=(Fault("restart-triggerer", "outcome", 1), Fault("kill-worker", "drain", 1)),
    ),
)


def test_chains_resume_from_the_cluster_through_every_fault(drill_lab: SoakLab, airflow_stack: AirflowStack) -> None:
    results = run_chains(drill_lab, airflow_stack, SOAK, parallel=len(SOAK))
    for result in results:
        said = f"chain {result.plan.index}: {result}"
        assert (result.error, result.task_state, result.state) == ("", "success", "success"), said
        assert [(f.kind, f.stage, f.submission) for f in result.injected] == [
            (f.kind, f.stage, f.submission) for f in result.plan.faults
        ], said
        assert (result.mismatches, result.double_admissions, result.overlaps) == ([], [], []), said
        assert result.trainjobs == [f"{result.plan.name}-1", f"{result.plan.name}-2"], said
    cleared, lost = results
    # the kill and the clear each ended a try; every later one went on from what the cluster showed
    assert cleared.started_tries >= 3
    assert cleared.resumed_tries == cleared.started_tries - 1
    # the try that followed the clear of a running task was started at the earlier try's deferral, and read the
    # cluster instead of that deferral's event
    logs = SoakRest(airflow_stack.base_url).try_logs(DAG_ID, cleared.run_id, "train", cleared.tries)
    assert any("deferred (a task cleared while it ran resumes at its last deferral)" in log for log in logs.values())
    assert lost.started_tries >= 2
    assert lost.resumed_tries == lost.started_tries - 1
