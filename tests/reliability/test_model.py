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
from airflow_provider_dispatch.dispatch.programs import queries, releasing

from .figures import report
from .runner import ScheduleReport, run_many, run_schedule
from .schedule import FAULT_KINDS, HOSTILE_RULES, RULES, Profile, Step

SEED = int(os.environ.get("DISPATCH_RELIABILITY_SEED", "20260807"))
SCHEDULES = int(os.environ.get("DISPATCH_RELIABILITY_SCHEDULES", "32"))
KUEUE_SCHEDULES = int(os.environ.get("DISPATCH_RELIABILITY_KUEUE_SCHEDULES", "4"))
CI = Profile(name="ci", steps=40)
CI_KUEUE = Profile(name="ci-kueue", steps=40, kueue=True)
#: rules whose precondition a schedule of 40 steps may never meet (a third party's resume needs its own
#: suspension and nothing of the TrainJob running; failure recovery a pod Terminating for a minute on an
#: unreachable node): they must be drawn, not necessarily carried out
RARE_RULES = frozenset({"third_party_resume", "failure_recovery"})
#: one pod per TrainJob, three nodes: the directed schedules know where things are
DIRECTED = Profile(name="directed", steps=0, nodes=3, objects=1)
ONE_POD = {"num_nodes": (1,), "termination_seconds": 8, "replicated_jobs": 1, "failure_policy": False}

#: open until the first execution runs (the first open usually finds the hold not yet observed by Trainer)
RUNNING = [
    Step.of("open", obj=0, caller=0),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=1),
    Step.of("advance", seconds=1),
    Step.of("open", obj=0, caller=2),
]


def _failure_text(failures: list[ScheduleReport], profile: Profile = CI) -> str:
    parts = []
    flags = f"--steps {profile.steps}" + (" --kueue" if profile.kueue else "")
    for failed in failures[:3]:
        parts.append(
            f"{failed.describe()}\nreplay: python tests/reliability/long_run.py --seed {failed.seed} --schedules 1 "
            f"{flags} --verbose"
        )
    return "\n\n".join(parts)


@pytest.mark.timeout(1800)  # the model's own length (about 200 s alone, more on a loaded machine): not a hang
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
    unexercised = [rule for rule in RULES if totals[f"rule {rule}"] == 0 and rule not in RARE_RULES]
    assert not unexercised, f"rules never carried out: {unexercised}"
    undrawn = [rule for rule in RARE_RULES if totals[f"drawn {rule}"] == 0]
    assert not undrawn, f"rules never drawn: {undrawn}"
    assert [kind for kind in FAULT_KINDS if totals[f"fault {kind} fired"] == 0] == []
    assert totals["release PodsRemainError"] > 0
    assert totals["release conflicts retried"] > 0  # 409s met and re-checked inside the release (conflicts.py)
    assert totals["admissions applied with the answer lost"] > 0
    assert totals["retries after a lost answer"] > 0
    assert totals["converged"] > 0


@pytest.mark.timeout(900)  # the Kueue model run's own length (about 60 s alone)
def test_random_schedules_in_kueue_mode_keep_the_promise() -> None:
    """Kueue mode beside plain mode (kueue_mode.py): queued TrainJobs admitted by Kueue through dispatch's
    admission check controller, which crashes and restarts, and Kueue's preemption."""
    run = run_many(SEED, KUEUE_SCHEDULES, CI_KUEUE)
    report(run.figure())
    assert not run.failures, _failure_text(run.failures, CI_KUEUE)
    assert run.overlaps == 0


def _directed(steps: list[Step], profile: Profile = DIRECTED, **options: Any) -> ScheduleReport:
    return run_schedule(0, profile, steps, params=ONE_POD, converge=False, **options)


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
    by_labels = [v for v in result.violations if "labels: job id job-a, submission 1, A 1" in v]
    by_admission = [v for v in result.violations if "(admission 1) on" in v and "(admission 2) on" in v]
    assert by_labels, result.describe()
    assert by_admission, result.describe()
    report(f"negative control (taint on a frozen machine): {result.overlaps} overlap(s) seen by the recorder")


@pytest.fixture
def without_the_drain_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken dispatch: the drain check reads no pods and finds none remaining."""

    def no_drain(selection: Any, **_: Any) -> Generator[Any, Any, Any]:
        return programs.Drain(programs.PodRead((), "", "full"), {}, {}, ())
        yield  # a generator, as the programs expect

    # wherever a program looks `drain` up: the admissions' module, the read-only programs', and the package's
    for module in (programs, releasing, queries):
        monkeypatch.setattr(module, "drain", no_drain)


@pytest.mark.usefixtures("without_the_drain_check")
def test_negative_control_the_model_catches_a_release_without_the_drain_check() -> None:
    """With the upstream default `podReplacementPolicy` the Job starts the new execution's pod beside the
    Terminating one at once (with `Failed` the Job itself would wait for it, in this schedule: the drain check
    matters there when Jobs are new, pods were released or deleted, which the random model does)."""
    steps = [
        *RUNNING,
        Step.of("freeze", host=0),
        Step.of("hold", obj=0, caller=0),
        # the frozen node is Ready=Unknown, so the new pod goes elsewhere; and the hold has settled (evidence.py)
        Step.of("advance", seconds=95),
        Step.of("release", obj=0, callers=(2,), race=False),
        Step.of("advance", seconds=5),
    ]
    result = _directed(
        steps,
        Profile(name="directed-upstream", steps=0, nodes=3, objects=1, runtime="upstream", accept_risks=True),
        stop_at_violation=False,
    )
    assert result.overlaps >= 1, result.describe()
    assert any("no complete read of the pods" in v for v in result.violations), result.describe()


def test_a_machine_rebooted_after_its_pod_was_deleted_does_not_run_it_again() -> None:
    """Found by the model (long run, seed 1014), shrunk: the operator fences a node (power off, taint), PodGC
    force-deletes its Terminating pod, dispatch admits execution 2, the machine is repaired and boots. The lab's
    kubelet started the deleted pod's container again from its own memory, beside execution 2; a real kubelet
    knows its pods from the API server only (lab/simulated/nodes/kubelet.py `_reboot`, fixed)."""
    steps = [
        *RUNNING,
        Step.of("fence", host=0, effect="NoSchedule"),
        Step.of("hold", obj=0, caller=0),
        Step.of("advance", seconds=60),
        Step.of("advance", seconds=35),  # the settle: 90 s and the 5 s clock skew bound (dispatch/evidence.py)
        Step.of("release", obj=0, callers=(0,), race=False),
        Step.of("recover", node=0),
        Step.of("advance", seconds=1),
    ]
    result = _directed(steps)
    assert result.stats["release ok"] == 1, result.describe()
    assert result.admissions == 2, result.describe()
    assert result.violations == [], result.describe()


#: one TrainJob of one pod per replicated job; the runtime as each test says
H_PARAMS = {"num_nodes": (1,), "termination_seconds": 8, "replicated_jobs": 1, "failure_policy": False}


def _hazard(steps: list[Step], runtime: str, **params: Any) -> ScheduleReport:
    profile = Profile(
        name=f"directed-{runtime}", steps=0, nodes=3, objects=1, runtime=runtime, accept_risks=runtime != "safe"
    )
    return run_schedule(0, profile, steps, params={**H_PARAMS, **params}, converge=False, stop_at_violation=False)


#: hazard H1: the node of the one pod is cut off (its machine runs on) for 400 s. After the 50 s node monitor
#: grace period it gets the `unreachable:NoExecute` taint; after the 300 s DefaultTolerationSeconds taint
#: eviction deletes the pod gracefully, and it stays Terminating behind the partition
H1 = [*RUNNING, Step.of("partition", host=0, seconds=400)]
#: hazard H2: two replicated jobs, a JobSet failure policy; the launcher's node is cut off, then the trainer
#: process fails, which fails its Job (backoffLimit 0): the JobSet restarts, deleting both Jobs (Foreground)
H2 = [
    *RUNNING,
    Step.of("lose", host=0, rjob="launcher"),
    Step.of("fail", obj=0, rjob="node"),
    Step.of("advance", seconds=20),
    Step.of("advance", seconds=20),
    Step.of("advance", seconds=5),
]


def test_negative_control_h1_upstream_replacement_policy_runs_two_processes_of_one_rank() -> None:
    """Hazard H1 (research/lab-fidelity-audit.md) with the upstream default `podReplacementPolicy:
    TerminatingOrFailed` (kubernetes `pkg/apis/batch/v1/defaults.go`): the Job controller counts the evicted,
    still Terminating pod as failed (`job_controller.go` `isPodFailed`) and, after the 10 s back-off, creates a
    pod for the same index on another node (`manageJob`: `terminating` is subtracted only when only failed pods
    are replaced; the lab: `simulated/workloads/job_pods.py` `is_pod_failed`, `first_pending_indexes`, `job.py`
    `_manage`). Two processes of rank node/0/0 within execution 1, with no re-admission for dispatch to stop:
    both the lab's recorder and the model's own ledger report it. With `podReplacementPolicy: Failed` the
    Job waits for the pod to be Failed, which needs its node proven down: nothing overlaps."""
    upstream = _hazard(H1, "upstream")
    assert upstream.admissions == 1, upstream.describe()
    by_recorder = [v for v in upstream.violations if "(both rank tj-a/node/0/0)" in v]
    by_ledger = [v for v in upstream.violations if "two processes of rank node/0/0" in v]
    assert by_recorder, upstream.describe()
    assert by_ledger, upstream.describe()
    assert upstream.overlaps >= 1
    safe = _hazard(H1, "safe")
    assert safe.violations == [], safe.describe()
    assert safe.overlaps == 0
    report(f"negative control H1 (TerminatingOrFailed, partition 400 s): {upstream.overlaps} rank overlap(s) seen")


def test_negative_control_h2_upstream_restarts_run_two_attempts_at_once() -> None:
    """Hazard H2 with the upstream default `restartStrategy: Recreate` (JobSet `jobset_controller.go`
    `deleteJobs` with Foreground propagation, then `constructJobsFromTemplate` creating every Job whose old object
    is gone; the lab: `simulated/workloads/jobset.py` `_delete_jobs`, `jobset_jobs.py` `jobs_to_create`): the failed
    trainer Job is gone at once and is created again for restart attempt 1, while the launcher Job, held by its
    pod Terminating on the lost node, still runs attempt 0. Both checks see one execution run two restart
    attempts at once. `BlockingRecreate` creates nothing until every old Job is gone: nothing overlaps."""
    upstream = _hazard(H2, "upstream", replicated_jobs=2, failure_policy=True)
    assert upstream.admissions == 1, upstream.describe()
    by_recorder = [v for v in upstream.violations if "(restart attempts 0 and 1)" in v]
    by_ledger = [v for v in upstream.violations if "ran restart attempts 0 and 1 at once" in v]
    assert by_recorder, upstream.describe()
    assert by_ledger, upstream.describe()
    assert upstream.overlaps >= 1
    safe = _hazard(H2, "safe", replicated_jobs=2, failure_policy=True)
    assert safe.violations == [], safe.describe()
    assert safe.overlaps == 0
    report(f"negative control H2 (Recreate, a restart beside a lost node): {upstream.overlaps} overlap(s) seen")


def test_hostile_rules_stay_out_of_the_invariant_run() -> None:
    assert not set(HOSTILE_RULES) & set(CI.rules())
    assert set(HOSTILE_RULES) <= set(Profile(hostile=True).rules())
