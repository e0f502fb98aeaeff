"""`dispatch status` and `dispatch find` against the lab, over real HTTP, as a person and a script use them.

Each test builds the cluster state a real cluster could be in (dispatch_lab.cluster), runs the command through
click's runner and reads what it printed and the exit code: held, waiting on a lost node (through the whole
runbook: taint, PodGC), running, not found, invalid names (refused before any request), unreachable, and JSON
that is exactly the Status the adapter returns.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import DispatchAdapter
from airflow_provider_dispatch.dispatch.explain import taint_command, untaint_command

from .conftest import CliLab

COLUMNS = ("NAME", "STATE", "MODE", "JOB ID", "SUBMISSION", "ADMISSION", "AGE")


def header_row(text: str) -> dict[str, str]:
    """The first two lines (header and row) as {column: value}: columns are separated by 2+ spaces."""
    header, row = text.splitlines()[:2]
    names = re.split(r"\s{2,}", header.strip())
    values = re.split(r"\s{2,}", row.strip())
    assert tuple(names) == COLUMNS
    assert len(values) == len(names), row
    return dict(zip(names, values, strict=True))


def section(text: str, title: str) -> list[str]:
    """The indented lines under `title` (a line starting with it)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    body = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        body.append(line.strip())
    return body


def test_held(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-1", runtime=runtime, admission=3, job_id="train-a")
    ref = f"{cluster.namespace}/ft-1"

    result = cli_lab.run("status", ref)

    assert result.exit_code == 0, result.output
    row = header_row(result.stdout)
    assert {k: v for k, v in row.items() if k != "AGE"} == {
        "NAME": ref,
        "STATE": "held",
        "MODE": "plain",
        "JOB ID": "train-a",
        "SUBMISSION": "1",
        "ADMISSION": "3",
    }
    assert re.fullmatch(r"\d+s", row["AGE"]), row["AGE"]
    assert "Cause:   held" in result.stdout
    assert section(result.stdout, "Detail:") == [f"no pod of TrainJob {ref} remains"]
    assert "Remaining pods" not in result.stdout
    assert result.stderr == ""


def test_waiting_on_a_lost_node_through_the_runbook(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    _, (pod,) = cluster.held_after_execution("ft-2", runtime=runtime, admission=1, pods_on=[node])
    cluster.lose_node(node)
    ref = f"{cluster.namespace}/ft-2"

    mark = cli_lab.log.mark()
    result = cli_lab.run("status", ref)

    assert result.exit_code == 0, result.output
    assert header_row(result.stdout)["STATE"] == "waiting"
    assert "Cause:   pods remain" in result.stdout
    assert section(result.stdout, "Remaining pods: 1 (0 ceased)") == [
        "POD"
        + " " * (len(pod) - 3)
        + "   PHASE     DELETING   NODE"
        + " " * (len(node) - 4)
        + "   NODE STATE      CEASED",
        f"{pod}   Running   yes        {node}   Ready=Unknown   no",
    ]
    detail = "\n".join(section(result.stdout, "Detail:"))
    assert pod in detail
    assert f"Node {node} is not Ready (Ready=Unknown)" in detail
    assert "confirm that" in detail
    assert "shut down (powered off)" in detail
    assert f"`{taint_command(node)}`" in detail
    assert f"kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" in detail
    assert f"`{untaint_command(node)}`" in detail
    assert "--force" not in result.stdout
    assert "delete pod" not in result.stdout
    # read-only: the command only read (the TrainJob, its JobSet, the pods, the node; AGE re-reads the TrainJob)
    sent = cli_lab.log.since(mark)
    assert sent
    assert {method for method, _ in sent} == {"GET"}
    assert f"/api/v1/nodes/{node}" in {path for _, path in sent}

    # The operator confirms the shutdown and taints the node: the pod is ceased, and still listed until PodGC.
    cluster.taint_out_of_service(node)
    tainted = cli_lab.run("status", ref)
    assert tainted.exit_code == 0, tainted.output
    assert section(tainted.stdout, "Remaining pods: 1 (1 ceased)")[1].split() == [
        pod,
        "Running",
        "yes",
        node,
        "Ready=Unknown,",
        "out-of-service",
        "yes",
    ]
    assert "proven gone (ceased)" in tainted.stdout

    # PodGC force-deletes the pod: nothing remains, the object is held and can be released.
    cluster.podgc_force_deletes(pod)
    drained = cli_lab.run("status", ref)
    assert drained.exit_code == 0, drained.output
    assert header_row(drained.stdout)["STATE"] == "held"
    assert "Remaining pods" not in drained.stdout


def test_running(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.trainjob("ft-3", runtime=runtime, admission=2, suspend=False)
    cluster.trainer_observes("ft-3", suspended=False)
    cluster.pod("ft-3", node=node)
    ref = f"{cluster.namespace}/ft-3"

    result = cli_lab.run("status", ref)

    assert result.exit_code == 0, result.output
    row = header_row(result.stdout)
    assert (row["STATE"], row["ADMISSION"]) == ("running", "2")
    assert "Cause:   execution 2 admitted" in result.stdout
    assert section(result.stdout, "Detail:") == [
        "Waiting for the training to finish; nothing blocks it (pods: 1 Running)",
        f"TrainJob {ref} runs execution 2 of job id ft-3, submission 1; 1 of its pods are not finished",
    ]
    assert "Remaining pods" not in result.stdout
    assert section(result.stdout, "Pods not finished: 1")[1].split()[1:] == ["Running", "no", node, "Ready=True", "no"]


def test_running_on_a_lost_node_names_the_pod_its_node_and_the_remedy(cli_lab: CliLab, cluster: Cluster) -> None:
    """The TrainJob runs, one pod is Terminating on a node that stopped reporting: Trainer will not write Failed
    until that pod goes, and `dispatch status` says so, with the drain check's remedy."""
    runtime = cluster.runtime()
    lost, fine = cluster.node("n1"), cluster.node("n2")
    execution = cluster.running_execution("ft-4", runtime=runtime, admission=2)
    stuck = cluster.pod("ft-4", node=lost, index=0, execution=execution)
    cluster.pod("ft-4", node=fine, index=1, execution=execution)
    cluster.job_controller_deletes(stuck)
    cluster.lose_node(lost)
    pending = cluster.pod(
        "ft-4",
        node=None,
        index=2,
        execution=execution,
        phase="Pending",
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/2 nodes fit"}],
    )

    result = cli_lab.run("status", f"{cluster.namespace}/ft-4")

    assert result.exit_code == 0, result.output
    assert header_row(result.stdout)["STATE"] == "running"
    rows = {line.split()[0]: line.split()[1:] for line in section(result.stdout, "Pods not finished: 3")[1:]}
    assert rows[stuck] == ["Running", "yes", lost, "Ready=Unknown", "no"]
    # what to do first, as every wait reason: the lost node's remedy, its command, permission and runbook section
    detail = section(result.stdout, "Detail:")
    assert detail[0] == f"Confirm {lost} is powered off, then taint it out-of-service (Ready=Unknown)"
    assert detail[1] == taint_command(lost)
    assert detail[2].startswith("Needs permission to patch nodes. ")
    assert detail[3] == "1 more thing blocks it: see below."
    assert detail[4].startswith(f"TrainJob {cluster.namespace}/ft-4 runs execution 2 of job id ")
    assert detail[5] == "Add capacity or relax their requests or placement: 1 pod Pending (Unschedulable)"
    assert any(f"Node {lost} is not Ready (Ready=Unknown)" in line for line in detail)
    assert f"pod {pending}: Unschedulable: 0/2 nodes fit" in detail
    assert "--force" not in result.stdout


def test_find_shows_the_newest_submission(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    cluster.trainjob("ft-z", runtime=runtime, job_id="train-b", submission="1", admission=1)
    cli_lab.advance(5)
    cluster.trainjob("ft-a", runtime=runtime, job_id="train-b", submission="2", admission=0)

    result = cli_lab.run("find", cluster.namespace, "--job-id", "train-b")

    assert result.exit_code == 0, result.output
    row = header_row(result.stdout)
    assert (row["NAME"], row["SUBMISSION"], row["ADMISSION"]) == (f"{cluster.namespace}/ft-a", "2", "0")


@pytest.mark.parametrize("command", ["status", "find"])
def test_json_is_the_status(cli_lab: CliLab, cluster: Cluster, command: str) -> None:
    runtime = cluster.runtime(jobs=("launcher", "node"))
    lost, healthy = cluster.node("n1"), cluster.node("n2")
    cluster.held_after_execution(
        "ft-4", runtime=runtime, admission=1, pods_on=[lost, lost], jobs=("launcher", "node"), terminating=True
    )
    cluster.lose_node(lost)
    cluster.pod("ft-4", node=healthy, phase="Succeeded", name="ft-4-done")  # terminal: not listed
    ref = f"{cluster.namespace}/ft-4"
    args = ["status", ref] if command == "status" else ["find", cluster.namespace, "--job-id", "ft-4"]

    result = cli_lab.run(*args, "--output", "json")

    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    with DispatchAdapter.from_kubeconfig(cli_lab.kubeconfig, read_only=True) as adapter:
        expected = adapter.inspect(ref).as_dict()
    assert printed == expected
    assert printed["state"] == "waiting"
    assert {pod["node_state"] for pod in printed["remaining"]} == {"Ready=Unknown"}
    assert "ft-4-done" not in result.stdout


def test_not_found(cli_lab: CliLab, cluster: Cluster) -> None:
    ref = f"{cluster.namespace}/missing"

    text = cli_lab.run("status", ref)
    assert text.exit_code == 1
    assert text.stdout == ""
    assert text.stderr.startswith(f"Error: TrainJob {ref} was not found")

    as_json = cli_lab.run("status", ref, "-o", "json")
    assert as_json.exit_code == 1
    error = json.loads(as_json.stdout)["error"]
    assert (error["type"], error["retryable"], error["ref"]) == ("NotFoundError", False, ref)

    none = cli_lab.run("find", cluster.namespace, "--job-id", "nobody")
    assert none.exit_code == 1
    assert "no TrainJob in namespace" in none.stderr


def test_not_managed_is_refused(cli_lab: CliLab, cluster: Cluster) -> None:
    cluster.trainjob("plain", runtime=cluster.runtime(), dispatch_labels=False)

    result = cli_lab.run("status", f"{cluster.namespace}/plain")

    assert result.exit_code == 1
    assert "is not managed by dispatch" in result.stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["status", "ns/a,b"], "TrainJob name 'a,b' is not allowed"),
        (["status", "ns/x=y"], "TrainJob name 'x=y' is not allowed"),
        (["status", "No-Capitals"], "TrainJob name 'No-Capitals' is not allowed"),
        (["status", "ft", "-n", "Ns"], "namespace 'Ns' is not allowed"),
        (["list", "-n", "a,b"], "namespace 'a,b' is not allowed"),
        (["status", "a/b/c"], "write it as namespace/name"),
        (["status", "Ns/ft"], "namespace 'Ns' is not allowed"),
        (["find", "a,b", "--job-id", "x"], "namespace 'a,b' is not allowed"),
        (["find", "ns", "--job-id", "a=b"], "job id 'a=b' is not allowed"),
        (["find", "ns", "--job-id", ""], "job id is empty"),
    ],
)
def test_invalid_names_are_refused_before_any_request(cli_lab: CliLab, args: list[str], complaint: str) -> None:
    mark = cli_lab.log.mark()

    result = cli_lab.run(*args)

    assert result.exit_code == 2, result.output
    assert complaint in result.stderr
    assert cli_lab.log.since(mark) == []


def test_missing_option_is_a_usage_error(cli_lab: CliLab) -> None:
    result = cli_lab.run("find", "ns")
    assert result.exit_code == 2
    assert "--job-id" in result.stderr


def test_unreachable(cli_lab: CliLab, closed_port_kubeconfig: Path) -> None:
    text = cli_lab.run("status", "ml/ft-7", kubeconfig=closed_port_kubeconfig)
    assert text.exit_code == 3, text.output
    assert "the Kubernetes API could not be reached" in text.stderr

    as_json = cli_lab.run("find", "ml", "--job-id", "ft-7", "-o", "json", kubeconfig=closed_port_kubeconfig)
    assert as_json.exit_code == 3
    assert json.loads(as_json.stdout)["error"]["retryable"] is True


def test_kubeconfig_that_cannot_be_loaded_is_refused(cli_lab: CliLab, tmp_path: Path) -> None:
    missing = cli_lab.run("status", "ml/ft-7", kubeconfig=tmp_path / "absent.yaml")
    assert missing.exit_code == 1
    assert "could not be loaded" in missing.stderr

    other_context = cli_lab.run("status", "ml/ft-7", "--context", "no-such-context")
    assert other_context.exit_code == 1
    assert "could not be loaded" in other_context.stderr
