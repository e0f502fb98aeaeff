"""The search: many seeds of the simulation, stopped at the first violation, shrunk, replayable (issue 26, item 3).

    python tests/reliability/sim/search.py --seeds 2000                 # from seed 1, stop at the first violation
    python tests/reliability/sim/search.py --seeds 2000 --jobs 2        # the same, seeds run by two processes
    python tests/reliability/sim/search.py --seed 17 --story            # one seed, its story
    python tests/reliability/sim/search.py --replay found.json          # the exact replay of a shrunk schedule
    python tests/reliability/sim/search.py --code prefix --seeds 5000   # against the code before issue 26's fix
    python tests/reliability/sim/search.py --mutant record-binds-unscheduled --seeds 2000

A schedule is a seed and a number of steps (`world.World`); its record is the list of action labels it took, and
`replay` follows such a list exactly, so a failure found by seed can be shrunk: steps are dropped (halves, then
quarters, ... then one at a time) and ticks shortened while the schedule still violates the promise, and the
result is printed as a replay (seed + labels, JSON) and as a story (what each controller, person and caller did,
with the virtual time). `--code prefix` and `--mutant NAME` run in a subprocess whose `airflow_provider_dispatch`
is a copy of the package: with `dispatch/` as it was before issue 26's fix (`git show 2809586^1:...`), or with
the mutation gate's mutant applied (`mutation_gate.materialise`, the gate's own mechanism). `--jobs N` runs the
seeds in N processes, chunk by chunk, and takes their results in the seeds' order: the first violating seed (and in
`--cases` mode each case's first seed and schedule count) is the serial run's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from reliability.sim.world import Config, World, _semantics
else:
    from .world import Config, World, _semantics

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_STEPS = 400


@dataclass
class Outcome:
    seed: int
    violation: str
    labels: list[str]
    story: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    case: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.violation)


def config_for(seed: int) -> Config:
    """Each seed draws a small world: nodes, TrainJobs, pods per TrainJob, the pods' grace period, how long a
    process takes to stop after SIGTERM (above the grace: it ignores SIGTERM and is killed at the grace), and the
    API server replicas' clock skew (2.5: the two replicas differ by 5 s, the rule's default bound; 22.5: by 45 s,
    with dispatch configured for it, `Config.clock_skew_seconds`), and how late a kubelet may act on a
    pod change (2 s, or a lagging watch: 20 or 55 s, within the 60 s the rule's margin allows), and how slowly
    writes land (one world in three has a slow API server: writes in flight for tens of seconds).

    The draws lean towards long graces and processes that ignore SIGTERM: those keep a process running for
    minutes after its pod's deletion, which is where a check that times a proof too early shows (swarm testing:
    each seed's world makes some behaviours common rather than every behaviour rare)."""
    import random

    rng = random.Random(seed * 7919 + 1)
    return Config(
        nodes=rng.choice((2, 3, 4)),
        trainjobs=rng.choice((1, 1, 2)),
        num_nodes=rng.choice((1, 1, 2)),
        termination_seconds=rng.choice((1.0, 5.0, 20.0, 3600.0, 3600.0, 3600.0)),
        skew=rng.choice((0.0, 1.0, 2.5, 22.5)),
        grace_seconds=rng.choice((30, 120, 300, 300)),
        kubelet_lag=rng.choice((2.0, 2.0, 20.0, 55.0)),
        landing=rng.choice((3.0, 3.0, 0.3)),
    )


def run(seed: int, steps: int = DEFAULT_STEPS, config: Config | None = None) -> Outcome:
    """One schedule by seed: until `steps` actions ran or the promise broke."""
    config = config or config_for(seed)
    world = World(seed, config)
    for _ in range(steps):
        world.step()
        if world.violations:
            break
    return _outcome(seed, world, config)


def _outcome(seed: int, world: World, config: Config) -> Outcome:
    return Outcome(
        seed,
        world.violations[0] if world.violations else "",
        world.labels,
        world.story,
        asdict(config),
        world.cases[0] if world.cases else "",
    )


def replay(seed: int, labels: Sequence[str], config: Config | None = None) -> Outcome:
    """Follow `labels` exactly (a label not enabled at its turn is skipped); the RNG still draws what the actions
    themselves draw (a binding's node), from the same seed."""
    config = config or config_for(seed)
    world = World(seed, config)
    for label in labels:
        world.step(label)
        if world.violations:
            break
    return _outcome(seed, world, config)


def shrink(found: Outcome, budget: int = 2000) -> Outcome:
    """Drop chunks of steps, then shorten ticks, while the replay still violates the promise."""
    config = Config(**found.config)
    best = found
    tries = 0
    chunk = max(len(best.labels) // 2, 1)
    while chunk >= 1 and tries < budget:
        start = 0
        progressed = False
        while start < len(best.labels) and tries < budget:
            candidate = best.labels[:start] + best.labels[start + chunk :]
            tries += 1
            attempt = replay(found.seed, candidate, config)
            if attempt.failed and attempt.case == found.case:
                best = attempt
                progressed = True
            else:
                start += chunk
        if not progressed:
            chunk //= 2
    for index, label in enumerate(list(best.labels)):
        if not label.startswith("tick:") or tries >= budget:
            continue
        for shorter in ("tick:1", "tick:5", "tick:10", "tick:20", "tick:30"):
            if shorter == label or float(shorter[5:]) >= float(label[5:]):
                continue
            candidate = [*best.labels[:index], shorter, *best.labels[index + 1 :]]
            tries += 1
            attempt = replay(found.seed, candidate, config)
            if attempt.failed and attempt.case == found.case and len(attempt.labels) <= len(best.labels):
                best = attempt
                break
    return best


@dataclass
class Search:
    seeds: int
    steps: int
    wall_seconds: float
    found: Outcome | None
    shrunk: Outcome | None = None

    @property
    def per_minute(self) -> float:
        return self.seeds / self.wall_seconds * 60 if self.wall_seconds else 0.0


#: seeds per task of a parallel search: small enough that the processes stay busy to the end and that little runs
#: past a failure, large enough that handing out tasks costs nothing beside the schedules
CHUNK = 8


def _failures(task: tuple[int, int, int, bool]) -> list[Outcome]:
    """In a worker: the failing schedules of seeds `first` to `first + count - 1`, in order (only the first one
    when `first_only`)."""
    first, count, steps, first_only = task
    found = []
    for seed in range(first, first + count):
        outcome = run(seed, steps)
        if outcome.failed:
            found.append(outcome)
            if first_only:
                break
    return found


def failures(
    first: int, count: int, steps: int, jobs: int = 1, *, first_only: bool = False
) -> Generator[Outcome, None, None]:
    """The failing schedules among seeds `first` to `first + count - 1`, in the order of their seeds, whatever
    `jobs`: with more than one, processes run chunks of seeds (`CHUNK`) and their results are taken in the chunks'
    order, so the first failure yielded is the lowest failing seed, as in the serial run; a chunk stops at its first
    failure when `first_only`. Closing the generator stops the workers."""
    if jobs <= 1:
        for seed in range(first, first + count):
            outcome = run(seed, steps)
            if outcome.failed:
                yield outcome
        return
    _semantics()  # the CRDs' schemas, read once before the fork rather than once per worker
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    tasks = [
        (start, min(CHUNK, first + count - start), steps, first_only) for start in range(first, first + count, CHUNK)
    ]
    with context.Pool(jobs) as pool:
        for found in pool.imap(_failures, tasks):
            yield from found


def search(first: int, count: int, steps: int = DEFAULT_STEPS, *, shrink_it: bool = True, jobs: int = 1) -> Search:
    """Seeds from `first` until the first failing one (the lowest, whatever `jobs`); `Search.seeds` counts the
    schedules up to it, as the serial search runs them (a parallel one may have run a few more)."""
    started = time.perf_counter()
    found = failures(first, count, steps, jobs, first_only=True)
    outcome = next(found, None)
    found.close()  # the workers stop before the shrinking starts
    elapsed = time.perf_counter() - started
    if outcome is None:
        return Search(count, steps, elapsed, None)
    return Search(outcome.seed - first + 1, steps, elapsed, outcome, shrink(outcome) if shrink_it else None)


@dataclass
class Found:
    case: str
    seed: int
    schedules: int
    seconds: float
    violation: str
    replay: dict[str, Any]
    story: list[str]


def search_cases(
    first: int, count: int, steps: int, wanted: Sequence[str], shrink_budget: int, jobs: int = 1
) -> tuple[list[Found], int, float]:
    """Run seeds until a violation of each wanted case was seen (issue 26's cases, `World.classify`): the first
    seed, schedules run and seconds until each; returns them, the schedules run and the seconds in all. The same
    first seeds and schedule counts whatever `jobs` (the failures come in the seeds' order, `failures`)."""
    started = time.perf_counter()
    shrinking = 0.0
    found: dict[str, Found] = {}
    ran = count
    for outcome in failures(first, count, steps, jobs):
        seed = outcome.seed
        key = (
            outcome.case.split(" ")[0] + " " + outcome.case.split(" ")[1]
            if outcome.failed and outcome.case.startswith("case")
            else ""
        )
        if (
            outcome.failed
            and (outcome.case or "other") not in {f.case for f in found.values()}
            and (not wanted or key in wanted)
        ):
            elapsed = time.perf_counter() - started - shrinking
            began = time.perf_counter()
            small = shrink(outcome, shrink_budget) if shrink_budget else outcome
            shrinking += time.perf_counter() - began
            found[outcome.case] = Found(
                outcome.case,
                seed,
                seed - first + 1,
                round(elapsed, 2),
                outcome.violation,
                {"seed": seed, "config": small.config, "labels": small.labels},
                small.story,
            )
            if wanted and all(any(f.case.startswith(w) for f in found.values()) for w in wanted):
                ran = seed - first + 1
                break
    return list(found.values()), ran, time.perf_counter() - started - shrinking


# --- running against another copy of the package ---------------------------------------------------------------


def materialise_code(code: str, into: Path) -> Path:
    """A copy of the package and tests: `prefix` (dispatch/ as before issue 26's fix) or a mutant's name."""
    sys.path.insert(0, str(ROOT / "tests"))
    from reliability import mutation_gate

    if code == "prefix":
        return mutation_gate.materialise_before_fix(into, ROOT)  # at the gate's BEFORE_ISSUE_26
    mutant = next((m for m in mutation_gate.MUTANTS if m.name == code), None)
    if mutant is None:
        raise SystemExit(f"no mutant named {code}")
    return mutation_gate.materialise(mutant, into, ROOT)


def run_elsewhere(code: str, argv: Sequence[str]) -> int:
    with tempfile.TemporaryDirectory(prefix=f"sim-{code}-") as tmp:
        root = materialise_code(code, Path(tmp))
        env = {**os.environ, "PYTHONPATH": str(root)}
        command = [sys.executable, str(root / "tests" / "reliability" / "sim" / "search.py"), *argv]
        return subprocess.run(command, env=env, cwd=tmp, check=False).returncode


# --- the CLI ---------------------------------------------------------------------------------------------------


def _print_found(result: Search, story: bool) -> None:
    found = result.shrunk or result.found
    assert found is not None
    print(f"VIOLATION at seed {found.seed} after {result.seeds} schedules, {result.wall_seconds:.1f} s:")
    print(f"  {found.violation}")
    print(f"  shrunk to {len(found.labels)} steps (from {len(result.found.labels) if result.found else '?'})")
    if story:
        print("story:")
        for line in found.story:
            print(f"  {line}")
    print("replay: " + json.dumps({"seed": found.seed, "config": found.config, "labels": found.labels}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds to run")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--story", action="store_true", help="print the shrunk failure's story")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--replay", type=Path, help="a JSON replay (seed, config, labels) to run exactly")
    parser.add_argument("--code", choices=("here", "prefix"), default="here")
    parser.add_argument("--mutant", help="a mutation gate mutant's name: run against it")
    parser.add_argument("--json", action="store_true", help="one JSON line with the result")
    parser.add_argument(
        "--cases",
        default="",
        help="comma-separated cases to find ('case 1,case 2,case 3'): run "
        "seeds until each was found, report time-to-find per case as JSON",
    )
    parser.add_argument("--shrink-budget", type=int, default=400)
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes running seeds at once (default 1); the same first failing seed and cases as one",
    )
    options = parser.parse_args(argv)
    if options.code == "prefix" or options.mutant:
        forwarded = [
            a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith(("--code", "--mutant"))
        ]
        forwarded = [a for i, a in enumerate(forwarded) if not (i > 0 and forwarded[i - 1] in ("--code", "--mutant"))]
        forwarded = [a for a in forwarded if a not in ("prefix",) and a != options.mutant]
        return run_elsewhere(options.mutant or "prefix", forwarded)
    if options.cases:
        wanted = [c.strip() for c in options.cases.split(",") if c.strip()]
        cases, ran, seconds = search_cases(
            options.seed, options.seeds, options.steps, wanted, options.shrink_budget, options.jobs
        )
        for item in cases:
            print(
                json.dumps(
                    {
                        "case": item.case,
                        "seed": item.seed,
                        "schedules": item.schedules,
                        "seconds": item.seconds,
                        "violation": item.violation,
                        "shrunk_steps": len(item.replay["labels"]),
                    }
                )
            )
            if options.story:
                print("\n".join(f"    {line}" for line in item.story))
                print("    replay: " + json.dumps(item.replay))
        print(
            json.dumps(
                {
                    "schedules": ran,
                    "seconds": round(seconds, 1),
                    "per_minute": round(ran / seconds * 60, 1),
                    "found": sorted(c.case for c in cases),
                }
            )
        )
        return 0 if all(any(c.case.startswith(w) for c in cases) for w in wanted) else 1
    if options.replay is not None:
        data = json.loads(options.replay.read_text())
        outcome = replay(int(data["seed"]), data["labels"], Config(**data["config"]))
        for line in outcome.story:
            print(f"  {line}")
        print(f"violation: {outcome.violation or 'none'}")
        return 1 if outcome.failed else 0
    result = search(options.seed, options.seeds, options.steps, shrink_it=not options.no_shrink, jobs=options.jobs)
    if options.json:
        found = result.shrunk or result.found
        print(
            json.dumps(
                {
                    "seeds": result.seeds,
                    "steps": options.steps,
                    "wall_seconds": round(result.wall_seconds, 3),
                    "per_minute": round(result.per_minute, 1),
                    "violation": found.violation if found else "",
                    "seed": found.seed if found else None,
                    "shrunk_steps": len(found.labels) if found else None,
                    "replay": {"seed": found.seed, "config": found.config, "labels": found.labels} if found else None,
                    "story": found.story if found else [],
                }
            )
        )
        return 1 if found else 0
    if result.found is None:
        print(
            f"no violation in {result.seeds} schedules of {options.steps} steps, {result.wall_seconds:.1f} s "
            f"({result.per_minute:.0f} schedules/min)"
        )
        return 0
    _print_found(result, options.story)
    return 1


if __name__ == "__main__":
    sys.exit(main())
