"""The returned node on a real kubelet: a pod force-deleted while its node was away, then the node comes back.

The promise's rule for it (dispatch/fencing.py, docs/promise.md step 7): a recorded pod whose object is gone
blocks while its node could not confirm that it stopped; a node that is `Ready=True` again confirms it only once
its kubelet has reported Ready for longer than the pod's grace period plus `RETURN_MARGIN_SECONDS`, because the
kubelet stops what was deleted meanwhile only when it relists its pods after it reconnects. Here the kubelet is the
real one (lab/real/machine.py): the node is cut off (`lost`: a partition), the hold records the pod, a person
force-deletes it, the partition heals, and the real kubelet decides when the process stops. Release must refuse
until then, and admit after; the overlap recorder is the judge. (A frozen machine that runs again takes the same
path through the rule; `relist_measurement.py` measures its kubelet too, docs/fidelity.md.)

The returned node's kubelet reports its status every `REPORT` seconds instead of every 5 minutes (its
`nodeStatusReportFrequency`), so that the heartbeat the rule counts on moves within the test's time; nothing else
in the kubelet changes with it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from airflow_provider_dispatch.dispatch.assessment import Execution
from airflow_provider_dispatch.dispatch.errors import PodsRemainError
from airflow_provider_dispatch.dispatch.nodes import RETURN_MARGIN_SECONDS
from airflow_provider_dispatch.dispatch.vocabulary import ANNOTATION_EXECUTION_PODS
from airflow_provider_dispatch_lab.real import RealCluster

from .steps import DRAINED, GRACE, SETTLED, Either, RealSteps, make_adapter, until

pytestmark = pytest.mark.slow

REPORT = 10.0
"""The returned node's `nodeStatusReportFrequency`, in seconds."""


@pytest.fixture
async def writer(real_cluster: RealCluster, steps: RealSteps) -> AsyncIterator[Either]:
    either = await make_adapter("async", real_cluster.kubeconfig("writer", steps.namespace))
    yield either
    await either.close()


async def test_a_pod_force_deleted_during_a_partition_blocks_until_the_returned_kubelet_stopped_it(
    steps: RealSteps, writer: Either
) -> None:
    name = "returned"
    ref = f"{steps.namespace}/{name}"
    node = steps.node("a", status_report_seconds=REPORT)
    assert await until("open", lambda: writer.call("open", steps.manifest(name, steps.runtime()))) == Execution(
        name, "1", 1
    )
    (pod,) = steps.running_pods(name, 1, admission=1)
    uid = pod.metadata.uid
    steps.node("b")  # somewhere for execution 2 to run
    steps.set_state(node, "lost")  # the partition: its kubelet runs on, cut off
    steps.wait_ready(node, "Unknown")

    assert await until("hold", lambda: writer.call("hold", ref)) == Execution(name, "1", 1)
    record = json.loads(steps.trainjob(name)["metadata"]["annotations"][ANNOTATION_EXECUTION_PODS])
    assert uid in json.dumps(record)
    steps.wait(
        "the Job controller marks the pod Terminating",
        lambda: steps.core.read_namespaced_pod(pod.metadata.name, steps.namespace).metadata.deletion_timestamp or None,
    )
    steps.core.delete_namespaced_pod(pod.metadata.name, steps.namespace, grace_period_seconds=0)  # --force
    steps.wait("the pod object gone", lambda: not steps.pods(name) or None)
    with pytest.raises(PodsRemainError) as away_refusal:
        await until("release", lambda: writer.call("release", ref), retry=SETTLED)
    assert "deleted from the API" in str(away_refusal.value)
    assert steps.process_runs(uid), "the machine's process stopped during the partition"

    steps.set_state(node, "ready")  # the partition heals
    steps.wait_ready(node, "True")
    with pytest.raises(PodsRemainError) as returned_refusal:
        await writer.call("release", ref)
    assert "has been Ready only briefly" in str(returned_refusal.value)

    admitted = await until(
        "release once the returned kubelet has reported Ready for grace + margin",
        lambda: writer.call("release", ref),
        retry=DRAINED,
        within=GRACE + RETURN_MARGIN_SECONDS + 3 * REPORT + 60,
    )
    assert admitted == Execution(name, "1", 2)
    (old,) = [p for p in steps.processes(name) if p.pod_uid == uid]
    assert old.stop is not None, "release admitted while the force-deleted pod's process still ran"
    steps.running_pods(name, 1, admission=2)
    fresh = [p for p in steps.processes(name) if p.pod_uid != uid]
    assert fresh
    assert old.stop <= min(p.start for p in fresh)
    assert steps.overlaps(name) == []
