"""Chained restarts: run a training, wait for its outcome, and on failure restart it, up to N attempts.

What it shows: each attempt is a task group. Attempt 1 opens submission 1 (create it held, release it) and
waits for its outcome with `TrainJobOutcomeSensor` (deferrable; `admission` pins the execution it waits for,
so it can never read an earlier run's outcome). A branch then decides: `Complete` ends the chain
(`attempt_k.succeeded`), `Failed` goes on to the next attempt, which

1. holds the failed TrainJob (nothing of it may be admitted again; under Kueue its Workload gives back its
   quota),
2. waits with `PodsDrainedSensor` until none of its pods remains, or all are proven ceased (a pod on a lost
   node), the wait reason naming them,
3. opens the next submission of the same job id (submission k, TrainJob `<name>-<k>`) and waits for its outcome.

Why a new submission and not a release of the failed TrainJob: a Failed TrainJob is finished for Trainer (its
JobSet failed; unsuspending it admits nothing), so dispatch refuses to release it (`FinishedError`: "open a new
TrainJob (a new submission) instead"). The chain keeps the job id, so `dispatch find <ns> --job-id <name>` shows
the newest submission.

The attempts are unrolled when the DAG is parsed (ATTEMPTS task groups, so the graph stays acyclic); the param
`attempts` (at most ATTEMPTS) stops the chain earlier: after the last allowed attempt fails,
`attempt_k.gave_up` fails the run. `done` runs after whichever attempt succeeded.

What it needs: a runtime (`runtime` param, a ClusterTrainingRuntime; the lab's default is
`torch-distributed`) whose training ends by itself, and the `kubernetes_default` connection
(KUBERNETES_CONN_ID) with the writer's permissions (docs: rbac). Works against a real cluster and the lab; in
the lab, the workload annotation `lab.dispatch.phpboyscout.uk/exit-code-by-submission` on the runtime's pod
template makes chosen submissions fail (`lab/simulated/nodes/workload.py`).

Params: `namespace`, `name` (the job id, and the TrainJob names' prefix: `<name>-1`, `<name>-2`, ...),
`runtime`, `num_nodes`, `attempts`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import Param, TaskGroup, TriggerRule, chain, get_current_context, task

# what the example DAGs share (dispatch_examples.py, beside this file; Airflow puts the DAG folder on sys.path)
from dispatch_examples import KUBERNETES_CONN_ID, NAME, NAMESPACE, example_dag, runtime_param, trainjob_manifest

from airflow_provider_dispatch.operators.trainjob import TrainJobHoldOperator, TrainJobOpenOperator
from airflow_provider_dispatch.sensors.pods_drained import PodsDrainedSensor
from airflow_provider_dispatch.sensors.trainjob_outcome import TrainJobOutcomeSensor

#: task groups unrolled at parse time; the param `attempts` may use fewer
ATTEMPTS = 3
#: how long one training may run before its outcome sensor gives up (a failure of the run, not of training)
TRAINING_TIMEOUT = timedelta(days=7)
WAIT_TIMEOUT = timedelta(hours=1)


def trainjob_name(attempt: int) -> str:
    """The templated name of attempt `attempt`'s TrainJob."""
    return f"{NAME}-{attempt}"


with example_dag(
    "chained_restarts",
    __doc__,
    params={
        "namespace": Param("default", type="string", description="Namespace of the TrainJobs."),
        "name": Param("chained", type="string", description="Job id, and prefix of the TrainJob names."),
        "runtime": runtime_param(),
        "num_nodes": Param(2, type="integer", minimum=1, description="Pods per TrainJob (one per node)."),
        "attempts": Param(ATTEMPTS, type="integer", minimum=1, maximum=ATTEMPTS, description="Attempts at most."),
    },
) as chained_restarts:
    done = EmptyOperator(task_id="done", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    previous_decision: Any = None

    for attempt in range(1, ATTEMPTS + 1):
        with TaskGroup(f"attempt_{attempt}"):
            prefix = f"attempt_{attempt}."
            steps: list[Any] = []
            if attempt > 1:
                steps.append(
                    TrainJobHoldOperator(
                        task_id="hold_previous",
                        namespace=NAMESPACE,
                        name=trainjob_name(attempt - 1),
                        kubernetes_conn_id=KUBERNETES_CONN_ID,
                    )
                )
                steps.append(
                    PodsDrainedSensor(
                        task_id="previous_drained",
                        namespace=NAMESPACE,
                        name=trainjob_name(attempt - 1),
                        kubernetes_conn_id=KUBERNETES_CONN_ID,
                        deferrable=True,
                        timeout=WAIT_TIMEOUT.total_seconds(),
                    )
                )
            steps.append(
                TrainJobOpenOperator(
                    task_id="open",
                    manifest=trainjob_manifest(name=trainjob_name(attempt), submission=str(attempt)),
                    kubernetes_conn_id=KUBERNETES_CONN_ID,
                    on_pods_remaining="wait",
                    deferrable=True,
                    wait_timeout=WAIT_TIMEOUT,
                )
            )
            steps.append(
                TrainJobOutcomeSensor(
                    task_id="outcome",
                    namespace=NAMESPACE,
                    name=trainjob_name(attempt),
                    admission="{{ ti.xcom_pull(task_ids='" + prefix + "open')['admission'] }}",
                    kubernetes_conn_id=KUBERNETES_CONN_ID,
                    deferrable=True,
                    timeout=TRAINING_TIMEOUT.total_seconds(),
                )
            )

            @task.branch(task_id="decide")
            def decide(attempt: int = attempt, prefix: str = prefix) -> str:
                """Complete: succeeded. Failed: the next attempt, or give up after the last one allowed."""
                context = get_current_context()
                outcome = context["ti"].xcom_pull(task_ids=f"{prefix}outcome")
                if outcome["outcome"] == "Complete":
                    return f"{prefix}succeeded"
                if attempt < min(int(context["params"]["attempts"]), ATTEMPTS):
                    return f"attempt_{attempt + 1}.hold_previous"
                return f"{prefix}gave_up"

            @task(task_id="succeeded")
            def succeeded(attempt: int = attempt, prefix: str = prefix) -> dict[str, Any]:
                """XCom: which attempt succeeded, and its execution identity."""
                outcome = get_current_context()["ti"].xcom_pull(task_ids=f"{prefix}outcome")
                return {"attempt": attempt, "trainjob": outcome["ref"], "execution": outcome["execution"]}

            @task(task_id="gave_up")
            def gave_up(attempt: int = attempt, prefix: str = prefix) -> None:
                outcome = get_current_context()["ti"].xcom_pull(task_ids=f"{prefix}outcome")
                raise AirflowFailException(
                    f"gave up after attempt {attempt}: TrainJob {outcome['ref']} execution {outcome['admission']} "
                    f"ended {outcome['outcome']} ({outcome['reason']}: {outcome['message']})"
                )

            decision, success, failure = decide(), succeeded(), gave_up()
            chain(*steps, decision, [success, failure])
            success >> done

        if previous_decision is not None:
            previous_decision >> steps[0]
        previous_decision = decision
