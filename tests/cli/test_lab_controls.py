"""`dispatch lab node|pod|clock|verdict` against `dispatch lab serve`, the cluster's state checked through the API.

One served lab (the console script, RBAC on, lab time at the speed of real time so that only `clock advance`
crosses the long waits) serves the module. The commands run in this process as a person types them, with the
kubeconfig the lab wrote; what they did is read back with the official client, as the admin: a frozen node goes
Ready=Unknown once lab time passes the node monitor's grace, the fencing agent powers off and taints the node, a
restored node is Ready again, a pod's process exit shows as its phase. The verdict is checked both ways: held for a
TrainJob run once, broken (exit 1) for one resumed while a pod of its first execution still ran on a frozen node.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from click.testing import CliRunner, Result
from served_lab import Served, serve, stop

from airflow_provider_dispatch.cli.commands import main
from airflow_provider_dispatch.dispatch import DispatchAdapter
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import HoldSettlingError, SuspensionNotObservedError
from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE
from airflow_provider_dispatch_lab.scenario import manifests

Obj = dict[str, Any]
EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
WAIT = 60  # wall seconds: a failure bound only, every wait ends on the state it watches for


@dataclass
class ServedLab:
    served: Served
    admin: kubernetes.client.ApiClient

    def run(self, *args: str, identity: str = "admin") -> Result:
        kubeconfig = str(self.served.kubeconfigs[identity])
        return CliRunner().invoke(main, ["lab", *args, "--kubeconfig", kubeconfig], prog_name="dispatch")

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.admin)

    def node(self, name: str) -> Obj:
        return dict(self.admin.sanitize_for_serialization(self.core.read_node(name)))

    def wait_for(self, list_call: Any, predicate: Any, **selector: Any) -> Obj:
        """The first object `list_call` lists or watches (with `selector`) for which `predicate` holds."""
        for event in kubernetes.watch.Watch().stream(list_call, timeout_seconds=WAIT, **selector):
            obj = dict(self.admin.sanitize_for_serialization(event["object"]))
            if predicate(obj):
                return obj
        raise AssertionError(f"nothing listed by {list_call.__name__} {selector} came to the state awaited")

    def wait_node(self, name: str, predicate: Any) -> Obj:
        return self.wait_for(self.core.list_node, predicate, field_selector=f"metadata.name={name}")


def ready(node: Obj) -> str | None:
    return next((c["status"] for c in node["status"].get("conditions") or [] if c["type"] == "Ready"), None)


def machine(node: Obj) -> str | None:
    return (node["metadata"].get("annotations") or {}).get("lab.dispatch.phpboyscout.uk/state")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLab]:
    served = serve(tmp_path_factory.mktemp("served"), "--speed", "1", "--rbac")
    admin = kubernetes.config.new_client_from_config(config_file=str(served.kubeconfigs["admin"]))
    try:
        custom = kubernetes.client.CustomObjectsApi(admin)
        custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", manifests.cluster_training_runtime())
        yield ServedLab(served, admin)
    finally:
        admin.close()
        assert stop(served) == 0


def run_trainjob(lab: ServedLab, name: str) -> list[Obj]:
    """A TrainJob of two pods, admitted at once (not suspended); its two pods once both run."""
    kubernetes.client.CustomObjectsApi(lab.admin).create_namespaced_custom_object(
        *TRAINER, "default", "trainjobs", manifests.trainjob(name, suspend=False)
    )
    running: dict[str, Obj] = {}
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"

    def both_run(pod: Obj) -> bool:
        if pod["status"].get("phase") == "Running":
            running[pod["metadata"]["name"]] = pod
        return len(running) == 2

    lab.wait_for(lab.core.list_namespaced_pod, both_run, namespace="default", label_selector=selector)
    return list(running.values())


def test_a_node_is_frozen_fenced_and_restored_by_commands(lab: ServedLab) -> None:
    listed = lab.run("node", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert [(n["name"], n["machine"], n["ready"]) for n in json.loads(listed.stdout)["items"]] == [
        (f"node-{i}", "ready", "True") for i in (1, 2, 3)
    ]

    frozen = lab.run("node", "freeze", "node-3")
    assert frozen.exit_code == 0, frozen.output
    assert frozen.stdout == "node/node-3: machine frozen; Node Ready=True\n"
    assert machine(lab.node("node-3")) == "frozen"
    # the node lifecycle controller gives up on the silent node after its 50 s grace, in lab time
    advanced = lab.run("clock", "advance", "60")
    assert advanced.exit_code == 0, advanced.output
    assert ready(lab.wait_node("node-3", lambda n: ready(n) == "Unknown")) == "Unknown"
    assert ready(lab.node("node-1")) == "True"  # the healthy nodes heartbeat through the jump

    armed = lab.run("node", "fencing", "node-3", "--after", "30")
    assert armed.exit_code == 0, armed.output
    assert lab.node("node-3")["metadata"]["annotations"]["lab.dispatch.phpboyscout.uk/fence-after-seconds"] == "30"
    assert lab.run("clock", "advance", "40").exit_code == 0
    fenced = lab.wait_node(
        "node-3", lambda n: any(t["key"] == TAINT_OUT_OF_SERVICE for t in n["spec"].get("taints") or [])
    )
    assert machine(fenced) == "powered-off"

    assert lab.run("node", "fencing", "node-3", "--off").exit_code == 0
    restored = lab.run("node", "restore", "node-3")
    assert restored.exit_code == 0, restored.output
    back = lab.wait_node("node-3", lambda n: ready(n) == "True")
    assert machine(back) == "ready"
    assert "lab.dispatch.phpboyscout.uk/fence-after-seconds" not in back["metadata"]["annotations"]


def test_every_machine_state_is_a_command(lab: ServedLab) -> None:
    for verb, state in (("not-ready", "not-ready"), ("lose", "lost"), ("power-off", "powered-off")):
        done = lab.run("node", verb, "node-2")
        assert done.exit_code == 0, done.output
        assert machine(lab.node("node-2")) == state
    # a kubelet that heartbeats says so at once: not-ready is Ready=False (KubeletNotReady)
    assert lab.run("node", "not-ready", "node-2").exit_code == 0
    assert ready(lab.wait_node("node-2", lambda n: ready(n) == "False")) == "False"
    assert lab.run("node", "restore", "node-2").exit_code == 0
    assert ready(lab.wait_node("node-2", lambda n: ready(n) == "True")) == "True"


def test_refusals_are_one_line_and_exit_1(lab: ServedLab) -> None:
    missing = lab.run("node", "freeze", "node-9")
    assert (missing.exit_code, missing.stderr) == (
        1,
        'Error: the lab refused (404): node "node-9" has no simulated kubelet in this lab\n',
    )
    reader = lab.run("node", "freeze", "node-1", identity="reader")
    assert reader.exit_code == 1
    assert reader.stderr.startswith("Error: the lab refused (403): forbidden: User ")
    assert 'cannot post path "/lab/nodes/node-1/state"' in reader.stderr
    assert machine(lab.node("node-1")) in (None, "ready")
    usage = lab.run("node", "fencing", "node-1")
    assert usage.exit_code == 2
    assert "give exactly one of --after SECONDS and --off" in usage.stderr


def test_a_pods_process_exits_on_command(lab: ServedLab) -> None:
    first, _ = run_trainjob(lab, "exits")
    name = first["metadata"]["name"]
    done = lab.run("pod", "exit", f"default/{name}")
    assert done.exit_code == 0, done.output
    assert done.stdout == f"pod/{name} in default: its process exited with code 0\n"
    succeeded = lab.wait_for(
        lab.core.list_namespaced_pod,
        lambda p: p["status"].get("phase") == "Succeeded",
        namespace="default",
        field_selector=f"metadata.name={name}",
    )
    (state,) = succeeded["status"]["containerStatuses"]
    assert state["state"]["terminated"]["exitCode"] == 0
    gone = lab.run("pod", "exit", f"default/{name}")
    assert gone.exit_code == 1
    assert f"no machine runs a process of pod default/{name}" in gone.stderr
    assert lab.run("pod", "exit", f"default/{name}", "--code", "256").exit_code == 2


def test_the_verdict_holds_for_one_execution_and_breaks_for_two_at_once(lab: ServedLab) -> None:
    run_trainjob(lab, "once")
    held = lab.run("verdict", "default/once")
    assert held.exit_code == 0, held.output
    lines = held.stdout.splitlines()
    assert lines[0] == "   admissions of default/once: -"  # admitted by its create, not by dispatch
    assert lines[1].startswith("   execution 1 ran: ")
    assert lines[2:] == [
        "   overlaps between executions: 0",
        "   overlaps of one rank: 0",
        "   overlaps of two restart attempts: 0",
        "The promise held: one execution at a time.",
    ]

    # Resume a TrainJob while a pod of its first execution runs on a frozen node: what dispatch exists to prevent.
    pods = run_trainjob(lab, "twice")
    first_uids = {pod["metadata"]["uid"] for pod in pods}
    node = pods[0]["spec"]["nodeName"]
    assert lab.run("node", "freeze", node).exit_code == 0
    custom = kubernetes.client.CustomObjectsApi(lab.admin)
    custom.patch_namespaced_custom_object(*TRAINER, "default", "trainjobs", "twice", {"spec": {"suspend": True}})
    selector = "jobset.sigs.k8s.io/jobset-name=twice"
    # the suspension taken on: the healthy node's pod gone, the frozen node's Terminating (its process runs on)
    lab.wait_for(
        lab.core.list_namespaced_pod,
        lambda p: p["metadata"]["uid"] == pods[0]["metadata"]["uid"] and bool(p["metadata"].get("deletionTimestamp")),
        namespace="default",
        label_selector=selector,
    )
    lab.wait_for(
        lab.core.list_namespaced_pod,
        lambda p: p["metadata"]["uid"] == pods[1]["metadata"]["uid"] and p["status"].get("phase") != "Running",
        namespace="default",
        label_selector=selector,
    )
    custom.patch_namespaced_custom_object(*TRAINER, "default", "trainjobs", "twice", {"spec": {"suspend": False}})
    lab.wait_for(
        lab.core.list_namespaced_pod,
        lambda p: p["status"].get("phase") == "Running" and p["metadata"]["uid"] not in first_uids,
        namespace="default",
        label_selector=selector,
    )
    broken = lab.run("verdict", "-o", "json")
    assert broken.exit_code == 1, broken.output
    answer = json.loads(broken.stdout)
    by_name = {item["name"]: item for item in answer["items"]}
    assert answer["promiseKept"] is False
    assert by_name["twice"]["admissions"] == [None, None]
    assert by_name["twice"]["overlaps"], by_name["twice"]
    assert by_name["once"]["promiseKept"] is True
    text = lab.run("verdict", "twice", "-n", "default")
    assert text.exit_code == 1
    assert text.stdout.splitlines()[-1] == "The promise was BROKEN."
    assert lab.run("node", "restore", node).exit_code == 0


def test_the_clock_shows_advances_and_changes_speed(lab: ServedLab) -> None:
    before = lab.run("clock", "show")
    assert before.exit_code == 0, before.output
    assert before.stdout.startswith("lab time ")
    assert before.stdout.endswith(" (x1)\n")
    stopped = lab.run("clock", "speed", "0")
    assert stopped.stdout.endswith(" (x0)\n")
    shown = lab.run("clock", "show").stdout
    assert shown == stopped.stdout  # stopped: only advance moves it
    assert lab.run("clock", "advance", "120").exit_code == 0
    moved = lab.run("clock", "show").stdout
    assert moved != shown
    assert lab.run("clock", "speed", "1").stdout.endswith(" (x1)\n")


def test_a_server_that_is_no_lab_is_named() -> None:
    from airflow_provider_dispatch_lab.runtime import Lab

    with Lab(speed=0.0) as plain:  # a lab without its controls: a server without /lab/nodes, as a cluster is
        url = plain.url
        done = CliRunner().invoke(main, ["lab", "node", "list", "--kubeconfig", str(plain.kubeconfig())])
    assert done.exit_code == 1
    assert done.stderr == (
        f"Error: {url} serves no lab controls (/lab/nodes is not found there): is it `dispatch lab serve`?\n"
    )


def condition(obj: Obj, kind: str) -> str | None:
    return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def open_by_dispatch(lab: ServedLab, manifest: Obj) -> Execution:
    """dispatch's open as the writer, as an operator retries it: after Trainer observed the hold, and after the
    hold settled (the lab clock moved past it)."""
    custom = kubernetes.client.CustomObjectsApi(lab.admin)
    trainjobs = functools.partial(custom.list_namespaced_custom_object, *TRAINER, "default", "trainjobs")
    functools.update_wrapper(trainjobs, custom.list_namespaced_custom_object)
    name = manifest["metadata"]["name"]
    with DispatchAdapter.from_kubeconfig(lab.served.kubeconfigs["writer"]) as adapter:
        for _ in range(30):
            settle: float | None = None
            try:
                return adapter.open(manifest)
            except HoldSettlingError as error:
                settle = error.seconds_left
            except SuspensionNotObservedError:
                settle = None
            if settle is not None:
                advanced = lab.run("clock", "advance", str(math.ceil(settle) + 1))
                assert advanced.exit_code == 0, advanced.output
                continue
            # Trainer, JobSet and the Job controller take the hold on in turn: wait for Trainer's mark, or when it is
            # there, for the next write to the Jobs (a few seconds at most, then ask again: it may be behind us)
            current = custom.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", name)
            if condition(current, "Suspended") != "True":
                lab.wait_for(
                    trainjobs, lambda tj: condition(tj, "Suspended") == "True", field_selector=f"metadata.name={name}"
                )
                continue
            jobs = kubernetes.client.BatchV1Api(lab.admin)
            version = jobs.list_namespaced_job("default").metadata.resource_version
            selector = f"jobset.sigs.k8s.io/jobset-name={name}"
            for _event in kubernetes.watch.Watch().stream(
                jobs.list_namespaced_job,
                "default",
                label_selector=selector,
                resource_version=version,
                timeout_seconds=5,
            ):
                break
    raise AssertionError(f"dispatch could not open {name} in 30 attempts")


def test_the_documented_flaky_runtime_fails_submission_1_and_completes_submission_2(lab: ServedLab) -> None:
    """docs/examples/lab-flaky-runtime.yaml (docs/lab.md, "Workload annotations"): 60 lab seconds of training,
    then exit 3 in submission 1 and 0 in submission 2, the TrainJob Failed then Complete."""
    custom = kubernetes.client.CustomObjectsApi(lab.admin)
    runtime = yaml.safe_load((EXAMPLES / "lab-flaky-runtime.yaml").read_text())
    custom.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
    trainjobs = functools.partial(custom.list_namespaced_custom_object, *TRAINER, "default", "trainjobs")
    functools.update_wrapper(trainjobs, custom.list_namespaced_custom_object)
    for submission, ending, code in (("1", "Failed", 3), ("2", "Complete", 0)):
        name = f"flaky-{submission}"
        manifest = manifests.trainjob(name, job_id="flaky", submission=submission, runtime="flaky-first", num_nodes=1)
        manifest["metadata"]["namespace"] = "default"
        assert open_by_dispatch(lab, manifest) == Execution("flaky", submission, 1)
        selector = f"jobset.sigs.k8s.io/jobset-name={name}"
        pod = lab.wait_for(
            lab.core.list_namespaced_pod,
            lambda p: p["status"].get("phase") == "Running",
            namespace="default",
            label_selector=selector,
        )
        assert lab.run("clock", "advance", "60").exit_code == 0
        outcome = functools.partial(lambda tj, kind: condition(tj, kind) == "True", kind=ending)
        lab.wait_for(trainjobs, outcome, field_selector=f"metadata.name={name}")
        ended = lab.core.read_namespaced_pod(pod["metadata"]["name"], "default")
        assert ended.status.container_statuses[0].state.terminated.exit_code == code
