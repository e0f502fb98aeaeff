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

ROOT = Path(__file__).resolve().parents[2]
#: a seed that finds the `record-binds-unscheduled` mutant in its first schedule (a pod recorded unscheduled, bound
#: after the record, listed bound by a refused release, then force-deleted: issue 26's case 1)
MUTANT_SEED = 0  # set below once measured


def test_one_seed_decides_the_schedule_and_a_replay_follows_it_exactly() -> None:
    first = run(7, 300)
    again = run(7, 300)
    assert first.labels == again.labels
    assert first.story == again.story
    followed = replay(7, first.labels, config_for(7))
    assert followed.labels == first.labels
    assert followed.story == first.story


def test_main_survives_a_few_schedules() -> None:
    for seed in range(1, 21):
        outcome = run(seed, 600)
        assert not outcome.failed, f"seed {seed}: {outcome.violation}\n" + "\n".join(outcome.story)


def test_a_fixed_seed_finds_the_unscheduled_pod_of_case_1(tmp_path: Path) -> None:
    """`record-binds-unscheduled` re-creates issue 26's case 1 (a pod recorded without a node keeps being judged
    as never scheduled after a check lists it bound): the search on the mutated copy, in a subprocess as the
    mutation gate runs it, finds two processes of one rank at this seed; main's code does not (above, and the
    unmutated run below)."""
    mutant = next(m for m in MUTANTS if m.name == "record-binds-unscheduled")
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
