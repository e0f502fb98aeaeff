"""The real control plane works, through the official `kubernetes` client: version, identities, a TrainJob that
runs to pods on a hollow node via the real Trainer, JobSet and Job controllers and the real kubelet, and a node cut
off from the API server that is marked by the real node lifecycle controller.

Every wait polls the API with a deadline (`wait_for`); nothing sleeps to let the cluster catch up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from api_answers import expect_answer
from kubernetes.client.exceptions import ApiException

from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.real.processes import wait_for
from airflow_provider_dispatch_lab.scenario import manifests
from tests.real.conftest import client_for

pytestmark = pytest.mark.slow

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
RUNTIME = "real-torch"


@pytest.fixture(scope="module")
def runtime(real_admin: kubernetes.client.ApiClient) -> str:
    """A small ClusterTrainingRuntime (the lab's sample, one replicated job `node`), created as the admin."""
    body = manifests.cluster_training_runtime(RUNTIME, grace_seconds=5)
    kubernetes.client.CustomObjectsApi(real_admin).create_cluster_custom_object(
        *TRAINER, "clustertrainingruntimes", body
    )
    return RUNTIME


@pytest.fixture
def identity_clients(real_cluster: RealCluster) -> Iterator[dict[str, kubernetes.client.ApiClient]]:
    clients = {name: client_for(real_cluster, name) for name in ("writer", "reader", "no-nodes")}
    yield clients
    for client in clients.values():
        client.close()


def _trainjob(name: str, runtime: str, *, suspend: bool) -> dict[str, Any]:
    return manifests.trainjob(name, num_nodes=1, runtime=runtime, suspend=suspend)


def test_version_is_the_pinned_release(real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient) -> None:
    info = kubernetes.client.VersionApi(real_admin).get_code()
    pinned = real_cluster.versions["KUBERNETES"]
    assert info.git_version == pinned
    assert (info.major, info.minor) == ("1", pinned.split(".")[1])


def test_identities_have_the_labs_rbac(
    real_admin: kubernetes.client.ApiClient,
    identity_clients: dict[str, kubernetes.client.ApiClient],
    real_namespace: str,
    runtime: str,
) -> None:
    kubernetes.client.CustomObjectsApi(real_admin).create_namespaced_custom_object(
        *TRAINER, real_namespace, "trainjobs", _trainjob("rbac", runtime, suspend=True)
    )

    def update_as(identity: str) -> None:
        """Read and replace, again on a 409: the real Trainer controller writes the new TrainJob too."""
        api = kubernetes.client.CustomObjectsApi(identity_clients[identity])
        for _ in range(10):
            current = api.get_namespaced_custom_object(*TRAINER, real_namespace, "trainjobs", "rbac")
            current["metadata"].setdefault("annotations", {})["real.test/updated-by"] = identity
            try:
                api.replace_namespaced_custom_object(*TRAINER, real_namespace, "trainjobs", "rbac", current)
                return
            except ApiException as error:
                if error.status != 409:
                    raise
        raise AssertionError(f"the TrainJob kept changing under {identity}'s update")

    update_as("writer")
    with pytest.raises(ApiException) as refused:
        update_as("reader")
    expect_answer(refused.value, 403)

    assert kubernetes.client.CoreV1Api(identity_clients["writer"]).read_node("node-1").metadata.name == "node-1"
    with pytest.raises(ApiException) as no_nodes:
        kubernetes.client.CoreV1Api(identity_clients["no-nodes"]).read_node("node-1")
    expect_answer(no_nodes.value, 403)
    update_as("no-nodes")  # the writer's TrainJob rights, without the node reader's


def test_a_kubelet_is_its_node_and_may_write_only_its_own(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, real_namespace: str
) -> None:
    """Each kubelet authenticates with its node's client certificate (`system:node:<name>` in `system:nodes`), so
    the Node authorizer and `NodeRestriction` bound it as on an upstream cluster: node-1's kubelet may patch its
    own Node and read its own Lease, and may not patch node-2's Node, read node-2's Lease, write the status of a
    pod bound to node-2 or delete it, nor read a Secret that none of its pods uses. A kubelet with an admin's
    token (the real tier's kubelets had one before) would be allowed every one of these."""
    admin = kubernetes.client.CoreV1Api(real_admin)
    admin.create_namespaced_secret(real_namespace, {"metadata": {"name": "unrelated"}, "stringData": {"key": "v"}})
    elsewhere = admin.create_namespaced_pod(
        real_namespace,
        {
            "metadata": {"name": "on-node-2"},
            "spec": {
                "nodeName": "node-2",
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox"}],
            },
        },
    )
    assert elsewhere.spec.node_name == "node-2"
    kubelet = kubernetes.config.new_client_from_config(
        config_file=str(real_cluster.machines.machine("node-1").kubeconfig)
    )
    try:
        review = kubernetes.client.AuthenticationV1Api(kubelet).create_self_subject_review({})
        assert review.status.user_info.username == "system:node:node-1"
        assert "system:nodes" in review.status.user_info.groups
        core = kubernetes.client.CoreV1Api(kubelet)
        leases = kubernetes.client.CoordinationV1Api(kubelet)

        def refused(call: Any, *args: Any) -> str:
            with pytest.raises(ApiException) as answer:
                call(*args)
            return str(expect_answer(answer.value, 403)["message"])

        mark = {"metadata": {"annotations": {"real.test/patched-by": "node-1"}}}
        assert core.patch_node("node-1", mark).metadata.annotations["real.test/patched-by"] == "node-1"
        core.patch_node("node-1", {"metadata": {"annotations": {"real.test/patched-by": None}}})

        def own_lease() -> Any:
            # The kubelet makes its Lease at its first renewal after its Node exists (nodelease.go: the owner
            # reference needs the Node), which may follow the Node's Ready by up to one renew interval (10 s).
            try:
                return leases.read_namespaced_lease("node-1", "kube-node-lease")
            except ApiException as error:
                expect_answer(error, 404)
                return None

        lease = wait_for("node-1's Lease, read as node-1", own_lease, timeout=60, programs=real_cluster.programs)
        assert lease.spec.holder_identity == "node-1"
        # NodeRestriction (plugin/pkg/admission/noderestriction/admission.go, v1.36.3) refuses what the Node
        # authorizer's static rules let any node try; the authorizer (plugin/pkg/auth/authorizer/node) refuses
        # the rest itself.
        assert 'node "node-1" is not allowed to modify node "node-2"' in refused(core.patch_node, "node-2", mark)
        assert "can only access node lease with the same name as the requesting node" in refused(
            leases.read_namespaced_lease, "node-2", "kube-node-lease"
        )
        status = {"status": {"conditions": [{"type": "real.test/Marked", "status": "True"}]}}
        assert 'node "node-1" can only update pod status for pods with spec.nodeName set to itself' in refused(
            core.patch_namespaced_pod_status, "on-node-2", real_namespace, status
        )
        assert 'node "node-1" can only delete pods with spec.nodeName set to itself' in refused(
            core.delete_namespaced_pod, "on-node-2", real_namespace
        )
        assert "no relationship found between node 'node-1'" in refused(
            core.read_namespaced_secret, "unrelated", real_namespace
        )
    finally:
        kubelet.close()
    assert admin.read_namespaced_pod("on-node-2", real_namespace).metadata.deletion_timestamp is None
    admin.delete_namespaced_pod("on-node-2", real_namespace, grace_period_seconds=0)


def test_trainjob_runs_to_pods_on_a_hollow_node(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, real_namespace: str, runtime: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(real_admin)
    core = kubernetes.client.CoreV1Api(real_admin)
    custom.create_namespaced_custom_object(
        *TRAINER, real_namespace, "trainjobs", _trainjob("runs", runtime, suspend=False)
    )

    def running_pods() -> list[Any] | None:
        pods = core.list_namespaced_pod(real_namespace, label_selector="jobset.sigs.k8s.io/jobset-name=runs").items
        running = [p for p in pods if p.status.phase == "Running" and p.spec.node_name in real_cluster.node_names]
        return running or None

    pods = wait_for("a Running pod of TrainJob runs", running_pods, timeout=90, programs=real_cluster.programs)
    jobset = custom.get_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", real_namespace, "jobsets", "runs")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    owner = pods[0].metadata.owner_references[0]
    assert (owner.kind, owner.controller) == ("Job", True)

    def recorded() -> list[Any] | None:
        return real_cluster.run(_async_value(lambda: real_cluster.machines.recorder.processes(real_namespace, "runs")))

    processes = wait_for("the machine's record of the process", recorded, timeout=30)
    assert processes[0].node == pods[0].spec.node_name
    assert processes[0].pod_uid == pods[0].metadata.uid
    assert processes[0].admission == 1  # the ledger, fed by watches of the real API server, saw one admission


def test_a_silent_node_goes_unknown_and_gets_the_unreachable_taint(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient
) -> None:
    core = kubernetes.client.CoreV1Api(real_admin)
    real_cluster.add_node("node-silent")
    try:
        _goes_unknown_and_tainted(real_cluster, core)
    finally:
        real_cluster.remove_node("node-silent")


def _goes_unknown_and_tainted(real_cluster: RealCluster, core: kubernetes.client.CoreV1Api) -> None:
    wait_for("node-silent schedulable", lambda: _ready(core, "node-silent") == "True" or None, timeout=60)

    real_cluster.set_node_state("node-silent", "lost")  # cut off: its kubelet runs on, and nothing reaches the API

    wait_for(
        "node-silent Ready=Unknown",
        lambda: _ready(core, "node-silent") == "Unknown" or None,
        timeout=90,
        programs=real_cluster.programs,
    )

    def unreachable() -> bool | None:
        taints = core.read_node("node-silent").spec.taints or []
        return any(t.key == "node.kubernetes.io/unreachable" and t.effect == "NoExecute" for t in taints) or None

    wait_for("the unreachable:NoExecute taint", unreachable, timeout=60, programs=real_cluster.programs)
    assert _ready(core, "node-1") == "True"  # the others kept heartbeating


def _ready(core: kubernetes.client.CoreV1Api, node: str) -> str | None:
    for condition in core.read_node(node).status.conditions or []:
        if condition.type == "Ready":
            return str(condition.status)
    return None


def _async_value(function: Any) -> Any:
    async def call() -> Any:
        return function() or None

    return call
