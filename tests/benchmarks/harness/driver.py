"""The command line every benchmark driver shares: run (or re-render) and write the results and their page.

Each driver (`drain_check.py`, `detection_latency.py`, `slot_seconds.py`, `triggerer_capacity.py`,
`controller_throughput.py`) has its own options and its own `Config`, `run` and `render_markdown`; what they
have in common is here, once:

* `--json` (the results, to render again later), `--markdown` (the page), `--from-json` (render an earlier
  run's results and run nothing);
* the command that reproduces the run, recorded in the results and shown on the page;
* the machine's load average at the start and at the end of the run, recorded beside the machine's description,
  because two benchmarks sharing the 2 cores measure each other (see docs/performance.md);
* a bad option value (the driver's `Config` raises `ValueError`) ends the run with the driver's name and the
  message, before anything starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

_Config = TypeVar("_Config")
Progress = Callable[[str], None]


def parser(script: str, description: str) -> argparse.ArgumentParser:
    """An argument parser for `tests/benchmarks/<script>` with the shared output options already added."""
    parser = argparse.ArgumentParser(prog=script, description=description)
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the results page (Markdown) here")
    parser.add_argument("--from-json", type=Path, help="render the page of an earlier run's --json; run nothing")
    return parser


def counts(text: str) -> tuple[int, ...]:
    """`1,100,1000` as numbers."""
    return tuple(int(item) for item in text.split(",") if item.strip())


def names(text: str) -> tuple[str, ...]:
    """`a,b` as names; an empty string is none."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def require_known(kind: str, given: Sequence[str], known: Iterable[str]) -> None:
    """A ValueError naming what of `given` is not among `known` (a driver's Config checks its cases with it)."""
    names = list(known)
    unknown = [name for name in given if name not in names]
    if unknown:
        raise ValueError(f"unknown {kind} {unknown}; known: {', '.join(names)}")


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (what `uptime` shows)."""
    return [round(value, 2) for value in os.getloadavg()]


def main(
    script: str,
    argv: Sequence[str],
    *,
    parse: Callable[[Sequence[str]], argparse.Namespace],
    configure: Callable[[argparse.Namespace, Progress], _Config],
    run: Callable[[_Config], dict[str, Any]],
    render: Callable[[dict[str, Any], str], str],
) -> int:
    """Run the benchmark the options describe (or re-render `--from-json`), print its page, write the outputs.

    `configure` builds the driver's Config from the options (a ValueError is a bad option); progress lines go to
    stderr, so that stdout is the page alone.
    """
    options = parse(argv)
    command = " ".join(("python", f"tests/benchmarks/{script}", *argv))
    if options.from_json:
        results = json.loads(options.from_json.read_text())
    else:
        try:
            config = configure(options, lambda line: print(line, file=sys.stderr, flush=True))
        except ValueError as error:
            raise SystemExit(f"{script}: {error}") from None
        load_at_start = load_average()
        results = run(config)
        results["command"] = command
        results.setdefault("machine", {})["loadAverage"] = {"start": load_at_start, "end": load_average()}
        if options.json:
            options.json.write_text(json.dumps(results, indent=1) + "\n")
    page = render(results, results.get("command", command))
    sys.stdout.write(page)
    if options.markdown:
        options.markdown.write_text(page)
    return 0
