"""`--watch` on `dispatch status` and `dispatch list`: the command runs as a process against the lab, prints
the first answer, prints again when the cluster changes (the node tainted, the pod force-deleted), and exits 0
on Ctrl-C (SIGINT), whenever it comes and whether or not the process started with SIGINT ignored (a shell's
background job starts so, and with it every process the job starts: pytest run with `&` runs these tests so).

The process's output is read line by line as it comes; nothing waits on a clock (pytest-timeout bounds a hang).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from dispatch_lab.cluster import Cluster

from .conftest import CliLab

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def dispatch(*args: str, sigint_ignored: bool = False) -> Iterator[subprocess.Popen[str]]:
    """`dispatch ARGS` as a process; `sigint_ignored`: started with SIGINT ignored, as a background job is."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    ignoring = ["sh", "-c", 'trap "" INT; exec "$@"', "sh"] if sigint_ignored else []
    process = subprocess.Popen(
        [*ignoring, sys.executable, "-m", "airflow_provider_dispatch.cli.commands", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def read_until(process: subprocess.Popen[str], wanted: str) -> list[str]:
    """The lines printed up to and including the first that contains `wanted`."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line.rstrip("\n"))
        if wanted in line:
            return lines
    raise AssertionError(f"the process ended before printing {wanted!r}: {lines}")


def interrupt(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGINT)
    return process.wait(timeout=60)


@pytest.mark.timeout(120)
def test_status_watch_prints_each_change_and_exits_0_on_ctrl_c(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    _, (pod,) = cluster.held_after_execution("ft-w", runtime=runtime, admission=1, pods_on=[node])
    cluster.lose_node(node)
    ref = f"{cluster.namespace}/ft-w"

    with dispatch("status", ref, "-w", "--kubeconfig", str(cli_lab.kubeconfig)) as process:
        first = read_until(process, "Remaining pods: 1 (0 ceased)")
        assert "waiting" in first[1]

        cluster.taint_out_of_service(node)
        read_until(process, "Remaining pods: 1 (1 ceased)")

        cluster.podgc_force_deletes(pod)
        held = read_until(process, "Cause:   held")
        assert any(line.startswith(ref) and " held " in line for line in held), held

        assert interrupt(process) == 0
        assert process.stderr is not None
        assert "Traceback" not in process.stderr.read()


@pytest.mark.timeout(120)
def test_list_watch_prints_changed_rows_and_json_documents(cli_lab: CliLab, cluster: Cluster) -> None:
    runtime = cluster.runtime()
    node = cluster.node("n1")
    cluster.held_after_execution("ft-a", runtime=runtime, admission=1)
    _, (pod,) = cluster.held_after_execution("ft-b", runtime=runtime, admission=1, pods_on=[node])
    ns = cluster.namespace

    with (
        dispatch("list", "-n", ns, "-w", "--kubeconfig", str(cli_lab.kubeconfig)) as table,
        dispatch("list", "-n", ns, "-w", "-o", "json", "--kubeconfig", str(cli_lab.kubeconfig)) as documents,
    ):
        first = read_until(table, "ft-b")
        assert first[0].split()[:2] == ["NAME", "STATE"]
        assert "waiting" in first[2]
        assert [item["state"] for item in next_document(documents)["items"]] == ["held", "waiting"]
        cluster.podgc_force_deletes(pod)
        # only the changed rows, no header, as kubectl -w prints them; ft-a never changes, so never reappears
        changed = read_until(table, " held ")
        assert [line.split()[0] for line in changed] == ["ft-b"] * len(changed), changed
        assert changed[-1].split()[:2] == ["ft-b", "held"]
        # the documents name only the TrainJob that changed (its detail may change before it is held)
        while True:
            items = [(item["ref"], item["state"]) for item in next_document(documents)["items"]]
            assert [ref for ref, _ in items] == [f"{ns}/ft-b"], items
            if items[0][1] == "held":
                break

        assert interrupt(table) == 0
        assert interrupt(documents) == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-default", "sigint-ignored"])
def test_ctrl_c_ends_the_watch_with_exit_0_at_any_moment(
    cli_lab: CliLab, cluster: Cluster, sigint_ignored: bool
) -> None:
    """Right after the first line, after the first answer, and while a re-read waits on the server: exit 0 at
    once, nothing on standard error. The held read is never answered before the command has exited."""
    cluster.held_after_execution("ft-i", runtime=cluster.runtime(), admission=1)
    ns = cluster.namespace
    ref = f"{ns}/ft-i"
    args = ("status", ref, "-w", "--kubeconfig", str(cli_lab.kubeconfig))

    def ends_cleanly(process: subprocess.Popen[str]) -> None:
        assert interrupt(process) == 0
        assert process.stderr is not None
        assert process.stderr.read() == ""

    with dispatch(*args, sigint_ignored=sigint_ignored) as process:
        assert process.stdout is not None
        assert process.stdout.readline()
        ends_cleanly(process)

    with dispatch(*args, sigint_ignored=sigint_ignored) as process:
        read_until(process, "Cause:   held")
        ends_cleanly(process)

    def trainjob_read(request: web.Request) -> bool:
        return request.method == "GET" and request.path.endswith(f"/namespaces/{ns}/trainjobs/ft-i")

    with dispatch(*args, sigint_ignored=sigint_ignored) as process:
        read_until(process, "Cause:   held")
        with cli_lab.holding(trainjob_read) as arrived:
            cluster.node("n-i")  # an event the Node stream passes on: the command reads again
            assert arrived.wait(60), "the command never read the TrainJob again"
            ends_cleanly(process)


def next_document(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The next indented JSON document printed: its lines up to a closing brace at the start of a line."""
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.rstrip("\n") == "}":
            document = json.loads("".join(lines))
            assert isinstance(document, dict)
            return document
    raise AssertionError(f"the process ended inside a document: {lines}")


@pytest.mark.timeout(120)
def test_ctrl_c_ends_a_one_shot_command_with_130_and_no_message(cli_lab: CliLab, cluster: Cluster) -> None:
    """Without --watch, a Ctrl-C while the read waits on the server ends the command as a shell expects of an
    interrupted program (exit 130, nothing printed), not with click's "Aborted!" and exit 1, which this CLI uses
    for a refusal (docs/cli.rst, exit codes)."""
    cluster.held_after_execution("ft-o", runtime=cluster.runtime(), admission=1)
    ns = cluster.namespace

    def trainjob_read(request: web.Request) -> bool:
        return request.method == "GET" and request.path.endswith(f"/namespaces/{ns}/trainjobs/ft-o")

    with (
        cli_lab.holding(trainjob_read) as arrived,
        dispatch("status", f"{ns}/ft-o", "--kubeconfig", str(cli_lab.kubeconfig)) as process,
    ):
        assert arrived.wait(60), "the command never read the TrainJob"
        assert interrupt(process) == 130
        assert process.stdout is not None
        assert process.stderr is not None
        assert (process.stdout.read(), process.stderr.read()) == ("", "")
