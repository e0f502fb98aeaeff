"""The flake hunt (`scripts/flake-hunt`, docs/architecture.md "Hunting flaky tests") on a small suite of its own.

The suite has a test that passes, one that fails in the first run only and one whose fixture errors in the second
run only (each run counts itself in a file), so two runs must report each of the last two as failed once in two,
with its message, and neither run may be retried. The hunt runs with a busy process beside it and in random
order: the runs' shuffle seeds are recorded, and the busy process is gone once the hunt has ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]

SUITE = """
import pathlib

import pytest

RUN = int((pathlib.Path(__file__).parent / "run").read_text())


@pytest.fixture
def resource():
    if RUN == 2:
        raise RuntimeError("the resource is gone in run 2")
    return 1


def test_steady():
    assert True


def test_red_in_the_first_run():
    assert RUN != 1, "red in run 1"


def test_with_a_fixture_that_errors_in_the_second_run(resource):
    assert resource == 1
"""

CONFTEST = """
import pathlib

counter = pathlib.Path(__file__).parent / "run"
counter.write_text(str(int(counter.read_text()) + 1) if counter.exists() else "1")
"""


def test_two_runs_count_each_failure_once_with_its_message(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")
    (suite / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (suite / "test_suite.py").write_text(textwrap.dedent(SUITE))
    findings = tmp_path / "findings.json"
    command = [sys.executable, str(ROOT / "scripts" / "flake_hunt.py"), "--runs", "2", "--load", "1", "--random"]
    command += ["--seed", "3", "--out", str(tmp_path / "out"), "--json", str(findings), "--"]
    command += [str(suite), "-c", str(suite / "pytest.ini"), "--rootdir", str(suite), "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 1, done.stdout + done.stderr  # some test failed: not 0, and every run reported
    summary = json.loads(findings.read_text())
    assert [(r["run"], r["tests"]) for r in summary["runs"]] == [(1, 3), (2, 3)], done.stdout
    assert all(r["seed"] for r in summary["runs"])  # each run's shuffle seed, to run that order again
    flaky = {entry["test"].split("::")[-1]: entry for entry in summary["flaky"]}
    assert sorted(flaky) == ["test_red_in_the_first_run", "test_with_a_fixture_that_errors_in_the_second_run"]
    red = flaky["test_red_in_the_first_run"]
    assert (red["failed"], red["runs"], red["failures"][0]["run"]) == (1, 2, 1)
    assert "red in run 1" in red["failures"][0]["message"]
    errored = flaky["test_with_a_fixture_that_errors_in_the_second_run"]
    assert (errored["failed"], errored["runs"], errored["failures"][0]["outcome"]) == (1, 2, "error")
    assert "the resource is gone in run 2" in errored["failures"][0]["message"]
    assert (suite / "run").read_text() == "2"  # two runs, nothing run again
    assert "1 of 2  " in done.stdout
    assert len(summary["load"]) == 1
    assert not any(_alive(pid) for pid in summary["load"])  # the busy process was stopped


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
