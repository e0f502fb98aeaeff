"""The pure parts of the lab's Kueue, rule by rule against upstream (k8s-apis.md §4, §6 rule 10)."""

from __future__ import annotations

import copy
import hashlib
from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.simulated.kueue import constants as k
from airflow_provider_dispatch_lab.simulated.kueue import preemption, queues, quota
from airflow_provider_dispatch_lab.simulated.kueue import workload_status as ws
from airflow_provider_dispatch_lab.simulated.kueue.config import KueueConfig
from airflow_provider_dispatch_lab.simulated.kueue.names import workload_name
from airflow_provider_dispatch_lab.simulated.kueue.podsets import (
    PodSetMergeError,
    kueue_patch_replicated_jobs,
    podset_infos,
    podsets,
    replicated_jobs,
)
from airflow_provider_dispatch_lab.simulated.kueue.status_writer import admission_status_patch
from airflow_provider_dispatch_lab.simulated.kueue.webhook import default_trainjob

Obj = dict[str, Any]
NOW = "2026-09-01T10:00:00Z"
LATER = "2026-09-01T10:05:00Z"
GATE_ON, GATE_OFF = KueueConfig(unadmitted_workloads_observability=True), KueueConfig()


def workload(*, checks: list[Obj] | None = None, conditions: list[Obj] | None = None, **spec: Any) -> Obj:
    wl: Obj = {
        "metadata": {"name": "wl", "namespace": "ns", "generation": 1, "uid": "u1", "creationTimestamp": NOW},
        "spec": {"podSets": [{"name": "node", "count": 1, "template": {"spec": {"containers": []}}}], **spec},
        "status": {},
    }
    if checks is not None:
        wl["status"]["admissionChecks"] = checks
    if conditions is not None:
        wl["status"]["conditions"] = conditions
    return wl


def cond(kind: str, status: bool, reason: str = "R", message: str = "m", when: str = NOW) -> Obj:
    return {"type": kind, "status": str(status), "reason": reason, "message": message, "lastTransitionTime": when}


def check(name: str, state: str, message: str = "", **extra: Any) -> Obj:
    return {"name": name, "state": state, "message": message, "lastTransitionTime": NOW, **extra}


def reasons(wl: Obj) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in wl["status"].get("conditions", [])}


# --- names --------------------------------------------------------------------------------------------------


def test_workload_name_is_kind_name_and_five_hex_of_the_sha1() -> None:
    digest = hashlib.sha1(b"TrainJob\ntrainer.kubeflow.org\nft-7\n0b7e-uid").hexdigest()
    assert workload_name("ft-7", "0b7e-uid") == f"trainjob-ft-7-{digest[:5]}"
    assert workload_name("ft-7", "other-uid") != workload_name("ft-7", "0b7e-uid")


def test_a_long_workload_name_is_cut_to_253_characters() -> None:
    name = workload_name("a" * 300, "uid")
    assert len(name) == 253
    assert name.startswith("trainjob-aaa")
    assert name[-6] == "-"


# --- the webhook ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "spec", "managed", "suspend", "managers"),
    [
        ({k.QUEUE_LABEL: "q"}, {"suspend": False}, True, True, [k.RUNTIME_PATCH_MANAGER]),
        ({k.QUEUE_LABEL: "q"}, {}, True, True, [k.RUNTIME_PATCH_MANAGER]),
        ({k.QUEUE_LABEL: "q"}, {"runtimePatches": [{"manager": "x/y"}]}, True, True, ["x/y", k.RUNTIME_PATCH_MANAGER]),
        # Kueue v0.19.2 appends its entry to every TrainJob created, unconditionally (`Default`; real cluster)
        ({}, {"suspend": False}, False, False, [k.RUNTIME_PATCH_MANAGER]),
        ({k.QUEUE_LABEL: ""}, {"suspend": False}, False, False, [k.RUNTIME_PATCH_MANAGER]),
        (
            {k.QUEUE_LABEL: "q"},
            {"runtimePatches": [{"manager": k.RUNTIME_PATCH_MANAGER}]},
            True,
            True,
            [k.RUNTIME_PATCH_MANAGER, k.RUNTIME_PATCH_MANAGER],
        ),
    ],
)
def test_the_webhook_suspends_queued_trainjobs_and_appends_its_patch(
    labels: dict[str, str], spec: Obj, managed: bool, suspend: bool, managers: list[str]
) -> None:
    trainjob = {"metadata": {"name": "t", "labels": labels}, "spec": copy.deepcopy(spec)}
    assert default_trainjob(trainjob) is managed
    assert trainjob["spec"].get("suspend", False) is suspend
    assert [p["manager"] for p in trainjob["spec"].get("runtimePatches", [])] == managers
    assert trainjob["spec"]["runtimePatches"][-1] == {
        "manager": k.RUNTIME_PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {}}},
    }


# --- PodSets ------------------------------------------------------------------------------------------------


def test_podsets_count_num_nodes_and_carry_the_resources_per_node() -> None:
    runtime = manifests.cluster_training_runtime()["spec"]
    trainjob = manifests.trainjob("t", num_nodes=3)
    trainjob["spec"]["trainer"]["resourcesPerNode"] = {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}
    [podset] = podsets(trainjob, runtime)
    assert (podset["name"], podset["count"]) == ("node", 3)
    container = podset["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "2", "nvidia.com/gpu": "1"}}
    assert quota.podset_requests(podset) == {"cpu": Decimal(6), "nvidia.com/gpu": Decimal(3)}


def test_podsets_fall_back_to_the_runtime_num_nodes() -> None:
    runtime = manifests.cluster_training_runtime()["spec"]
    runtime["mlPolicy"]["numNodes"] = 4
    trainjob = manifests.trainjob("t")
    del trainjob["spec"]["trainer"]["numNodes"]
    assert [p["count"] for p in podsets(trainjob, runtime)] == [4]


def test_the_runtime_without_kueue_patch_drops_only_kueue_entries() -> None:
    runtime = manifests.cluster_training_runtime()["spec"]
    trainjob = manifests.trainjob("t")
    label_patch = {"spec": {"template": {"metadata": {"labels": {"who": "me"}}}}}
    trainjob["spec"]["runtimePatches"] = [
        {
            "manager": "x/y",
            "trainingRuntimeSpec": {
                "template": {"spec": {"replicatedJobs": [{"name": "node", "template": label_patch}]}}
            },
        },
        {
            "manager": k.RUNTIME_PATCH_MANAGER,
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {"spec": {"template": {"metadata": {"labels": {k.PODSET_LABEL: "node"}}}}},
                            }
                        ]
                    }
                }
            },
        },
    ]
    with_all = replicated_jobs(trainjob, runtime)[0]["template"]["spec"]["template"]["metadata"]["labels"]
    without = replicated_jobs(trainjob, runtime, with_kueue_patch=False)[0]["template"]["spec"]["template"]
    assert with_all["who"] == "me"
    assert with_all[k.PODSET_LABEL] == "node"
    assert without["metadata"]["labels"]["who"] == "me"
    assert k.PODSET_LABEL not in without["metadata"]["labels"]


def _admitted(*updates: Obj) -> Obj:
    wl = workload(checks=[check("c1", k.CHECK_READY, podSetUpdates=list(updates))])
    wl["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"name": "node", "count": 1}]}
    return wl


def test_the_podset_info_has_the_podset_label_and_the_checks_updates() -> None:
    [info] = podset_infos(_admitted({"name": "node", "labels": {"a": "1"}, "nodeSelector": {"zone": "z1"}}))
    assert info.labels == {k.PODSET_LABEL: "node", "a": "1"}
    assert info.node_selector == {"zone": "z1"}
    jobs = [{"name": "node", "template": {"spec": {"template": {"spec": {"tolerations": [{"key": "t"}]}}}}}]
    info.tolerations.append({"key": "u"})
    [patch] = kueue_patch_replicated_jobs([info], jobs)
    pod = patch["template"]["spec"]["template"]
    assert pod["metadata"] == {"labels": {k.PODSET_LABEL: "node", "a": "1"}}
    assert pod["spec"] == {"nodeSelector": {"zone": "z1"}, "tolerations": [{"key": "t"}, {"key": "u"}]}


def test_a_check_update_that_contradicts_the_podset_label_cannot_start() -> None:
    with pytest.raises(PodSetMergeError, match="conflict for labels"):
        podset_infos(_admitted({"name": "node", "labels": {k.PODSET_LABEL: "other"}}))


# --- conditions ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "reserved", "checks", "expected"),
    [
        (GATE_ON, False, [], ("False", k.REASON_NO_RESERVATION)),
        (GATE_ON, True, [check("c", k.CHECK_PENDING)], ("False", k.REASON_UNSATISFIED_CHECKS)),
        (GATE_ON, True, [check("c", k.CHECK_READY)], ("True", k.REASON_ADMITTED)),
        (GATE_ON, True, [], ("True", k.REASON_ADMITTED)),
        (GATE_OFF, False, [check("c", k.CHECK_PENDING)], None),
        (GATE_OFF, True, [check("c", k.CHECK_READY)], ("True", k.REASON_ADMITTED)),
    ],
)
def test_admitted_follows_reservation_and_checks(
    config: KueueConfig, reserved: bool, checks: list[Obj], expected: tuple[str, str] | None
) -> None:
    wl = workload(checks=checks, conditions=[cond(k.QUOTA_RESERVED, reserved)])
    ws.sync_admitted_condition(wl, NOW, config)
    assert reasons(wl).get(k.ADMITTED) == expected


def test_losing_admission_adds_the_admitted_time() -> None:
    wl = workload(
        checks=[check("c", k.CHECK_PENDING)],
        conditions=[cond(k.QUOTA_RESERVED, True), cond(k.ADMITTED, True, k.REASON_ADMITTED)],
    )
    assert ws.sync_admitted_condition(wl, LATER, GATE_OFF)
    assert reasons(wl)[k.ADMITTED] == ("False", k.REASON_UNSATISFIED_CHECKS_LEGACY)
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == 300


def test_reserving_quota_resets_an_active_eviction() -> None:
    wl = workload(conditions=[cond(k.EVICTED, True, k.EVICTED_BY_PREEMPTION, "by x"), cond(k.PREEMPTED, True)])
    ws.set_quota_reservation(wl, {"clusterQueue": "cq", "podSetAssignments": []}, LATER)
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == k.EVICTED)
    assert (evicted["status"], evicted["reason"], evicted["message"]) == ("False", "QuotaReserved", "Previously: by x")
    assert reasons(wl)[k.QUOTA_RESERVED] == ("True", k.REASON_QUOTA_RESERVED)
    assert next(c for c in wl["status"]["conditions"] if c["type"] == k.QUOTA_RESERVED)["message"] == (
        "Quota reserved in ClusterQueue cq"
    )


def test_eviction_resets_checks_that_are_not_pending() -> None:
    wl = workload(
        checks=[
            check("a", k.CHECK_PENDING, "waiting for pods"),
            check("b", k.CHECK_READY),
            check("c", k.CHECK_RETRY, requeueAfterSeconds=30, retryCount=2),
        ]
    )
    ws.prepare_for_eviction(wl, k.EVICTED_BY_PREEMPTION, "preempted", LATER)
    by_name = {c["name"]: c for c in wl["status"]["admissionChecks"]}
    assert by_name["a"]["message"] == "waiting for pods"
    assert by_name["b"]["message"] == "Reset to Pending after eviction. Previously: Ready"
    assert (by_name["c"]["state"], by_name["c"]["retryCount"], by_name["c"]["requeueAfterSeconds"]) == (
        k.CHECK_PENDING,
        3,
        30,
    )
    assert wl["status"]["schedulingStats"]["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 1}]


def test_a_deactivation_carries_its_cause_in_the_reason() -> None:
    wl = workload()
    ws.prepare_for_eviction(wl, k.EVICTED_BY_DEACTIVATION, "msg", NOW, cause="AdmissionCheck")
    assert reasons(wl)[k.EVICTED] == ("True", "DeactivatedDueToAdmissionCheck")


@pytest.mark.parametrize(
    ("checks", "state", "message"),
    [
        ([check("c1", k.CHECK_RETRY)], k.CHECK_RETRY, 'AdmissionCheck in Retry state: "c1"'),
        (
            [check("c3", k.CHECK_RETRY, "budget"), check("c1", k.CHECK_RETRY, "infra")],
            k.CHECK_RETRY,
            'AdmissionChecks in Retry state: "c1" (infra); "c3" (budget)',
        ),
        ([check("c", k.CHECK_REJECTED, "no")], k.CHECK_REJECTED, 'AdmissionCheck in Rejected state: "c" (no)'),
    ],
)
def test_check_messages_are_upstreams(checks: list[Obj], state: str, message: str) -> None:
    assert ws.checks_message(checks, state) == message


def test_check_entries_follow_the_cluster_queue_strategy() -> None:
    wl = workload(checks=[check("gone", k.CHECK_READY), check("b", k.CHECK_READY)])
    assert ws.sync_admission_check_entries(wl, ["a", "b"], LATER)
    assert [(c["name"], c["state"]) for c in wl["status"]["admissionChecks"]] == [
        ("a", k.CHECK_PENDING),
        ("b", k.CHECK_READY),
    ]
    assert not ws.sync_admission_check_entries(wl, ["a", "b"], LATER)
    assert ws.sync_admission_check_entries(wl, [], LATER)
    assert "admissionChecks" not in wl["status"]


def test_a_retry_time_is_recorded_only_when_it_is_ahead() -> None:
    wl = workload(checks=[check("c", k.CHECK_RETRY, requeueAfterSeconds=60)])
    start = ws.max_retry_time(wl)
    assert start is not None
    assert ws.needs_requeue_at_update(wl, start - 1) == "2026-09-01T10:01:00Z"
    assert ws.needs_requeue_at_update(wl, start + 1) is None
    ws.set_requeue_at(wl, "2026-09-01T10:01:00Z")
    assert ws.needs_requeue_at_update(wl, start - 1) is None


# --- quota ---------------------------------------------------------------------------------------------------


def _podset(cpu: str, count: int = 1, gpu: str | None = None) -> Obj:
    requests = {"cpu": cpu, **({"nvidia.com/gpu": gpu} if gpu else {})}
    return {
        "name": "node",
        "count": count,
        "template": {"spec": {"containers": [{"name": "node", "resources": {"requests": requests}}]}},
    }


def _cluster_queue(cpu: str = "8") -> Obj:
    return manifests.cluster_queue("cq", cpu=cpu)


@pytest.mark.parametrize(
    ("podset", "used", "message", "reason"),
    [
        (_podset("2", 2), "0", "", ""),
        (
            _podset("2", 2),
            "6",
            "couldn't assign flavors to pod set node: insufficient unused quota for cpu in flavor default-flavor, "
            "2 more needed",
            k.REASON_WAITING_FOR_QUOTA,
        ),
        (
            _podset("500m", 20),
            "0",
            "couldn't assign flavors to pod set node: insufficient quota for cpu in flavor default-flavor, "
            "request > maximum capacity (10 > 8)",
            k.REASON_EXCEEDS_MAX_QUOTA,
        ),
        (
            _podset("1", 1, gpu="1"),
            "0",
            "couldn't assign flavors to pod set node: resource nvidia.com/gpu unavailable in ClusterQueue",
            k.REASON_INADMISSIBLE,
        ),
    ],
)
def test_flavor_assignment_messages(podset: Obj, used: str, message: str, reason: str) -> None:
    wl = workload()
    wl["spec"]["podSets"] = [podset]
    usage = {("default-flavor", "cpu"): Decimal(used)}
    assignment = quota.assign_flavors(wl, _cluster_queue(), usage)
    assert (assignment.message, assignment.no_fit_reason) == (message, reason)


def test_a_fitting_assignment_names_flavor_usage_and_count() -> None:
    wl = workload()
    wl["spec"]["podSets"] = [_podset("1500m", 2)]
    assignment = quota.assign_flavors(wl, _cluster_queue(), {})
    assert assignment.podset_assignments == [
        {"name": "node", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "3"}, "count": 2}
    ]
    wl["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": assignment.podset_assignments}
    assert quota.workload_usage(wl) == {("default-flavor", "cpu"): Decimal(3)}


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [("cpu", "4", "4"), ("cpu", "0.5", "500m"), ("memory", str(2 * 1024**3), "2Gi"), ("memory", "1000", "1000")],
)
def test_quantities_print_as_the_api_does(resource: str, amount: str, text: str) -> None:
    assert quota.format_quantity(resource, Decimal(amount)) == text


# --- queues --------------------------------------------------------------------------------------------------


def _active(name: str, active: bool = True) -> Obj:
    return {"metadata": {"name": name}, "status": {"conditions": [cond(k.ACTIVE, active)]}}


@pytest.mark.parametrize(
    ("checks", "active", "reason", "message"),
    [
        ({"c": _active("c")}, True, k.CQ_REASON_READY, "Can admit new workloads"),
        ({}, False, k.CQ_REASON_CHECK_NOT_FOUND, "Can't admit new workloads: references missing AdmissionCheck(s): c."),
        (
            {"c": _active("c", False)},
            False,
            k.CQ_REASON_CHECK_INACTIVE,
            "Can't admit new workloads: references inactive AdmissionCheck(s): c.",
        ),
    ],
)
def test_a_cluster_queue_is_active_only_with_its_checks_active(
    checks: dict[str, Obj], active: bool, reason: str, message: str
) -> None:
    readiness = queues.cluster_queue_readiness(manifests.cluster_queue("cq", admission_checks=["c"]), checks)
    assert (readiness.active, readiness.reason, readiness.message) == (active, reason, message)


def test_checks_apply_to_all_flavors_unless_they_name_some() -> None:
    cq = manifests.cluster_queue("cq", admission_checks=["all"])
    cq["spec"]["admissionChecksStrategy"]["admissionChecks"].append({"name": "other", "onFlavors": ["spot"]})
    wl = workload()
    assert queues.checks_for_workload(wl, cq) == {"all"}
    wl["status"]["admission"] = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "node", "flavors": {"cpu": "spot"}}],
    }
    assert queues.checks_for_workload(wl, cq) == {"all", "other"}


# --- preemption ----------------------------------------------------------------------------------------------


def _reserved(name: str, priority: int, at: str, evicted: bool = False) -> Obj:
    wl = workload(priority=priority)
    wl["metadata"]["name"] = name
    conditions = [cond(k.QUOTA_RESERVED, True, when=at)]
    if evicted:
        conditions.append(cond(k.EVICTED, True, k.EVICTED_BY_PREEMPTION))
    wl["status"]["conditions"] = conditions
    wl["status"]["admission"] = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "node", "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": "4"}}],
    }
    return wl


def test_preemption_candidates_are_lower_priority_evicted_first_then_newest() -> None:
    cq = _cluster_queue(cpu="20")  # full: five reservations of 4 cpu
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    reserved = [
        _reserved("old-low", 1, NOW),
        _reserved("new-low", 1, LATER),
        _reserved("lowest", 0, NOW),
        _reserved("evicted", 5, NOW, evicted=True),
        _reserved("equal", 9, LATER),
    ]
    preemptor = workload(priority=9)
    names = [wl["metadata"]["name"] for wl in preemption.candidates(preemptor, cq, reserved)]
    assert names == ["evicted", "lowest", "new-low", "old-low"]
    preemptor["spec"]["podSets"] = [_podset("4")]
    usage = quota.sum_usage(reserved)
    # the already evicted one is enough for 4 more cpu: nothing else is preempted
    assert [wl["metadata"]["name"] for wl in preemption.targets(preemptor, cq, reserved, usage)] == ["evicted"]
    preemptor["spec"]["podSets"] = [_podset("8")]
    assert [wl["metadata"]["name"] for wl in preemption.targets(preemptor, cq, reserved, usage)] == [
        "evicted",
        "lowest",
    ]


def test_no_preemption_without_a_policy() -> None:
    assert preemption.candidates(workload(priority=9), _cluster_queue(), [_reserved("low", 0, NOW)]) == []


def test_the_preemption_message_names_preemptor_and_paths() -> None:
    preemptor = {"metadata": {"uid": "wl-uid", "labels": {k.JOB_UID_LABEL: "job-uid"}}}
    assert preemption.preemption_message(preemptor, "cq") == (
        "Preempted to accommodate a workload (UID: wl-uid, JobUID: job-uid) due to prioritization in the "
        "ClusterQueue; preemptor path: /cq; preemptee path: /cq"
    )


# --- the status apply ----------------------------------------------------------------------------------------


def test_the_admission_apply_carries_identity_admission_conditions_and_every_check() -> None:
    wl = workload(
        checks=[check("mine", k.CHECK_PENDING), check("theirs", k.CHECK_READY)],
        conditions=[cond(k.QUOTA_RESERVED, True), cond("SomethingElse", True)],
    )
    wl["metadata"]["resourceVersion"] = "42"
    wl["status"]["admission"] = None
    applied = admission_status_patch(wl)
    assert applied["metadata"] == {"name": "wl", "namespace": "ns", "uid": "u1", "resourceVersion": "42"}
    assert "admission" not in applied["status"]  # left out: the apply removes it
    assert [c["type"] for c in applied["status"]["conditions"]] == [k.QUOTA_RESERVED]
    assert [c["name"] for c in applied["status"]["admissionChecks"]] == ["mine", "theirs"]
