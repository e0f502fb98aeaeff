"""The long run of the reliability model (issue 7 item 1): as many random schedules as you like.

    python tests/reliability/long_run.py --schedules 500 --seed 1 --jobs 4
    python tests/reliability/long_run.py --seed 1234 --schedules 1 --verbose      # replay one schedule
    python tests/reliability/long_run.py --seed 1234 --schedules 1 --shrink       # and cut it down
    python tests/reliability/long_run.py --replay steps.json                      # a saved (shrunk) schedule
    python tests/reliability/long_run.py --hostile --schedules 50                 # negative control
    python tests/reliability/long_run.py --kueue --schedules 50                   # Kueue mode beside plain
    python tests/reliability/long_run.py --runtime upstream --schedules 50        # hazards H1, H2 (control)

Schedule `i` has seed `S + i`, so a failing schedule replays alone with `--seed S+i --schedules 1`. Each
schedule runs in a fresh lab; `--jobs` runs that many at once, each in a process of its own. The exit status
is 1 when any schedule broke an invariant (0 with `--hostile` only if some schedule did: the negative control
must be able to fail). The figure line is the same as the CI test's.

A saved schedule (`--save`) keeps its seed, the profile's options (nodes, objects, hostile, kueue, runtime) and
the world parameters given with `--param`, so `--replay` runs it as it was found; the regression schedules in
`schedules/` are such files (test_schedules.py replays every one).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `reliability` importable as the tests import it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliability.runner import RunReport, ScheduleReport, run_schedule
from reliability.schedule import RULES, Profile, Step
from reliability.stories import schedule_of, story_parameters


def _one(seed: int, profile: Profile, params: dict[str, Any] | None = None) -> ScheduleReport:
    return run_schedule(seed, profile, params=params)


def replay_profile(saved: Mapping[str, Any], name: str = "replay") -> Profile:
    """The profile a saved schedule was found with (files from before the options existed: plain, safe)."""
    return Profile(
        name=name,
        steps=0,
        nodes=int(saved["nodes"]),
        objects=int(saved["objects"]),
        hostile=bool(saved.get("hostile", False)),
        kueue=bool(saved.get("kueue", False)),
        runtime=str(saved.get("runtime", "safe")),
        accept_risks=bool(saved.get("accept_risks", False)),
    )


def replay(path: Path) -> ScheduleReport:
    """Run the schedule saved in `path` (its steps, seed, profile options and world parameters)."""
    saved = json.loads(path.read_text())
    steps = [Step.from_json(item) for item in saved["steps"]]
    params = {key: tuple(value) if isinstance(value, list) else value for key, value in saved.get("params", {}).items()}
    return run_schedule(int(saved["seed"]), replay_profile(saved), steps, params=params or None)


def _parse_param(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    return key, json.loads(value)


def _line(report: ScheduleReport) -> str:
    state = "VIOLATION" if report.failed else "ok"
    return (
        f"seed {report.seed}: {state}, {report.executed} steps, {report.admissions} admissions, "
        f"{report.overlaps} overlaps, {report.wall_seconds:.1f} s"
    )


def anchored(anchors: Sequence[str]) -> Callable[[Sequence[Step]], bool]:
    """A test that a candidate keeps every anchor step: `rule` or `rule.arg=value` (e.g. `delay.target=trainer:
    apply`), so that shrinking keeps the class of failure it started from, not just any failure."""

    def keeps(steps: Sequence[Step]) -> bool:
        for anchor in anchors:
            rule, _, condition = anchor.partition(".")
            key, _, value = condition.partition("=")
            if not any(s.rule == rule and (not key or str(s.get(key)) == value) for s in steps):
                return False
        return True

    return keeps


def shrink(
    seed: int,
    profile: Profile,
    steps: Sequence[Step],
    params: dict[str, Any] | None = None,
    keep: Callable[[Sequence[Step]], bool] = lambda steps: True,
) -> list[Step]:
    """Remove chunks of steps while the schedule still breaks an invariant (a simple delta debugging); `keep`
    must hold of every candidate (`anchored`)."""
    current = list(steps)
    chunk = max(len(current) // 2, 1)
    while chunk >= 1:
        index, changed = 0, False
        while index < len(current):
            candidate = current[:index] + current[index + chunk :]
            if candidate and keep(candidate) and run_schedule(seed, profile, candidate, params=params).failed:
                current, changed = candidate, True
                print(f"  shrink: {len(current)} steps", flush=True)
            else:
                index += chunk
        if not changed:
            chunk //= 2
    return current


def save(path: Path, seed: int, profile: Profile, steps: Sequence[Step], params: dict[str, Any] | None) -> None:
    """Write a replayable schedule, with what it breaks now (one more run)."""
    found = run_schedule(seed, profile, steps, params=params)
    saved = {
        "seed": seed,  # the world's parameters (pods per TrainJob, stop times) come from it
        **profile.options(),
        "params": dict(params or {}),
        "found": [violation[:600] for violation in found.violations[:3]],
        "steps": [step.to_json() for step in steps],
    }
    path.write_text(json.dumps(saved, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60, help="steps per schedule (CI: 40)")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--objects", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1, help="schedules run at once, one process each")
    parser.add_argument("--hostile", action="store_true", help="add the rules that break the precondition")
    parser.add_argument("--kueue", action="store_true", help="Kueue mode: queued TrainJobs beside plain ones")
    parser.add_argument(
        "--runtime", choices=("safe", "upstream"), default="safe", help="the runtime's Job and restart settings"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        type=_parse_param,
        metavar="KEY=JSON",
        help="a world parameter for every schedule, e.g. failure_policy=true or num_nodes=[1,2]",
    )
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        type=_parse_param,
        metavar="RULE=W",
        help="draw RULE with weight W (0: never) instead of schedule.RULES' weight, e.g. third_party_suspend=6",
    )
    parser.add_argument("--shrink", action="store_true", help="cut a failing schedule down to what fails")
    parser.add_argument("--replay", type=Path, help="run the schedule saved in this JSON file (by --save)")
    parser.add_argument("--save", type=Path, help="write the (shrunk) steps of the first failure here")
    parser.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="RULE[.ARG=VALUE]",
        help="shrinking keeps a step like this (the class of failure), e.g. delay.target=job:create-pods",
    )
    parser.add_argument("--verbose", action="store_true", help="print each schedule's log")
    args = parser.parse_args(argv)
    profile = Profile(
        name="hostile" if args.hostile else "long",
        steps=args.steps,
        nodes=args.nodes,
        objects=args.objects,
        hostile=args.hostile,
        kueue=args.kueue,
        runtime=args.runtime,
        weights={**RULES, **dict(args.weight)},
    )
    params = {key: tuple(value) if isinstance(value, list) else value for key, value in args.param} or None
    if args.replay is not None:
        result = replay(args.replay)
        print(result.describe() if (result.failed or args.verbose) else _line(result))
        return 1 if result.failed else 0

    run = RunReport(args.seed, profile)
    started = time.monotonic()
    seeds = [args.seed + index for index in range(args.schedules)]
    if args.jobs > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            for result in pool.map(_one, seeds, [profile] * len(seeds), [params] * len(seeds)):
                run.schedules.append(result)
                print(_line(result), flush=True)
                if result.failed or args.verbose:
                    print(result.describe(), flush=True)
    else:
        for seed in seeds:
            result = _one(seed, profile, params)
            run.schedules.append(result)
            print(_line(result), flush=True)
            if result.failed or args.verbose:
                print(result.describe(), flush=True)
    print(run.figure())
    print(f"wall time {time.monotonic() - started:.0f} s")
    failures = run.failures
    if failures and (args.shrink or args.save):
        first = failures[0]
        steps = schedule_of(first.seed, profile)[: first.executed]
        params = {**story_parameters(first.seed, profile), **(params or {})} or None  # the saved steps' world
        if args.shrink:
            steps = shrink(first.seed, profile, steps, params, anchored(args.keep))
        print(f"seed {first.seed}, {len(steps)} steps:")
        for step in steps:
            print(f"  {step}")
        if args.save:
            save(args.save, first.seed, profile, steps, params)
    if args.hostile or args.runtime == "upstream":
        return 0 if failures else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
