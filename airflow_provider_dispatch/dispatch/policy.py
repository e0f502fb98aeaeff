"""Runtime policy: refuse runtimes whose controllers may start a second copy of one rank (DESIGN §3.7).

The drain check keeps re-admissions apart. Two upstream behaviours start a second process of one rank with no
re-admission at all (research lab-fidelity-audit.md, hazards H1 and H2), so no check at admission time can stop
them; only the runtime's settings can:

* **pod replacement** (`pod-replacement`). Under a Job's default `podReplacementPolicy: TerminatingOrFailed`
  the Job controller counts a pod that is being deleted as gone and creates a replacement for its index at once
  (`kubernetes/kubernetes:pkg/controller/job/job_controller.go` `manageJob`: `diff := wantActive - terminating
  - active` subtracts `terminating` only when `onlyReplaceFailedPods`; `indexed_job_utils.go`
  `firstPendingIndexes` likewise). On a partitioned node, taint eviction deletes the pods after the default
  300 s toleration; they stay Terminating while they may still run, and their replacements start elsewhere:
  two writers of one rank inside one execution. With `podReplacementPolicy: Failed` the Job waits until the old
  pod is terminal, which on a lost node means PodGC proved it ended. The default is `TerminatingOrFailed` unless
  the Job has a `podFailurePolicy`, then `Failed` (`pkg/apis/batch/v1/defaults.go`; the gate is GA and locked on
  since 1.34). JobSet, Trainer's runtimes and Kueue set neither (audit row 3).
* **JobSet restarts** (`jobset-restart`). A JobSet failure-policy restart deletes the old Jobs with foreground
  propagation; under the default `restartStrategy: Recreate` it creates each Job whose old object is gone at
  once, while another old Job, held by foreground deletion, still has a pod Terminating on a lost node
  (`kubernetes-sigs/jobset:pkg/controllers/jobset_controller.go` `deleteJobs`, `shouldCreateJob`). Attempts n
  and n+1 overlap. `BlockingRecreate` (since JobSet v0.7.0) waits until every old Job is gone. Restarts are
  possible when `failurePolicy.maxRestarts` is above 0 or a rule's action restarts regardless of it
  (`...AndIgnoreMaxRestarts`).

Runtime patches cannot set either field (the TrainJob CRD's `runtimePatches` schema has no Job or JobSet spec
fields but the pod template's), so the runtime alone decides.

A platform team can accept a risk by name (`accepted_risks`): the admission then proceeds, the risk is logged
on every admission and recorded on the TrainJob (annotation `dispatch.phpboyscout.uk/accepted-risks`) so that
`dispatch status` shows it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_dispatch.dispatch.vocabulary import field, name_of, object_list

#: the Job's own default when neither the field nor a podFailurePolicy is set (batch/v1 defaults.go)
JOB_DEFAULT_REPLACEMENT: Final = "TerminatingOrFailed"
SAFE_REPLACEMENT: Final = "Failed"
JOBSET_DEFAULT_RESTART: Final = "Recreate"
SAFE_RESTART: Final = "BlockingRecreate"

POD_REPLACEMENT: Final = "pod-replacement"
JOBSET_RESTART: Final = "jobset-restart"
#: every risk a platform team may accept by name
RISKS: Final = (POD_REPLACEMENT, JOBSET_RESTART)


@dataclass(frozen=True)
class RuntimeRisk:
    """One setting of a runtime that lets a controller start a second copy of a rank, and its fix."""

    name: str
    runtime: str
    detail: str
    fix: str

    def describe(self) -> str:
        return f"{self.name}: {self.detail}"


def validate_accepted_risks(accepted: Iterable[str]) -> frozenset[str]:
    """The accepted risk names, refused (ValueError) when one is not a known risk: a typo must not pass."""
    names = frozenset(accepted)
    unknown = sorted(names - set(RISKS))
    if unknown:
        raise ValueError(
            f"unknown runtime risk {', '.join(map(repr, unknown))}; the risks that can be accepted are "
            f"{', '.join(RISKS)}"
        )
    return names


def _replicated_jobs(runtime: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return object_list(runtime, "spec", "template", "spec", "replicatedJobs")


def effective_replacement_policy(job_spec: Mapping[str, Any] | None) -> str:
    """The `podReplacementPolicy` the API server defaults a Job spec to."""
    policy = field(job_spec, "podReplacementPolicy")
    if isinstance(policy, str) and policy:
        return policy
    return SAFE_REPLACEMENT if field(job_spec, "podFailurePolicy") is not None else JOB_DEFAULT_REPLACEMENT


def restarts_possible(failure_policy: Mapping[str, Any] | None) -> bool:
    """Whether a JobSet with this `failurePolicy` may restart (recreate its Jobs) at all."""
    if not isinstance(failure_policy, Mapping):
        return False
    max_restarts = failure_policy.get("maxRestarts")
    if isinstance(max_restarts, int) and not isinstance(max_restarts, bool) and max_restarts > 0:
        return True
    return any(
        str(rule.get("action", "")).endswith("AndIgnoreMaxRestarts") for rule in object_list(failure_policy, "rules")
    )


def runtime_risks(runtime: Mapping[str, Any]) -> tuple[RuntimeRisk, ...]:
    """Every setting of the runtime that may start two processes of one rank, with the change that fixes it."""
    name = name_of(runtime)
    kind = str(runtime.get("kind") or "ClusterTrainingRuntime")
    risks: list[RuntimeRisk] = []
    unsafe = [
        (str(job.get("name", "")), effective_replacement_policy(field(job, "template", "spec")))
        for job in _replicated_jobs(runtime)
    ]
    unsafe = [(job, policy) for job, policy in unsafe if policy != SAFE_REPLACEMENT]
    if unsafe:
        jobs = ", ".join(f"{job} ({policy})" for job, policy in unsafe)
        risks.append(
            RuntimeRisk(
                POD_REPLACEMENT,
                name,
                f"{kind} {name} lets the Job controller replace a pod that is still Terminating (replicatedJobs "
                f"{jobs}): on a partitioned node, taint eviction deletes the pod while it may still run and the "
                "replacement starts beside it, two processes of one rank",
                fix_command(POD_REPLACEMENT, runtime),
            )
        )
    failure_policy = field(runtime, "spec", "template", "spec", "failurePolicy")
    strategy = field(failure_policy, "restartStrategy") or JOBSET_DEFAULT_RESTART
    if restarts_possible(failure_policy) and strategy != SAFE_RESTART:
        risks.append(
            RuntimeRisk(
                JOBSET_RESTART,
                name,
                f"{kind} {name} lets its JobSet restart with restartStrategy {strategy}: a restart creates new "
                "Jobs while an old Job may still have a pod Terminating on a lost node, so two attempts overlap",
                fix_command(JOBSET_RESTART, runtime),
            )
        )
    return tuple(risks)


def unaccepted(risks: Iterable[RuntimeRisk], accepted: Collection[str]) -> tuple[RuntimeRisk, ...]:
    return tuple(risk for risk in risks if risk.name not in accepted)


def fix_command(risk: str, runtime: Mapping[str, Any]) -> str:
    """The exact change that removes the risk named `risk`, as a command a platform team can run."""
    kind = str(runtime.get("kind") or "ClusterTrainingRuntime").lower()
    where = f" -n {field(runtime, 'metadata', 'namespace')}" if kind == "trainingruntime" else ""
    if risk == POD_REPLACEMENT:
        ops = [
            {
                "op": "add",
                "path": f"/spec/template/spec/replicatedJobs/{index}/template/spec/podReplacementPolicy",
                "value": SAFE_REPLACEMENT,
            }
            for index, _ in enumerate(_replicated_jobs(runtime))
        ]
        return f"kubectl patch {kind} {name_of(runtime)}{where} --type=json -p '{json.dumps(ops)}'"
    return (
        f"failurePolicy is immutable in a runtime: recreate {kind} {name_of(runtime)} with "
        f"spec.template.spec.failurePolicy.restartStrategy: {SAFE_RESTART} (kubectl replace --force -f <file>)"
    )


__all__ = [
    "JOBSET_RESTART",
    "POD_REPLACEMENT",
    "RISKS",
    "SAFE_REPLACEMENT",
    "SAFE_RESTART",
    "RuntimeRisk",
    "effective_replacement_policy",
    "fix_command",
    "restarts_possible",
    "runtime_risks",
    "unaccepted",
    "validate_accepted_risks",
]
