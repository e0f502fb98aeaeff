"""Requests held in flight (`lab.apiserver.delays`): released, a held write is applied as sent; past kube-apiserver's
request
timeout (60 s of lab time) it is answered 504 and not applied. Through the official client, at lab speed 0."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import pytest
from api_answers import expect_answer
from kubernetes.client import ApiException

from airflow_provider_dispatch_lab.apiserver.delays import REQUEST_TIMEOUT_SECONDS, DelayRule, RequestDelays
from airflow_provider_dispatch_lab.runtime import Lab

AGENT = "slow-controller/1.0"


@pytest.fixture
def delays() -> RequestDelays:
    return RequestDelays()


@pytest.fixture
def lab(delays: RequestDelays) -> Iterator[Lab]:
    with Lab(speed=0.0, middlewares=(delays.middleware,)) as running:
        delays.clock = running.clock
        yield running


def _client(lab: Lab, agent: str) -> kubernetes.client.CoreV1Api:
    api = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig(agent.split("/")[0])))
    api.user_agent = agent
    return kubernetes.client.CoreV1Api(api)


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except ApiException as error:
            result.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def _held(lab: Lab, delays: RequestDelays, count: int) -> None:
    """Wait (on the lab's loop, bounded) until `count` requests are held."""
    lab.run(lambda: delays.wait_held(count), 10)


def test_a_held_write_is_applied_when_released(lab: Lab, delays: RequestDelays) -> None:
    slow, other = _client(lab, AGENT), _client(lab, "someone-else/1.0")
    lab.call(lambda: delays.add(DelayRule(AGENT, frozenset({"create"}), frozenset({"namespaces"}))))
    body = {"metadata": {"name": "late", "labels": {"k": "v"}}}
    thread, result = _in_thread(lambda: slow.create_namespace(body))
    _held(lab, delays, 1)
    names = [n.metadata.name for n in other.list_namespace().items]
    assert "late" not in names  # not applied while held; other clients are not held
    other.create_namespace({"metadata": {"name": "unheld"}})
    assert lab.call(lambda: delays.release()) == 1
    thread.join(10)
    assert result, "the held write never answered"
    assert not isinstance(result[0], ApiException), result
    assert other.read_namespace("late").metadata.labels["k"] == "v"
    assert [r.outcome for r in delays.requests] == ["released"]


def test_past_the_request_timeout_a_held_write_is_answered_504_and_not_applied(lab: Lab, delays: RequestDelays) -> None:
    slow = _client(lab, AGENT)
    lab.call(lambda: delays.add(DelayRule(AGENT, frozenset({"create"}), frozenset({"namespaces"}))))
    thread, result = _in_thread(lambda: slow.create_namespace({"metadata": {"name": "lost"}}))
    _held(lab, delays, 1)
    lab.call(lambda: lab.clock.advance(REQUEST_TIMEOUT_SECONDS - 1))
    assert [r.outcome for r in delays.requests] == ["held"]
    lab.call(lambda: lab.clock.advance(1))
    thread.join(10)
    assert isinstance(result[0], ApiException), result
    expect_answer(result[0], 504)
    assert lab.call(lambda: delays.release()) == 0  # too late: nothing to release
    with pytest.raises(ApiException) as missing:
        slow.read_namespace("lost")
    expect_answer(missing.value, 404)
    assert [r.outcome for r in delays.requests] == ["timed out"]


def test_a_request_held_before_the_server_has_no_request_timeout(lab: Lab, delays: RequestDelays) -> None:
    """A client paused after it built the request (`before_the_server`): the server has not received it, so no
    deadline runs; released minutes later, it is carried out as it was built."""
    slow, other = _client(lab, AGENT), _client(lab, "someone-else/1.0")
    rule = DelayRule(AGENT, frozenset({"create"}), frozenset({"namespaces"}), before_the_server=True)
    lab.call(lambda: delays.add(rule))
    thread, result = _in_thread(lambda: slow.create_namespace({"metadata": {"name": "paused"}}))
    _held(lab, delays, 1)
    lab.call(lambda: lab.clock.advance(10 * REQUEST_TIMEOUT_SECONDS))
    assert [r.outcome for r in delays.requests] == ["held"]
    assert "paused" not in [n.metadata.name for n in other.list_namespace().items]
    assert lab.call(lambda: delays.release(rule)) == 1
    thread.join(10)
    assert result, "the paused write never answered"
    assert not isinstance(result[0], ApiException), result
    assert other.read_namespace("paused").metadata.name == "paused"
    assert [r.outcome for r in delays.requests] == ["released"]


def test_a_rule_catches_only_its_count_of_matching_requests(lab: Lab, delays: RequestDelays) -> None:
    slow = _client(lab, AGENT)
    rule = DelayRule(AGENT, frozenset({"create"}), frozenset({"namespaces"}), count=1)
    lab.call(lambda: delays.add(rule))
    thread, _ = _in_thread(lambda: slow.create_namespace({"metadata": {"name": "first"}}))
    _held(lab, delays, 1)
    slow.create_namespace({"metadata": {"name": "second"}})  # the rule is spent
    slow.list_namespace()  # another verb never matched
    lab.call(lambda: delays.release(rule))
    thread.join(10)
    assert rule.caught == 1


def test_a_rule_can_hold_only_the_lists_with_a_label_selector(lab: Lab, delays: RequestDelays) -> None:
    """`selected=True`: a list of one object's pods (by selector) is held, a whole namespace's is not."""
    slow = _client(lab, AGENT)
    rule = DelayRule(AGENT, frozenset({"list"}), frozenset({"pods"}), selected=True)
    lab.call(lambda: delays.add(rule))
    assert slow.list_namespaced_pod("default").items == []  # no selector: not held
    thread, result = _in_thread(lambda: slow.list_namespaced_pod("default", label_selector="app=x"))
    _held(lab, delays, 1)
    assert lab.call(lambda: delays.release(rule)) == 1
    thread.join(10)
    assert result, "the held list never answered"
    assert not isinstance(result[0], ApiException), result
    assert (rule.caught, [r.path for r in delays.requests]) == (1, ["/api/v1/namespaces/default/pods"])
