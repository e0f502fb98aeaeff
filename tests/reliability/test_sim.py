"""The deterministic simulation (tests/reliability/sim): one seed decides a schedule, a replay reproduces it
exactly, main's code survives a few schedules, and a fixed seed finds issue 26's hole when its check is removed.

Seconds, not minutes: the search itself (thousands of seeds) is `sim/search.py`'s CLI and the mutation gate's
`--judge sim`; the figures are in docs/reliability.md ("The search")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .mutation_gate import MUTANTS, materialise
from .sim.search import config_for, replay, run
from .sim.world import World

ROOT = Path(__file__).resolve().parents[2]
#: the first seed at which the search finds the `record-grows-with-listed-pods` mutant (`mutation_gate.py --judge
#: sim`, seeds from 1): a pod the hold did not record under its node, listed bound by a refused release, then
#: force-deleted (issue 26, cases 1 and 2)
MUTANT_SEED = 456


def test_one_seed_decides_the_schedule_and_a_replay_follows_it_exactly() -> None:
    first = run(7, 300)
    again = run(7, 300)
    assert first.labels == again.labels
    assert first.story == again.story
    followed = replay(7, first.labels, config_for(7))
    assert followed.labels == first.labels
    assert followed.story == first.story


def test_the_actions_kept_between_steps_are_those_derived_afresh() -> None:
    """`World.actions` keeps some controllers' actions while what they read is unchanged (`store.Memo`); with the
    memo's check on, each kept list is derived again at every step and compared, and a derivation that drew from an
    RNG fails: a kept controller that reads something its key does not name fails here."""
    for seed in (3, 11):
        world = World(seed, config_for(seed))
        world.memo.check = True
        for _ in range(600):
            world.step()
        assert world.memo.hits > world.memo.misses  # the check ran, on most steps


def test_main_survives_a_few_schedules() -> None:
    for seed in range(1, 21):
        outcome = run(seed, 600)
        assert not outcome.failed, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.story)


def test_a_fixed_seed_finds_the_record_that_does_not_grow(tmp_path: Path) -> None:
    """`record-grows-with-listed-pods` re-creates issue 26's cases 1 and 2 (a check that lists a pod the record
    does not name under its node forgets it): the search on the mutated copy, in a subprocess as the mutation gate
    runs it, finds a violation at this seed; main's code does not (the unmutated run below)."""
    mutant = next(m for m in MUTANTS if m.name == "record-grows-with-listed-pods")
    root = materialise(mutant, tmp_path / "copy", ROOT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [
        sys.executable,
        str(root / "tests" / "reliability" / "sim" / "search.py"),
        "--seed",
        str(MUTANT_SEED),
        "--seeds",
        "1",
        "--steps",
        "600",
        "--json",
        "--no-shrink",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    result = json.loads(done.stdout.splitlines()[-1])
    assert "rank" in result["violation"] or "two executions" in result["violation"], done.stdout + done.stderr
    assert not run(MUTANT_SEED, 600).failed


def test_a_parallel_search_finds_the_serial_runs_first_seed(tmp_path: Path) -> None:
    """`--jobs 2` runs chunks of seeds in two processes: on the mutated copy, from a few seeds before
    `MUTANT_SEED`, it reports that seed, the same count of schedules to it and the same schedule as the serial run
    (the order in which results are taken is not what this tells: no other seed of these fails)."""
    mutant = next(m for m in MUTANTS if m.name == "record-grows-with-listed-pods")
    root = materialise(mutant, tmp_path / "copy", ROOT)
    env = {**os.environ, "PYTHONPATH": str(root)}
    results = []
    for jobs in ("1", "2"):
        command = [
            sys.executable,
            str(root / "tests" / "reliability" / "sim" / "search.py"),
            *("--seed", str(MUTANT_SEED - 5), "--seeds", "24", "--steps", "600", "--json", "--no-shrink"),
            *("--jobs", jobs),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        results.append(json.loads(done.stdout.splitlines()[-1]))
    serial, parallel = results
    assert serial["seed"] == parallel["seed"] == MUTANT_SEED, (serial["seed"], parallel["seed"])
    assert parallel["seeds"] == serial["seeds"] == 6
    assert parallel["replay"] == serial["replay"]
    assert parallel["story"] == serial["story"]
