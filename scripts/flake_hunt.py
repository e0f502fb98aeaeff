"""The flake hunt: run the test suite, or a chosen part of it, N times and say which tests failed how often.

    scripts/flake-hunt [--runs N] [--load N] [--random [--random-bucket B]] [--out DIR] [--json FILE] [--] [pytest args]

A test that is red once in ten runs costs a landing (CI runs the suite once), and a rerun would only hide it, so
this command looks for such tests on purpose: it runs pytest `--runs` times on the same arguments, each run with
a JUnit report of its own (`run-<k>.xml`) and its output kept (`run-<k>.log`) in `--out`, and at the end prints
every test that failed or errored in any run, how often and with the first line of each distinct failure, then
the durations profile (the slowest tests, and each tier's total: the folder under `tests/` a test lives in). No
run is retried and no failed test is run again within a run: each count is what one plain run would have met.

Two ways to shake out timing defects (a test must pass on an idle and on a loaded machine alike):

* `--load N` runs N busy processes (a Python loop each) beside pytest for the whole hunt, at the same priority,
  so the tests compete for the CPU as they do on a loaded CI machine; they are stopped, by their own pids, at
  the end;
* `--random` shuffles the order of the tests in each run (the `pytest-random-order` plugin of the `test` extra;
  `--random-bucket` is its `--random-order-bucket`: `module`, the default, shuffles within each module,
  `package` and `global` across them). Each run's seed is printed and recorded, so an order that failed can be
  run again with `--random-order-bucket=BUCKET --random-order-seed=SEED`.

It exits 0 when every run passed, 1 when any test failed or errored in any run, 2 when a run ended without a
report (pytest crashed or was killed: its log says why).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
BUCKETS: Final = ("module", "package", "global", "parent", "grandparent", "class")
BUSY_LOOP: Final = "while True:\n    pass\n"


@dataclass(frozen=True)
class Case:
    """One test's outcome in one run, read from the JUnit report."""

    test: str
    outcome: str  # passed, failed, error, skipped
    seconds: float
    message: str = ""

    @property
    def tier(self) -> str:
        """The folder under tests/ the test lives in (`tests/lab`), or `tests` for the top-level modules."""
        parts = self.test.split("::", 1)[0].split(".")
        if len(parts) >= 3 and parts[0] == "tests":
            return "/".join(parts[:2])
        return parts[0] if parts else "?"


@dataclass
class Run:
    """One pytest run of the hunt."""

    index: int
    exit_code: int
    seconds: float
    seed: str | None
    cases: list[Case] = field(default_factory=list)
    report: Path | None = None
    log: Path | None = None

    @property
    def failed(self) -> list[Case]:
        return [case for case in self.cases if case.outcome in ("failed", "error")]


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def read_report(path: Path) -> list[Case]:
    """Every test case of a pytest JUnit report: its id (`tests.lab.test_x::test_y`), outcome, seconds (setup,
    call and teardown: pytest's `junit_duration_report` default) and, if it failed, the first line of why."""
    root = ET.parse(path).getroot()
    cases: list[Case] = []
    for element in root.iter("testcase"):
        test = f"{element.get('classname', '')}::{element.get('name', '')}"
        seconds = float(element.get("time") or 0.0)
        outcome, message = "passed", ""
        for child in element:
            if child.tag in ("failure", "error"):
                # a failure of the call and an error in teardown can both be there: the failure is what counts
                if outcome != "failed":
                    outcome = "failed" if child.tag == "failure" else "error"
                    message = first_line(child.get("message")) or first_line(child.text)
            elif child.tag == "skipped" and outcome == "passed":
                outcome = "skipped"
        cases.append(Case(test, outcome, seconds, message))
    return cases


@contextlib.contextmanager
def cpu_load(processes: int) -> Iterator[list[int]]:
    """`processes` busy loops beside the tests, stopped (by their pids) when the block ends."""
    started = [
        subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(processes)
    ]
    try:
        yield [p.pid for p in started]
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def pytest_command(pytest_args: Sequence[str], report: Path, bucket: str | None, seed: str | None) -> list[str]:
    command = [sys.executable, "-m", "pytest", *pytest_args, f"--junitxml={report}"]
    if bucket is not None and seed is not None:
        command += [f"--random-order-bucket={bucket}", f"--random-order-seed={seed}"]
    return command


def run_once(index: int, options: argparse.Namespace, pytest_args: Sequence[str], rng: random.Random) -> Run:
    report, log = options.out / f"run-{index}.xml", options.out / f"run-{index}.log"
    seed = str(rng.randrange(1, 10**6)) if options.bucket is not None else None
    command = pytest_command(pytest_args, report, options.bucket, seed)
    started = time.monotonic()
    with log.open("w") as output:
        output.write("$ " + " ".join(command) + "\n")
        output.flush()
        exit_code = subprocess.call(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT)
    run = Run(index, exit_code, time.monotonic() - started, seed, log=log)
    if report.exists():
        run.report = report
        with contextlib.suppress(ET.ParseError):
            run.cases = read_report(report)
    return run


def describe_run(run: Run, runs: int) -> str:
    counts = Counter(case.outcome for case in run.cases)
    figures = ", ".join(f"{counts[o]} {o}" for o in ("passed", "failed", "error", "skipped") if counts[o])
    seed = f", seed {run.seed}" if run.seed else ""
    if run.report is None:
        figures = f"no report (pytest exit {run.exit_code}; see {run.log})"
    line = f"run {run.index}/{runs}: {figures or 'no test'} in {run.seconds:.0f} s{seed}"
    for case in run.failed:
        line += f"\n    {case.outcome.upper()} {case.test}: {case.message}"
    return line


def summarise(runs: list[Run], slowest: int) -> dict[str, Any]:
    """The hunt's findings: per test that failed, how often and how; the durations profile."""
    ran: Counter[str] = Counter()
    failures: dict[str, list[dict[str, Any]]] = defaultdict(list)
    seconds: dict[str, list[float]] = defaultdict(list)
    tiers: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        per_tier: dict[str, float] = defaultdict(float)
        for case in run.cases:
            if case.outcome == "skipped":
                continue
            ran[case.test] += 1
            seconds[case.test].append(case.seconds)
            per_tier[case.tier] += case.seconds
            if case.outcome in ("failed", "error"):
                failures[case.test].append(
                    {"run": run.index, "outcome": case.outcome, "message": case.message, "seed": run.seed}
                )
        if run.cases:
            for tier, total in per_tier.items():
                tiers[tier].append(total)
    flaky = [
        {"test": test, "failed": len(found), "runs": ran[test], "failures": found}
        for test, found in sorted(failures.items(), key=lambda item: (-len(item[1]), item[0]))
    ]
    mean = {test: sum(values) / len(values) for test, values in seconds.items()}
    slow = sorted(mean.items(), key=lambda item: -item[1])[:slowest]
    return {
        "runs": [
            {
                "run": r.index,
                "exitCode": r.exit_code,
                "seconds": round(r.seconds, 1),
                "seed": r.seed,
                "report": str(r.report) if r.report else None,
                "log": str(r.log),
                "tests": len(r.cases),
                "failed": [c.test for c in r.failed],
            }
            for r in runs
        ],
        "flaky": flaky,
        "slowest": [{"test": test, "meanSeconds": round(value, 2), "runs": len(seconds[test])} for test, value in slow],
        "tiers": {
            tier: {"meanSeconds": round(sum(v) / len(v), 1), "runs": len(v)} for tier, v in sorted(tiers.items())
        },
    }


def render(summary: dict[str, Any], runs: int) -> str:
    lines = [""]
    crashed = [r for r in summary["runs"] if r["report"] is None]
    if summary["flaky"]:
        lines.append(f"Failed in {runs} run(s):")
        for entry in summary["flaky"]:
            lines.append(f"  {entry['failed']} of {entry['runs']}  {entry['test']}")
            for message, count in Counter(f["message"] for f in entry["failures"]).most_common():
                lines.append(f"      {count} x {message or '(no message)'}")
    else:
        lines.append(f"No test failed in {runs} run(s).")
    for r in crashed:
        lines.append(f"Run {r['run']} ended without a report (pytest exit {r['exitCode']}): see {r['log']}")
    if summary["slowest"]:
        lines += ["", f"The {len(summary['slowest'])} slowest tests (mean seconds, setup and teardown included):"]
        lines += [f"  {s['meanSeconds']:8.2f}  {s['test']}" for s in summary["slowest"]]
    if summary["tiers"]:
        lines += ["", "Each tier's total (mean seconds per run):"]
        lines += [f"  {t['meanSeconds']:8.1f}  {tier}" for tier, t in summary["tiers"].items()]
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog="scripts/flake-hunt",
        description=(__doc__ or "").splitlines()[0],
        epilog="Every other argument goes to pytest (put them after `--` when one looks like an option here).",
    )
    parser.add_argument("--runs", "-n", type=int, default=5, help="how many times to run pytest (default 5)")
    parser.add_argument("--load", type=int, default=0, help="busy processes beside the tests (default none)")
    parser.add_argument("--random", action="store_true", help="shuffle the tests in each run (pytest-random-order)")
    parser.add_argument(
        "--random-bucket",
        default="module",
        choices=BUCKETS,
        help="what --random shuffles within (default module; package and global shuffle across modules)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the runs' shuffle seeds (default random)")
    parser.add_argument("--out", type=Path, default=None, help="where the reports and logs go (default .flake-hunt/)")
    parser.add_argument("--json", type=Path, default=None, help="also write the findings as JSON here")
    parser.add_argument("--slowest", type=int, default=30, help="how many of the slowest tests to list (default 30)")
    options, rest = parser.parse_known_args(argv)
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    if options.load < 0:
        parser.error("--load must be 0 or more")
    pytest_args = rest[1:] if rest[:1] == ["--"] else list(rest)
    options.bucket = options.random_bucket if options.random else None
    if options.out is None:
        options.out = ROOT / ".flake-hunt" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    options.out = options.out.resolve()
    return options, pytest_args


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str]) -> int:
    # a hunt stopped early (SIGTERM, SIGHUP, or Ctrl-C also when started in the background, where SIGINT is
    # ignored) still stops its busy processes, and `subprocess.call` kills the pytest run in hand
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    options, pytest_args = parse_args(argv)
    options.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(options.seed)
    what = " ".join(pytest_args) or "the whole suite"
    extras = ""
    if options.load:
        extras += f", {options.load} busy process(es) beside it"
    if options.bucket is not None:
        extras += f", in random order (bucket {options.bucket})"
    print(f"flake hunt: {options.runs} run(s) of {what}{extras}; reports and logs in {options.out}", flush=True)
    runs: list[Run] = []
    with cpu_load(options.load) as load:
        for index in range(1, options.runs + 1):
            run = run_once(index, options, pytest_args, rng)
            runs.append(run)
            print(describe_run(run, options.runs), flush=True)
    summary = summarise(runs, options.slowest)
    summary["command"] = {"pytest": pytest_args, "load": options.load, "random": options.bucket, "cwd": str(ROOT)}
    summary["load"] = load  # the busy processes' pids, stopped by now
    print(render(summary, options.runs), flush=True)
    if options.json is not None:
        options.json.write_text(json.dumps(summary, indent=2) + "\n")
    if any(r["report"] is None for r in summary["runs"]):
        return 2
    return 1 if summary["flaky"] else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
