"""The pod fence through both real clients (dispatch/fence.py, docs/decisions/pod-fence.md): open and each
admission record its identity, the next admission verifies it, and `require_pod_fence` refuses, writing nothing,
when it is absent, changed during the execution, or cannot be read.

The fence is cluster-scoped: each test installs it in the session's lab and removes it after (the other adapter
tests force-delete pods, which it would refuse)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import kubernetes
import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodFenceError, SuspensionNotObservedError
from airflow_provider_dispatch.dispatch.fence import POLICY_NAME
from airflow_provider_dispatch_lab.scenario.pod_fence import install_pod_fence, remove_pod_fence

from .cluster import Cluster
from .conftest import DispatchLab, MakeAdapter
from .either import Either
from .test_release import manifest


@pytest.fixture
def fenced(admin_api: kubernetes.client.ApiClient) -> Iterator[kubernetes.client.ApiClient]:
    install_pod_fence(admin_api)
    try:
        yield admin_api
    finally:
        remove_pod_fence(admin_api)


def _fence_annotation(cluster: Cluster, name: str) -> dict[str, object]:
    return dict(json.loads(cluster.trainjob_object(name)["metadata"]["annotations"][v.ANNOTATION_POD_FENCE]))


async def _opened_and_admitted(adapter: Either, cluster: Cluster) -> str:
    body = manifest(cluster, cluster.runtime())
    with pytest.raises(SuspensionNotObservedError):  # Trainer has not observed the new object's hold yet
        await adapter.open(body)
    cluster.trainer_observes("ft-7")
    cluster.jobset("ft-7")
    assert await adapter.open(body) == Execution("ft-7", "1", 1)
    return f"{cluster.namespace}/ft-7"


def _held_again(cluster: Cluster, dispatch_lab: DispatchLab) -> None:
    """Trainer and JobSet observe the hold of execution 1 (the JobSet as Trainer applies it now, with its Job);
    it settles."""
    cluster.custom.delete_namespaced_custom_object(
        v.JOBSET.group, v.JOBSET.version, cluster.namespace, "jobsets", "ft-7", propagation_policy="Background"
    )
    batch = kubernetes.client.BatchV1Api(cluster.api)
    for job in batch.list_namespaced_job(cluster.namespace).items:
        batch.delete_namespaced_job(job.metadata.name, cluster.namespace, propagation_policy="Background")
    cluster.trainer_observes("ft-7")
    cluster.jobset("ft-7")
    dispatch_lab.settle()


async def test_open_and_the_admission_record_the_fence_and_the_next_admission_verifies_it(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, fenced: object
) -> None:
    adapter = await make_adapter(kind, require_pod_fence=True)
    ref = await _opened_and_admitted(adapter, cluster)
    recorded = _fence_annotation(cluster, "ft-7")
    assert recorded["admission"] == 1
    assert str(recorded["policy"]).endswith("/1")
    assert str(recorded["binding"]).endswith("/1")
    await adapter.hold(ref)
    _held_again(cluster, dispatch_lab)
    assert (await adapter.release(ref)).admission == 2
    assert _fence_annotation(cluster, "ft-7") == {**recorded, "admission": 2}


async def test_require_pod_fence_refuses_writing_nothing_when_the_fence_changed_during_the_execution(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab, fenced: object
) -> None:
    adapter = await make_adapter(kind, require_pod_fence=True)
    ref = await _opened_and_admitted(adapter, cluster)
    await adapter.hold(ref)
    _held_again(cluster, dispatch_lab)
    # someone removes the fence and installs it again: its uid changes, and a force deletion may have passed
    remove_pod_fence(dispatch_lab_admin(dispatch_lab))
    install_pod_fence(dispatch_lab_admin(dispatch_lab))
    before = dispatch_lab.revision()
    with pytest.raises(PodFenceError) as refused:
        await adapter.release(ref)
    assert "the pod fence changed during the execution" in str(refused.value)
    assert "Nothing was admitted" in str(refused.value)
    assert dispatch_lab.revision() == before
    # without require_pod_fence the same check admits on the record, and says so in its answer
    lenient = await make_adapter(kind)
    admitted = await lenient.release(ref)
    assert admitted.admission == 2
    assert "the pod fence changed during the execution" in admitted.fence_note


async def test_require_pod_fence_refuses_when_the_fence_is_not_installed(
    make_adapter: MakeAdapter, kind: str, cluster: Cluster, dispatch_lab: DispatchLab
) -> None:
    adapter = await make_adapter(kind, require_pod_fence=True)
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=1)
    dispatch_lab.settle()
    before = dispatch_lab.revision()
    with pytest.raises(PodFenceError) as refused:
        await adapter.release(f"{cluster.namespace}/ft-7")
    assert f"the pod fence {POLICY_NAME} is not installed" in str(refused.value)
    assert "dispatch pod-fence | kubectl apply -f -" in str(refused.value)
    assert dispatch_lab.revision() == before


def dispatch_lab_admin(dispatch_lab: DispatchLab) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(config_file=str(dispatch_lab.kubeconfig("lab-admin")))
