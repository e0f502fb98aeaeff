"""Lost-node drill (LAB ONLY): a node freezes under a running TrainJob; dispatch waits for proof, then restarts.

What it shows, step by step:

1. `check_lab`: both connections reach the dispatch lab, or the run stops here (the chaos steps below would
   freeze a real machine on a real cluster: they refuse any API server whose `/version` gitCommit is not the
   lab's marker, `airflow_provider_dispatch_lab.apiserver.discovery.LAB_GIT_COMMIT`);
2. `open`: create the TrainJob held and release it: admission 1;
3. `wait_running`: until every pod of admission 1 is Running;
4. `freeze_node`: freeze the machine under the first pod, through the Node annotation
   `lab.dispatch.phpboyscout.uk/state: frozen` (its kubelet stops, its process keeps running), and arm the
   lab's fencing agent for it (`lab.dispatch.phpboyscout.uk/fence-after-seconds`);
5. `hold`: suspend the TrainJob. The pod on the healthy node goes within its grace period; the one on the
   frozen node stays Terminating: nothing can confirm it stopped;
6. `wait_ceased`: `PodsDrainedSensor` (deferrable) waits, its wait reason naming the pod, the node and the
   node's state (`Ready=True`, then `Ready=Unknown` once the node lifecycle controller gives up on it). Then
   the fencing agent, the node not Ready for `fence_after_seconds`, powers the machine off and taints the node
   `node.kubernetes.io/out-of-service`: the sensor succeeds with outcome `ceased` (its XCom lists the pod with
   node state `Ready=Unknown, out-of-service`);
7. `release`: waits (deferrable) until PodGC has force-deleted the ceased pod, then admits admission 2;
8. `wait_running_again`: the new execution runs, on the nodes left;
9. `report`: one summary (XCom, and one log line starting `DRILL REPORT`) of what happened.

Nothing in the DAG decides the drill's outcome: the lab's machines, its node lifecycle controller, its
fencing agent and PodGC do what their upstream counterparts do, and dispatch reads the cluster as it would
read a real one. `dispatch demo` runs this DAG with `airflow dags test` and prints the story.

What it needs:

* the lab with its simulated cluster: `dispatch demo` (does everything), or `dispatch lab serve` and the
  `kubernetes_default` connection pointing at the kubeconfig it writes (docs: quickstart, drill). At least two
  nodes (the lab has three) and the default runtime `torch-distributed` (`dispatch demo` creates it; with
  `dispatch lab serve`, create it as the quickstart shows);
* the connection `kubernetes_default` (KUBERNETES_CONN_ID) for dispatch's operators and sensors, and
  `chaos_conn_id` (a param, default the same connection) for the steps that freeze a node: with the lab's RBAC
  on, `kubernetes_default` is the least-privilege `writer` and the chaos steps need an identity that may patch
  Nodes (the demo's `lab_admin`).

Params: `namespace`, `name` (a TrainJob name not used before in that namespace: the drill opens it),
`runtime`, `num_nodes`, `fence_after_seconds` (lab seconds the node stays not Ready before the fencing agent
acts), `chaos_conn_id`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from airflow.sdk import Param, PokeReturnValue, get_current_context, task

# what the example DAGs share (dispatch_examples.py, beside this file; Airflow puts the DAG folder on sys.path)
from dispatch_examples import KUBERNETES_CONN_ID, NAME, NAMESPACE, example_dag, runtime_param, trainjob_manifest

from airflow_provider_dispatch.hooks.errors import airflow_errors
from airflow_provider_dispatch.operators.trainjob import (
    TrainJobHoldOperator,
    TrainJobOpenOperator,
    TrainJobReleaseOperator,
)
from airflow_provider_dispatch.sensors.pods_drained import PodsDrainedSensor
from airflow_provider_dispatch_lab.scenario import drill

#: a wait that outlasts the drill by far: its timeout bounds a broken lab, not the drill
WAIT_TIMEOUT = 1800.0
log = logging.getLogger(__name__)

MANIFEST = trainjob_manifest()


def _api(conn_id: str) -> Any:
    return KubernetesHook(conn_id=conn_id).api_client


with example_dag(
    "lost_node_drill",
    __doc__,
    tags=("lab-only",),
    params={
        "namespace": Param("default", type="string", description="Namespace of the drill's TrainJob."),
        "name": Param("drill", type="string", description="Name of the TrainJob the drill opens (a new one)."),
        "runtime": runtime_param(),
        "num_nodes": Param(2, type="integer", minimum=2, description="Pods of the TrainJob (one per node)."),
        "fence_after_seconds": Param(
            60, type="number", minimum=0, description="Lab seconds the node stays not Ready before it is fenced."
        ),
        "chaos_conn_id": Param(
            KUBERNETES_CONN_ID, type="string", description="Connection for the chaos steps (may patch Nodes)."
        ),
    },
) as lost_node_drill:

    @task
    def check_lab() -> dict[str, str]:
        """Refuse to go on unless both connections reach the lab (nothing has been changed yet)."""
        chaos_conn_id = get_current_context()["params"]["chaos_conn_id"]
        with airflow_errors():
            for conn_id in dict.fromkeys((KUBERNETES_CONN_ID, chaos_conn_id)):
                drill.require_lab(_api(conn_id), step=f"run the lost-node drill through connection {conn_id}")
        return {"lab": drill.server_commit(_api(chaos_conn_id))}

    open_trainjob = TrainJobOpenOperator(
        task_id="open",
        manifest=MANIFEST,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        on_pods_remaining="wait",
        deferrable=True,
        wait_timeout=WAIT_TIMEOUT,
    )

    @task.sensor(poke_interval=0.5, timeout=WAIT_TIMEOUT, mode="poke")
    def wait_running(after: str) -> PokeReturnValue:
        """Until every pod of the execution `after` (a task id) admitted is Running; XCom: where they run."""
        context = get_current_context()
        params = context["params"]
        admission = str(context["ti"].xcom_pull(task_ids=after)["admission"])
        with airflow_errors():
            places = drill.running_pods(_api(KUBERNETES_CONN_ID), params["namespace"], params["name"])
        current = [place for place in places or () if place.admission == admission]
        if places is None or len(current) != len(places):
            log.info("waiting for the pods of admission %s to run: %s", admission, places)
            return PokeReturnValue(is_done=False)
        log.info("admission %s runs: %s", admission, ", ".join(f"{p.pod} on {p.node}" for p in current))
        return PokeReturnValue(is_done=True, xcom_value=[place.as_dict() for place in current])

    @task
    def freeze_node(places: list[dict[str, str]]) -> dict[str, Any]:
        """Freeze the machine under the first pod and arm the lab's fencing agent for it (lab only)."""
        params = get_current_context()["params"]
        target, fence_after = places[0], float(params["fence_after_seconds"])
        with airflow_errors():
            drill.freeze_node(_api(params["chaos_conn_id"]), target["node"], fence_after_seconds=fence_after)
        log.info(
            "froze node %s under pod %s; the fencing agent acts after %g lab seconds not Ready",
            target["node"],
            target["pod"],
            fence_after,
        )
        return {**target, "fence_after_seconds": fence_after}

    hold = TrainJobHoldOperator(task_id="hold", namespace=NAMESPACE, name=NAME, kubernetes_conn_id=KUBERNETES_CONN_ID)

    wait_ceased = PodsDrainedSensor(
        task_id="wait_ceased",
        namespace=NAMESPACE,
        name=NAME,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        accept_ceased=True,
        deferrable=True,
        timeout=WAIT_TIMEOUT,
    )

    release = TrainJobReleaseOperator(
        task_id="release",
        namespace=NAMESPACE,
        name=NAME,
        kubernetes_conn_id=KUBERNETES_CONN_ID,
        on_pods_remaining="wait",
        deferrable=True,
        wait_timeout=WAIT_TIMEOUT,
    )

    @task
    def report() -> dict[str, Any]:
        """What happened, from the tasks' XComs: the frozen node, the cessation, the new admission."""
        ti = get_current_context()["ti"]
        summary = {
            "frozen": ti.xcom_pull(task_ids="freeze_node"),
            "first": ti.xcom_pull(task_ids="open"),
            "first_running": ti.xcom_pull(task_ids="wait_running"),
            "wait": ti.xcom_pull(task_ids="wait_ceased"),
            "released": ti.xcom_pull(task_ids="release"),
            "running": ti.xcom_pull(task_ids="wait_running_again"),
        }
        log.info("DRILL REPORT %s", json.dumps(summary, sort_keys=True))
        return summary

    first = wait_running.override(task_id="wait_running")("open")
    again = wait_running.override(task_id="wait_running_again")("release")
    check_lab() >> open_trainjob >> first
    freeze_node(first) >> hold >> wait_ceased >> release >> again >> report()
