"""Create, get, update, status subresources and metadata through the official clients."""

from __future__ import annotations

import time

import kubernetes
import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException
from servers import SERVERS, Server, make_pod

from airflow_provider_dispatch_lab.scenario import manifests

TRAINER = ("trainer.kubeflow.org", "v1alpha1")

API_SERVERS = SERVERS


def test_create_stamps_server_owned_metadata(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    created = core_v1.create_namespaced_pod(namespace, make_pod("p"))
    meta = created.metadata
    assert meta.uid
    assert len(meta.uid) == 36
    assert meta.creation_timestamp is not None
    assert meta.generation == 1
    assert int(meta.resource_version) > 0
    # The status is reset on create: the pod starts Pending with a QoS class.
    assert (created.status.phase, created.status.qos_class) == ("Pending", "BestEffort")
    # Defaulting as the apiserver does it.
    assert created.spec.termination_grace_period_seconds == 30
    assert created.spec.restart_policy == "Always"


def test_one_global_resource_version_across_kinds(
    core_v1: kubernetes.client.CoreV1Api, custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    first = int(core_v1.create_namespaced_pod(namespace, make_pod("a")).metadata.resource_version)
    job = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    second = int(job["metadata"]["resourceVersion"])
    third = int(core_v1.create_namespaced_event(namespace, _event("e", namespace)).metadata.resource_version)
    assert first < second < third
    listed = core_v1.list_namespaced_pod(namespace)
    assert int(listed.metadata.resource_version) >= third


def _event(name: str, namespace: str) -> dict:
    return {
        "metadata": {"name": name},
        "involvedObject": {"kind": "Pod", "name": "a", "namespace": namespace},
        "reason": "Tested",
        "message": "a test event",
        "type": "Normal",
    }


def test_generate_name(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    body = make_pod("")
    body["metadata"] = {"generateName": "worker-"}
    created = core_v1.create_namespaced_pod(namespace, body)
    assert created.metadata.name.startswith("worker-")
    assert len(created.metadata.name) == len("worker-") + 5


def test_already_exists_is_409_with_status(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("dup"))
    with pytest.raises(ApiException) as raised:
        core_v1.create_namespaced_pod(namespace, make_pod("dup"))
    status = expect_answer(raised.value, 409, "AlreadyExists")
    assert (status["kind"], status["code"]) == ("Status", 409)
    assert status["message"] == 'pods "dup" already exists'
    assert status["details"] == {"name": "dup", "kind": "pods"}


def test_not_found_is_404_with_status(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    with pytest.raises(ApiException) as raised:
        custom_objects.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "missing")
    status = expect_answer(raised.value, 404, "NotFound")
    assert status["message"] == 'trainjobs.trainer.kubeflow.org "missing" not found'
    assert status["details"] == {"name": "missing", "group": "trainer.kubeflow.org", "kind": "trainjobs"}


def test_create_in_missing_namespace_is_refused(core_v1: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as raised:
        core_v1.create_namespaced_pod("no-such-namespace", make_pod("p"))
    assert expect_answer(raised.value, 404)["message"] == 'namespaces "no-such-namespace" not found'


def test_stale_resource_version_is_409(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    # on the real control plane Trainer writes the new TrainJob too, so the fresh write starts from a fresh read
    for _ in range(10):
        fresh = custom_objects.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj")
        fresh["metadata"]["labels"] = {**fresh["metadata"]["labels"], "x": "1"}
        try:
            custom_objects.replace_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj", fresh)
            break
        except ApiException as conflict:
            if conflict.status != 409:
                raise
    else:
        pytest.fail("10 fresh writes in a row met a conflict")
    stale = dict(created)
    stale["metadata"] = {**created["metadata"], "labels": {**created["metadata"]["labels"], "x": "2"}}
    with pytest.raises(ApiException) as raised:
        custom_objects.replace_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj", stale)
    status = expect_answer(raised.value, 409, "Conflict")
    assert status["message"] == (
        'Operation cannot be fulfilled on trainjobs.trainer.kubeflow.org "tj": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    current = custom_objects.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj")
    assert current["metadata"]["labels"]["x"] == "1"


def test_custom_resource_update_needs_resource_version(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    del created["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as raised:
        custom_objects.replace_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj", created)
    assert expect_answer(raised.value, 422)["details"]["causes"][0]["field"] == "metadata.resourceVersion"


def test_generation_moves_on_spec_changes_only(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    labelled = custom_objects.patch_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "tj", {"metadata": {"labels": {"seen": "yes"}}}
    )
    assert labelled["metadata"]["generation"] == 1
    resumed = custom_objects.patch_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "tj", {"spec": {"suspend": False}}
    )
    assert resumed["metadata"]["generation"] == 2
    status = custom_objects.patch_namespaced_custom_object_status(
        *TRAINER,
        namespace,
        "trainjobs",
        "tj",
        {"status": {"conditions": [_condition("Suspended", "False", "Resumed")]}},
    )
    assert status["metadata"]["generation"] == 2


def _condition(kind: str, status: str, reason: str) -> dict:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": f"TrainJob is {reason.lower()}",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def test_status_subresource_separates_spec_and_status(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str
) -> None:
    body = manifests.trainjob("tj")
    body["status"] = {"conditions": [_condition("Suspended", "True", "Suspended")]}
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", body)
    assert "status" not in created or not created["status"].get("conditions")  # create cannot set status

    # A write to the main resource keeps the stored status; a write to /status keeps the stored spec.
    via_status = custom_objects.patch_namespaced_custom_object_status(
        *TRAINER,
        namespace,
        "trainjobs",
        "tj",
        {
            "spec": {"suspend": False},
            "status": {"conditions": [_condition("Suspended", "True", "Suspended")]},
        },
    )
    assert via_status["spec"]["suspend"] is True
    assert via_status["status"]["conditions"][0]["type"] == "Suspended"
    via_main = custom_objects.patch_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "tj", {"spec": {"suspend": False}, "status": {"conditions": []}}
    )
    assert via_main["spec"]["suspend"] is False
    assert via_main["status"]["conditions"][0]["type"] == "Suspended"


def test_pod_status_and_node_status(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_node(manifests.node(f"node-{namespace}"))
    core_v1.create_namespaced_pod(namespace, make_pod("p", node_name=f"node-{namespace}"))
    running = core_v1.patch_namespaced_pod_status("p", namespace, {"status": {"phase": "Running"}})
    assert running.status.phase == "Running"
    not_ready = core_v1.patch_node_status(
        f"node-{namespace}",
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}},
    )
    assert [c.status for c in not_ready.status.conditions if c.type == "Ready"] == ["Unknown"]
    core_v1.delete_node(f"node-{namespace}")


def test_binding_assigns_a_node_once(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("p"))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p"},
        "target": {"kind": "Node", "name": "n1"},
    }
    core_v1.create_namespaced_pod_binding("p", namespace, binding, _preload_content=False)
    pod = core_v1.read_namespaced_pod("p", namespace)
    assert pod.spec.node_name == "n1"
    assert [c.status for c in pod.status.conditions if c.type == "PodScheduled"] == ["True"]
    with pytest.raises(ApiException) as raised:
        core_v1.create_namespaced_pod_binding("p", namespace, binding, _preload_content=False)
    expect_answer(raised.value, 409)


def test_node_name_cannot_change_by_update(core_v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    core_v1.create_namespaced_pod(namespace, make_pod("p", node_name="n1"))
    with pytest.raises(ApiException) as raised:
        core_v1.patch_namespaced_pod("p", namespace, {"spec": {"nodeName": "n2"}})
    expect_answer(raised.value, 422)


def test_jobs_and_events(api_client: kubernetes.client.ApiClient, namespace: str) -> None:
    batch = kubernetes.client.BatchV1Api(api_client)
    job = {
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}},
    }
    created = batch.create_namespaced_job(namespace, job)
    assert created.spec.backoff_limit == 6
    assert created.spec.suspend is False
    updated = batch.patch_namespaced_job_status("j", namespace, {"status": {"active": 1}})
    assert updated.status.active == 1
    core = kubernetes.client.CoreV1Api(api_client)
    core.create_namespaced_event(namespace, _event("ev", namespace))
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=a")
    assert [e.reason for e in events.items] == ["Tested"]


def test_crds_are_defaulted_and_validated(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    body = manifests.trainjob("tj", suspend=None)
    del body["spec"]["runtimeRef"]["apiGroup"], body["spec"]["runtimeRef"]["kind"]
    body["spec"]["unknownField"] = "pruned"
    created = custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", body)
    assert created["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert created["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert created["spec"]["suspend"] is False
    assert "unknownField" not in created["spec"]


@pytest.mark.parametrize("name", ["Upper", "with.dot", "x" * 64, "-lead"])
def test_invalid_trainjob_names_are_422(
    custom_objects: kubernetes.client.CustomObjectsApi, namespace: str, name: str
) -> None:
    with pytest.raises(ApiException) as raised:
        custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob(name))
    assert expect_answer(raised.value, 422, "Invalid")["details"]["causes"]


def test_immutable_trainjob_fields(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", manifests.trainjob("tj"))
    with pytest.raises(ApiException) as raised:
        custom_objects.patch_namespaced_custom_object(
            *TRAINER, namespace, "trainjobs", "tj", {"spec": {"trainer": {"numNodes": 3}}}
        )
    expect_answer(raised.value, 422)
    unchanged = custom_objects.get_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "tj")
    assert unchanged["spec"]["trainer"]["numNodes"] == 2


def test_kueue_objects_at_v1beta2(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    group, version = "kueue.x-k8s.io", "v1beta2"
    check = custom_objects.create_cluster_custom_object(
        group, version, "admissionchecks", manifests.admission_check(f"check-{namespace}")
    )
    assert check["spec"]["controllerName"] == "dispatch.phpboyscout.uk/drained"
    queue = custom_objects.create_cluster_custom_object(
        group,
        version,
        "clusterqueues",
        manifests.cluster_queue(f"cq-{namespace}", admission_checks=[check["metadata"]["name"]]),
    )
    assert queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"] == check["metadata"]["name"]
    local = custom_objects.create_namespaced_custom_object(
        group, version, namespace, "localqueues", manifests.local_queue(cluster_queue_name=f"cq-{namespace}")
    )
    assert local["spec"]["clusterQueue"] == f"cq-{namespace}"
    workload = {
        "apiVersion": f"{group}/{version}",
        "kind": "Workload",
        "metadata": {"name": "trainjob-tj-12345"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "node",
                    "count": 2,
                    "template": {"spec": {"containers": [{"name": "node", "image": "x"}]}},
                }
            ],
        },
    }
    created = custom_objects.create_namespaced_custom_object(group, version, namespace, "workloads", workload)
    assert created["spec"]["active"] is True
    custom_objects.delete_cluster_custom_object(group, version, "clusterqueues", f"cq-{namespace}")
    custom_objects.delete_cluster_custom_object(group, version, "admissionchecks", check["metadata"]["name"])


def test_runtimes_and_jobsets(custom_objects: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    runtime = manifests.cluster_training_runtime(f"rt-{namespace}")
    created = custom_objects.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", runtime)
    assert created["spec"]["template"]["spec"]["replicatedJobs"][0]["name"] == "node"
    namespaced = manifests.cluster_training_runtime("local")
    namespaced["kind"] = "TrainingRuntime"
    custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainingruntimes", namespaced)
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"suspend": True, "replicatedJobs": runtime["spec"]["template"]["spec"]["replicatedJobs"]},
    }
    made = custom_objects.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", jobset)
    assert made["spec"]["suspend"] is True
    custom_objects.delete_cluster_custom_object(*TRAINER, "clustertrainingruntimes", f"rt-{namespace}")


def _runtime_patch(manager: str) -> dict:
    job = {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}}
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


@pytest.mark.parametrize(
    ("managers", "causes"),
    [
        (
            [f"m{i}.example.com/x" for i in range(17)],
            [
                ("spec.runtimePatches", "FieldValueTooMany", "Too many: {count}: must have at most 16 items"),
                (
                    "<nil>",
                    "FieldValueInvalid",
                    "Invalid value: null: some validation rules were not checked because the object was invalid; "
                    "correct the existing errors to complete validation",
                ),
            ],
        ),
        (
            ["a.io/m", "b.io/m", "a.io/m"],
            [("spec.runtimePatches[2]", "FieldValueDuplicate", 'Duplicate value: {"manager":"a.io/m"}')],
        ),
    ],
)
def test_trainjob_schema_refusals_name_their_causes(
    server: Server,
    custom_objects: kubernetes.client.CustomObjectsApi,
    namespace: str,
    managers: list[str],
    causes: list[tuple[str, str, str]],
) -> None:
    """The CRD's own validation (list size, listMapKeys, CEL), before any webhook: the causes as the
    apiextensions-apiserver words them (values rendered as `field.Error.ErrorBody` does)."""
    body = manifests.trainjob("tj")
    body["spec"]["runtimePatches"] = [_runtime_patch(m) for m in managers]
    with pytest.raises(ApiException) as raised:
        custom_objects.create_namespaced_custom_object(*TRAINER, namespace, "trainjobs", body)
    status = expect_answer(raised.value, 422, "Invalid")
    # Real Kueue's TrainJob webhook appends its runtime patch to every TrainJob created; the session lab runs no
    # webhooks (a lab with Kueue's controllers does the same, lab/simulated/kueue/webhook.py).
    count = len(managers) + server.expect(lab=0, real=1)
    expected = [(field, reason, message.replace("{count}", str(count))) for field, reason, message in causes]
    assert [(c.get("field", "<nil>"), c["reason"], c["message"]) for c in status["details"]["causes"]] == expected
