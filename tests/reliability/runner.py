"""Running schedules: one fresh lab per schedule, the steps, the checks, and the figures.

A schedule runs in a lab of its own (the lab starts in about a second), so that schedule `s` replays alone from
its seed with no memory of the schedules before it. Schedule `i` of a run with seed `S` has seed `S + i`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import kueue_mode
from .harness import CLUSTER, ReliabilityLab
from .schedule import Profile, Step, world_parameters
from .stories import schedule_of, story_parameters
from .world import NAMESPACE, World


@dataclass
class ScheduleReport:
    seed: int
    steps: list[Step]
    executed: int = 0
    stats: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    admissions: int = 0
    overlaps: int = 0
    processes: int = 0
    wall_seconds: float = 0.0
    lab_seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return bool(self.violations)

    def replay(self) -> str:
        """The schedule as Python, for a test or `long_run.py --steps`."""
        return "[\n" + "".join(f"    {step!r},\n" for step in self.steps[: self.executed or None]) + "]"

    def describe(self) -> str:
        lines = [f"schedule seed {self.seed}: {self.executed}/{len(self.steps)} steps, {self.admissions} admissions"]
        lines += [f"  VIOLATION {v}" for v in self.violations[:20]]
        lines += ["  log (last 60 lines):", *("    " + line for line in self.log[-60:])]
        return "\n".join(lines)


def run_schedule(
    seed: int,
    profile: Profile,
    steps: Sequence[Step] | None = None,
    *,
    converge: bool = True,
    stop_at_violation: bool = True,
    params: Mapping[str, Any] | None = None,
) -> ScheduleReport:
    """Run one schedule (its own steps, or `schedule_of(seed, profile)` in a world with its story's parameters) in a
    fresh lab; never raises on a violation, which the report carries."""
    planned = list(steps) if steps is not None else schedule_of(seed, profile)
    report = ScheduleReport(seed, planned)
    started = time.monotonic()
    with ReliabilityLab(controllers=kueue_mode.CONTROLLERS if profile.kueue else CLUSTER) as rlab:
        lab_start = rlab.now()
        world = World(
            rlab,
            profile.nodes,
            profile.objects,
            {**world_parameters(seed), **(story_parameters(seed, profile) if steps is None else {}), **(params or {})},
            runtime=profile.runtime,
            accept_risks=profile.accept_risks,
            kueue=kueue_mode.KueueMode() if profile.kueue else None,
        ).setup()
        try:
            for step in planned:
                found = world.apply(step)
                report.executed += 1
                if found and stop_at_violation:
                    break
            if converge and not (world.violations and stop_at_violation):
                world.converge()
        finally:
            world.close()
        report.stats = world.stats
        report.violations = list(world.violations)
        report.log = world.log
        report.admissions = sum(1 for w in rlab.book.writes if w.admitted)
        report.overlaps = sum(
            len(rlab.sc.overlaps(NAMESPACE, o.name))
            + len(rlab.sc.rank_overlaps(NAMESPACE, o.name))
            + len(rlab.sc.attempt_overlaps(NAMESPACE, o.name))
            for o in world.objects
        )
        report.processes = len(world.processes())
        report.lab_seconds = rlab.now() - lab_start
    report.wall_seconds = time.monotonic() - started
    return report


@dataclass
class RunReport:
    seed: int
    profile: Profile
    schedules: list[ScheduleReport] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return sum(s.executed for s in self.schedules)

    @property
    def admissions(self) -> int:
        return sum(s.admissions for s in self.schedules)

    @property
    def overlaps(self) -> int:
        return sum(s.overlaps for s in self.schedules)

    @property
    def failures(self) -> list[ScheduleReport]:
        return [s for s in self.schedules if s.failed]

    def totals(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for schedule in self.schedules:
            total.update(schedule.stats)
        return total

    def figure(self) -> str:
        """The one-line figure CI prints."""
        totals = self.totals()
        faults = sum(n for key, n in totals.items() if key.startswith("fault "))
        conflicts = sum(n for key, n in totals.items() if key.endswith("ConflictError"))
        retried = sum(n for key, n in totals.items() if key.endswith("conflicts retried"))
        blocked = sum(n for key, n in totals.items() if key.endswith("PodsRemainError"))
        wall = sum(s.wall_seconds for s in self.schedules)
        each = [s.wall_seconds for s in self.schedules] or [0.0]
        return (
            f"reliability model ({self.profile.name}, seed {self.seed}): {len(self.schedules)} schedules, "
            f"{self.steps} steps, {self.admissions} admissions, {blocked} releases blocked by remaining pods, "
            f"{retried} conflicts retried inside an operation, {conflicts} conflicts raised, {faults} faults fired, "
            f"{totals['admissions applied with the answer lost']} admissions with a lost answer, "
            f"{self.overlaps} overlaps, {len(self.failures)} schedules with violations ({wall:.0f} s; per "
            f"schedule {wall / len(each):.1f} s on average, {max(each):.1f} s at most)"
        )


def run_many(
    seed: int, count: int, profile: Profile, progress: Callable[[ScheduleReport], None] = lambda report: None
) -> RunReport:
    run = RunReport(seed, profile)
    for index in range(count):
        report = run_schedule(seed + index, profile)
        run.schedules.append(report)
        progress(report)
    return run
