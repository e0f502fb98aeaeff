"""`dispatch admission-controller` as a process: it admits, logs JSON lines, and stops cleanly on SIGTERM.

The process runs on wall time (it has no lab clock) against the module's lab, as the lab's `controller`
identity through a kubeconfig, exactly as it would run outside a cluster.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from airflow_provider_dispatch_lab.runtime import Lab

from .support import Steps, admission_of, admitted, ready

COMMAND = [sys.executable, "-m", "airflow_provider_dispatch.cli.commands", "admission-controller"]


def test_the_command_admits_then_stops_on_sigterm(steps: Steps, kueue_lab: Lab, tmp_path: Path) -> None:
    steps.node("a"), steps.node("b")
    setup = steps.queues()
    [check] = setup.admission_checks
    kubeconfig = kueue_lab.kubeconfig_for("controller")
    log = (tmp_path / "controller.log").open("w+")
    process = subprocess.Popen(
        [*COMMAND, "--kubeconfig", str(kubeconfig), "--check-name", check, "--resync-seconds", "5"],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:
        name = steps.queued_trainjob(setup, steps.runtime())
        wl = steps.workload_name(name)
        steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))
        assert admission_of(steps.trainjob(name)) == "1"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log.seek(0)
    records = [json.loads(line) for line in log.read().splitlines() if line.strip()]
    messages = [r["message"] for r in records]
    assert any(m.startswith("admission check controller started") for m in messages), messages
    assert "received SIGTERM" in messages
    assert messages[-1] == "admission check controller stopped"
    ready_record = next(r for r in records if r.get("state") == "Ready")
    assert ready_record["workload"] == f"{steps.namespace}/{wl}"
    assert ready_record["admission"] == 1
    assert {"time", "level", "logger", "message"} <= set(ready_record)


def test_bad_arguments_and_an_unloadable_kubeconfig_are_refused(tmp_path: Path) -> None:
    usage = subprocess.run([*COMMAND, "--check-name", "a,b"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2
    assert "not a valid AdmissionCheck name" in usage.stderr
    broken = tmp_path / "kubeconfig.yaml"
    broken.write_text("clusters: [")
    refused = subprocess.run([*COMMAND, "--kubeconfig", str(broken)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert refused.stderr.startswith("Error: the kubeconfig")
