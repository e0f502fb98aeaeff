"""The mutation gate (issue 15 item 5): remove each safety check in turn and let the randomized model find out.

    python tests/reliability/mutation_gate.py                      # every mutant, one after the other
    python tests/reliability/mutation_gate.py --jobs 2             # two mutants at once (2 cores)
    python tests/reliability/mutation_gate.py --only fencing-vanished --schedules 80
    python tests/reliability/mutation_gate.py --check              # only: does every snippet still match once?

A mutant is a textual patch of dispatch's source, applied to a copy of the package in a temporary directory
(never a switch in production code): `MUTANTS` below, one row per safety check, each (name, file, the exact
original snippet, its replacement, why the check is there). A snippet that is not found exactly once is refused
(the gate exits 2 before running anything), so a refactor cannot silently disable a mutant: update the row.

For each mutant, the model (`runner.run_schedule`, the CI profile unless told otherwise) runs schedules `seed`,
`seed + 1`, ... in a process whose `airflow_provider_dispatch` is the mutated copy, until one breaks an invariant
that the same schedule does not break against the unmutated code (the baseline, run once per schedule and kept
in the output directory): the mutant is then killed, by that schedule and that invariant. A mutant still alive
after `--schedules` schedules survived: the model lacks the move that would show the check matters (a finding).
Only the model kills: the directed tests do not count here.

Output: a markdown table (for docs/reliability.md) on stdout and in `<out>/mutation-table.md`, and the same
as JSON in `<out>/mutation-gate.json`. To add a mutant for a new check, add a row to `MUTANTS`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "airflow_provider_dispatch"
#: the lab the model runs on, a distribution of its own (lab/): copied and digested with the package
LAB = Path("lab") / "airflow_provider_dispatch_lab"


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str
    """Relative to the package (`dispatch/selection.py`)."""
    original: str
    replacement: str
    reason: str


MUTANTS: tuple[Mutant, ...] = (
    # --- which pods are the object's ---------------------------------------------------------------------------
    Mutant(
        "selection-dispatch-labels",
        "dispatch/selection.py",
        "return self.in_namespace(pod) and (self.matches_dispatch_labels(pod) or self.matches_jobset_name(pod))",
        "return self.in_namespace(pod) and self.matches_jobset_name(pod)",
        "pods that lost the jobset-name label are found by job id and submission (DESIGN §3.3)",
    ),
    Mutant(
        "selection-jobset-name",
        "dispatch/selection.py",
        "return self.in_namespace(pod) and (self.matches_dispatch_labels(pod) or self.matches_jobset_name(pod))",
        "return self.in_namespace(pod) and self.matches_dispatch_labels(pod)",
        "a rewritten or dropped runtime patch cannot hide pods from the jobset-name selection (DESIGN §3.3)",
    ),
    Mutant(
        "lineage-owner-and-name",
        "dispatch/selection.py",
        "return self._owned(pod) or self._named(pod)",
        "return False",
        "the hold records a pod whose labels were edited by its controller and its immutable name (fencing.py)",
    ),
    Mutant(
        "recorded-pods-looked-up",
        "dispatch/fencing.py",
        "return [pod for name, pod in lookups.items() if pod is not None and "
        "is_recorded_pod(execution_pods, name, pod)]",
        "return []",
        "a recorded pod the label selections no longer list still blocks while it exists (fencing.py)",
    ),
    # --- which pods block ----------------------------------------------------------------------------------------
    Mutant(
        "terminating-blocks",
        "dispatch/blocking.py",
        "    if phase not in TERMINAL_PHASES:\n        return Blocking.NOT_FINISHED",
        "    if phase not in TERMINAL_PHASES and field(pod, 'metadata', 'deletionTimestamp') is None:\n"
        "        return Blocking.NOT_FINISHED",
        "a Terminating pod's containers may still run until its kubelet confirms the end (DESIGN §3.4)",
    ),
    Mutant(
        "kueue-failure-recovery",
        "dispatch/blocking.py",
        "if phase == PHASE_FAILED and condition_is_true(pod, CONDITION_KUEUE_FAILURE_RECOVERY):",
        "if False:",
        "Kueue's failure recovery writes Failed with no proof the containers stopped (DESIGN §3.4)",
    ),
    Mutant(
        "fencing-vanished",
        "dispatch/fencing.py",
        "return remaining + vanished_pods(execution_pods, namespace, listed + relabelled, remaining, nodes, lookups)",
        "return remaining",
        "a recorded pod deleted while its node cannot confirm its end may still run (fencing.py)",
    ),
    Mutant(
        "fencing-returned-node",
        "dispatch/nodes.py",
        "return state.ready_for < confirming_seconds(grace_seconds)",
        "return False",
        "a node back from a partition kills what was deleted meanwhile only after it relists, with the pod's "
        "grace (fencing.py)",
    ),
    # --- the record --------------------------------------------------------------------------------------------
    Mutant(
        "hold-record",
        "dispatch/programs/holding.py",
        "yield from _replace(v.TRAINJOB, hold_body(trainjob, made.to_annotation()), text)",
        "yield from _replace(v.TRAINJOB, hold_body(trainjob), text)",
        "the hold records the execution's pods, so a later force deletion or label edit cannot hide them",
    ),
    Mutant(
        "hold-records-a-held-object",
        "dispatch/programs/holding.py",
        "    if is_held(trainjob):\n        yield from ensure_record(trainjob, obj, page_size=page_size)\n",
        "    if is_held(trainjob):\n",
        "a TrainJob suspended by someone else is recorded when dispatch first sees it held (fencing.py)",
    ),
    # --- the hold observed for this execution ------------------------------------------------------------------
    Mutant(
        "hold-observed-suspended",
        "dispatch/evidence.py",
        "    if not condition_is_true(trainjob, CONDITION_SUSPENDED):\n        return (",
        "    if False:\n        return (",
        "until Trainer reports Suspended, Jobs may still create pods after the check (DESIGN §3.1)",
    ),
    Mutant(
        "hold-observed-jobset-suspend",
        "dispatch/evidence.py",
        'if field_of(jobset, "spec", "suspend") is not True:',
        "if False:",
        "until the JobSet is suspended, its Jobs may still create pods after the check (DESIGN §3.1)",
    ),
    Mutant(
        "hold-observed-this-execution",
        "dispatch/evidence.py",
        "stale = _stale_templates(trainjob, jobset)",
        "stale: list[str] = []",
        "a JobSet suspended by an earlier hold, Trainer not having applied this execution's (evidence.py, ABA)",
    ),
    Mutant(
        "each-job-read",
        "dispatch/evidence.py",
        "problem = _job_problem(name, job, jobset_uid)",
        "problem = None",
        "a Job not suspended (or not yet created, or an earlier JobSet's) may still create pods (evidence.py)",
    ),
    Mutant(
        "settle",
        "dispatch/evidence.py",
        "return _settling(trainjob, evidence, admission)",
        "return None",
        "a write a controller started before it saw the hold may still land after the check (evidence.py)",
    ),
    Mutant(
        "settle-shortcut-needs-the-job-controller",
        "dispatch/evidence.py",
        "return resumed_for(job, admission) and job_controller_acted(job)",
        "return resumed_for(job, admission)",
        "the settle is skipped only where each Job shows the Job controller acted on the hold (evidence.py)",
    ),
    Mutant(
        "settle-from-the-hold-reaching-the-jobs",
        "dispatch/evidence.py",
        "reached = hold_reached(evidence)",
        "reached = None",
        "a hold that reached the JobSet late leaves JobSet's writes from its older view in flight until the settle "
        "counted from then (evidence.py)",
    ),
    Mutant(
        "settle-shortcut-needs-the-resume",
        "dispatch/evidence.py",
        "return resumed_for(job, admission) and job_controller_acted(job)",
        "return not resumed_for(job, admission) or job_controller_acted(job)",
        "a Job still suspended from an earlier hold may have JobSet's resume for this execution in flight, "
        "however long ago the execution started (evidence.py)",
    ),
    # --- cessation ---------------------------------------------------------------------------------------------
    Mutant(
        "cessation-taint",
        "dispatch/nodes.py",
        "return self.out_of_service and self.ready is not Readiness.TRUE",
        "return self.ready is not Readiness.TRUE",
        "a node that is merely not Ready may still run its pods; the taint is the operator's proof (DESIGN §4)",
    ),
    Mutant(
        "cessation-not-ready",
        "dispatch/nodes.py",
        "return self.out_of_service and self.ready is not Readiness.TRUE",
        "return self.out_of_service",
        "a taint on a Ready node is a mistake, not proof: PodGC's own test (DESIGN §4)",
    ),
    # --- the write, the runtime, the names ---------------------------------------------------------------------
    Mutant(
        "conditional-write",
        "dispatch/programs/releasing.py",
        "        fence=checked.fence.identity,\n    )\n    try:\n",
        "        fence=checked.fence.identity,\n    )\n"
        "    fresh = yield from read_trainjob(target)  # the write no longer depends on what was checked\n"
        '    body["metadata"]["resourceVersion"] = v.field(fresh, "metadata", "resourceVersion")\n'
        "    try:\n",
        "the admitting write is conditional on the version that was checked, so a change after the check (another "
        "caller's admission, a hold) makes it fail instead of admitting on stale facts (DESIGN §3.6)",
    ),
    Mutant(
        "runtime-policy-pod-replacement",
        "dispatch/policy.py",
        "unsafe = [(job, policy) for job, policy in unsafe if policy != SAFE_REPLACEMENT]",
        "unsafe = []",
        "a Job that replaces a Terminating pod starts a second process of its rank on a partition (policy.py, H1)",
    ),
    Mutant(
        "runtime-policy-jobset-restart",
        "dispatch/policy.py",
        "if restarts_possible(failure_policy) and strategy != SAFE_RESTART:",
        "if False:",
        "a JobSet restart that recreates Jobs beside an old one stuck on a lost node overlaps attempts (H2)",
    ),
    Mutant(
        "name-validation",
        "dispatch/validation.py",
        "    if pattern.fullmatch(value) is None:\n        raise",
        "    if False:\n        raise",
        "a name such as `a,b` must be refused, not turned into another selector or path (DESIGN §3.3)",
    ),
    # --- the record that only grows, the deleted Node, the namesake's predecessor (issue 26) -------------------
    Mutant(
        "record-grows-with-listed-pods",
        "dispatch/programs/releasing.py",
        "record = grown(record, pods=drained.pods, nodes=drained.nodes, now=drained.server_now)",
        "record = grown(record, pods=(), nodes=drained.nodes, now=drained.server_now)",
        "a pod bound or created after the hold's record, then listed, keeps blocking after a force deletion (#26, 1-2)",
    ),
    Mutant(
        "record-binds-unscheduled",
        "dispatch/fencing.py",
        "if known is not None and (name in known or not keep):",
        "if name in execution_pods.unscheduled or (known is not None and (name in known or not keep)):",
        "a pod recorded without a node is judged on its node once a check lists it bound (issue 26, case 1)",
    ),
    Mutant(
        "deleted-node-not-proof-at-once",
        "dispatch/fencing.py",
        "result[node] = NodeRead.DELETED_RECENTLY",
        "pass",
        "a Node deleted while its machine runs is no proof its pods stopped, until grace and margin pass (#26, 4)",
    ),
    Mutant(
        "deleted-node-waits-for-its-pods",
        "dispatch/fencing.py",
        "still_listed = nodes_of_pods_that_may_run(pods)",
        "still_listed = frozenset[str]()",
        "a deleted Node's clock starts only once no pod that may run is listed on it: PodGC takes up to 80 s",
    ),
    Mutant(
        "deleted-node-seen-after-nodes",
        "dispatch/fencing.py",
        "gone[node] = now",
        "gone[node] = execution_pods.since or now",
        "a Node's deletion is timed by a clock read after the Nodes, never the hold's, read before (issue 26, 4)",
    ),
    Mutant(
        "deleted-node-proof-skew",
        "dispatch/fencing.py",
        "confirming_seconds(grace_seconds) + clock_skew_seconds)",
        "confirming_seconds(grace_seconds))",
        "two API servers' clocks wrote the deletion's first sight and now: their skew is waited for (issue 26, 5)",
    ),
    Mutant(
        "namesake-waits-predecessor-jobs",
        "dispatch/evidence.py",
        "found.append(f\"Job {name_of(job)} (controller {parent or 'none'}{suffix})\")",
        "pass",
        "a namesake waits for every Job its deleted predecessor left (issue 26, case 3)",
    ),
    Mutant(
        "namesake-settles",
        "dispatch/evidence.py",
        "    if admission == 0:\n        return _namesake_settling(ref, evidence)",
        "    if admission == 0:\n        return None",
        "a namesake settles from when its predecessor's last Job was found gone (issue 26, case 3)",
    ),
    Mutant(
        "settle-clock-skew",
        "dispatch/evidence.py",
        "return self.settle_seconds + self.clock_skew_seconds",
        "return self.settle_seconds",
        "the settle compares times two API servers' clocks wrote: it waits for their skew too (issue 26, 5)",
    ),
)

#: the invariant a violation message belongs to (first match wins), for the table
INVARIANTS: tuple[tuple[str, str], ...] = (
    ("(both rank ", "two processes of one rank (recorder)"),
    ("two processes of rank ", "two processes of one rank (ledger)"),
    ("(restart attempts ", "two restart attempts at once (recorder)"),
    ("ran restart attempts ", "two restart attempts at once (ledger)"),
    (" overlaps rel/", "two executions at once (recorder)"),
    (") overlaps ", "two executions at once (ledger)"),
    ("label A=", "admission label (pod not labelled with its execution's A)"),
    ("ran without any admission", "a pod with no admission before it"),
    ("no complete read of the pods", "admission without a full check"),
    ("was not read after the TrainJob", "admission without a full check"),
    ("no successful read of TrainJob", "admission without a full check"),
    ("admitted while ", "no admission while an earlier execution runs"),
    ("raise A", "admission number A"),
    ("A changed", "admission number A"),
    (" raises", "admission number A"),
    ("the hold was lifted", "admission number A"),
    ("crafted name", "names refused before any request"),
    ("read-only", "read-only adapter"),
    ("outside DESIGN", "error classes"),
    ("caller was told", "what callers were told"),
    ("returned", "what callers were told"),
    ("not admitted again", "nothing lost (converge)"),
    ("final release", "nothing lost (converge)"),
    ("crashed", "no lab controller crashed"),
)


def source_digest(root: Path = ROOT) -> str:
    """A digest of dispatch's, the lab's and the model's sources: a baseline kept for other sources is not reused. The
    reliability suite's test modules and this gate are left out: the baseline's schedules do not run them, so
    editing a directed test or the gate's table keeps the baseline."""
    digest = hashlib.sha256()
    model = [p for p in (root / "tests" / "reliability").glob("*.py") if not _outside_model(p)]
    for path in sorted([*(root / PACKAGE).rglob("*.py"), *(root / LAB).rglob("*.py"), *model]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _outside_model(path: Path) -> bool:
    return path.name.startswith("test_") or path.name == Path(__file__).name


def _schedule_module() -> Any:
    """The model's `schedule.py` beside this file, however the gate was started (a script or a test module)."""
    name = "_mutation_gate_schedule"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("schedule.py"))
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def weights_of(pairs: Sequence[str]) -> dict[str, float]:
    """`--weight RULE=W` options as a mapping; a rule the model does not have, or a weight that is not a
    number of at least 0, is refused (ValueError) before anything runs."""
    schedule = _schedule_module()
    known = {*schedule.RULES, *schedule.HOSTILE_RULES, *schedule.KUEUE_RULES}
    weights: dict[str, float] = {}
    for pair in pairs:
        rule, _, text = pair.partition("=")
        if rule not in known:
            raise ValueError(f"--weight {pair}: no such rule (the rules: {', '.join(sorted(known))})")
        try:
            weight = float(text)
        except ValueError:
            weight = -1.0
        if not weight >= 0:
            raise ValueError(f"--weight {pair}: the weight must be a number of at least 0")
        weights[rule] = weight
    return weights


def invariant_of(violation: str) -> str:
    return next((name for marker, name in INVARIANTS if marker in violation), "other")


# --- applying a mutant --------------------------------------------------------------------------------------------


class SnippetError(Exception):
    """A mutant's original snippet is not found exactly once."""


def check(mutant: Mutant, root: Path = ROOT) -> str:
    """The mutated text of the mutant's file; SnippetError unless its snippet occurs exactly once."""
    path = root / PACKAGE / mutant.file
    text = path.read_text()
    count = text.count(mutant.original)
    if count != 1:
        raise SnippetError(f"{mutant.name}: the snippet occurs {count} times in {PACKAGE}/{mutant.file}, not once")
    return text.replace(mutant.original, mutant.replacement)


def materialise(mutant: Mutant | None, into: Path, source: Path = ROOT) -> Path:
    """A copy of the package, of the lab's package and of the tests of `source` under `into` (the package mutated
    unless `mutant` is None); returns the directory to put first on PYTHONPATH."""
    target = into / PACKAGE
    shutil.copytree(source / PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    # a checkout keeps the lab's package under lab/; a copy made here (the gate's snapshot) beside the provider's
    lab = source / LAB if (source / LAB).is_dir() else source / LAB.name
    shutil.copytree(lab, into / LAB.name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(source / "tests", into / "tests", ignore=shutil.ignore_patterns("__pycache__", "mutation-gate*"))
    if mutant is not None:
        (target / mutant.file).write_text(check(mutant, source))
    return into


#: the first parent of issue 26's merge: the code before the fix, a "mutant" for the search (`--judge sim`)
BEFORE_ISSUE_26 = "2809586^1"


def materialise_before_fix(into: Path, source: Path = ROOT, commit: str = BEFORE_ISSUE_26) -> Path:
    """A copy of the package and tests of `source` whose `dispatch/` modules are those of `commit` (read from this
    checkout's git): the code before issue 26's fix, which the search must tell from main by itself."""
    root = materialise(None, into, source)
    names = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{commit}:{PACKAGE}/dispatch/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        if name.endswith(".py"):
            text = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{commit}:{PACKAGE}/dispatch/{name}"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            module = root / PACKAGE / "dispatch" / name
            package = module.with_suffix("")
            if package.is_dir():  # split into a package since (dispatch/programs/): the old module alone stands
                shutil.rmtree(package)
            module.write_text(text)
    return root


def snapshot(into: Path) -> Path:
    """The package, the lab and the tests as they are when the gate starts, copied once: every mutant and the baseline
    are made from this copy, so editing the checkout while the gate runs (hours, at a large budget) changes no
    run of it."""
    return materialise(None, into)


# --- running the model against one copy -----------------------------------------------------------------------------


@dataclass
class Run:
    seed: int
    failed: bool
    violation: str
    wall_seconds: float
    steps: int
    admissions: int


def _worker(args: argparse.Namespace) -> int:
    """In the mutant's process: run the schedules, one JSON line each, until told to stop by a failure."""
    import airflow_provider_dispatch
    import airflow_provider_dispatch_lab

    expected = Path(os.environ["DISPATCH_MUTANT_ROOT"]).resolve()
    for package in (airflow_provider_dispatch, airflow_provider_dispatch_lab):
        where = Path(package.__file__ or "").resolve()
        if expected not in where.parents:
            print(json.dumps({"error": f"imported {where}, not the copy under {expected}"}), flush=True)
            return 3
    copied = expected / "tests"
    sys.path.insert(0, str(copied if copied.is_dir() else ROOT / "tests"))
    from reliability.runner import run_schedule
    from reliability.schedule import RULES, Profile

    weights = {**RULES, **weights_of(args.weight)}
    profile = Profile(name="gate", steps=args.steps, kueue=args.kueue, weights=weights)
    for seed in args.seeds:
        report = run_schedule(seed, profile)
        run = Run(
            seed,
            report.failed,
            report.violations[0] if report.violations else "",
            report.wall_seconds,
            report.executed,
            report.admissions,
        )
        print(json.dumps(asdict(run)), flush=True)
        if run.failed and args.stop_at_failure and seed not in args.baseline_failed:
            break
    return 0


def run_copy(
    mutant: Mutant | None,
    seeds: Sequence[int],
    options: argparse.Namespace,
    baseline_failed: Sequence[int] | None = None,
) -> list[Run]:
    """Run the model on `seeds` in a subprocess importing a copy of the package (mutated unless None); with
    `baseline_failed`, stop at the first failing schedule that is not one of those."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name if mutant else 'baseline'}-") as tmp:
        root = materialise(mutant, Path(tmp), options.source)
        env = {**os.environ, "PYTHONPATH": str(root), "DISPATCH_MUTANT_ROOT": str(root)}
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            "--steps",
            str(options.steps),
            "--seeds",
            *map(str, seeds),
        ]
        if baseline_failed is not None:
            command += ["--stop-at-failure", "--baseline-failed", *map(str, baseline_failed)]
        command += ["--kueue"] if options.kueue else []
        command += [f"--weight={weight}" for weight in options.weight]
        done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True, check=False)
    runs = []
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        data = json.loads(line)
        if "error" in data:
            raise RuntimeError(data["error"])
        runs.append(Run(**data))
    stopped = bool(runs) and runs[-1].failed and baseline_failed is not None and runs[-1].seed not in baseline_failed
    if len(runs) < len(seeds) and not stopped:
        raise RuntimeError(
            f"the model ran {len(runs)} of {len(seeds)} schedules ({done.returncode}): {done.stderr[-3000:]}"
        )
    return runs


@dataclass
class Verdict:
    name: str
    reason: str
    killed: bool
    schedules: int
    """Schedules run until the kill (or all of them, for a survivor)."""
    seed: int | None
    invariant: str
    violation: str
    wall_seconds: float


def judge(mutant: Mutant, baseline: dict[int, Run], options: argparse.Namespace) -> Verdict:
    """Run the mutant's schedules until one fails that the baseline passes."""
    seeds = [options.seed + i for i in range(options.schedules)]
    failed = [seed for seed, run in baseline.items() if run.failed]
    started = time.monotonic()
    for position, run in enumerate(run_copy(mutant, seeds, options, failed), start=1):
        if run.failed and run.seed not in failed:
            return Verdict(
                mutant.name,
                mutant.reason,
                True,
                position,
                run.seed,
                invariant_of(run.violation),
                run.violation[:400],
                time.monotonic() - started,
            )
    return Verdict(mutant.name, mutant.reason, False, len(seeds), None, "", "", time.monotonic() - started)


def table(verdicts: Sequence[Verdict], options: argparse.Namespace, baseline_failures: Sequence[int]) -> str:
    lines = [
        f"Mutation gate: the CI profile ({options.steps} steps{', Kueue mode' if options.kueue else ''}), "
        f"schedules from seed {options.seed}, at most {options.schedules} per mutant"
        + (f", weights changed: {', '.join(options.weight)}" if options.weight else "")
        + (f"; baseline failures (not counted): {list(baseline_failures)}" if baseline_failures else ""),
        "",
        "| mutant | check removed | schedules to first violation | invariant |",
        "|---|---|---|---|",
    ]
    for verdict in verdicts:
        first = f"{verdict.schedules} (seed {verdict.seed})" if verdict.killed else f"survived {verdict.schedules}"
        lines.append(f"| `{verdict.name}` | {verdict.reason} | {first} | {verdict.invariant or '-'} |")
    killed = sum(v.killed for v in verdicts)
    lines += ["", f"{killed} of {len(verdicts)} mutants killed by the model."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=[], help="run this mutant (repeatable)")
    parser.add_argument("--seed", type=int, default=20260807, help="the first schedule's seed (CI's)")
    parser.add_argument("--schedules", type=int, default=40, help="schedules per mutant before it survives")
    parser.add_argument("--steps", type=int, default=40, help="steps per schedule (CI: 40)")
    parser.add_argument("--kueue", action="store_true", help="the Kueue profile (queued TrainJobs beside plain)")
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="RULE=W",
        help="draw RULE with weight W instead of its CI weight (repeatable): a profile biased towards one story",
    )
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1; 2 cores: 2)")
    parser.add_argument("--out", type=Path, default=Path("mutation-gate"), help="where the table and JSON go")
    parser.add_argument("--check", action="store_true", help="only check that every snippet matches once")
    parser.add_argument(
        "--judge",
        choices=("model", "sim", "tests"),
        default="model",
        help="who kills: the live-lab model (default), the deterministic simulation's search (tests/reliability/sim) "
        "or the directed tests (--tests; mutation_tests_judge.py)",
    )
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        help="--judge tests: a test path to run against each mutant (repeatable; default tests/dispatch)",
    )
    parser.add_argument("--sim-seeds", type=int, default=2000, help="--judge sim: seeds per mutant before it survives")
    parser.add_argument("--sim-steps", type=int, default=600, help="--judge sim: steps per simulated schedule")
    parser.add_argument(
        "--sim-jobs",
        type=int,
        default=1,
        help="--judge sim: processes each search runs seeds in (search.py --jobs: the same first violating seed)",
    )
    parser.add_argument(
        "--before-fix",
        action="store_true",
        help="--judge sim: add the code before issue 26's fix (dispatch/ at 2809586^1) as a mutant to kill",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seeds", type=int, nargs="*", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--stop-at-failure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-failed", type=int, nargs="*", default=[], help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        return _worker(options)

    try:
        weights_of(options.weight)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    chosen = [m for m in MUTANTS if not options.only or m.name in options.only]
    unknown = set(options.only) - {m.name for m in MUTANTS}
    if unknown:
        print(f"no such mutant: {sorted(unknown)}", file=sys.stderr)
        return 2
    problems = []
    for mutant in chosen:
        try:
            check(mutant)
        except SnippetError as error:
            problems.append(str(error))
    if problems:
        print("refused: " + "; ".join(problems), file=sys.stderr)
        return 2
    if options.check:
        print(f"{len(chosen)} mutants, every snippet found exactly once")
        return 0

    options.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mutation-gate-source-") as frozen:
        options.source = snapshot(Path(frozen))
        if options.judge == "sim":
            return _sim_gate(chosen, options)
        if options.judge == "tests":
            sys.path.insert(0, str(ROOT / "tests"))
            from reliability.mutation_tests_judge import tests_gate

            return tests_gate(chosen, options, materialise, ROOT / "pyproject.toml")
        return _gate(chosen, options)


# --- the second judge: the simulation's search (tests/reliability/sim/search.py) -------------------------------------


def sim_search(mutant: Mutant | None, options: argparse.Namespace, *, before_fix: bool = False) -> dict[str, Any]:
    """The search on a copy of the package (mutated unless None; `before_fix`: dispatch/ before issue 26's fix),
    in a subprocess: its JSON result."""
    with tempfile.TemporaryDirectory(prefix=f"sim-{mutant.name if mutant else 'baseline'}-") as tmp:
        if before_fix:
            root = materialise_before_fix(Path(tmp), options.source)
        else:
            root = materialise(mutant, Path(tmp), options.source)
        env = {**os.environ, "PYTHONPATH": str(root)}
        command = [
            sys.executable,
            str(root / "tests" / "reliability" / "sim" / "search.py"),
            "--seed",
            "1",
            "--seeds",
            str(options.sim_seeds),
            "--steps",
            str(options.sim_steps),
            "--json",
            "--no-shrink",
            "--jobs",
            str(options.sim_jobs),
        ]
        done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"the search ran nothing ({done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _sim_gate(chosen: Sequence[Mutant], options: argparse.Namespace) -> int:
    """Each mutant judged by the simulation's search: killed when it finds a violation within `--sim-seeds` seeds
    that the unmutated code survives (the baseline must survive them all, or the table says so)."""
    started = time.monotonic()
    baseline = sim_search(None, options)
    lines = [
        f"Mutation gate, judged by the simulation's search: seeds 1 to {options.sim_seeds}, {options.sim_steps} steps "
        f"each; baseline: {'violation at seed ' + str(baseline['seed']) if baseline['violation'] else 'survived'}",
        "",
        "| mutant | check removed | schedules to first violation | seconds | violation |",
        "|---|---|---|---|---|",
    ]
    verdicts = []
    for mutant in chosen:
        result = sim_search(mutant, options)
        killed = bool(result["violation"]) and (not baseline["violation"] or result["seed"] < baseline["seed"])
        first = f"{result['seeds']} (seed {result['seed']})" if killed else f"survived {result['seeds']}"
        print(f"{mutant.name}: {'killed after ' + str(result['seeds']) if killed else 'SURVIVED'}", flush=True)
        verdicts.append({"name": mutant.name, "killed": killed, **result, "replay": None, "story": None})
        violation = result["violation"][:160].replace("|", "/") if killed else "-"
        lines.append(f"| `{mutant.name}` | {mutant.reason} | {first} | {result['wall_seconds']:.0f} | {violation} |")
    if options.before_fix:
        result = sim_search(None, options, before_fix=True)
        killed = bool(result["violation"]) and (not baseline["violation"] or result["seed"] < baseline["seed"])
        first = f"{result['seeds']} (seed {result['seed']})" if killed else f"survived {result['seeds']}"
        print(f"before-issue-26: {'killed after ' + str(result['seeds']) if killed else 'SURVIVED'}", flush=True)
        verdicts.append({"name": "before-issue-26", "killed": killed, **result, "replay": None, "story": None})
        violation = result["violation"][:160].replace("|", "/") if killed else "-"
        lines.append(
            f"| `before-issue-26` | `dispatch/` as at `{BEFORE_ISSUE_26}` (all of issue 26's checks) | {first} | "
            f"{result['wall_seconds']:.0f} | {violation} |"
        )
    killed_count = sum(v["killed"] for v in verdicts)
    lines += [
        "",
        f"{killed_count} of {len(verdicts)} mutants killed by the search ({time.monotonic() - started:.0f} s).",
    ]
    text = "\n".join(lines)
    print(text)
    (options.out / "mutation-table-sim.md").write_text(text + "\n")
    (options.out / "mutation-gate-sim.json").write_text(
        json.dumps({"baseline": baseline, "mutants": verdicts}, indent=1)
    )
    return 0 if all(v["killed"] for v in verdicts) else 1


def _gate(chosen: Sequence[Mutant], options: argparse.Namespace) -> int:
    """The baseline (kept per source digest), then each mutant; the JSON is rewritten after each mutant, so an
    interrupted run keeps what it measured."""
    started = time.monotonic()
    seeds = [options.seed + i for i in range(options.schedules)]
    mode = ("-kueue" if options.kueue else "") + "".join(f"-{weight}" for weight in sorted(options.weight))
    cache = options.out / f"baseline-{source_digest(options.source)}-{options.seed}-{options.steps}{mode}.json"
    known = {r["seed"]: Run(**r) for r in json.loads(cache.read_text())} if cache.exists() else {}
    missing = [s for s in seeds if s not in known]
    print(f"baseline: {len(missing)} schedules to run ({len(known)} known)", flush=True)
    for run in run_copy(None, missing, options) if missing else []:
        known[run.seed] = run
    cache.write_text(json.dumps([asdict(r) for r in sorted(known.values(), key=lambda r: r.seed)], indent=1))
    baseline = {s: known[s] for s in seeds if s in known}
    baseline_failures = [s for s, r in baseline.items() if r.failed]
    verdicts: list[Verdict] = []

    def save() -> None:
        result: dict[str, Any] = {
            "seed": options.seed,
            "steps": options.steps,
            "schedules": options.schedules,
            "kueue": options.kueue,
            "wall_seconds": round(time.monotonic() - started),
            "baseline": [asdict(r) for r in baseline.values()],
            "mutants": [asdict(v) for v in verdicts],
        }
        (options.out / "mutation-gate.json").write_text(json.dumps(result, indent=1) + "\n")

    def one(mutant: Mutant) -> Verdict:
        verdict = judge(mutant, baseline, options)
        state = f"killed after {verdict.schedules} ({verdict.invariant})" if verdict.killed else "SURVIVED"
        print(f"{mutant.name}: {state} in {verdict.wall_seconds:.0f} s", flush=True)
        verdicts.append(verdict)
        save()
        return verdict

    with ThreadPoolExecutor(max(options.jobs, 1)) as pool:
        ordered = list(pool.map(one, chosen))
    verdicts[:] = ordered
    save()
    text = table(ordered, options, baseline_failures)
    text += f"\n\nThe gate ran {time.monotonic() - started:.0f} s ({options.jobs} at once)."
    print(text)
    (options.out / "mutation-table.md").write_text(text + "\n")
    return 0 if all(v.killed for v in ordered) else 1


if __name__ == "__main__":
    sys.exit(main())
