"""What the search simulates, recorded, so that a change meant only to make it faster can be shown to change nothing.

    python tests/reliability/sim/fingerprint.py --record /tmp/sim-fp.json          # before the change
    python tests/reliability/sim/fingerprint.py --check /tmp/sim-fp.json           # after: exit 1 on a difference
    python tests/reliability/sim/fingerprint.py --check /tmp/sim-fp.json --seeds 50   # the first 50 only
    python tests/reliability/sim/fingerprint.py --check /tmp/sim-fp.json --check-memo # and the memo re-derived
    python tests/reliability/sim/fingerprint.py --record /tmp/prefix.json --code prefix   # with violations to compare
    python tests/reliability/sim/fingerprint.py --check /tmp/m.json --mutant record-grows-with-listed-pods

For each seed (`--first`, `--seeds`, `--steps`: 1, 300, 600 unless told) the schedule `search.run` draws: its
labels, its story, its violation and its case; and the replay of those labels (`search.replay`) must give the same
again. `--code prefix` and `--mutant NAME` run the same in a subprocess on a copy of the package (search.py's own
mechanism), whose simulation is this checkout's: main's code finds no violation in the first seeds, the code before
issue 26's fix and the mutants do, so the violations and their stories are compared too. A dev tool, not a test: the
recording is of one version of the simulation's behaviour, which the next change to the world (a new draw) changes
on purpose; record again then (and run `--check-memo` once: the controllers' actions that `World.actions` keeps
between steps are derived again at every step and compared, which a change to what such a controller reads would
fail).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from reliability.sim.search import config_for, materialise_code, replay, run
else:
    from .search import config_for, materialise_code, replay, run


def fingerprint(first: int, seeds: int, steps: int) -> dict[str, Any]:
    """Every schedule of the seeds, and whether its replay followed it exactly."""
    schedules: dict[str, Any] = {}
    for seed in range(first, first + seeds):
        outcome = run(seed, steps)
        again = replay(seed, outcome.labels, config_for(seed))
        schedules[str(seed)] = {
            "labels": outcome.labels,
            "story": outcome.story,
            "violation": outcome.violation,
            "case": outcome.case,
            "replay_same": (again.labels, again.story, again.violation)
            == (
                outcome.labels,
                outcome.story,
                outcome.violation,
            ),
        }
    text = json.dumps(schedules, sort_keys=True)
    return {
        "first": first,
        "seeds": seeds,
        "steps": steps,
        "digest": hashlib.sha256(text.encode()).hexdigest(),
        "violations": sum(1 for s in schedules.values() if s["violation"]),
        "schedules": schedules,
    }


def compare(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The differences, one line each: the first differing label, story line or violation of each seed."""
    problems = []
    for seed, new in now["schedules"].items():
        old = recorded["schedules"].get(seed)
        if old is None:
            problems.append(f"seed {seed}: not recorded")
            continue
        for part in ("labels", "story"):
            if old[part] != new[part]:
                at = next(
                    (i for i, (a, b) in enumerate(zip(old[part], new[part], strict=False)) if a != b),
                    min(len(old[part]), len(new[part])),
                )
                was = old[part][at] if at < len(old[part]) else "(end)"
                got = new[part][at] if at < len(new[part]) else "(end)"
                problems.append(f"seed {seed}: {part}[{at}] was {was!r}, now {got!r}")
        for part in ("violation", "case", "replay_same"):
            if old[part] != new[part]:
                problems.append(f"seed {seed}: {part} was {old[part]!r}, now {new[part]!r}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="write the fingerprint here")
    mode.add_argument("--check", type=Path, help="compare with the fingerprint recorded here")
    mode.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)  # the subprocess of --code/--mutant
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=300)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--code", choices=("here", "prefix"), default="here")
    parser.add_argument("--mutant", help="a mutation gate mutant's name: the package mutated")
    parser.add_argument(
        "--check-memo",
        action="store_true",
        help="also derive every kept controller's actions again at each step and fail if they differ (store.Memo)",
    )
    options = parser.parse_args(argv)
    if options.check_memo:
        os.environ["SIM_CHECK_MEMO"] = "1"
    if options.emit:
        json.dump(fingerprint(options.first, options.seeds, options.steps), sys.stdout)
        return 0
    code = options.mutant or (options.code if options.code != "here" else "")
    if code:
        with tempfile.TemporaryDirectory(prefix=f"sim-fingerprint-{code}-") as tmp:
            root = materialise_code(code, Path(tmp))
            command = [
                sys.executable,
                str(root / "tests" / "reliability" / "sim" / "fingerprint.py"),
                "--emit",
                *("--first", str(options.first), "--seeds", str(options.seeds), "--steps", str(options.steps)),
            ]
            env = {**os.environ, "PYTHONPATH": str(root)}
            done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True, check=False)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return 2
            now = json.loads(done.stdout)
    else:
        now = fingerprint(options.first, options.seeds, options.steps)
    summary = f"seeds {options.first}..{options.first + options.seeds - 1}, {options.steps} steps, {code or 'here'}"
    if options.record is not None:
        options.record.write_text(json.dumps(now, sort_keys=True))
        print(f"recorded {summary}: {now['violations']} violations, digest {now['digest']}")
        return 0
    recorded = json.loads(options.check.read_text())
    if recorded["steps"] != options.steps:
        print("the recording is of another number of steps", file=sys.stderr)
        return 2
    problems = compare(recorded, now)
    for line in problems[:40]:
        print(line)
    whole = (recorded["first"], recorded["seeds"]) == (options.first, options.seeds)
    if problems or (whole and recorded["digest"] != now["digest"]):
        print(f"DIFFERENT: {summary} ({len(problems)} differences)")
        return 1
    print(f"identical: {summary}: {now['violations']} violations" + (f", digest {now['digest']}" if whole else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
