"""How big each payload about remaining pods is, at 500 pods on 300 nodes and at 50,000 pods (docs/performance.md).

    python tests/benchmarks/payload_sizes.py [--cases 500:300,50000:5000] [--baseline-ref REF] [--json out.json]

Every payload is built by the code that builds it in production, from one drain check's report: the sensor's
`evaluate` (its wait reason: the log line, the rendered field `wait_reason` and the XCom `wait_reason`) and its
XCom on success (`outcome_xcom`), the trigger's event (`{"status": "progress", **DrainCheck.as_dict()}`, what
`PodsDrainedTrigger.decide` yields) and the kwargs of the trigger the sensor defers to (`make_trigger`, then
`serialize`), the release operator's wait reason (the `PodsRemainError` message) and the Kueue admission check
message (`kueue.verdicts.pods_remain`, cut as `kueue.status_patch` writes it). The report comes from the pure
core (`blocking.remaining_pods`, `assessment.remaining_report`) over pod and Node objects shaped as the API
serves them: no lab, no I/O, so the figures are exact and the same on every machine. Sizes are UTF-8 bytes of
compact JSON (`separators=(",", ":")`) for JSON payloads and of the text for texts.

The cluster is the one the tests bound the payloads on (`tests/dispatch/support.py`, `remaining_across`): every
pod is Terminating (the hold's graceful deletion), pod `i` on node `i % nodes` (every 997th never scheduled); the
first six nodes are lost (two, Ready=Unknown), Ready=False, fenced (Ready=Unknown and out-of-service), deleted,
and Ready=True with the out-of-service taint, the rest Ready=True.

`--baseline-ref REF` measures the same cases on the package as it was at git revision REF too (extracted with
`git archive` into a temporary directory and run in a child process with that directory first on `sys.path`),
and shows both, baseline first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make `benchmarks` importable

from benchmarks.harness import driver
from benchmarks.harness.report import describe_machine, format_ratio, markdown_table, ratio

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE, NAME = "ml", "ft-7"  # the TrainJob of tests/dispatch/support.py
NOW = datetime(2026, 8, 21, 10, 0, 18, tzinfo=UTC)

PAYLOADS: tuple[tuple[str, str], ...] = (
    ("wait_reason", "sensor wait reason (log line, rendered field, XCom `wait_reason`)"),
    ("drain_xcom", "sensor XCom on success (`ceased`)"),
    ("trigger_event", "trigger event (`progress`)"),
    ("trigger_kwargs", "trigger kwargs (serialized)"),
    ("release_reason", "release operator wait reason (`PodsRemainError`)"),
    ("kueue_message", "Kueue admission check message"),
)
#: the limit each payload is held to (`dispatch/payloads.py`), by the name of its constant there
LIMIT_NAMES = {
    "wait_reason": "WAIT_REASON_LIMIT",
    "drain_xcom": "DRAIN_XCOM_LIMIT",
    "trigger_event": "TRIGGER_EVENT_LIMIT",
    "trigger_kwargs": "TRIGGER_KWARGS_LIMIT",
    "release_reason": "WAIT_REASON_LIMIT",
    "kueue_message": "KUEUE_MESSAGE_LIMIT",
}


@dataclass(frozen=True)
class Config:
    cases: tuple[tuple[int, int], ...]
    baseline_ref: str | None


def parse_cases(text: str) -> tuple[tuple[int, int], ...]:
    cases = []
    for item in driver.names(text):
        pods, _, nodes = item.partition(":")
        cases.append((int(pods), int(nodes or 1)))
    if not cases or any(p < 1 or n < 1 for p, n in cases):
        raise ValueError(f"--cases needs PODS:NODES pairs of positive numbers, not {text!r}")
    return tuple(cases)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = driver.parser("payload_sizes.py", __doc__.splitlines()[0])
    parser.add_argument("--cases", default="500:300,50000:5000", help="PODS:NODES pairs (default 500:300,50000:5000)")
    parser.add_argument("--baseline-ref", help="also measure the package at this git revision (e.g. 2b8c5c1)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # the baseline's child: results go here
    return parser.parse_args(argv)


def configure(options: argparse.Namespace, progress: driver.Progress) -> Config:
    return Config(cases=parse_cases(options.cases), baseline_ref=options.baseline_ref)


# --- the cluster -----------------------------------------------------------------------------------------------


def remaining(pods: int, nodes: int) -> Any:
    """`pods` Terminating pods over `nodes` nodes, judged by the pure core: the cluster the tests bound the payloads
    on (`tests/dispatch/support.py`, `remaining_across`)."""
    from dispatch.support import remaining_across

    return remaining_across(pods, nodes)


# --- the payloads, built by the production code ----------------------------------------------------------------


class _RecordingTaskInstance:
    """What `show_wait_reason` needs of `context["ti"]`: it keeps the XComs pushed (no database here)."""

    def __init__(self) -> None:
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def _json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def _text_size(value: str) -> int:
    return len(value.encode())


def measure_case(pods: int, nodes: int) -> dict[str, Any]:
    from airflow_provider_dispatch.dispatch.assessment import Execution, remaining_report
    from airflow_provider_dispatch.dispatch.errors import PodsRemainError
    from airflow_provider_dispatch.dispatch.selection import Selection
    from airflow_provider_dispatch.hooks.checks import DrainCheck
    from airflow_provider_dispatch.kueue import verdicts
    from airflow_provider_dispatch.kueue.status_patch import clip
    from airflow_provider_dispatch.sensors.pods_drained import PodsDrainedSensor

    ref = f"{NAMESPACE}/{NAME}"
    pods_left = remaining(pods, nodes)
    report = remaining_report(ref, pods_left, "123456", now=NOW)
    check = DrainCheck(
        report=report,
        execution=Execution(NAME, "1", 3),
        held=True,
        selection=Selection(NAMESPACE, NAME, NAME, "1"),
    )
    event = {"status": "progress", **check.as_dict()}
    sensor = PodsDrainedSensor(task_id="drained", namespace=NAMESPACE, name=NAME, kubernetes_conn_id=None)
    ti = _RecordingTaskInstance()
    sensor.evaluate({"ti": ti}, event)  # type: ignore[typeddict-item]
    trigger = sensor.make_trigger(deadline=1_900_000_000.0, recheck_interval=300.0, kubernetes_conn_id=None)
    _, kwargs = trigger.serialize()
    started = time.process_time()
    message = clip(verdicts.pods_remain(PodsRemainError(ref, pods_left, now=NOW)).message)
    kueue_seconds = time.process_time() - started
    sizes = {
        "wait_reason": _text_size(sensor.wait_reason),
        "drain_xcom": _json_size(PodsDrainedSensor.outcome_xcom("ceased", event)),
        "trigger_event": _json_size(event),
        "trigger_kwargs": _json_size(kwargs),
        "release_reason": _text_size(PodsRemainError(ref, pods_left, now=NOW).message),
        "kueue_message": _text_size(message),
    }
    assert ti.xcoms["wait_reason"] == sensor.wait_reason
    first_line = sensor.wait_reason.splitlines()[0]
    return {
        "pods": pods,
        "nodes": nodes,
        "sizes": sizes,
        "waitReasonFirstLine": first_line if len(first_line) <= 600 else first_line[:600] + "...",
        "waitReasonFirstLineBytes": _text_size(first_line),
        "kueueMessageCpuSeconds": kueue_seconds,
    }


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The sensor logs its wait reason (in full: 17 MB at 50,000 pods before the bound) to the process's stdout,
    which is the results page here: send file descriptor 1 to /dev/null meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def measure(cases: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    home = tempfile.mkdtemp(prefix="payload-sizes-airflow-")
    os.environ.setdefault("AIRFLOW_HOME", home)  # importing Airflow must not write into the user's ~/airflow
    import airflow_provider_dispatch

    package = str(Path(airflow_provider_dispatch.__file__).parent)
    with _quiet():
        return [{**measure_case(pods, nodes), "package": package} for pods, nodes in cases]


def baseline(ref: str, cases: Sequence[tuple[int, int]]) -> list[dict[str, Any]]:
    """The same cases, measured on the package as it was at `ref`, in a child process."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "airflow_provider_dispatch"], check=True, capture_output=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="payload-sizes-baseline-") as where:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(where, filter="data")
        spec = ",".join(f"{pods}:{nodes}" for pods, nodes in cases)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([where, os.environ.get("PYTHONPATH", "")])}
        out = Path(where) / "results.json"
        subprocess.run([sys.executable, __file__, "--worker", str(out), "--cases", spec], check=True, env=env)
        results: list[dict[str, Any]] = json.loads(out.read_text())
    if any(not result["package"].startswith(where) for result in results):
        raise RuntimeError(f"the baseline child imported the package from elsewhere: {results[0]['package']}")
    return results


def run(config: Config) -> dict[str, Any]:
    from benchmarks.harness.report import machine

    results: dict[str, Any] = {
        "machine": machine(packages=("apache-airflow",)),
        "candidate": measure(config.cases),
        "limits": limits(),
    }
    if config.baseline_ref:
        results["baselineRef"] = config.baseline_ref
        results["baseline"] = baseline(config.baseline_ref, config.cases)
    return results


# --- the page --------------------------------------------------------------------------------------------------


def _bytes(count: int) -> str:
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:,.1f} {unit}"
    return f"{count:,} B"


def limits() -> dict[str, int]:
    """The limits of the package this process imports (none before the bound existed)."""
    try:
        from airflow_provider_dispatch.dispatch import payloads
    except ImportError:
        return {}
    return {key: int(getattr(payloads, name)) for key, name in LIMIT_NAMES.items()}


def render_markdown(results: Mapping[str, Any], command: str) -> str:
    candidate = results["candidate"]
    base = results.get("baseline")
    bounds: Mapping[str, int] = results.get("limits") or limits()
    headers = ["payload", "limit"] if bounds else ["payload"]
    for case in candidate:
        where = f"{case['pods']:,} pods on {case['nodes']:,} nodes"
        headers += [f"{where}: before", "after"] if base else [where]
    rows = []
    for key, label in PAYLOADS:
        row = [label, _bytes(bounds[key])] if bounds else [label]
        for index, case in enumerate(candidate):
            after = case["sizes"][key]
            if base:
                before = base[index]["sizes"][key]
                row += [_bytes(before), f"{_bytes(after)} ({format_ratio(ratio(before, after))})"]
            else:
                row.append(_bytes(after))
        rows.append(row)
    lines = [
        f"Machine: {describe_machine(results['machine'])}.",
        "",
        f"Command: `{command}`" + (f" (baseline: the package at `{results['baselineRef']}`)." if base else "."),
        "",
        markdown_table(headers, rows),
        "",
    ]
    for index, case in enumerate(candidate):
        lines.append(
            f"* {case['pods']:,} pods: the wait reason's first line is {case['waitReasonFirstLineBytes']:,} bytes"
            + (f" (before: {base[index]['waitReasonFirstLineBytes']:,})" if base else "")
            + f"; building the Kueue message took {case['kueueMessageCpuSeconds'] * 1e3:,.1f} ms of CPU"
            + (f" (before: {base[index]['kueueMessageCpuSeconds'] * 1e3:,.1f} ms)" if base else "")
            + "."
        )
    for case in candidate:
        first = case["waitReasonFirstLine"]
        lines += ["", f"First line of the wait reason at {case['pods']:,} pods:", "", f"    {first}"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    options = parse(argv)
    if options.worker:  # the baseline's child: measure, write the results as JSON, nothing else
        options.worker.write_text(json.dumps(measure(parse_cases(options.cases))))
        return 0
    return driver.main(
        "payload_sizes.py",
        [arg for arg in argv],
        parse=parse,
        configure=configure,
        run=run,
        render=render_markdown,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
