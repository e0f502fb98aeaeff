"""The example DAGs (`example_dags/`) through `dag.test()` against the lab with its whole simulated cluster.

Unlike the other Airflow tests, nothing here builds cluster state by hand: the lab runs Trainer, JobSet, the Job
controller, kubelets, node lifecycle, PodGC, the fencing agent, Kueue and dispatch's admission check controller
(`lab.scenario.presets.cluster_controllers`), and the test only sets up what an administrator would (a runtime, queues)
before it runs the DAG. What a test checks comes from three places: the DAG run (task states, XComs), the
task logs (`capfd`: `dag.test()` writes them to stdout), and the lab's own truth, which no task can influence
(the overlap recorder: no two executions ran at once; the admission ledger: which admissions happened).

The restart operator under Kueue, and with a node going not Ready while it waits for an outcome, runs the test
DAG `dispatch_restart` (tests/airflow/dags), whose manifest the test builds (a queue label, a runtime whose
processes exit when the test says), against this same cluster.

`kubernetes_default` points at this module's lab as its `writer` identity for the length of each test, and
`lab_admin` at its admin (the drill's chaos steps patch Nodes). Each test works in a namespace of its own with a
runtime of its own (its workload annotations say how its pods behave: `lab/simulated/nodes/workload.py`).

The drill pauses lab time once: the sensor's `ceased` lasts from the out-of-service taint until PodGC's next
pass, up to 20 s in a cluster but only 20/speed wall seconds in the lab, so the test stops lab time just before
the fencing agent acts and gives it back once the sensor has decided (`advance`, as the lab's tests do).
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from aiohttp import web
from airflow_lab import WAIT_BOUND, Actor, DagRunResult, Probe, find_wait_reasons, node_reads

from airflow_provider_dispatch.dispatch.errors import ConflictError, SuspensionNotObservedError
from airflow_provider_dispatch.dispatch.payloads import GLANCE
from airflow_provider_dispatch.dispatch.programs import prepare_manifest
from airflow_provider_dispatch.dispatch.restarts import run_key, submission_manifest
from airflow_provider_dispatch.dispatch.sync_adapter import DispatchAdapter
from airflow_provider_dispatch.dispatch.vocabulary import CLUSTER_TRAINING_RUNTIME, LABEL_JOBSET_NAME, TRAINJOB
from airflow_provider_dispatch_lab.clock import parse_timestamp
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import drill, manifests
from airflow_provider_dispatch_lab.scenario.kueue import SyncKueueScenario
from airflow_provider_dispatch_lab.scenario.presets import ClusterShape, cluster_controllers, provision
from airflow_provider_dispatch_lab.scenario.scenario import Scenario
from airflow_provider_dispatch_lab.simulated.nodes.fencing import FENCE_AFTER_SECONDS, FencingAgent
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import STATE_ANNOTATION
from airflow_provider_dispatch_lab.simulated.nodes.workload import (
    EXIT_CODE_BY_SUBMISSION,
    EXIT_NOW,
    RUN_SECONDS,
    TERMINATION_SECONDS,
)

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_DAGS = ROOT / "example_dags"
LAB_SPEED = 10.0
NOT_THE_LAB_COMMIT = "7d5b2e63a1f2c5c5dbf5b9d2a4bb0b0fd1a0e6c7"
Obj = dict[str, Any]


class VersionMask:
    """A middleware that, when on, answers /version as a real cluster would (another gitCommit)."""

    def __init__(self) -> None:
        self.on = False

    @web.middleware
    async def middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        response: web.StreamResponse = await handler(request)
        if self.on and request.path.rstrip("/") == "/version" and isinstance(response, web.Response) and response.text:
            body = json.loads(response.text)
            return web.json_response({**body, "gitCommit": NOT_THE_LAB_COMMIT})
        return response


@dataclass
class ClusterLab:
    lab: Lab
    scenario: Scenario
    kueue: SyncKueueScenario
    probe: Probe
    mask: VersionMask
    kubeconfigs: dict[str, Path]
    api: kubernetes.client.ApiClient

    def fencing_agent(self) -> FencingAgent:
        return next(c for c in self.lab.inner.controllers if isinstance(c, FencingAgent))

    def admissions(self, namespace: str, name: str) -> list[str | None]:
        history = self.lab.call(lambda: self.lab.inner.ledger.history(namespace, name))
        return [entry.admission_annotation for entry in history]


@pytest.fixture(scope="module")
def cluster_lab() -> Iterator[ClusterLab]:
    probe, mask = Probe(), VersionMask()
    with Lab(
        speed=LAB_SPEED, rbac=True, controllers=cluster_controllers(), middlewares=(probe.middleware, mask.middleware)
    ) as lab:
        provisioned = lab.run(lambda: provision(lab.inner, ClusterShape(nodes=3)))
        lab.run(provisioned.close)
        kubeconfigs = {"admin": lab.kubeconfig(), "writer": lab.kubeconfig_for("writer")}
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfigs["admin"]))
        kueue = SyncKueueScenario(lab)
        with Scenario(lab) as scenario:
            yield ClusterLab(lab, scenario, kueue, probe, mask, kubeconfigs, api)
        kueue.close()
        api.close()
        assert not lab.inner.crashes, f"lab tasks crashed: {lab.inner.crashes}"


@pytest.fixture(scope="module")
def example_dags(airflow_env: Any) -> dict[str, Any]:
    """The DAG objects of example_dags/, each module imported once (dag.test runs these objects). The folder
    goes on `sys.path` first, as Airflow puts a bundle's folder there: the DAGs import `dispatch_examples`."""
    from airflow.sdk import DAG

    if str(EXAMPLE_DAGS) not in sys.path:
        sys.path.append(str(EXAMPLE_DAGS))
    found: dict[str, Any] = {}
    for path in sorted(EXAMPLE_DAGS.glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"dispatch_example_{path.stem}", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.update({dag.dag_id: dag for dag in vars(module).values() if isinstance(dag, DAG)})
    return found


@pytest.fixture
def connections(cluster_lab: ClusterLab, monkeypatch: pytest.MonkeyPatch) -> None:
    for conn_id, identity in (("KUBERNETES_DEFAULT", "writer"), ("LAB_ADMIN", "admin")):
        extra = {"kube_config_path": str(cluster_lab.kubeconfigs[identity])}
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id}", json.dumps({"conn_type": "kubernetes", "extra": extra}))


@pytest.fixture
def namespace(cluster_lab: ClusterLab, connections: None) -> str:
    name = f"ex-{uuid.uuid4().hex[:10]}"
    kubernetes.client.CoreV1Api(cluster_lab.api).create_namespace({"metadata": {"name": name}})
    return name


def run(example_dags: dict[str, Any], dag_id: str, **conf: Any) -> DagRunResult:
    dag_run = example_dags[dag_id].test(run_conf=conf)
    return DagRunResult(dag_id, dag_run.run_id, str(dag_run.state))


def make_runtime(
    cluster_lab: ClusterLab, *, grace: int = 30, annotations: dict[str, str] | None = None, finite: bool = False
) -> str:
    """A ClusterTrainingRuntime of the test's own; `finite`: its pods are not restarted and one failure fails
    the Job (restartPolicy Never, backoffLimit 0), so a failing run fails the TrainJob at once."""
    name = f"rt-{uuid.uuid4().hex[:8]}"
    body = manifests.cluster_training_runtime(name, grace_seconds=grace)
    job_spec = body["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    if annotations:
        job_spec["template"]["metadata"] = {"annotations": dict(annotations)}
    if finite:
        job_spec["backoffLimit"] = 0
        job_spec["template"]["spec"]["restartPolicy"] = "Never"
    custom = kubernetes.client.CustomObjectsApi(cluster_lab.api)
    coords = CLUSTER_TRAINING_RUNTIME
    custom.create_cluster_custom_object(coords.group, coords.version, coords.plural, body)
    return name


def node_of(cluster_lab: ClusterLab, node: str) -> Obj:
    found: Obj = cluster_lab.api.sanitize_for_serialization(
        kubernetes.client.CoreV1Api(cluster_lab.api).read_node(node)
    )
    return found


def ready_since(node: Obj) -> float | None:
    """When the node's Ready condition last changed to something other than True, if it is not True."""
    ready = next((c for c in node.get("status", {}).get("conditions") or () if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") == "True":
        return None
    return parse_timestamp(str(ready["lastTransitionTime"]))


@contextlib.contextmanager
def lab_time_stopped(cluster_lab: ClusterLab) -> Iterator[None]:
    clock = cluster_lab.lab.clock
    cluster_lab.lab.call(lambda: clock.set_speed(0.0))
    try:
        yield
    finally:
        cluster_lab.lab.call(lambda: clock.set_speed(LAB_SPEED))


def released_checked(seen: list[Any], namespace: str, name: str) -> bool:
    """The release task (the worker) has read the TrainJob: the sensor before it has decided."""
    path = TRAINJOB.path(namespace, name)
    return any(s.by_worker and s.method == "GET" and s.path == path and s.phase == "done" for s in seen)


# --- the lost-node drill --------------------------------------------------------------------------------------


def frozen_node(cluster_lab: ClusterLab) -> str:
    nodes = kubernetes.client.CoreV1Api(cluster_lab.api).list_node().items
    [node] = [n.metadata.name for n in nodes if (n.metadata.annotations or {}).get(STATE_ANNOTATION) == "frozen"]
    return str(node)


def held_after_admission(admission: int) -> Any:
    """A predicate: the TrainJob is held (again) after admission `admission` (the drill's hold step)."""

    def held(trainjob: Obj | None) -> bool:
        annotations = ((trainjob or {}).get("metadata") or {}).get("annotations") or {}
        suspended = ((trainjob or {}).get("spec") or {}).get("suspend") is True
        return suspended and annotations.get("dispatch.phpboyscout.uk/admission") == str(admission)

    return held


def has_out_of_service(node: Obj | None) -> bool:
    return any(
        t.get("key") == "node.kubernetes.io/out-of-service" for t in (node or {}).get("spec", {}).get("taints") or ()
    )


def test_the_lost_node_drill_waits_for_cessation_and_admits_once(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    fence_after, name = 120.0, "drill"  # lab seconds, but the test jumps over them once the sensor has shown
    scenario, probe = cluster_lab.scenario, cluster_lab.probe
    frozen: list[str] = []

    def shown_unknown(seen: list[Any]) -> bool:
        """The sensor's wait reason (its XCom, pushed before it defers again) names the node Ready=Unknown."""
        reason = find_wait_reasons("lost_node_drill", "wait_ceased", f"{namespace}/{name}").get("xcom", "")
        return f"on {frozen[0]} (Ready=Unknown)" in reason

    def fence_with_the_sensor_watching() -> None:
        """After the hold, once the sensor has shown the frozen node Ready=Unknown: stop lab time, move it to the
        fencing agent's moment, and let it run on only once the release (the task after the sensor) started."""
        scenario.wait_for(TRAINJOB, namespace, name, held_after_admission(1), timeout=WAIT_BOUND)
        frozen.append(frozen_node(cluster_lab))
        unknown = scenario.wait_for_node(frozen[0], lambda n: ready_since(n or {}) is not None, timeout=WAIT_BOUND)
        probe.wait_for(shown_unknown)
        with lab_time_stopped(cluster_lab):
            since = ready_since(unknown or {})
            assert since is not None
            mark = probe.mark()
            scenario.advance(max(0.0, since + fence_after - scenario.now()) + 0.01)
            scenario.wait_for_node(frozen[0], has_out_of_service, timeout=WAIT_BOUND)
            probe.wait_for(lambda seen: released_checked(seen, namespace, name), mark)

    actor = Actor(fence_with_the_sensor_watching).start()
    result = run(
        example_dags,
        "lost_node_drill",
        namespace=namespace,
        name=name,
        chaos_conn_id="lab_admin",
        fence_after_seconds=fence_after,
    )
    actor.join()
    out = capfd.readouterr().out
    [node] = frozen
    assert result.state == "success", out[-4000:]

    first, released = result.xcom("open"), result.xcom("release")
    assert (first["admission"], released["admission"]) == (1, 2)
    assert released == {"job_id": name, "submission": "1", "admission": 2}
    froze = result.xcom("freeze_node")
    assert (froze["node"], froze["fence_after_seconds"]) == (node, fence_after)
    waited = result.xcom("wait_ceased")
    assert waited["outcome"] == "ceased"
    assert waited["remaining"] == [{"pod": froze["pod"], "node": node, "node_state": "Ready=Unknown, out-of-service"}]
    # the wait reason while the node was frozen, as the sensor logged it (the UI's task log)
    assert f"remaining pods: {froze['pod']} on {node} (Ready=Unknown)\n" in out
    assert f"kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in out
    running = result.xcom("wait_running_again")
    assert {place["admission"] for place in running} == {"2"}
    assert node not in {place["node"] for place in running}
    assert result.xcom("report")["wait"] == waited

    # the lab's truth: the agent fenced that node; one execution at a time; admissions 1 and 2, nothing else
    assert node in cluster_lab.lab.call(lambda: list(cluster_lab.fencing_agent().fenced))
    assert (node_of(cluster_lab, node)["metadata"]["annotations"][STATE_ANNOTATION]) == "powered-off"
    assert cluster_lab.scenario.overlaps(namespace, name) == []
    assert cluster_lab.admissions(namespace, name) == ["1", "2"]
    executions = {record.admission for record in cluster_lab.scenario.processes(namespace, name)}
    assert executions == {1, 2}

    # the machine back on: the fencing agent removes its taint once the node is Ready again
    scenario.recover(node)
    scenario.wait_for_node(node, lambda n: not has_out_of_service(n), timeout=WAIT_BOUND)
    patch = {"metadata": {"annotations": {FENCE_AFTER_SECONDS: None}}}
    kubernetes.client.CoreV1Api(cluster_lab.api).patch_node(node, patch)


def test_the_drill_refuses_a_cluster_that_is_not_the_lab(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    nodes_before = {
        n.metadata.name: n.metadata.annotations for n in kubernetes.client.CoreV1Api(cluster_lab.api).list_node().items
    }
    cluster_lab.mask.on = True
    try:
        result = run(example_dags, "lost_node_drill", namespace=namespace, name="drill", chaos_conn_id="lab_admin")
    finally:
        cluster_lab.mask.on = False
    out = capfd.readouterr().out
    assert result.state == "failed"
    assert (result.task_state("check_lab"), result.try_number("check_lab")) == ("failed", 1)
    assert "is not the dispatch lab (its /version gitCommit is" in out
    assert NOT_THE_LAB_COMMIT in out
    assert result.task_state("open") == "upstream_failed"
    # nothing was written: no TrainJob, no node touched
    custom = kubernetes.client.CustomObjectsApi(cluster_lab.api)
    listed = custom.list_namespaced_custom_object(TRAINJOB.group, TRAINJOB.version, namespace, TRAINJOB.plural)
    assert listed["items"] == []
    nodes_after = {
        n.metadata.name: n.metadata.annotations for n in kubernetes.client.CoreV1Api(cluster_lab.api).list_node().items
    }
    assert nodes_after == nodes_before


# --- chained restarts -----------------------------------------------------------------------------------------


def test_chained_restarts_open_the_next_submission_after_a_failure(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str
) -> None:
    runtime = make_runtime(cluster_lab, annotations={RUN_SECONDS: "20", EXIT_CODE_BY_SUBMISSION: "1=3"}, finite=True)
    result = run(example_dags, "chained_restarts", namespace=namespace, name="chain", runtime=runtime, attempts=3)
    assert result.state == "success"
    first, second = result.xcom("attempt_1.outcome"), result.xcom("attempt_2.outcome")
    assert (first["outcome"], first["ref"], first["admission"]) == ("Failed", f"{namespace}/chain-1", 1)
    assert (second["outcome"], second["ref"]) == ("Complete", f"{namespace}/chain-2")
    assert result.xcom("attempt_2.open") == {"job_id": "chain", "submission": "2", "admission": 1}
    assert result.xcom("attempt_2.succeeded") == {
        "attempt": 2,
        "trainjob": f"{namespace}/chain-2",
        "execution": {"job_id": "chain", "submission": "2", "admission": 1},
    }
    assert result.xcom("attempt_2.previous_drained")["outcome"] == "drained"
    states = {
        task: result.task_state(task) for task in ("attempt_1.succeeded", "attempt_1.gave_up", "attempt_2.gave_up")
    }
    assert set(states.values()) == {"skipped"}
    assert {result.task_state(t) for t in ("attempt_3.hold_previous", "attempt_3.open")} == {"skipped"}
    assert result.task_state("done") == "success"

    # the lab's truth: the second submission started after every process of the first had stopped
    runs = {name: cluster_lab.scenario.processes(namespace, name) for name in ("chain-1", "chain-2")}
    assert runs["chain-1"]
    assert runs["chain-2"]
    assert max(r.stop or float("inf") for r in runs["chain-1"]) <= min(r.start for r in runs["chain-2"])
    assert {r.labels.get("dispatch.phpboyscout.uk/submission") for r in runs["chain-2"]} == {"2"}
    assert [cluster_lab.admissions(namespace, n) for n in ("chain-1", "chain-2")] == [["1"], ["1"]]


def test_chained_restarts_give_up_after_the_last_attempt_allowed(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str
) -> None:
    runtime = make_runtime(cluster_lab, annotations={RUN_SECONDS: "10", EXIT_CODE_BY_SUBMISSION: "1=3"}, finite=True)
    result = run(example_dags, "chained_restarts", namespace=namespace, name="chain", runtime=runtime, attempts=1)
    assert result.state == "failed"
    assert (result.task_state("attempt_1.gave_up"), result.task_state("attempt_1.succeeded")) == ("failed", "skipped")
    assert result.task_state("attempt_2.hold_previous") == "skipped"
    assert result.task_state("done") == "skipped"


# --- scheduled retries ----------------------------------------------------------------------------------------


def open_running(cluster_lab: ClusterLab, namespace: str, name: str, runtime: str) -> None:
    """Open the lab's sample TrainJob `name` on `runtime` as the admin, and return once both its pods run
    admission 1."""
    body = manifests.trainjob(name, runtime=runtime, num_nodes=2)
    body["metadata"]["namespace"] = namespace
    open_until_running(cluster_lab, body)


def open_until_running(cluster_lab: ClusterLab, body: Obj) -> None:
    """Open TrainJob `body` as the admin (dispatch's adapter), and return once both its pods run admission 1."""
    namespace, name = str(body["metadata"]["namespace"]), str(body["metadata"]["name"])
    with DispatchAdapter.from_kubeconfig(cluster_lab.kubeconfigs["admin"]) as adapter:
        for _ in range(10):  # a retried open continues with the object it created (DESIGN: open)
            try:
                adapter.open(body)
                break
            except SuspensionNotObservedError:
                cluster_lab.scenario.wait_for(TRAINJOB, namespace, name, hold_observed, timeout=WAIT_BOUND)
            except ConflictError:
                continue  # Trainer wrote the status meanwhile: the check runs again on the new state
        else:
            raise AssertionError(f"open of {namespace}/{name} never admitted")
    wait_pods_running(cluster_lab, namespace, name, admission="1", count=2)


def hold_observed(trainjob: Obj | None) -> bool:
    conditions = ((trainjob or {}).get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions)


def wait_pods_running(cluster_lab: ClusterLab, namespace: str, name: str, *, admission: str, count: int) -> None:
    core = kubernetes.client.CoreV1Api(cluster_lab.api)
    selector = f"{LABEL_JOBSET_NAME}={name},dispatch.phpboyscout.uk/admission={admission}"
    pods: dict[str, Any] = {}
    stream = kubernetes.watch.Watch().stream(
        core.list_namespaced_pod, namespace, label_selector=selector, timeout_seconds=int(WAIT_BOUND)
    )
    for event in stream:
        pods[event["object"].metadata.name] = event["object"]
        if event["type"] == "DELETED":
            pods.pop(event["object"].metadata.name)
        if sum(1 for p in pods.values() if p.status.phase == "Running") == count:
            return
    raise AssertionError(f"the pods of {namespace}/{name} admission {admission} never all ran: {pods}")


def test_scheduled_retries_wait_by_retrying_until_the_old_pods_are_gone(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    runtime = make_runtime(cluster_lab, grace=60, annotations={TERMINATION_SECONDS: "40"})
    open_running(cluster_lab, namespace, "retried", runtime)
    result = run(example_dags, "scheduled_retries", namespace=namespace, name="retried")
    out = capfd.readouterr().out
    assert result.state == "success"
    assert result.xcom("hold") == {"job_id": "retried", "submission": "1", "admission": 1}
    assert result.xcom("release") == {"job_id": "retried", "submission": "1", "admission": 2}
    assert result.try_number("release") >= 2  # the retries did the waiting
    assert f"TrainJob {namespace}/retried" in out
    assert "remaining pods: retried-node-0-" in out
    assert cluster_lab.scenario.overlaps(namespace, "retried") == []
    assert cluster_lab.admissions(namespace, "retried") == ["1", "2"]


# --- Kueue mode -----------------------------------------------------------------------------------------------


def test_kueue_mode_readmits_only_after_the_old_pods_are_gone(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    check = f"drained-{uuid.uuid4().hex[:6]}"
    setup = cluster_lab.kueue.create_queues(
        namespace,
        cluster_queue=f"cq-{namespace}",
        local_queue="user-queue",
        admission_checks=(check,),
        activate_checks=False,  # dispatch's admission check controller makes it Active
    )
    runtime = make_runtime(cluster_lab, grace=60, annotations={TERMINATION_SECONDS: "30"})
    result = run(
        example_dags, "kueue_mode", namespace=namespace, name="queued", queue=setup.local_queue, runtime=runtime
    )
    assert result.state == "success"
    assert result.xcom("open")["admission"] == 0  # Kueue admits, not the open
    # so the open records no execution it expects to admit (the release neither: it reactivates the Workload)
    assert "Noted in the task state store" not in capfd.readouterr().out
    admitted, readmitted = result.xcom("wait_admitted"), result.xcom("wait_readmitted")
    assert (admitted["admission"], readmitted["admission"]) == (1, 2)
    assert result.xcom("release")["admission"] == 1  # release reactivates; the admission check raises A
    waited = "\n".join(readmitted["wait_reasons"])
    # the admission check's message says what is awaited first, then the pods of the previous execution
    assert f"admission check {check} Pending: " in waited
    assert "\npods of the previous execution remain: queued-node-0-" in waited
    assert cluster_lab.scenario.overlaps(namespace, "queued") == []
    assert cluster_lab.admissions(namespace, "queued") == ["1", "2"]


# --- the restart operator -------------------------------------------------------------------------------------


def trainjobs_in(cluster_lab: ClusterLab, namespace: str) -> list[str]:
    custom = kubernetes.client.CustomObjectsApi(cluster_lab.api)
    listed = custom.list_namespaced_custom_object(TRAINJOB.group, TRAINJOB.version, namespace, TRAINJOB.plural)
    return sorted(item["metadata"]["name"] for item in listed["items"])


def one_after_another(cluster_lab: ClusterLab, namespace: str, names: list[str]) -> None:
    """The lab's truth: each submission's processes all started after every process of the one before stopped."""
    runs = {name: cluster_lab.scenario.processes(namespace, name) for name in names}
    assert all(runs.values()), runs
    for before, after in itertools.pairwise(names):
        assert max(r.stop or float("inf") for r in runs[before]) <= min(r.start for r in runs[after])


def chain_completed(result: DagRunResult, out: str, namespace: str, submissions: int, max_restarts: int) -> list[Obj]:
    """Check that the chain of job id `job` succeeded on its first try with submission `submissions`, each earlier
    one Failed and drained before the next was opened, each run as execution 1 of its TrainJob; its history."""
    assert result.state == "success", out[-4000:]
    assert result.try_number("train") == 1
    assert result.xcom("train") == {
        "outcome": "Complete",
        "trainjob": f"{namespace}/job-{submissions}",
        "submission": submissions,
        "restarts": submissions - 1,
        "execution": {"job_id": "job", "submission": str(submissions), "admission": 1},
    }
    chain = result.xcom("train", "restarts")
    assert (chain["stage"], chain["max_restarts"]) == ("succeeded", max_restarts)
    history: list[Obj] = chain["history"]
    outcomes = ["Failed"] * (submissions - 1) + ["Complete"]
    assert [(h["submission"], h["trainjob"], h["admission"], h["outcome"]) for h in history] == [
        (k, f"{namespace}/job-{k}", 1, outcome) for k, outcome in enumerate(outcomes, start=1)
    ]
    for before, after in itertools.pairwise(history):
        assert before["opened_at"] <= before["finished_at"] <= before["drained_at"] <= after["opened_at"]
    return history


def run_restart(test_dags: dict[str, Any], manifest: Obj, max_restarts: int) -> DagRunResult:
    """One `dag.test()` of the test DAG `dispatch_restart` on `manifest`."""
    dag_run = test_dags["dispatch_restart"].test(run_conf={"manifest": manifest, "max_restarts": max_restarts})
    return DagRunResult("dispatch_restart", dag_run.run_id, str(dag_run.state))


def test_the_restart_operator_restarts_failed_submissions_until_one_completes(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    runtime = make_runtime(
        cluster_lab, annotations={RUN_SECONDS: "20", EXIT_CODE_BY_SUBMISSION: "1=3,2=3"}, finite=True
    )
    result = run(example_dags, "restart_operator", namespace=namespace, name="job", runtime=runtime, max_restarts=3)
    out = capfd.readouterr().out
    history = chain_completed(result, out, namespace, submissions=3, max_restarts=3)
    assert [h["drained"] for h in history] == ["drained", "drained", None]
    assert result.xcom("report") == {"submissions": 3, "outcomes": ["Failed", "Failed", "Complete"]}
    # the wait reason at each stage, as the task logged it
    # (what is awaited first, then the chain's submission, then the TrainJob and its execution; the details follow
    # while pods start, and nothing does when they ran already at the task's check: "nothing blocks it")
    assert (
        f"\nRestart chain, submission 1 of at most 4.\nTrainJob {namespace}/job-1 runs execution 1; waiting for "
        "execution 1 to finish (Complete or Failed)."
    ) in out
    failed = rf"TrainJob {namespace}/job-1 execution 1 finished: Failed.*\nRestart chain, submission 1 of at most 4\."
    assert re.search(failed, out)
    assert f"Submission 1 failed: held TrainJob {namespace}/job-1" in out
    assert (
        "\nRestart chain, submission 1 of at most 4 failed; submission 2 opens once its pods are gone or stopped."
        in out
    )
    finished = (
        rf"TrainJob {namespace}/job-3 execution 1 finished: Complete.*\nRestart chain, submission 3 of at most 4\."
    )
    assert re.search(finished, out)
    # the log says what each open did: each submission's TrainJob admitted its first execution
    for k in (1, 2, 3):
        assert f"TrainJob {namespace}/job-{k}: admitted execution 1 " in out
    # dag.test() hands a resumed task only the trigger's event, so the chain comes back from its XCom here (the
    # real scheduler passes next_kwargs: tests/browser/test_restart_operator_triggerer.py)
    assert "Resuming the restart chain from its XCom" in out

    # the lab's truth: one submission at a time, each admitted once, no fourth
    assert trainjobs_in(cluster_lab, namespace) == ["job-1", "job-2", "job-3"]
    one_after_another(cluster_lab, namespace, ["job-1", "job-2", "job-3"])
    assert [cluster_lab.admissions(namespace, n) for n in ("job-1", "job-2", "job-3")] == [["1"], ["1"], ["1"]]


def test_the_restart_operator_fails_clearly_when_max_restarts_are_used_up(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    runtime = make_runtime(
        cluster_lab, annotations={RUN_SECONDS: "10", EXIT_CODE_BY_SUBMISSION: "1=3,2=4,3=0"}, finite=True
    )
    result = run(example_dags, "restart_operator", namespace=namespace, name="job", runtime=runtime, max_restarts=1)
    out = capfd.readouterr().out
    assert result.state == "failed"
    assert (result.task_state("train"), result.try_number("train")) == ("failed", 1)
    assert result.task_state("report") == "upstream_failed"
    assert (
        f"gave up after 1 restart (max_restarts=1): submission 2, TrainJob {namespace}/job-2 execution 1, ended "
        "Failed" in out
    )
    chain = result.xcom("train", "restarts")
    assert chain["stage"] == "exhausted"
    assert [h["outcome"] for h in chain["history"]] == ["Failed", "Failed"]
    assert trainjobs_in(cluster_lab, namespace) == ["job-1", "job-2"]  # no third submission, though it would pass


def test_the_restart_operator_refuses_a_bad_manifest_before_writing(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    mark = cluster_lab.probe.mark()
    result = run(example_dags, "restart_operator", namespace=namespace, name="x" * 61, max_restarts=25)
    out = capfd.readouterr().out
    assert result.state == "failed"
    assert (result.task_state("train"), result.try_number("train")) == ("failed", 1)
    assert f"{'x' * 61}-26' is 64 characters long" in out  # the last submission's name is the one too long
    assert trainjobs_in(cluster_lab, namespace) == []
    assert not [seen for seen in cluster_lab.probe.since(mark) if seen.writes]


def test_the_restart_operator_survives_a_node_frozen_in_a_failing_submission(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """A node freezes under submission 1, whose other pod then fails. The Job stays short of Failed while the
    frozen pod may still run (its process pauses, holding what it holds), so the chain waits; the fencing agent
    powers the machine off and taints the node out-of-service (the runbook's step), PodGC removes the pod, the
    TrainJob fails, and only then is submission 2 opened, on the other nodes."""
    scenario = cluster_lab.scenario
    runtime = make_runtime(cluster_lab, annotations={RUN_SECONDS: "60", EXIT_CODE_BY_SUBMISSION: "1=3"}, finite=True)
    frozen: list[str] = []

    def freeze_a_node_of_submission_1() -> None:
        wait_pods_running(cluster_lab, namespace, "job-1", admission="1", count=2)
        core = kubernetes.client.CoreV1Api(cluster_lab.api)
        pods = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_JOBSET_NAME}=job-1").items
        frozen.append(sorted(p.spec.node_name for p in pods)[0])
        drill.freeze_node(cluster_lab.api, frozen[0], fence_after_seconds=60)

    actor = Actor(freeze_a_node_of_submission_1).start()
    try:
        result = run(example_dags, "restart_operator", namespace=namespace, name="job", runtime=runtime, max_restarts=1)
        actor.join()
    finally:
        if frozen:  # the machine back on: the fencing agent removes its taint once the node is Ready again
            scenario.recover(frozen[0])
            scenario.wait_for_node(frozen[0], lambda n: not has_out_of_service(n), timeout=WAIT_BOUND)
            patch = {"metadata": {"annotations": {FENCE_AFTER_SECONDS: None}}}
            kubernetes.client.CoreV1Api(cluster_lab.api).patch_node(frozen[0], patch)
    out = capfd.readouterr().out
    [node] = frozen
    assert result.state == "success", out[-4000:]
    assert result.xcom("train")["trainjob"] == f"{namespace}/job-2"
    history = result.xcom("train", "restarts")["history"]
    assert [(h["submission"], h["outcome"]) for h in history] == [(1, "Failed"), (2, "Complete")]
    assert history[0]["drained"] in ("ceased", "drained")
    assert f"TrainJob {namespace}/job-1 runs execution 1; waiting for execution 1 to finish" in out
    # the lab's truth: the node was fenced; submission 2 started after every process of submission 1 stopped
    # (the frozen one when its machine was powered off), and not on the fenced node
    assert node in cluster_lab.lab.call(lambda: list(cluster_lab.fencing_agent().fenced))
    one_after_another(cluster_lab, namespace, ["job-1", "job-2"])
    assert node in {r.node for r in cluster_lab.scenario.processes(namespace, "job-1")}
    assert node not in {r.node for r in cluster_lab.scenario.processes(namespace, "job-2")}
    assert [cluster_lab.admissions(namespace, n) for n in ("job-1", "job-2")] == [["1"], ["1"]]


# --- the restart operator under Kueue ---------------------------------------------------------------------------


def chain_manifest(namespace: str, runtime: str, *, queue: str | None = None) -> Obj:
    """The chain's TrainJob `job` (two pods), in a LocalQueue when `queue` is given (then Kueue's to admit); no
    submission label (the operator numbers the submissions)."""
    body = manifests.trainjob("job", runtime=runtime, num_nodes=2, queue=queue)
    body["metadata"]["namespace"] = namespace
    del body["metadata"]["labels"]["dispatch.phpboyscout.uk/submission"]
    return body


def test_the_restart_operator_restarts_under_kueue_through_the_admission_check(
    cluster_lab: ClusterLab,
    test_dags: dict[str, Any],
    namespace: str,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """In Kueue mode the open admits nothing (admission 0): Kueue admits each submission once dispatch's admission
    check is Ready (A=1 on that TrainJob). Submission 1 fails, is held and drained; submission 2 is admitted by
    Kueue the same way and completes. The history names the execution each submission ran, not the 0 of the
    open."""
    check = f"drained-{uuid.uuid4().hex[:6]}"
    setup = cluster_lab.kueue.create_queues(
        namespace,
        cluster_queue=f"cq-{namespace}",
        local_queue="user-queue",
        admission_checks=(check,),
        activate_checks=False,  # dispatch's admission check controller makes it Active
    )
    runtime = make_runtime(cluster_lab, annotations={RUN_SECONDS: "20", EXIT_CODE_BY_SUBMISSION: "1=3"}, finite=True)
    result = run_restart(test_dags, chain_manifest(namespace, runtime, queue=setup.local_queue), max_restarts=2)
    out = capfd.readouterr().out
    # admission 1 in the history and the XCom: the execution Kueue ran, not the 0 the open saw
    history = chain_completed(result, out, namespace, submissions=2, max_restarts=2)
    assert history[0]["drained"] == "drained"
    # unpinned (Kueue admits, the open saw admission 0): whatever execution the submission's TrainJob runs
    assert "\nRestart chain, submission 1 of at most 3.\n" in out
    assert f"TrainJob {namespace}/job-1 runs execution 1; waiting for its current execution to finish" in out
    finished = (
        rf"TrainJob {namespace}/job-2 execution 1 finished: Complete.*\nRestart chain, submission 2 of at most 3\."
    )
    assert re.search(finished, out)
    assert f"Submission 1 failed: held TrainJob {namespace}/job-1" in out
    # what the open said of a submission Kueue had not admitted yet; nothing claimed an execution 0 ran
    assert (
        f"TrainJob {namespace}/job-2: its Workload is active; Kueue admits the next execution once dispatch's "
        "admission check is Ready (none admitted yet)"
    ) in out
    assert "runs execution 0" not in out
    assert "admitted execution" not in out  # Kueue admits, not the open

    # Kueue admitted each submission through dispatch's admission check, once; the failed one is held the Kueue
    # way (its Workload deactivated), the completed one is not
    workloads = {name: cluster_lab.kueue.workload_for(namespace, name) for name in ("job-1", "job-2")}
    for name, workload in workloads.items():
        assert workload is not None, name
        assert cluster_lab.kueue.check_states(namespace, workload["metadata"]["name"]) == {check: "Ready"}
    assert [(w or {})["spec"].get("active") for w in workloads.values()] == [False, True]
    # the lab's truth: one execution at a time within each TrainJob and across the chain, no third submission
    assert trainjobs_in(cluster_lab, namespace) == ["job-1", "job-2"]
    assert [cluster_lab.scenario.overlaps(namespace, n) for n in ("job-1", "job-2")] == [[], []]
    one_after_another(cluster_lab, namespace, ["job-1", "job-2"])
    assert [cluster_lab.admissions(namespace, n) for n in ("job-1", "job-2")] == [["1"], ["1"]]


# --- the restart operator: progress while it waits for an outcome -------------------------------------------------


def exit_now(cluster_lab: ClusterLab, namespace: str, pods: list[str], code: int) -> None:
    """The lab's control: the pods' processes exit now with `code` (what a training does when it ends)."""
    core = kubernetes.client.CoreV1Api(cluster_lab.api)
    for pod in pods:
        core.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": {EXIT_NOW: str(code)}}})


def pods_of(cluster_lab: ClusterLab, namespace: str, trainjob: str) -> list[tuple[str, str]]:
    """(pod, node) of the TrainJob's pods, by name."""
    core = kubernetes.client.CoreV1Api(cluster_lab.api)
    found = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_JOBSET_NAME}={trainjob}").items
    return sorted((p.metadata.name, p.spec.node_name) for p in found)


def test_the_restart_operator_shows_progress_in_the_outcome_wait_and_defers_again(
    cluster_lab: ClusterLab, test_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """While the chain waits (deferred) for submission 1's outcome, the node of one of its running pods goes not
    Ready: the outcome trigger yields `progress`, the task shows the new wait reason (pod, node, node state and
    remedy on its first line; in the log, the rendered field and the XCom while deferred) and defers again. The
    node recovers, submission 1 fails, submission 2 completes: the chain ends as it would have."""
    scenario, probe = cluster_lab.scenario, cluster_lab.probe
    runtime = make_runtime(cluster_lab, finite=True)  # the processes run until the test says they exit
    mark = probe.mark()
    seen: dict[str, Any] = {}

    def story() -> None:
        wait_pods_running(cluster_lab, namespace, "job-1", admission="1", count=2)
        (pod, node), _ = pods_of(cluster_lab, namespace, "job-1")
        seen.update(pod=pod, node=node)
        # the outcome trigger has checked with the pod on its node: the task waits deferred
        probe.wait_for(lambda requests: node_reads(requests, node, by_trigger=True) >= 1, mark)
        scenario.set_not_ready(node)
        changed = probe.mark()
        # the trigger's check that sees the node not Ready (progress), then the next deferral's trigger checks
        probe.wait_for(lambda requests: node_reads(requests, node, by_trigger=True) >= 2, changed)
        seen["deferred"] = find_wait_reasons("dispatch_restart", "train", f"{namespace}/job-1")
        scenario.recover(node)
        exit_now(cluster_lab, namespace, [pod], 3)  # submission 1 fails
        wait_pods_running(cluster_lab, namespace, "job-2", admission="1", count=2)
        exit_now(cluster_lab, namespace, [p for p, _ in pods_of(cluster_lab, namespace, "job-2")], 0)

    actor = Actor(story).start()
    result = run_restart(test_dags, chain_manifest(namespace, runtime), max_restarts=1)
    actor.join()
    out = capfd.readouterr().out
    chain_completed(result, out, namespace, submissions=2, max_restarts=1)

    # the reason the progress event brought, shown while the task was deferred again: what to do first (the node,
    # its state, how many of the submission's pods are on it) and the command, then the chain's submission, the
    # TrainJob and its execution, then the details naming the pod
    pod, node = seen["pod"], seen["node"]
    first = f"Confirm {node} is powered off, then taint it out-of-service (Ready=False)\n"
    about = (
        f"\nRestart chain, submission 1 of at most 2.\nTrainJob {namespace}/job-1 runs execution 1; waiting for "
        "execution 1 to finish (Complete or Failed)."
    )
    for reason in (seen["deferred"]["rendered"], seen["deferred"]["xcom"]):
        lines = reason.splitlines()
        assert lines[0] + "\n" == first, lines[0]
        assert len(lines[0]) <= GLANCE
        assert lines[1] == f"kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
        assert about + "\n" in reason  # the details (naming the pod) follow
        assert pod in reason
    # in the log: the reason the task showed when it first deferred (the story changes the node only once the
    # trigger has read it), the new one, then the outcome. That first reason is the pods starting (details follow
    # its about lines) or, when they ran already at the task's check, "nothing blocks it", which has no details:
    # its about lines end the log message, so the search stops at their end.
    before = out.index(about)
    changed = out.index(first)
    assert "info" in out[out.rfind("\n", 0, changed) : changed].lower()  # the first line of a logged reason
    finished = out.index(f"TrainJob {namespace}/job-1 execution 1 finished: Failed")
    assert before < changed < finished
    assert out.index(f"TrainJob {namespace}/job-2 execution 1 finished: Complete") > finished

    # the lab's truth: one execution at a time
    assert [cluster_lab.scenario.overlaps(namespace, n) for n in ("job-1", "job-2")] == [[], []]
    one_after_another(cluster_lab, namespace, ["job-1", "job-2"])
    assert [cluster_lab.admissions(namespace, n) for n in ("job-1", "job-2")] == [["1"], ["1"]]


# --- the restart operator: a new try resumes from the cluster ---------------------------------------------------


def worker_writes(probe: Probe, mark: int) -> list[tuple[str, str, int | str]]:
    """The provider's writes since `mark` (method, path, answer)."""
    return [(s.method, s.path, s.status) for s in probe.since(mark) if s.writes and s.phase == "done"]


def test_a_chain_that_used_up_its_restarts_fails_again_in_its_own_words_or_goes_on_with_more(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """A new try of an exhausted chain (a Clear: here a new run of the same job id) fails at once with the chain's
    message, writing nothing; with a higher `max_restarts` it goes on from the cluster: the last failed submission
    is held and drained, and submission 3 is opened. Submission 1 is never opened again."""
    runtime = make_runtime(
        cluster_lab, annotations={RUN_SECONDS: "10", EXIT_CODE_BY_SUBMISSION: "1=3,2=4"}, finite=True
    )
    conf = {"namespace": namespace, "name": "job", "runtime": runtime}
    assert run(example_dags, "restart_operator", **conf, max_restarts=1).state == "failed"
    capfd.readouterr()

    mark = cluster_lab.probe.mark()
    again = run(example_dags, "restart_operator", **conf, max_restarts=1)
    out = capfd.readouterr().out
    assert (again.state, again.task_state("train"), again.try_number("train")) == ("failed", "failed", 1)
    assert (
        f"the cluster shows submissions 1 to 2 (1 restart used); {namespace}/job-2 failed (execution 1) and no "
        "restart is left: the chain has failed" in out
    )
    assert f"gave up after 1 restart (max_restarts=1): submission 2, TrainJob {namespace}/job-2 execution 1" in out
    assert "unsuspending it would admit nothing" not in out  # never the release's FinishedError
    assert worker_writes(cluster_lab.probe, mark) == []
    assert [h["outcome"] for h in again.xcom("train", "restarts")["history"]] == ["Failed", "Failed"]

    more = run(example_dags, "restart_operator", **conf, max_restarts=2)
    out = capfd.readouterr().out
    assert more.state == "success", out[-4000:]
    assert "the cluster shows submissions 1 to 2 (1 restart used); " in out
    assert f"Submission 2 failed: held TrainJob {namespace}/job-2" in out
    assert more.xcom("train")["trainjob"] == f"{namespace}/job-3"
    history = more.xcom("train", "restarts")["history"]
    assert [(h["submission"], h["outcome"], h["admission"]) for h in history] == [
        (1, "Failed", 1),
        (2, "Failed", 1),
        (3, "Complete", 1),
    ]
    # how submission 1's pods went, read back from submission 2's create; submission 2's, seen by this try
    assert [h["drained"] for h in history] == ["drained", "drained", None]
    assert trainjobs_in(cluster_lab, namespace) == ["job-1", "job-2", "job-3"]
    assert [cluster_lab.admissions(namespace, n) for n in ("job-1", "job-2", "job-3")] == [["1"], ["1"], ["1"]]
    one_after_another(cluster_lab, namespace, ["job-1", "job-2", "job-3"])


def test_a_new_try_waits_for_the_running_submission_and_opens_nothing(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """An earlier try opened submission 1 and died while it ran: the new try finds it running, waits for its
    outcome (deferred, read-only) and succeeds with it; it creates, holds and releases nothing."""
    runtime = make_runtime(cluster_lab, finite=True)  # the processes run until the test says they exit
    open_until_running(cluster_lab, submission_manifest(chain_manifest(namespace, runtime), 1))
    probe = cluster_lab.probe
    mark = probe.mark()

    def training_ends_once_the_task_waits() -> None:
        (_, node), _ = pods_of(cluster_lab, namespace, "job-1")
        probe.wait_for(lambda requests: node_reads(requests, node, by_trigger=True) >= 1, mark)
        exit_now(cluster_lab, namespace, [p for p, _ in pods_of(cluster_lab, namespace, "job-1")], 0)

    actor = Actor(training_ends_once_the_task_waits).start()
    result = run(example_dags, "restart_operator", namespace=namespace, name="job", runtime=runtime, max_restarts=2)
    actor.join()
    out = capfd.readouterr().out
    assert result.state == "success", out[-4000:]
    assert (
        f"the cluster shows submissions 1 to 1 (0 restarts used); {namespace}/job-1 runs execution 1: waiting for "
        "its outcome" in out
    )
    assert result.xcom("train") == {
        "outcome": "Complete",
        "trainjob": f"{namespace}/job-1",
        "submission": 1,
        "restarts": 0,
        "execution": {"job_id": "job", "submission": "1", "admission": 1},
    }
    assert worker_writes(probe, mark) == []
    assert (trainjobs_in(cluster_lab, namespace), cluster_lab.admissions(namespace, "job-1")) == (["job-1"], ["1"])


def test_a_submission_created_but_never_released_is_opened_as_it_is(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The open of an earlier try created submission 1 held and died before it released it: the new try opens it
    as it is (its create answers AlreadyExists, the same job id and submission: adopted) and releases it once."""
    runtime = make_runtime(cluster_lab, annotations={RUN_SECONDS: "10"}, finite=True)
    _, body = prepare_manifest(submission_manifest(chain_manifest(namespace, runtime), 1))
    custom = kubernetes.client.CustomObjectsApi(cluster_lab.api)
    custom.create_namespaced_custom_object(TRAINJOB.group, TRAINJOB.version, namespace, TRAINJOB.plural, body)
    mark = cluster_lab.probe.mark()
    result = run(example_dags, "restart_operator", namespace=namespace, name="job", runtime=runtime, max_restarts=2)
    out = capfd.readouterr().out
    assert result.state == "success", out[-4000:]
    assert f"{namespace}/job-1 has not finished and is held or queued: opening it as it is" in out
    assert result.xcom("train")["trainjob"] == f"{namespace}/job-1"
    creates = [(method, status) for method, path, status in worker_writes(cluster_lab.probe, mark) if method == "POST"]
    assert creates == [("POST", 409)]  # the fence: the existing TrainJob answered, and was taken
    assert (trainjobs_in(cluster_lab, namespace), cluster_lab.admissions(namespace, "job-1")) == (["job-1"], ["1"])


# --- the restart operator: one chain per DAG run ------------------------------------------------------------------


def test_each_run_of_the_nightly_dag_has_a_chain_of_its_own(
    cluster_lab: ClusterLab, example_dags: dict[str, Any], namespace: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """`nightly_restarts` (per_run): a run with a logical date (as the scheduler makes it) and a manual run with
    none (where `{{ ds_nodash }}` fails) each open TrainJobs of their own key; the rendered field `trainjobs` names
    exactly the TrainJobs that exist."""
    runtime = make_runtime(cluster_lab, annotations={RUN_SECONDS: "10", EXIT_CODE_BY_SUBMISSION: "1=3"}, finite=True)
    conf = {"namespace": namespace, "name": "nightly", "runtime": runtime, "max_restarts": 2}
    dag = example_dags["nightly_restarts"]
    night = datetime(2026, 12, 5, 2, 0, tzinfo=UTC)
    keys = []
    for logical_date in (night, None):
        dag_run = dag.test(logical_date=logical_date, run_conf=conf)
        result = DagRunResult("nightly_restarts", dag_run.run_id, str(dag_run.state))
        out = capfd.readouterr().out
        assert result.state == "success", out[-4000:]
        date = logical_date or dag_run.run_after
        key = run_key(dag_id="nightly_restarts", task_id="train", run_id=dag_run.run_id, date=date)
        assert key.startswith(f"{date:%Y%m%d}-")
        names = [f"nightly-{key}-1", f"nightly-{key}-2"]
        assert result.xcom("train")["execution"]["job_id"] == f"nightly-{key}"
        assert result.rendered("train")["trainjobs"] == [f"{namespace}/{name}" for name in names]
        assert [h["trainjob"] for h in result.xcom("train", "restarts")["history"]] == [
            f"{namespace}/{name}" for name in names
        ]
        keys.append(key)
    assert keys[0].startswith("20261205-")
    assert len(set(keys)) == 2
    assert trainjobs_in(cluster_lab, namespace) == sorted(f"nightly-{key}-{k}" for key in keys for k in (1, 2))
