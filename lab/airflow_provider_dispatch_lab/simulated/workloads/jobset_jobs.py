"""What the JobSet controller computes from a JobSet and its child Jobs: pure functions.

Sources (research k8s-apis.md §2.1, §2.2, §6 rule 5), `kubernetes-sigs/jobset:pkg/controllers/`:

- `jobset_controller.go` `getChildJobs`: a Job whose `jobset.sigs.k8s.io/restart-attempt` label is below
  `status.restarts` belongs to a previous run; the others are active, successful (`Complete=True`) or failed
  (`Failed=True`).
- `calculateReplicatedJobStatuses`, over the current run's Jobs: `ready` counts active Jobs with
  `status.ready + status.succeeded >= min(parallelism, completions)`, `active` those with `status.active > 0`,
  `suspended` those with `spec.suspend`; `succeeded` and `failed` count finished Jobs. Upstream builds the
  list from a Go map, so its order is random; the lab keeps the spec's order, and compares ignoring order
  (`replicatedJobStatusesEqual`).
- `constructJob` and `labelAndAnnotateObject`: Job `<jobset>-<replicatedJob>-<index>` (`placement.GenJobName`)
  with the Job template's metadata and spec, the JobSet labels set both as labels and as annotations on the
  Job and on its pod template, the pod subdomain when DNS hostnames are enabled, and `spec.suspend` = the
  JobSet's. The `jobset-uid` and group keys are those of §2.1 (group `default` unless `groupName` is set;
  group replicas and the job's index within its group count like the global ones, as the upstream tests'
  `addGroupReplicas` / `addJobGroupIndex` expect).
- `success_policy.go`: `All` (the webhook default) needs every targeted Job to succeed, `Any` one.
- `failure_policy.go` `executeFailurePolicy`: without a failure policy the JobSet fails (`FailedJobs`);
  with one, the first rule matching the first failed Job decides (`FailJobSet`, `RestartJobSet` up to
  `maxRestarts`, `RestartJobSetAndIgnoreMaxRestarts`), `RestartJobSet` when none matches. A restart only
  increments `status.restarts`: the next reconcile deletes the old Jobs (Foreground) and creates new ones.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_dispatch_lab.kinds import JOBSET
from airflow_provider_dispatch_lab.simulated.objects import condition_true, controller_reference, find_condition, meta

Obj = dict[str, Any]

PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME = PREFIX + "jobset-name"
JOBSET_UID = PREFIX + "jobset-uid"
REPLICATED_JOB_NAME = PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS = PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS = PREFIX + "global-replicas"
JOB_INDEX = PREFIX + "job-index"
JOB_GLOBAL_INDEX = PREFIX + "job-global-index"
JOB_KEY = PREFIX + "job-key"
RESTART_ATTEMPT = PREFIX + "restart-attempt"
GROUP_NAME = PREFIX + "group-name"
GROUP_REPLICAS = PREFIX + "group-replicas"
JOB_GROUP_INDEX = PREFIX + "job-group-index"
COORDINATOR = PREFIX + "coordinator"
DEFAULT_GROUP = "default"
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"

SUSPENDED = ("SuspendedJobs", "jobset is suspended")
RESUMED = ("ResumeJobs", "jobset is resumed")
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
REACHED_MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_JOBSET_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")


@dataclass
class ChildJobs:
    active: list[Obj] = field(default_factory=list)
    successful: list[Obj] = field(default_factory=list)
    failed: list[Obj] = field(default_factory=list)
    previous: list[Obj] = field(default_factory=list)

    def all(self) -> list[Obj]:
        return [*self.active, *self.successful, *self.failed, *self.previous]


def replicated_jobs(jobset: Mapping[str, Any]) -> list[Obj]:
    return list((jobset.get("spec") or {}).get("replicatedJobs") or [])


def replicas(job: Mapping[str, Any]) -> int:
    return int(job.get("replicas", 1) if job.get("replicas") is not None else 1)


def job_name(jobset_name: str, replicated_job: str, index: int) -> str:
    """`placement.GenJobName`."""
    return f"{jobset_name}-{replicated_job}-{index}"


def finished_type(job: Mapping[str, Any]) -> str:
    """`JobFinished`: "Complete", "Failed" or "" for a Job still running."""
    for condition in (job.get("status") or {}).get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return ""


def classify(jobs: Iterable[Obj], restarts: int) -> ChildJobs:
    """`getChildJobs`; a Job with a malformed restart-attempt label is an error upstream, here "previous"."""
    owned = ChildJobs()
    for job in jobs:
        try:
            attempt = int((meta(job).get("labels") or {}).get(RESTART_ATTEMPT, ""))
        except ValueError:
            owned.previous.append(job)
            continue
        if attempt < restarts:
            owned.previous.append(job)
            continue
        kind = finished_type(job)
        bucket = {"": owned.active, "Complete": owned.successful, "Failed": owned.failed}[kind]
        bucket.append(job)
    return owned


def _rjob_of(job: Mapping[str, Any]) -> str:
    return str((meta(job).get("labels") or {}).get(REPLICATED_JOB_NAME) or "")


def replicated_job_statuses(jobset: Mapping[str, Any], owned: ChildJobs) -> list[Obj]:
    """`calculateReplicatedJobStatuses`, in the spec's order."""
    counts: dict[str, dict[str, int]] = {
        str(rjob["name"]): {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for rjob in replicated_jobs(jobset)
    }
    for job in owned.active:
        entry = counts.get(_rjob_of(job))
        if entry is None:
            continue
        spec, status = job.get("spec") or {}, job.get("status") or {}
        pods = int(spec.get("parallelism") or 1)
        if spec.get("completions") is not None and int(spec["completions"]) < pods:
            pods = int(spec["completions"])
        if int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods:
            entry["ready"] += 1
        if int(status.get("active") or 0) > 0:
            entry["active"] += 1
        if spec.get("suspend") is True:
            entry["suspended"] += 1
    for job in owned.successful:
        if _rjob_of(job) in counts:
            counts[_rjob_of(job)]["succeeded"] += 1
    for job in owned.failed:
        if _rjob_of(job) in counts:
            counts[_rjob_of(job)]["failed"] += 1
    return [{"name": name, **values} for name, values in counts.items()]


def statuses_equal(old: Iterable[Obj] | None, new: Iterable[Obj] | None) -> bool:
    def normal(items: Iterable[Obj] | None) -> list[Obj]:
        return sorted((dict(i) for i in items or ()), key=lambda i: str(i.get("name")))

    return normal(old) == normal(new)


def _global_index(jobset: Mapping[str, Any], rjob_name: str, index: int) -> str:
    total = 0
    for rjob in replicated_jobs(jobset):
        if rjob.get("name") == rjob_name:
            return str(total + index)
        total += replicas(rjob)
    return ""


def _group(rjob: Mapping[str, Any]) -> str:
    return str(rjob.get("groupName") or DEFAULT_GROUP)


def _group_index(jobset: Mapping[str, Any], group: str, rjob_name: str, index: int) -> str:
    total = 0
    for rjob in replicated_jobs(jobset):
        if _group(rjob) != group:
            continue
        if rjob.get("name") == rjob_name:
            return str(total + index)
        total += replicas(rjob)
    return ""


def subdomain(jobset: Mapping[str, Any]) -> str:
    """`GetSubdomain`: `spec.network.subdomain`, else the JobSet's name."""
    network = (jobset.get("spec") or {}).get("network") or {}
    return str(network.get("subdomain") or meta(jobset).get("name"))


def dns_hostnames_enabled(jobset: Mapping[str, Any]) -> bool:
    return ((jobset.get("spec") or {}).get("network") or {}).get("enableDNSHostnames") is True


def jobset_keys(jobset: Mapping[str, Any], rjob: Mapping[str, Any], index: int) -> dict[str, str]:
    """The keys `labelAndAnnotateObject` sets, as labels and as annotations alike."""
    metadata = meta(jobset)
    name, namespace = str(metadata["name"]), str(metadata.get("namespace") or "")
    rjob_name, group = str(rjob["name"]), _group(rjob)
    keys = {
        JOBSET_NAME: name,
        JOBSET_UID: str(metadata.get("uid") or ""),
        REPLICATED_JOB_NAME: rjob_name,
        RESTART_ATTEMPT: str(int((jobset.get("status") or {}).get("restarts") or 0)),
        REPLICATED_JOB_REPLICAS: str(replicas(rjob)),
        GLOBAL_REPLICAS: str(sum(replicas(r) for r in replicated_jobs(jobset))),
        JOB_INDEX: str(index),
        JOB_KEY: hashlib.sha1(f"{namespace}/{job_name(name, rjob_name, index)}".encode()).hexdigest(),
        JOB_GLOBAL_INDEX: _global_index(jobset, rjob_name, index),
        GROUP_NAME: group,
        GROUP_REPLICAS: str(sum(replicas(r) for r in replicated_jobs(jobset) if _group(r) == group)),
        JOB_GROUP_INDEX: _group_index(jobset, group, rjob_name, index),
    }
    coordinator = (jobset.get("spec") or {}).get("coordinator")
    if coordinator:
        keys[COORDINATOR] = (
            f"{name}-{coordinator.get('replicatedJob')}-{int(coordinator.get('jobIndex') or 0)}-"
            f"{int(coordinator.get('podIndex') or 0)}.{subdomain(jobset)}"
        )
    return keys


def _label_and_annotate(obj: Obj, keys: Mapping[str, str]) -> None:
    metadata = obj.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **keys}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **keys}


def construct_job(jobset: Mapping[str, Any], rjob: Mapping[str, Any], index: int) -> Obj:
    """`constructJob`, with the controller owner reference `createJobs` adds."""
    template = rjob.get("template") or {}
    template_meta = template.get("metadata") or {}
    metadata: Obj = {"name": job_name(str(meta(jobset)["name"]), str(rjob["name"]), index)}
    if template_meta.get("labels"):
        metadata["labels"] = dict(template_meta["labels"])
    if template_meta.get("annotations"):
        metadata["annotations"] = dict(template_meta["annotations"])
    metadata["ownerReferences"] = [controller_reference(jobset, JOBSET)]
    job: Obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata}
    job["spec"] = copy.deepcopy(template.get("spec") or {})
    keys = jobset_keys(jobset, rjob, index)
    _label_and_annotate(job, keys)
    _label_and_annotate(job["spec"].setdefault("template", {}), keys)
    if dns_hostnames_enabled(jobset):
        job["spec"]["template"].setdefault("spec", {})["subdomain"] = subdomain(jobset)
    job["spec"]["suspend"] = bool((jobset.get("spec") or {}).get("suspend"))
    return job


def jobs_to_create(jobset: Mapping[str, Any], owned: ChildJobs) -> list[Obj]:
    """`constructJobsFromTemplate` for every replicated Job: the missing ones, none while a
    `BlockingRecreate` restart still has old Jobs."""
    strategy = ((jobset.get("spec") or {}).get("failurePolicy") or {}).get("restartStrategy")
    if owned.previous and strategy == "BlockingRecreate":
        return []
    existing = {meta(job).get("name") for job in owned.all()}
    name = str(meta(jobset)["name"])
    return [
        construct_job(jobset, rjob, index)
        for rjob in replicated_jobs(jobset)
        for index in range(replicas(rjob))
        if job_name(name, str(rjob["name"]), index) not in existing
    ]


def finished(jobset: Mapping[str, Any]) -> bool:
    return condition_true(jobset, "Completed") or condition_true(jobset, "Failed")


def success_policy_met(jobset: Mapping[str, Any], successful: list[Obj]) -> bool:
    """`executeSuccessPolicy`: matching successful Jobs reach the number expected."""
    policy = (jobset.get("spec") or {}).get("successPolicy") or {"operator": "All"}
    targets = set(policy.get("targetReplicatedJobs") or [r["name"] for r in replicated_jobs(jobset)])
    matching = sum(1 for job in successful if _rjob_of(job) in targets)
    if policy.get("operator") == "Any":
        expected = 1
    else:
        expected = sum(replicas(r) for r in replicated_jobs(jobset) if r.get("name") in targets)
    return matching >= expected


def _failure_time(job: Mapping[str, Any]) -> str:
    condition = find_condition((job.get("status") or {}).get("conditions"), "Failed") or {}
    return str(condition.get("lastTransitionTime") or "")


def _rule_applies(rule: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    reason = (find_condition((job.get("status") or {}).get("conditions"), "Failed") or {}).get("reason")
    reasons = rule.get("onJobFailureReasons") or []
    targets = rule.get("targetReplicatedJobs") or []
    return (not reasons or reason in reasons) and bool(_rjob_of(job)) and (not targets or _rjob_of(job) in targets)


@dataclass(frozen=True)
class FailureOutcome:
    """A failed condition (reason, message), or a restart (counting towards `maxRestarts` or not), or
    neither for an action the lab does not know (upstream logs it and retries)."""

    failed: tuple[str, str] | None = None
    restart_counts: bool | None = None


def failure_outcome(jobset: Mapping[str, Any], failed_jobs: list[Obj]) -> FailureOutcome:
    """`executeFailurePolicy` and its action appliers."""
    first = min(failed_jobs, key=_failure_time)
    policy = (jobset.get("spec") or {}).get("failurePolicy")
    if policy is None:
        reason, message = FAILED_JOBS
        return FailureOutcome(failed=(reason, f"{message} (first failed job: {meta(first)['name']})"))
    action, matched = "RestartJobSet", first
    for rule in policy.get("rules") or ():
        candidates = [job for job in failed_jobs if _rule_applies(rule, job)]
        if candidates:
            action, matched = str(rule.get("action")), min(candidates, key=_failure_time)
            break
    suffix = f" (first failed job: {meta(matched)['name']})"
    if action == "FailJobSet":
        return FailureOutcome(failed=(FAIL_JOBSET_ACTION[0], FAIL_JOBSET_ACTION[1] + suffix))
    if action == "RestartJobSetAndIgnoreMaxRestarts":
        return FailureOutcome(restart_counts=False)
    if action != "RestartJobSet":
        return FailureOutcome()
    restarts = int((jobset.get("status") or {}).get("restartsCountTowardsMax") or 0)
    if restarts >= int(policy.get("maxRestarts") or 0):
        return FailureOutcome(failed=(REACHED_MAX_RESTARTS[0], REACHED_MAX_RESTARTS[1] + suffix))
    return FailureOutcome(restart_counts=True)
