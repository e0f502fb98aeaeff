"""The mutation gate's third judge (`mutation_gate.py --judge tests`): the directed tests CI runs.

The model and the search find a violation by themselves, or do not within their budget; some checks guard windows
so narrow (a clock skew's last seconds, a write in flight across a settle that ended early) that neither reaches
them in a CI budget, and each such check has directed tests that stage its window exactly (issue 26's, in
`tests/dispatch/test_lost_pods_rule.py` and, on whole clusters, `test_lost_pods.py` and
`tests/real/test_real_lost_pods.py`). This judge runs chosen test paths (`--tests`, default `tests/dispatch`: the
rule's own tests, seconds) against each mutated copy: a mutant is killed when they fail and the unmutated copy's
pass. It is the classic mutation test, and it says which checks rest on directed tests alone: the table puts it
beside the model's and the search's verdicts (docs/reliability.md)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

#: pytest's exit codes: 0 all passed, 1 some failed; anything else (interrupted, internal error, usage, no tests)
#: is no verdict
PASSED, FAILED = 0, 1


class MutantLike(Protocol):
    name: str
    reason: str


def run_tests(root: Path, paths: Sequence[str], ini: Path) -> tuple[int, str, float]:
    """pytest on `paths` of the copy at `root`, with the project's pytest settings (`ini`, the checkout's
    pyproject.toml: asyncio mode, markers, timeouts), in a subprocess whose first import path is the copy."""
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-c", str(ini), "--rootdir", str(root), *paths]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    failed = [line for line in lines if line.startswith("FAILED ")]
    summary = failed[0] if failed else (lines[-1] if lines else done.stderr[-500:])
    return done.returncode, summary, time.monotonic() - started


def tests_gate(
    chosen: Sequence[MutantLike],
    options: argparse.Namespace,
    materialise: Callable[[MutantLike | None, Path, Path], Path],
    ini: Path,
) -> int:
    """The baseline must pass; each mutant is killed when the same tests fail on it."""
    started = time.monotonic()
    paths = options.tests or ["tests/dispatch"]
    with tempfile.TemporaryDirectory(prefix="tests-baseline-") as tmp:
        code, summary, _ = run_tests(materialise(None, Path(tmp), options.source), paths, ini)
    if code != PASSED:
        print(f"the unmutated copy does not pass {paths} (pytest exit {code}): {summary}", file=sys.stderr)
        return 2
    lines = [
        f"Mutation gate, judged by the directed tests `{' '.join(paths)}` (the unmutated copy passes them)",
        "",
        "| mutant | check removed | verdict | seconds | first failing test |",
        "|---|---|---|---|---|",
    ]
    verdicts: list[dict[str, Any]] = []
    for mutant in chosen:
        with tempfile.TemporaryDirectory(prefix=f"tests-{mutant.name}-") as tmp:
            code, summary, seconds = run_tests(materialise(mutant, Path(tmp), options.source), paths, ini)
        verdict = "killed" if code == FAILED else "SURVIVED" if code == PASSED else f"no verdict (pytest exit {code})"
        print(f"{mutant.name}: {verdict} in {seconds:.0f} s", flush=True)
        shown = summary.removeprefix("FAILED ").replace("|", "/")[:160] if code == FAILED else "-"
        lines.append(f"| `{mutant.name}` | {mutant.reason} | {verdict} | {seconds:.0f} | {shown} |")
        verdicts.append({"name": mutant.name, "killed": code == FAILED, "exit": code, "summary": summary})
    killed = sum(v["killed"] for v in verdicts)
    lines += ["", f"{killed} of {len(verdicts)} mutants killed by the tests ({time.monotonic() - started:.0f} s)."]
    text = "\n".join(lines)
    print(text)
    (options.out / "mutation-table-tests.md").write_text(text + "\n")
    (options.out / "mutation-gate-tests.json").write_text(json.dumps({"tests": paths, "mutants": verdicts}, indent=1))
    return 0 if killed == len(verdicts) else 1
