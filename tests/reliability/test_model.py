"""Issue 7 item 1, plain mode: random schedules of faults, races and machine failures never give one TrainJob
two executions at once, and A grows by exactly one per admission (model: world.py; invariants: invariants.py).

The CI profile runs `SCHEDULES` schedules of 40 steps from `SEED` (environment `DISPATCH_RELIABILITY_SCHEDULES`
and `DISPATCH_RELIABILITY_SEED` change them) and prints its figure; `long_run.py` runs as many as you like.
Two negative controls prove the checks can fail: a hostile operator who taints a running machine's node, and a
dispatch whose drain check was removed.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

from airflow_provider_dispatch.dispatch import programs

from .figures import report
from .runner import ScheduleReport, run_many, run_schedule
from .schedule import FAULT_KINDS, HOSTILE_RULES, RULES, Profile, Step

SEED = int(os.environ.get("DISPATCH_RELIABILITY_SEED", "20260807"))
SCHEDULES = int(os.environ.get("DISPATCH_RELIABILITY_SCHEDULES", "32"))
CI = Profile(name="ci", steps=40)
#: one pod per TrainJob, three nodes: the directed schedules know where things are
DIRECTED = Profile(name="directed", steps=0, nodes=3, objects=1)
ONE_POD = {"num_nodes": (1,), "termination_seconds": 8}

#: open until the first execution runs (the first open usually finds the hold not yet observed by Trainer)
RUNNING = [
    Step.of("open", obj=0, caller=0),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=1),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=2),
]


def _failure_text(failures: list[ScheduleReport]) -> str:
    parts = []
    for failed in failures[:3]:
        parts.append(
            f"{failed.describe()}\nreplay: python tests/reliability/long_run.py --seed {failed.seed} --schedules 1"
        )
    return "\n\n".join(parts)


def test_random_schedules_keep_the_promise() -> None:
    run = run_many(SEED, SCHEDULES, CI)
    report(run.figure())
    assert not run.failures, _failure_text(run.failures)
    assert run.overlaps == 0

    # The schedules exercised what they claim to, so that "0 overlaps" is not vacuous (a run of a handful of
    # schedules, through the environment, need not reach every rule).
    if SCHEDULES < 20:
        return
    totals = run.totals()
    assert run.admissions >= 2 * SCHEDULES
    unexercised = [rule for rule in RULES if totals[f"rule {rule}"] == 0]
    assert not unexercised, f"rules never carried out: {unexercised}"
    assert [kind for kind in FAULT_KINDS if totals[f"fault {kind} fired"] == 0] == []
    assert totals["release PodsRemainError"] > 0
    assert totals["release ConflictError"] > 0
    assert totals["admissions applied with the answer lost"] > 0
    assert totals["retries after a lost answer"] > 0
    assert totals["converged"] > 0


def _directed(steps: list[Step], **options: Any) -> ScheduleReport:
    return run_schedule(0, DIRECTED, steps, params=ONE_POD, converge=False, **options)


def test_negative_control_a_taint_on_a_running_machine_gives_an_overlap_the_checks_see() -> None:
    """The operator's precondition broken: the machine is frozen, not off, when it is tainted out-of-service.
    PodGC force-deletes the Terminating pod, dispatch admits (correctly, by DESIGN §4), the old process runs on."""
    steps = [
        *RUNNING,
        Step.of("freeze", host=0),
        Step.of("hold", obj=0, caller=0),
        Step.of("advance", seconds=60),
        Step.of("advance", seconds=60),
        Step.of("release", obj=0, callers=(1,), race=False),  # refused: the pod remains on a Ready=Unknown node
        Step.of("hostile_taint", host=0, effect="NoExecute"),
        Step.of("advance", seconds=30),  # PodGC: tainted and not Ready, so it force-deletes the pod
        Step.of("release", obj=0, callers=(0,), race=False),
        Step.of("advance", seconds=5),
    ]
    result = _directed(steps)
    assert result.stats["rule hostile_taint"] == 1, result.describe()
    assert result.stats["release PodsRemainError"] >= 1, result.describe()
    assert result.overlaps >= 1, result.describe()
    by_labels = [v for v in result.violations if "(execution ExecutionKey(" in v]
    by_admission = [v for v in result.violations if "(admission 1) on" in v and "(admission 2) on" in v]
    assert by_labels, result.describe()
    assert by_admission, result.describe()
    report(f"negative control (taint on a frozen machine): {result.overlaps} overlap(s) seen by the recorder")


@pytest.fixture
def without_the_drain_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken dispatch: the drain check reads no pods and finds none remaining."""

    def no_drain(selection: Any, **_: Any) -> Generator[Any, Any, Any]:
        return programs.Drain(programs.PodRead((), "", "full"), {}, ())
        yield  # a generator, as the programs expect

    monkeypatch.setattr(programs, "drain", no_drain)


@pytest.mark.usefixtures("without_the_drain_check")
def test_negative_control_the_model_catches_a_release_without_the_drain_check() -> None:
    steps = [
        *RUNNING,
        Step.of("freeze", host=0),
        Step.of("hold", obj=0, caller=0),
        Step.of("advance", seconds=60),  # the frozen node is Ready=Unknown: the new pod goes elsewhere
        Step.of("release", obj=0, callers=(2,), race=False),
        Step.of("advance", seconds=5),
    ]
    result = _directed(steps, stop_at_violation=False)
    assert result.overlaps >= 1, result.describe()
    assert any("no complete read of the pods" in v for v in result.violations), result.describe()


def test_a_machine_rebooted_after_its_pod_was_deleted_does_not_run_it_again() -> None:
    """Found by the model (long run, seed 1014), shrunk: the operator fences a node (power off, taint), PodGC
    force-deletes its Terminating pod, dispatch admits execution 2, the machine is repaired and boots. The lab's
    kubelet started the deleted pod's container again from its own memory, beside execution 2; a real kubelet
    knows its pods from the API server only (lab/controllers/kubelet.py `_reboot`, fixed)."""
    steps = [
        *RUNNING,
        Step.of("fence", host=0, effect="NoSchedule"),
        Step.of("hold", obj=0, caller=0),
        Step.of("advance", seconds=60),
        Step.of("advance", seconds=30),
        Step.of("release", obj=0, callers=(0,), race=False),
        Step.of("recover", node=0),
        Step.of("advance", seconds=1),
    ]
    result = _directed(steps)
    assert result.stats["release ok"] == 1, result.describe()
    assert result.admissions == 2, result.describe()
    assert result.violations == [], result.describe()


def test_hostile_rules_stay_out_of_the_invariant_run() -> None:
    assert not set(HOSTILE_RULES) & set(CI.rules())
    assert set(HOSTILE_RULES) <= set(Profile(hostile=True).rules())
