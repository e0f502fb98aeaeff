"""One measured case in a fresh Python process: JSON in on stdin, JSON out as the last line of stdout.

Why a fresh process per case: peak RSS only ever grows within a process, allocators keep freed arenas, and the
`kubernetes` client caches (model classes, a thread pool) and warms up; a case measured after another would
inherit all of that. A new interpreter per case makes each figure its own. The module given runs with
`python -m`, with `tests/` on `PYTHONPATH` so that it imports `benchmarks.*` as the scripts do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TESTS_DIR = Path(__file__).resolve().parents[2]


class WorkerError(RuntimeError):
    """A worker exited with an error or printed no JSON result."""


def python_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child Python: ours, with `tests/` first on PYTHONPATH."""
    env = dict(os.environ)
    paths = [str(TESTS_DIR), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.update(extra or {})
    return env


def run_worker(module: str, payload: Mapping[str, Any], *, timeout: float = 1800.0) -> dict[str, Any]:
    """Run `python -m module` with `payload` on stdin; its result (a JSON object) from the last stdout line."""
    completed = subprocess.run(
        [sys.executable, "-m", module],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=python_env(),
        check=False,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        tail = "\n".join(completed.stderr.strip().splitlines()[-15:])
        raise WorkerError(f"worker {module} exited {completed.returncode}:\n{tail}")
    result = json.loads(lines[-1])
    if not isinstance(result, dict):
        raise WorkerError(f"worker {module} printed {lines[-1][:200]!r}, not a JSON object")
    return result


def serve(handler: Callable[[dict[str, Any]], Mapping[str, Any]]) -> None:
    """A worker's main: read the payload, run the handler, print its result as one JSON line."""
    payload = json.load(sys.stdin)
    result = handler(payload)
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
