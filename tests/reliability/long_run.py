"""The long run of the reliability model (issue 7 item 1): as many random schedules as you like.

    python tests/reliability/long_run.py --schedules 500 --seed 1 --jobs 4
    python tests/reliability/long_run.py --seed 1234 --schedules 1 --verbose      # replay one schedule
    python tests/reliability/long_run.py --seed 1234 --schedules 1 --shrink       # and cut it down
    python tests/reliability/long_run.py --replay steps.json                      # a saved (shrunk) schedule
    python tests/reliability/long_run.py --hostile --schedules 50                 # negative control

Schedule `i` has seed `S + i`, so a failing schedule replays alone with `--seed S+i --schedules 1`. Each
schedule runs in a fresh lab; `--jobs` runs that many at once, each in a process of its own. The exit status
is 1 when any schedule broke an invariant (0 with `--hostile` only if some schedule did: the negative control
must be able to fail). The figure line is the same as the CI test's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `reliability` importable as the tests import it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability.runner import RunReport, ScheduleReport, run_schedule
from reliability.schedule import Profile, Step, generate


def _one(seed: int, profile: Profile) -> ScheduleReport:
    return run_schedule(seed, profile)


def _line(report: ScheduleReport) -> str:
    state = "VIOLATION" if report.failed else "ok"
    return (
        f"seed {report.seed}: {state}, {report.executed} steps, {report.admissions} admissions, "
        f"{report.overlaps} overlaps, {report.wall_seconds:.1f} s"
    )


def shrink(seed: int, profile: Profile, steps: Sequence[Step], say: object = print) -> list[Step]:
    """Remove chunks of steps while the schedule still breaks an invariant (a simple delta debugging)."""
    current = list(steps)
    chunk = max(len(current) // 2, 1)
    while chunk >= 1:
        index, changed = 0, False
        while index < len(current):
            candidate = current[:index] + current[index + chunk :]
            if candidate and run_schedule(seed, profile, candidate).failed:
                current, changed = candidate, True
                print(f"  shrink: {len(current)} steps", flush=True)
            else:
                index += chunk
        if not changed:
            chunk //= 2
    return current


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60, help="steps per schedule (CI: 40)")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--objects", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1, help="schedules run at once, one process each")
    parser.add_argument("--hostile", action="store_true", help="add the rules that break the precondition")
    parser.add_argument("--shrink", action="store_true", help="cut a failing schedule down to what fails")
    parser.add_argument("--replay", type=Path, help="run the schedule saved in this JSON file (by --save)")
    parser.add_argument("--save", type=Path, help="write the (shrunk) steps of the first failure here")
    parser.add_argument("--verbose", action="store_true", help="print each schedule's log")
    args = parser.parse_args(argv)
    profile = Profile(
        name="hostile" if args.hostile else "long",
        steps=args.steps,
        nodes=args.nodes,
        objects=args.objects,
        hostile=args.hostile,
    )
    if args.replay is not None:
        saved = json.loads(args.replay.read_text())
        profile = Profile(name="replay", steps=0, nodes=saved["nodes"], objects=saved["objects"], hostile=args.hostile)
        steps = [Step.from_json(item) for item in saved["steps"]]
        result = run_schedule(int(saved["seed"]), profile, steps)
        print(result.describe() if (result.failed or args.verbose) else _line(result))
        return 1 if result.failed else 0

    run = RunReport(args.seed, profile)
    started = time.monotonic()
    seeds = [args.seed + index for index in range(args.schedules)]
    if args.jobs > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            for result in pool.map(_one, seeds, [profile] * len(seeds)):
                run.schedules.append(result)
                print(_line(result), flush=True)
                if result.failed or args.verbose:
                    print(result.describe(), flush=True)
    else:
        for seed in seeds:
            result = _one(seed, profile)
            run.schedules.append(result)
            print(_line(result), flush=True)
            if result.failed or args.verbose:
                print(result.describe(), flush=True)
    print(run.figure())
    print(f"wall time {time.monotonic() - started:.0f} s")
    failures = run.failures
    if failures and (args.shrink or args.save):
        first = failures[0]
        steps = generate(first.seed, profile)[: first.executed]
        if args.shrink:
            steps = shrink(first.seed, profile, steps)
        print(f"seed {first.seed}, {len(steps)} steps:")
        for step in steps:
            print(f"  {step}")
        if args.save:
            saved = {
                "seed": first.seed,  # the world's parameters (pods per TrainJob, stop times) come from it
                "nodes": profile.nodes,
                "objects": profile.objects,
                "steps": [step.to_json() for step in steps],
            }
            args.save.write_text(json.dumps(saved, indent=1))
    if args.hostile:
        return 0 if failures else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
