"""The runtime policy through both real clients (dispatch/policy.py, DESIGN §3.7): a runtime whose Jobs may
replace a pod that may still run, or whose JobSet may restart Jobs beside old ones, is refused before anything is
written, with the exact change that fixes it; a platform team can accept each risk by name, and then every
admission is logged with it and status shows it."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import SpecRejectedError
from airflow_provider_dispatch_lab.scenario import manifests

from .cluster import Cluster
from .conftest import DispatchLab, MakeAdapter

RESTARTS = {"maxRestarts": 3}


def _manifest(cluster: Cluster, runtime: str, name: str = "ft-7") -> dict[str, object]:
    body = manifests.trainjob(name, job_id=name, submission="1", runtime=runtime)
    body["metadata"]["namespace"] = cluster.namespace
    return body


@pytest.mark.parametrize(
    ("options", "risk", "fix"),
    [
        (
            {"pod_replacement_policy": None},
            "pod-replacement",
            '"path": "/spec/template/spec/replicatedJobs/0/template/spec/podReplacementPolicy", "value": "Failed"',
        ),
        (
            {"pod_replacement_policy": "TerminatingOrFailed"},
            "pod-replacement",
            "kubectl patch clustertrainingruntime",
        ),
        ({"failure_policy": RESTARTS}, "jobset-restart", "restartStrategy: BlockingRecreate"),
        (
            {"failure_policy": {**RESTARTS, "restartStrategy": "Recreate"}},
            "jobset-restart",
            "restartStrategy: BlockingRecreate",
        ),
        (
            {"failure_policy": {"rules": [{"name": "r", "action": "RestartJobSetAndIgnoreMaxRestarts"}]}},
            "jobset-restart",
            "failurePolicy is immutable in a runtime: recreate",
        ),
    ],
)
async def test_an_unsafe_runtime_is_refused_before_anything_is_written(
    make_adapter: MakeAdapter,
    kind: str,
    cluster: Cluster,
    dispatch_lab: DispatchLab,
    options: dict[str, object],
    risk: str,
    fix: str,
) -> None:
    adapter = await make_adapter(kind)
    runtime = cluster.runtime(**options)  # type: ignore[arg-type]
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    revision = dispatch_lab.revision()
    with pytest.raises(SpecRejectedError) as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert f"accepted_risks='{risk}'" in refused.value.message
    assert fix in refused.value.message
    assert "refused before anything is written" in refused.value.message
    assert not refused.value.retryable
    with pytest.raises(SpecRejectedError, match=risk):
        await adapter.open(_manifest(cluster, runtime, "ft-8"))
    assert dispatch_lab.revision() == revision


@pytest.mark.parametrize(
    "options",
    [
        {"pod_replacement_policy": "Failed"},
        {"failure_policy": {**RESTARTS, "restartStrategy": "BlockingRecreate"}},
        {"failure_policy": {"maxRestarts": 0}},
        {"pod_replacement_policy": None, "podFailurePolicy": True},
    ],
)
async def test_a_safe_runtime_is_admitted(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, options: dict[str, object]
) -> None:
    adapter = await make_adapter(kind)
    runtime_options = dict(options)
    with_failure_policy = runtime_options.pop("podFailurePolicy", False)
    runtime = cluster.runtime(**runtime_options)  # type: ignore[arg-type]
    if with_failure_policy:
        # a Job with a podFailurePolicy defaults to podReplacementPolicy Failed (batch/v1 defaults.go)
        live = cluster.custom.get_cluster_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime
        )
        job_spec = live["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        job_spec["podFailurePolicy"] = {
            "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
        }
        cluster.custom.replace_cluster_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime, live
        )
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    assert await adapter.release(f"{cluster.namespace}/ft-7") == Execution("ft-7", "1", 2)
    annotations = cluster.trainjob_object("ft-7")["metadata"]["annotations"]
    assert v.ANNOTATION_ACCEPTED_RISKS not in annotations


async def test_an_accepted_risk_admits_logs_and_shows_in_status(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    adapter = await make_adapter(kind, accepted_risks=("pod-replacement",))
    runtime = cluster.runtime(pod_replacement_policy=None)
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    ref = f"{cluster.namespace}/ft-7"
    with caplog.at_level(logging.WARNING, logger="airflow_provider_dispatch.dispatch"):
        execution = await adapter.release(ref)
    assert (execution, execution.accepted_risks) == (Execution("ft-7", "1", 2), ("pod-replacement",))
    assert execution.as_dict()["accepted_risks"] == ["pod-replacement"]
    (warning,) = [r for r in caplog.records if "accepted runtime risks" in r.getMessage()]
    assert ref in warning.getMessage()
    assert "pod-replacement" in warning.getMessage()
    annotations = cluster.trainjob_object("ft-7")["metadata"]["annotations"]
    assert annotations[v.ANNOTATION_ACCEPTED_RISKS] == "pod-replacement"
    status = await adapter.inspect(ref)
    assert status.execution.accepted_risks == ("pod-replacement",)
    assert "accepted runtime risks: pod-replacement" in status.detail

    # a retry of the release (the object runs) returns the execution and logs the risk again
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_provider_dispatch.dispatch"):
        again = await adapter.release(ref)
    assert again.accepted_risks == ("pod-replacement",)
    assert [r for r in caplog.records if "accepted runtime risks" in r.getMessage()]


async def test_accepting_one_risk_does_not_accept_the_other(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster
) -> None:
    adapter = await make_adapter(kind, accepted_risks=("pod-replacement",))
    runtime = cluster.runtime(pod_replacement_policy=None, failure_policy=RESTARTS)
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1)
    with pytest.raises(SpecRejectedError, match="jobset-restart") as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert "pod-replacement" not in refused.value.message.split("Fix the runtime")[0]


async def test_an_unknown_risk_name_is_refused_when_the_adapter_is_built(make_adapter: MakeAdapter, kind: str) -> None:
    with pytest.raises(ValueError, match="unknown runtime risk 'pod-replacment'"):
        await make_adapter(kind, accepted_risks=("pod-replacment",))
