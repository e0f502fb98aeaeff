"""`dispatch demo` (README's main command): the lost-node drill end to end, and how it reads what happened.

The end-to-end test runs the installed console script as a person does (minus the install `scripts/demo`
does first): a lab in the demo's process, real Airflow in a subprocess, and checks the account it prints and its
exit code. The other tests cover the reading of Airflow's log and the account on their own, table-driven.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from airflow_provider_dispatch.cli.commands import main
from airflow_provider_dispatch_lab.demo import (
    DemoOptions,
    LabVerdict,
    LogRecord,
    drill_report,
    find_dags_folder,
    log_records,
    render_summary,
    wait_reasons,
)
from airflow_provider_dispatch_lab.truth.verdict import TrainJobVerdict

ROOT = Path(__file__).resolve().parents[1]
DISPATCH = Path(sys.executable).with_name("dispatch")
SENSOR = "airflow.task.operators.sensors.PodsDrainedSensor"
T0, T1, T2 = "2026-12-02T16:47:28.478080Z", "2026-12-02T16:47:32.754746Z", "2026-12-02T16:47:35.664398Z"
WAITING = "Waiting until the pods of TrainJob d/t (execution 1) are gone or proven stopped."

LOG = f"""$ airflow dags test lost_node_drill
2026-12-02T16:47:02.490902Z [warning  ] Could not import graphviz.
You might need to install the graphviz package. [py.warnings] category=UserWarning lineno=57
{T0} [info     ] Waiting for the kubelet of n to stop 1 pod (Ready=True)
{WAITING}
Pod p on node n (Ready=True) is terminating. [{SENSOR}] loc=base.py:122
2026-12-02T16:47:28.492619Z [info     ] Pausing task as DEFERRED.      [task] dag_id=d loc=task_runner.py:1466
{T1} [info     ] Confirm n is powered off, then taint it out-of-service (Ready=Unknown)
{WAITING}
Node n is not Ready (Ready=Unknown): it stays until the node is tainted. [{SENSOR}] loc=base.py:122
{T1} [info     ] Confirm n is powered off, then taint it out-of-service (Ready=Unknown) [{SENSOR}] loc=base.py:124
{T2} [info     ] Ceased: every remaining pod of TrainJob d/t is proven stopped
x [{SENSOR}] loc=base.py:122
{T2} [info     ] DRILL REPORT {{"released": {{"admission": 2}}}} [dispatch_example_lost_node_drill] loc=x.py:200
"""


def test_log_records_keep_multi_line_messages_and_their_logger() -> None:
    records = log_records(LOG)
    assert [r.logger for r in records][:3] == ["py.warnings", SENSOR, "task"]
    assert records[0].message == "Could not import graphviz.\nYou might need to install the graphviz package."
    assert records[1].message.endswith("\nPod p on node n (Ready=True) is terminating.")
    assert records[2] == LogRecord("2026-12-02T16:47:28.492619Z", "info", "task", "Pausing task as DEFERRED.")
    assert records[1].time == T0


def test_wait_reasons_are_the_sensors_distinct_reasons_in_order() -> None:
    reasons = wait_reasons(log_records(LOG + LOG))  # twice: each reason is kept once
    # the full reasons (the first line repeated alone on a later poke is not one), then the end of the wait
    assert [reason.splitlines()[0] for reason in reasons] == [
        "Waiting for the kubelet of n to stop 1 pod (Ready=True)",
        "Confirm n is powered off, then taint it out-of-service (Ready=Unknown)",
        "Ceased: every remaining pod of TrainJob d/t is proven stopped",
    ]
    assert reasons[1].splitlines()[2].startswith("Node n is not Ready (Ready=Unknown)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LOG, {"released": {"admission": 2}}),
        ("2026-12-02T16:47:36.589012Z [info     ] DRILL REPORT {not json [x] loc=a.py:1\n", None),
        ("2026-12-02T16:47:36.589012Z [info     ] Done. [x] loc=a.py:1\n", None),
        ("", None),
    ],
)
def test_drill_report_is_read_from_its_log_line(text: str, expected: dict[str, object] | None) -> None:
    assert drill_report(log_records(text)) == expected


def verdict(overlaps: tuple[str, ...] = (), admissions: tuple[str, ...] = ("1", "2")) -> LabVerdict:
    trainjob = TrainJobVerdict("default", "drill", admissions, {1: ("p on n1",), 2: ("q on n2",)}, overlaps)
    return LabVerdict(trainjob, ["n1"], {"n1": "Ready=Unknown"})


def test_the_account_says_when_podgc_won_the_race_and_when_the_drill_did_not_finish(tmp_path: Path) -> None:
    options = DemoOptions(tmp_path)
    report = {
        "frozen": {"node": "n1", "pod": "p", "fence_after_seconds": 30.0},
        "wait": {"outcome": "drained", "remaining": []},
        "released": {"admission": 2, "job_id": "drill", "submission": "1"},
    }
    lines = render_summary(options, report, [], verdict(), tmp_path / "log", {"total": 3.0})
    assert "     the sensor succeeded: drained (PodGC had already removed the pod)" in lines
    assert "   overlaps between executions: 0" in lines
    unfinished = render_summary(options, None, [], verdict(overlaps=("x overlaps y",)), tmp_path / "log", {})
    assert "The drill did not finish: no report from the DAG. See the log." in unfinished
    assert unfinished[unfinished.index("   overlaps between executions: 1") + 1] == "     x overlaps y"
    assert verdict().one_at_a_time
    assert not verdict(admissions=("1", "2", "3")).one_at_a_time
    assert not verdict(overlaps=("x overlaps y",)).one_at_a_time


def test_the_demo_refuses_a_folder_without_the_drill(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", "--dags-folder", str(tmp_path)])
    assert result.exit_code == 2
    assert "has no lost_node_drill.py" in result.output
    assert find_dags_folder() == ROOT / "example_dags"


@pytest.mark.timeout(720)
def test_dispatch_demo_runs_the_drill_end_to_end(tmp_path: Path) -> None:
    assert DISPATCH.is_file(), f"the dispatch console script is not installed next to {sys.executable}"
    # the subprocess's timeout is a hang bound, not a speed claim: how long the drill takes is the machine's (its
    # waits are in lab time; a loaded machine stretches the wall time of Airflow's own start and task runs)
    done = subprocess.run(
        [str(DISPATCH), "demo", "--workdir", str(tmp_path)], capture_output=True, text=True, check=False, timeout=660
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    lines = out.splitlines()
    assert "dispatch demo: the lost-node drill on TrainJob default/drill (lab time x10)" in lines
    # the wait reason while the node was frozen: the pod, the node, the node's state
    frozen = re.search(r"^2\. (node-\d) frozen under pod (drill-node-0-\d-\w+) ", out, re.MULTILINE)
    assert frozen is not None, out
    node, pod = frozen.groups()
    # what to do first: the node, its state and the remedy; then the command, whose pods, which pod
    first = f"     Confirm {node} is powered off, then taint it out-of-service (Ready=Unknown)"
    assert first in lines, out
    after = lines[lines.index(first) + 1 :]
    assert after[0] == f"       kubectl taint node {node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert f"       remaining pods: {pod} on {node} (Ready=Unknown)" in lines
    # the cessation, the release and the new admission number
    tainted = "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
    assert f"     {node} now: Ready=Unknown, {tainted}; machine powered-off" in lines
    # PodGC may remove the pod in the instant between the taint and the sensor's check (at x10, 1-2 % of runs)
    outcome = next(line for line in lines if line.startswith("     the sensor succeeded: "))
    assert outcome in (
        f"     the sensor succeeded: ceased: {pod} on {node} (Ready=Unknown, out-of-service)",
        "     the sensor succeeded: drained (PodGC had already removed the pod)",
    )
    assert "5. release, after PodGC force-deleted the ceased pod: admission 2 (job id drill, submission 1)" in lines
    # the lab's verdict
    assert "   admissions of default/drill: 1, 2" in lines
    assert "   overlaps between executions: 0" in lines
    # Airflow's own log is in the file, not on the terminal
    assert f"full log: {tmp_path / 'demo.log'}" in lines
    assert "DRILL REPORT" in (tmp_path / "demo.log").read_text()
    assert "[DAG TEST]" not in out
