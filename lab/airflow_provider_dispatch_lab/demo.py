"""`dispatch demo`: the lost-node drill, end to end, with real Airflow against a lab this process runs.

What it does (README's main command; docs: quickstart, "Rehearse a lost node"):

1. start the lab with its whole simulated cluster (`lab.scenario.presets`: three nodes, the default runtime, the fencing
   agent; RBAC on) on a background thread of this process;
2. make a fresh Airflow home in a temporary folder: sqlite, the DAG folder `example_dags/` (`find_dags_folder`),
   the connection `kubernetes_default` as the lab's least-privilege `writer` and `lab_admin` as its admin (for
   the drill's chaos steps), then `airflow db migrate`;
3. run `airflow dags test lost_node_drill` as a subprocess (the DAG's tasks reach the lab over HTTP only);
4. print what happened, from the DAG's own report and its sensor's wait reasons (read back from the log), and
   the lab's verdict, which no Airflow task can influence: the overlap recorder (processes that ran at the same
   time for two executions: must be none) and the admission ledger (admissions 1 and 2).

Airflow's own log goes to a file in the temporary home (its path is printed); the terminal gets the story. The
exit code is 0 when the drill ran and the lab saw exactly one execution at a time, 1 otherwise.

This module imports neither Airflow nor the DAG: Airflow runs in the subprocess, as it would on a worker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import airflow_provider_dispatch
from airflow_provider_dispatch.dispatch.reasons import WAITING_FOR_PODS
from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE
from airflow_provider_dispatch_lab.truth.verdict import TrainJobVerdict, verdict_of

DAG_ID = "lost_node_drill"
WAIT_REASON_TASK_LOGGER = "PodsDrainedSensor"
REPORT_MARKER = "DRILL REPORT "
#: the connection the DAG's chaos steps use in the demo (the lab's admin: it may patch Nodes)
CHAOS_CONN_ID = "lab_admin"
_RECORD = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT[\d:.]+Z) \[(?P<level>\w+)\s*\] (?P<text>.*)$")
_TAIL = re.compile(r"\s\[(?P<logger>[^\]\s]+)\](?: [^=\s]+=\S*)*\s*$")

Echo = Callable[[str], None]


def find_dags_folder() -> Path | None:
    """The example DAGs this installation has: the wheel's copy inside the package, else the checkout's.

    The wheel maps the repository's top-level `example_dags/` to `airflow_provider_dispatch/example_dags/`
    (pyproject's hatch `force-include`); an editable install has no such copy and runs from the checkout, whose
    `example_dags/` sits next to the package.
    """
    package = Path(airflow_provider_dispatch.__file__).resolve().parent
    for candidate in (package / "example_dags", package.parent / "example_dags"):
        if (candidate / f"{DAG_ID}.py").is_file():
            return candidate
    return None


@dataclass(frozen=True)
class DemoOptions:
    dags_folder: Path
    speed: float = 10.0
    fence_after_seconds: float = 30.0
    namespace: str = "default"
    name: str = "drill"
    workdir: Path | None = None


@dataclass(frozen=True)
class LogRecord:
    time: str
    level: str
    logger: str
    message: str


def log_records(text: str) -> list[LogRecord]:
    """The records of an `airflow dags test` log (structlog's console format; a message may span lines)."""
    records: list[LogRecord] = []
    current: list[str] | None = None
    head: re.Match[str] | None = None

    def flush() -> None:
        if head is None or current is None:
            return
        body = "\n".join(current)
        tail = _TAIL.search(body)
        logger = tail.group("logger") if tail else ""
        message = body[: tail.start()] if tail else body
        records.append(LogRecord(head.group("time"), head.group("level"), logger, message.rstrip()))

    for line in text.splitlines():
        match = _RECORD.match(line)
        if match:
            flush()
            head, current = match, [match.group("text")]
        elif current is not None:
            current.append(line)
    flush()
    return records


def wait_reasons(records: Sequence[LogRecord]) -> list[str]:
    """Each distinct wait reason the drill's PodsDrainedSensor logged (in full), in order."""
    seen: list[str] = []
    for record in records:
        if not record.logger.endswith(WAIT_REASON_TASK_LOGGER):
            continue
        full = WAITING_FOR_PODS in record.message or record.message.startswith(("Ceased:", "Drained:"))
        if full and record.message not in seen:
            seen.append(record.message)
    return seen


def _wrapped(text: str, indent: str) -> list[str]:
    """The first line as it is, the explanation under it wrapped to the terminal's usual width."""
    first, _, rest = text.partition("\n")
    lines = [indent + first]
    for paragraph in rest.splitlines():
        lines += textwrap.wrap(paragraph, width=110, initial_indent=indent + "  ", subsequent_indent=indent + "  ")
    return lines


def drill_report(records: Sequence[LogRecord]) -> dict[str, Any] | None:
    """The DAG's `report` task summary (its `DRILL REPORT {...}` log line), if it ran."""
    for record in reversed(records):
        if record.message.startswith(REPORT_MARKER):
            try:
                found = json.loads(record.message[len(REPORT_MARKER) :])
            except json.JSONDecodeError:
                return None
            return found if isinstance(found, dict) else None
    return None


@dataclass
class LabVerdict:
    """What the lab itself saw, whatever Airflow says: its verdict on the TrainJob (`lab.truth.verdict`), and
    the fenced node and its state."""

    trainjob: TrainJobVerdict
    fenced: list[str]
    node_state: dict[str, str] = field(default_factory=dict)

    @property
    def one_at_a_time(self) -> bool:
        return self.trainjob.kept and self.trainjob.admissions == ("1", "2")


def airflow_environment(home: Path, dags_folder: Path, writer: Path, admin: Path) -> dict[str, str]:
    """A fresh Airflow 3 home on sqlite with the DAG folder and the two lab connections."""

    def connection(kubeconfig: Path) -> str:
        return json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}})

    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("AIRFLOW_", "AIRFLOW__"))}
    return {
        **inherited,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW_CONN_KUBERNETES_DEFAULT": connection(writer),
        "AIRFLOW_CONN_LAB_ADMIN": connection(admin),
    }


def _airflow(args: Sequence[str], env: Mapping[str, str], log: Path) -> int:
    """`python -m airflow ...` with its output appended to `log`; its exit code."""
    with log.open("a") as out:
        out.write(f"\n$ airflow {' '.join(args)}\n")
        out.flush()
        done = subprocess.run(
            [sys.executable, "-m", "airflow", *args], env=dict(env), stdout=out, stderr=subprocess.STDOUT, check=False
        )
    return done.returncode


def _verdict(lab: Any, namespace: str, name: str) -> LabVerdict:
    from airflow_provider_dispatch_lab.scenario.scenario import Scenario
    from airflow_provider_dispatch_lab.simulated.nodes.fencing import FencingAgent

    with Scenario(lab) as scenario:
        trainjob = lab.call(lambda: verdict_of(scenario.recorder, lab.inner.ledger, namespace, name))
    agents = [c for c in lab.inner.controllers if isinstance(c, FencingAgent)]
    fenced = lab.call(lambda: [node for agent in agents for node in agent.fenced])
    return LabVerdict(trainjob, fenced)


def _node_state(admin: Path, node: str) -> str:
    """`Ready=<status>` plus the out-of-service taint and the machine's lab state, read as the admin."""
    import kubernetes

    from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import STATE_ANNOTATION

    client = kubernetes.config.new_client_from_config(config_file=str(admin))
    try:
        found = kubernetes.client.CoreV1Api(client).read_node(node)
    finally:
        client.close()
    ready = next((c.status for c in found.status.conditions or () if c.type == "Ready"), "absent")
    taints = [t for t in found.spec.taints or () if t.key == TAINT_OUT_OF_SERVICE]
    machine = (found.metadata.annotations or {}).get(STATE_ANNOTATION, "ready")
    tainted = f", {TAINT_OUT_OF_SERVICE}={taints[0].value}:{taints[0].effect}" if taints else ""
    return f"Ready={ready}{tainted}; machine {machine}"


def _places(entries: Any) -> str:
    if not isinstance(entries, list) or not entries:
        return "(none)"
    return ", ".join(f"{entry.get('pod')} on {entry.get('node')}" for entry in entries if isinstance(entry, dict))


def _identity(execution: Any) -> str:
    if not isinstance(execution, dict):
        return "(unknown)"
    return (
        f"admission {execution.get('admission')} (job id {execution.get('job_id')}, "
        f"submission {execution.get('submission')})"
    )


def render_summary(
    options: DemoOptions,
    report: Mapping[str, Any] | None,
    reasons: Sequence[str],
    verdict: LabVerdict,
    log: Path,
    seconds: Mapping[str, float],
) -> list[str]:
    """The account the demo prints: the drill as the DAG saw it, then the lab's verdict."""
    ref = f"{options.namespace}/{options.name}"
    lines = [f"dispatch demo: the lost-node drill on TrainJob {ref} (lab time x{options.speed:g})", ""]
    if report is None:
        lines.append("The drill did not finish: no report from the DAG. See the log.")
    else:
        frozen = report.get("frozen") or {}
        wait = report.get("wait") or {}
        node = frozen.get("node", "?")
        lines += [
            f"1. open: {_identity(report.get('first'))} runs: {_places(report.get('first_running'))}",
            f"2. {node} frozen under pod {frozen.get('pod')} (its kubelet silent, its process still running); "
            f"TrainJob {ref} held",
            f"3. while {node} was frozen, PodsDrainedSensor waited; its wait reason (log, rendered field, XCom):",
        ]
        for reason in reasons:
            if WAITING_FOR_PODS in reason:  # still waiting (not `Ceased:` or `Drained:`)
                lines += _wrapped(reason, "     ")
        lines += [
            f"4. {node} not Ready for {float(frozen.get('fence_after_seconds', 'nan')):g} lab seconds: the lab's "
            "fencing agent powered its machine off, then tainted the node:",
            f"     {node} now: {verdict.node_state.get(node, '?')}",
        ]
        if wait.get("outcome") == "ceased":
            remaining = ", ".join(
                f"{entry.get('pod')} on {entry.get('node')} ({entry.get('node_state')})"
                for entry in wait.get("remaining") or ()
            )
            lines.append(f"     the sensor succeeded: ceased: {remaining}")
        else:
            lines.append(f"     the sensor succeeded: {wait.get('outcome')} (PodGC had already removed the pod)")
        lines += [
            f"5. release, after PodGC force-deleted the ceased pod: {_identity(report.get('released'))}",
            f"6. {_identity(report.get('released'))} runs: {_places(report.get('running'))}",
        ]
    lines += ["", "The lab's verdict (its overlap recorder and admission ledger, which no task can influence):"]
    lines += verdict.trainjob.lines()
    timing = ", ".join(f"{what} {value:.0f}s" for what, value in seconds.items())
    lines += ["", f"wall time: {timing}", f"full log: {log}"]
    return lines


def run_demo(options: DemoOptions, echo: Echo) -> int:
    """The drill end to end (module docstring); 0 when it ran and the lab saw one execution at a time."""
    from airflow_provider_dispatch_lab.runtime import Lab
    from airflow_provider_dispatch_lab.scenario.presets import ClusterShape, cluster_controllers, provision

    home = options.workdir or Path(tempfile.mkdtemp(prefix="dispatch-demo-"))
    home.mkdir(parents=True, exist_ok=True)
    log = home / "demo.log"
    seconds: dict[str, float] = {}
    started = time.monotonic()
    echo(f"Starting the lab (3 nodes, lab time x{options.speed:g}) and a fresh Airflow home in {home} ...")
    with Lab(speed=options.speed, rbac=True, controllers=cluster_controllers(kueue=False)) as lab:
        scenario = lab.run(lambda: provision(lab.inner, ClusterShape()))
        lab.run(scenario.close)
        writer = lab.inner.kubeconfig_for("writer", home / "kubeconfig-writer.yaml")
        admin = lab.inner.kubeconfig(home / "kubeconfig-admin.yaml")
        env = airflow_environment(home, options.dags_folder, writer, admin)
        seconds["lab"] = time.monotonic() - started
        echo("Migrating Airflow's database (airflow db migrate) ...")
        if _airflow(["db", "migrate"], env, log) != 0:
            echo(f"airflow db migrate failed; see {log}")
            return 1
        seconds["airflow db migrate"] = time.monotonic() - started - seconds["lab"]
        echo(f"Running the drill (airflow dags test {DAG_ID}) ...")
        conf = {
            "namespace": options.namespace,
            "name": options.name,
            "chaos_conn_id": CHAOS_CONN_ID,
            "fence_after_seconds": options.fence_after_seconds,
        }
        drill_started = time.monotonic()
        code = _airflow(["dags", "test", DAG_ID, "--conf", json.dumps(conf)], env, log)
        seconds["airflow dags test"] = time.monotonic() - drill_started
        verdict = _verdict(lab, options.namespace, options.name)
        records = log_records(log.read_text(errors="replace"))
        report = drill_report(records)
        if report is not None:
            node = str((report.get("frozen") or {}).get("node", ""))
            if node:
                verdict.node_state[node] = _node_state(admin, node)
    seconds["total"] = time.monotonic() - started
    summary = render_summary(options, report, wait_reasons(records), verdict, log, seconds)
    echo("")
    for line in summary:
        echo(line)
    first = (report or {}).get("first") or {}
    released = (report or {}).get("released") or {}
    ok = (
        code == 0
        and report is not None
        and verdict.one_at_a_time
        and released.get("admission") == int(first.get("admission", 0)) + 1
    )
    if not ok:
        echo("")
        echo(f"The drill FAILED (airflow dags test exit code {code}); see {log}")
    return 0 if ok else 1


__all__ = [
    "DAG_ID",
    "DemoOptions",
    "LabVerdict",
    "LogRecord",
    "drill_report",
    "find_dags_folder",
    "log_records",
    "render_summary",
    "run_demo",
    "wait_reasons",
]
