"""The lab's Tables and OpenAPI documents over HTTP, through the official client's ApiClient: the parts kubectl
reads (tests/kubectl runs kubectl itself; tests/real/test_real_tables.py compares with the real server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from api_answers import expect_answer

from airflow_provider_dispatch_lab.apiserver import tables
from airflow_provider_dispatch_lab.runtime import Lab

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@pytest.fixture
def client(lab: Lab) -> Iterator[kubernetes.client.ApiClient]:
    made = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig()))
    yield made
    made.close()


def _get(client: kubernetes.client.ApiClient, path: str, accept: str = TABLE, **query: str) -> tuple[int, Any]:
    try:
        answer = client.call_api(
            path,
            "GET",
            query_params=list(query.items()),
            header_params={"Accept": accept},
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
    except kubernetes.client.ApiException as error:
        return error.status, json.loads(error.body)
    return answer.status, json.loads(answer.data)


def test_events_print_as_the_real_server_does(client: kubernetes.client.ApiClient) -> None:
    event = {
        "metadata": {"name": "e1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "fieldPath": "spec.containers{c}"},
        "reason": "Killing",
        "message": "Stopping container c \n",
        "type": "Normal",
        "source": {"component": "kubelet", "host": "node-1"},
        "count": 3,
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    kubernetes.client.CoreV1Api(client).create_namespaced_event("default", event)
    table = expect_answer(_get(client, "/api/v1/namespaces/default/events"), 200)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == [c[0] for c in tables.EVENT_COLUMNS]
    cells = table["rows"][0]["cells"]
    assert cells[1:7] == ["Normal", "Killing", "pod/p", "spec.containers{c}", "kubelet, node-1", "Stopping container c"]
    assert cells[8:] == [3, "e1"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["rows"][0]["object"]["metadata"]["name"] == "e1"


def test_include_object_and_plain_json(client: kubernetes.client.ApiClient) -> None:
    table = expect_answer(_get(client, "/api/v1/namespaces/default", includeObject="Object"), 200)
    assert table["rows"][0]["object"]["kind"] == "Namespace"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Created At"]
    expect_answer(_get(client, "/api/v1/namespaces", includeObject="Everything"), 400)
    plain = expect_answer(_get(client, "/api/v1/namespaces", accept="application/json"), 200)
    assert plain["kind"] == "NamespaceList"


def test_printer_columns_follow_the_crd(client: kubernetes.client.ApiClient) -> None:
    table = expect_answer(_get(client, "/apis/kueue.x-k8s.io/v1beta2/workloads"), 200)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"),
        ("Queue", "string"),
        ("Reserved in", "string"),
        ("Admitted", "string"),
        ("Finished", "string"),
        ("Age", "date"),
    ]


def test_jsonpath_of_printer_columns() -> None:
    obj = {"status": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Suspended", "status": "X"}]}}
    assert tables.find_results(obj, tables.compile_path(".status.conditions[-1:].type")) == ["Suspended"]
    assert tables.find_results(obj, tables.compile_path('.status.conditions[?(@.type=="Created")].status')) == ["True"]
    assert tables.find_results(obj, tables.compile_path(".status.conditions[?(@.type=='Nope')].status")) == []
    assert tables.find_results(obj, tables.compile_path(".spec.missing")) == []
    with pytest.raises(ValueError, match="unrecognized column definition"):
        tables.compile_path(".a..b")


def test_openapi_v3_says_the_server_validates_fields(client: kubernetes.client.ApiClient) -> None:
    index = expect_answer(_get(client, "/openapi/v3", accept="application/json"), 200)
    url = index["paths"]["apis/trainer.kubeflow.org/v1alpha1"]["serverRelativeURL"]
    document = expect_answer(_get(client, url.split("?")[0], accept="application/json"), 200)
    patch = document["paths"]["/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "trainer.kubeflow.org",
        "version": "v1alpha1",
        "kind": "TrainJob",
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]
    schema = document["components"]["schemas"]["org.kubeflow.trainer.v1alpha1.TrainJob"]
    assert "suspend" in schema["properties"]["spec"]["properties"]
    expect_answer(_get(client, "/openapi/v3/apis/nope.example.com/v1", accept="application/json"), 404)
