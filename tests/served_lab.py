"""`dispatch lab serve` run as a person runs it, for the tests that drive a served lab (tests/kubectl, tests/cli).

`serve` starts the installed console script in a folder of the test's own and reads the lines that say where the
lab is and which kubeconfigs it wrote; `stop` ends it with SIGINT, as Ctrl-C does. Its standard error goes to an
anonymous temporary file (a pipe nobody reads would fill and block the lab; a file in the folder would be one the
lab did not write), read back when the start fails.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

DISPATCH = Path(sys.executable).parent / "dispatch"


@dataclass
class Served:
    """A running `dispatch lab serve`: its URL and the kubeconfigs it printed, by identity."""

    process: subprocess.Popen[str]
    url: str
    stderr: IO[str]
    kubeconfigs: dict[str, Path] = field(default_factory=dict)


def serve(folder: Path, *options: str) -> Served:
    """Start `dispatch lab serve` in `folder` and read the lines that say where it is."""
    errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 - it lives as long as the lab: `stop` closes it
    process = subprocess.Popen(
        [str(DISPATCH), "lab", "serve", "--kubeconfig", "lab-kubeconfig.yaml", *options],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    found = re.match(r"lab API server on (\S+) ", first)
    if found is None:
        process.kill()
        process.wait(timeout=30)
        errors.seek(0)
        said = errors.read()
        errors.close()
        raise AssertionError(f"dispatch lab serve said {first!r}; stderr: {said}")
    served = Served(process, found.group(1), errors)
    expected = 5 if "--rbac" in options else 1
    for _ in range(expected):
        line = process.stdout.readline()
        named = re.fullmatch(r"kubeconfig(?: \((\S+)\))?: (.+)\n", line)
        assert named is not None, line
        served.kubeconfigs[named.group(1) or "admin"] = Path(named.group(2))
    return served


def stop(served: Served) -> int:
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGINT)
    try:
        return served.process.wait(timeout=30)
    finally:
        served.stderr.close()
