"""Bulk seeding (`lab/apiserver/seeding.py`): objects from a template through the API server's own create and status
path.

A seeded pod must be exactly the pod a client's `POST` then `PUT .../status` leaves in the store, and bad input
must be refused with a clear Status and nothing written (the store's revision does not move).
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from api_answers import expect_answer

from airflow_provider_dispatch_lab.apiserver.auth.auth import Decision, UserInfo
from airflow_provider_dispatch_lab.apiserver.requests import RequestInfo
from airflow_provider_dispatch_lab.apiserver.seeding import SEED_PATH, BulkSeeder, render, seed_body
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, Lab
from airflow_provider_dispatch_lab.scenario import manifests

PODS = "/api/v1/namespaces/{ns}/pods"
STATUS = {
    "phase": "Running",
    "qosClass": "BestEffort",
    "podIP": "10.244.0.{i}",
    "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": None}],
}


@pytest.fixture(scope="module")
def seeding_lab() -> Iterator[Lab]:
    seeder = BulkSeeder()
    with Lab(speed=100.0, middlewares=(seeder.middleware,)) as lab:
        seeder.bind(lab.inner.server)
        yield lab


@pytest.fixture
def core(seeding_lab: Lab) -> Iterator[kubernetes.client.CoreV1Api]:
    client = kubernetes.config.new_client_from_config(config_file=str(seeding_lab.kubeconfig("seeding")))
    yield kubernetes.client.CoreV1Api(client)
    client.close()


@pytest.fixture
def namespace(core: kubernetes.client.CoreV1Api) -> str:
    name = f"s-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def post(lab: Lab, body: Any, token: str = DEFAULT_TOKEN) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        lab.url + SEED_PATH,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def template(labels: dict[str, str] | None = None) -> dict[str, Any]:
    pod = manifests.pod("p-{g}-{i}", node_name="node-{g}", labels=labels or {"app": "a-{g}", "rank": "{i}"})
    pod["status"] = copy.deepcopy(STATUS)
    return pod


def revision(lab: Lab) -> int:
    return lab.call(lambda: lab.inner.store.revision)


def test_render_fills_index_and_group_everywhere() -> None:
    given = {"metadata": {"name": "p-{i}", "labels": {"k-{g}": "{g}/{i}"}}, "spec": {"n": 3, "l": ["{i}", None]}}
    assert render(given, 37, 16) == {
        "metadata": {"name": "p-37", "labels": {"k-2": "2/37"}},
        "spec": {"n": 3, "l": ["37", None]},
    }
    assert render(given, 5, 1)["metadata"]["name"] == "p-5"


def test_seeds_the_objects_with_their_status(
    seeding_lab: Lab, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    answer = expect_answer(
        post(seeding_lab, seed_body(PODS.format(ns=namespace), template(), 6, start=10, group_size=4)), 201
    )
    assert (answer["kind"], answer["created"]) == ("LabSeedResult", 6)
    pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
    assert sorted(pods) == sorted(f"p-{i // 4}-{i}" for i in range(10, 16))
    p = pods["p-3-13"]
    assert (p.metadata.labels, p.spec.node_name) == ({"app": "a-3", "rank": "13"}, "node-3")
    assert (p.status.phase, p.status.pod_ip, p.status.qos_class) == ("Running", "10.244.0.13", "BestEffort")
    versions = [int(pod.metadata.resource_version) for pod in pods.values()]
    assert len(set(versions)) == len(versions)
    assert max(versions) == int(answer["resourceVersion"])


def test_a_seeded_pod_is_what_post_and_put_status_store(
    seeding_lab: Lab, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    body = render(template(), 0, 1)
    status = body.pop("status")
    by_api = {**body, "metadata": {**body["metadata"], "name": "by-api"}}
    core.create_namespaced_pod(namespace, by_api, field_manager="lab-seed")
    live = core.api_client.sanitize_for_serialization(core.read_namespaced_pod("by-api", namespace))
    # as a kubelet PUTs it
    core.replace_namespaced_pod_status("by-api", namespace, {**live, "status": status}, field_manager="lab-seed")
    post(seeding_lab, seed_body(PODS.format(ns=namespace), {**body, "status": status}, 1))

    def stored(name: str) -> dict[str, Any]:
        obj = seeding_lab.call(lambda: seeding_lab.inner.store.get("pods", (namespace, name)))
        assert obj is not None
        for server_set in ("name", "uid", "resourceVersion", "creationTimestamp"):
            obj["metadata"].pop(server_set)
        for entry in obj["metadata"]["managedFields"]:
            entry.pop("time")  # when each was written: the seed came later
        return obj

    assert stored("p-0-0") == stored("by-api")


@pytest.mark.parametrize(
    ("case", "change", "code", "message"),
    [
        ("invalid label value", lambda b: b["template"]["metadata"]["labels"].update(bad="a b"), 422, "a valid label"),
        ("invalid status", lambda b: b["template"]["status"].update(phase=7), 422, "status.phase"),
        ("one name for all", lambda b: b["template"]["metadata"].update(name="same"), 400, "put {i} in"),
        ("count zero", lambda b: b.update(count=0), 400, "count must be"),
        ("count not a number", lambda b: b.update(count="5"), 400, "count must be"),
        ("negative start", lambda b: b.update(start=-1), 400, "start must be"),
        ("not a collection", lambda b: b.update(path=b["path"] + "/one"), 400, "not the collection"),
        ("unknown resource", lambda b: b.update(path="/api/v1/namespaces/x/widgets"), 404, "could not find"),
        ("missing namespace", lambda b: b.update(path="/api/v1/namespaces/absent-ns/pods"), 404, "absent-ns"),
        ("no template", lambda b: b.pop("template"), 400, "template must be"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(
    seeding_lab: Lab, core: kubernetes.client.CoreV1Api, namespace: str, case: str, change: Any, code: int, message: str
) -> None:
    body = seed_body(PODS.format(ns=namespace), template(), 5)
    change(body)
    before = revision(seeding_lab)
    answer = expect_answer(post(seeding_lab, body), code)
    assert answer["kind"] == "Status", case
    assert message in answer["message"], case
    assert revision(seeding_lab) == before, case
    assert core.list_namespaced_pod(namespace).items == []


def test_a_name_already_taken_is_refused_before_anything_is_written(
    seeding_lab: Lab, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_pod(namespace, manifests.pod("p-3-3"))
    before = revision(seeding_lab)
    expect_answer(post(seeding_lab, seed_body(PODS.format(ns=namespace), template(), 5)), 409, "AlreadyExists")
    assert revision(seeding_lab) == before
    assert [p.metadata.name for p in core.list_namespaced_pod(namespace).items] == ["p-3-3"]


class NoStatusWrites:
    """May create pods, may not write their status: the seeding asks for both before it writes."""

    def authenticate(self, authorization: str | None) -> UserInfo | None:
        return UserInfo("creator")

    def authorize(self, user: UserInfo, request: RequestInfo) -> Decision:
        allowed = request.subresource != "status"
        return Decision(allowed, "" if allowed else "no status writes")


def test_seeding_is_authorized_as_the_create_and_the_status_write() -> None:
    seeder, authorizer = BulkSeeder(), NoStatusWrites()
    with Lab(speed=100.0, authenticator=authorizer, authorizer=authorizer, middlewares=(seeder.middleware,)) as lab:
        seeder.bind(lab.inner.server)
        before = revision(lab)
        answer = expect_answer(post(lab, seed_body(PODS.format(ns="default"), template(), 3)), 403, "Forbidden")
        assert 'cannot update resource "pods/status"' in answer["message"]
        assert revision(lab) == before
        without_status = {k: v for k, v in template().items() if k != "status"}
        answer = expect_answer(post(lab, seed_body(PODS.format(ns="default"), without_status, 3)), 201)
        assert answer["created"] == 3


def test_a_later_object_the_api_refuses_stops_the_batch_and_names_its_index(
    seeding_lab: Lab, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    """The dry run covers the first object; one that `{i}` makes invalid later (a label value past 63 characters
    at index 10) stops the batch there, with what came before it written."""
    grows = template({"v": "x" * 62 + "{i}"})
    answer = expect_answer(post(seeding_lab, seed_body(PODS.format(ns=namespace), grows, 12)), 422, "Invalid")
    assert answer["message"].startswith("object 10 (after 10 created): ")
    assert len(core.list_namespaced_pod(namespace).items) == 10
