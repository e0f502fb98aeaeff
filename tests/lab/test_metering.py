"""The lab's request/byte meter (`lab/apiserver/metering.py`): every request counted, byte for byte, at `/lab/metrics`.

Bytes are checked against a raw socket: what the test sends is what the meter must count as the request, and
everything the server writes back until it closes the connection is what it must count as the response.
"""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import kubernetes
import pytest

from airflow_provider_dispatch_lab.apiserver.faults import FaultInjector, FaultRule
from airflow_provider_dispatch_lab.apiserver.metering import METRICS_PATH, Meter
from airflow_provider_dispatch_lab.runtime import DEFAULT_TOKEN, Lab
from airflow_provider_dispatch_lab.scenario import manifests


@dataclass
class MeteredLab:
    lab: Lab
    meter: Meter
    faults: FaultInjector


@pytest.fixture(scope="module")
def metered() -> Iterator[MeteredLab]:
    meter, faults = Meter(), FaultInjector(seed=3)
    with Lab(speed=100.0, middlewares=(meter.middleware, faults.middleware)) as lab:
        yield MeteredLab(lab, meter, faults)


def metrics(lab: Lab) -> dict[str, Any]:
    request = urllib.request.Request(lab.url + METRICS_PATH, headers={"Authorization": f"Bearer {DEFAULT_TOKEN}"})
    with urllib.request.urlopen(request) as answer:
        body: dict[str, Any] = json.loads(answer.read())
    return body


def series(body: dict[str, Any]) -> dict[tuple[str, str, str], tuple[int, int, int]]:
    return {
        (s["user"], s["verb"], s["resource"]): (s["requests"], s["requestBytes"], s["responseBytes"])
        for s in body["series"]
    }


def delta(before: dict[str, Any], after: dict[str, Any]) -> dict[tuple[str, str, str], tuple[int, int, int]]:
    old = series(before)
    changed = {}
    for key, (requests, sent, received) in series(after).items():
        was = old.get(key, (0, 0, 0))
        if (requests, sent, received) != was:
            changed[key] = (requests - was[0], sent - was[1], received - was[2])
    return changed


def raw_exchange(lab: Lab, method: str, target: str, body: bytes = b"") -> tuple[bytes, bytes]:
    """One HTTP/1.1 request on its own connection; (the bytes sent, every byte received until the server closed)."""
    url = urlsplit(lab.url)
    headers = [
        ("Host", url.netloc),
        ("Authorization", f"Bearer {DEFAULT_TOKEN}"),
        ("Accept", "application/json"),
        ("Connection", "close"),
    ]
    if body:
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    sent = f"{method} {target} HTTP/1.1\r\n".encode()
    sent += b"".join(f"{name}: {value}\r\n".encode() for name, value in headers) + b"\r\n" + body
    received = b""
    with socket.create_connection((url.hostname, url.port), timeout=10) as connection:
        connection.sendall(sent)
        while chunk := connection.recv(65536):
            received += chunk
    return sent, received


@pytest.mark.parametrize(
    ("method", "target", "body", "key", "status"),
    [
        ("GET", "/api/v1/namespaces/default/pods", b"", ("lab-admin", "list", "pods"), b"200"),
        ("GET", "/api/v1/namespaces/default/pods/absent", b"", ("lab-admin", "get", "pods"), b"404"),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            json.dumps(manifests.pod("metered-post", labels={"k": "v" * 60})).encode(),
            ("lab-admin", "create", "pods"),
            b"201",
        ),
        ("GET", "/version", b"", ("lab-admin", "get", "/version"), b"200"),
    ],
    ids=["list", "404-status-body", "create-with-body", "non-resource"],
)
def test_a_request_and_its_answer_are_counted_byte_for_byte(
    metered: MeteredLab, method: str, target: str, body: bytes, key: tuple[str, str, str], status: bytes
) -> None:
    before = metrics(metered.lab)
    sent, received = raw_exchange(metered.lab, method, target, body)
    assert received.split(b" ", 2)[1] == status
    assert delta(before, metrics(metered.lab)) == {key: (1, len(sent), len(received))}


def test_an_error_raised_further_in_is_counted_with_its_status_body(metered: MeteredLab) -> None:
    metered.faults.add(FaultRule("500", verbs=frozenset({"list"}), resources=frozenset({"secrets"}), count=1))
    before = metrics(metered.lab)
    sent, received = raw_exchange(metered.lab, "GET", "/api/v1/namespaces/default/secrets")
    assert received.split(b" ", 2)[1] == b"500"
    assert b'"kind":"Status"' in received
    assert delta(before, metrics(metered.lab)) == {("lab-admin", "list", "secrets"): (1, len(sent), len(received))}


def test_a_watch_is_counted_when_it_ends(metered: MeteredLab) -> None:
    before = metrics(metered.lab)
    # timeoutSeconds is lab time: at 100x the watch ends after 10 ms of wall time
    sent, received = raw_exchange(metered.lab, "GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1")
    assert received.endswith(b"0\r\n\r\n")  # the chunked stream's end
    assert delta(before, metrics(metered.lab)) == {("lab-admin", "watch", "pods"): (1, len(sent), len(received))}


def test_series_name_user_verb_and_resource_as_the_authorizer_sees_them(metered: MeteredLab) -> None:
    client = kubernetes.config.new_client_from_config(config_file=str(metered.lab.kubeconfig("metered")))
    core = kubernetes.client.CoreV1Api(client)
    before = metrics(metered.lab)
    core.create_namespaced_pod("default", manifests.pod("metered-pod"))
    core.read_namespaced_pod("metered-pod", "default")
    core.patch_namespaced_pod_status("metered-pod", "default", {"status": {"phase": "Running"}})
    core.delete_namespaced_pod("metered-pod", "default", grace_period_seconds=0)
    client.close()
    counted = delta(before, metrics(metered.lab))
    verbs = {(verb, resource): counts[0] for (_, verb, resource), counts in counted.items()}
    assert verbs == {("create", "pods"): 1, ("get", "pods"): 1, ("patch", "pods/status"): 1, ("delete", "pods"): 1}
    assert {user for user, _, _ in counted} == {"lab-admin"}
    totals = metrics(metered.lab)["totals"]
    assert totals["requests"] == sum(s["requests"] for s in metrics(metered.lab)["series"])


def test_reading_the_metrics_is_not_counted_and_only_get_is_served(metered: MeteredLab) -> None:
    first = metrics(metered.lab)
    assert first["kind"] == "LabMetrics"
    assert metrics(metered.lab) == first
    _, received = raw_exchange(metered.lab, "POST", METRICS_PATH, b"{}")
    assert received.split(b" ", 2)[1] == b"405"
    assert metrics(metered.lab) == first
