"""The node side's pure pieces, table-driven: tolerations, quantities, workload annotations, the overlap
recorder's interval logic, zone states and node condition changes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from airflow_provider_dispatch_lab.simulated.nodes.kubelet_status import node_conditions, node_conditions_changed
from airflow_provider_dispatch_lab.simulated.nodes.node_lifecycle import zone_of, zone_state
from airflow_provider_dispatch_lab.simulated.nodes.scheduler import filter_node, least_allocated_score
from airflow_provider_dispatch_lab.simulated.nodes.taints import (
    matching_tolerations,
    min_toleration_seconds,
    tolerates,
    untolerated,
)
from airflow_provider_dispatch_lab.simulated.nodes.workload import WorkloadError, WorkloadSpec
from airflow_provider_dispatch_lab.simulated.quantities import parse_quantity, pod_requests
from airflow_provider_dispatch_lab.truth.overlap import ExecutionKey, OverlapRecorder

from .nodes_support import execution_labels

UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}, UNREACHABLE, True),
        ({"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, UNREACHABLE, True),
        ({"operator": "Exists"}, OUT_OF_SERVICE, True),
        ({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}, UNREACHABLE, False),
        ({"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown"}, OUT_OF_SERVICE, True),
        ({"key": "node.kubernetes.io/out-of-service", "operator": "Equal", "value": "other"}, OUT_OF_SERVICE, False),
        ({"key": "node.kubernetes.io/not-ready", "operator": "Exists"}, UNREACHABLE, False),
        ({"key": "node.kubernetes.io/unreachable", "operator": "Lt", "value": "3"}, UNREACHABLE, False),
    ],
)
def test_tolerates(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_untolerated_only_looks_at_the_given_effects() -> None:
    taints = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    assert untolerated(taints, [], ["NoSchedule", "NoExecute"]) == taints[1]
    assert untolerated(taints, [{"key": "b", "operator": "Exists"}], ["NoSchedule", "NoExecute"]) is None


@pytest.mark.parametrize(
    ("tolerations", "expected_tolerated", "expected_seconds"),
    [
        ([], False, None),
        ([{"key": UNREACHABLE["key"], "operator": "Exists", "tolerationSeconds": 300}], True, 300.0),
        ([{"operator": "Exists"}], True, None),
        ([{"key": UNREACHABLE["key"], "operator": "Exists", "tolerationSeconds": 0}], True, 0.0),
        ([{"key": UNREACHABLE["key"], "operator": "Exists", "tolerationSeconds": -5}], True, 0.0),
    ],
)
def test_eviction_delay(tolerations: list[dict[str, Any]], expected_tolerated: bool, expected_seconds: Any) -> None:
    tolerated, used = matching_tolerations([UNREACHABLE], tolerations)
    assert tolerated is expected_tolerated
    if tolerated:
        assert min_toleration_seconds(used) == expected_seconds


def test_no_used_toleration_means_now() -> None:
    assert min_toleration_seconds([]) == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2", Decimal(2)),
        ("500m", Decimal("0.5")),
        ("1.5", Decimal("1.5")),
        ("128Gi", Decimal(128 * 2**30)),
        ("1k", Decimal(1000)),
        ("1e3", Decimal(1000)),
        (3, Decimal(3)),
    ],
)
def test_parse_quantity(text: Any, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1Qi", "--1", True])
def test_parse_quantity_refuses_garbage(text: Any) -> None:
    with pytest.raises(ValueError, match="quantit"):
        parse_quantity(text)


def test_pod_requests_sum_containers_and_take_the_largest_init_container() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"resources": {"limits": {"cpu": "500m"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
        }
    }
    assert pod_requests(pod) == {"cpu": Decimal(4), "memory": Decimal(2**30)}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, WorkloadSpec()),
        (
            {"lab.dispatch.phpboyscout.uk/run-seconds": "30", "lab.dispatch.phpboyscout.uk/exit-code": "3"},
            WorkloadSpec(run_seconds=30.0, exit_code=3),
        ),
        ({"lab.dispatch.phpboyscout.uk/termination-seconds": "12.5"}, WorkloadSpec(termination_seconds=12.5)),
        ({"lab.dispatch.phpboyscout.uk/exit-now": "0"}, WorkloadSpec(exit_now=0)),
        ({"unrelated/annotation": "x"}, WorkloadSpec()),
    ],
)
def test_workload_annotations(annotations: dict[str, str], expected: WorkloadSpec) -> None:
    assert WorkloadSpec.from_annotations(annotations) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("run-seconds", "soon"),
        ("run-seconds", "-1"),
        ("run-seconds", "inf"),
        ("exit-code", "256"),
        ("exit-code", "1.5"),
        ("termination-seconds", "nan"),
        ("exit-now", "-1"),
    ],
)
def test_bad_workload_annotations_are_refused_by_name(key: str, value: str) -> None:
    annotation = f"lab.dispatch.phpboyscout.uk/{key}"
    with pytest.raises(WorkloadError) as raised:
        WorkloadSpec.from_annotations({annotation: value})
    assert raised.value.annotation == annotation
    assert repr(value) in str(raised.value)


def _recorder_with(*intervals: tuple[int | None, float, float | None]) -> OverlapRecorder:
    recorder = OverlapRecorder()
    for index, (admission, start, stop) in enumerate(intervals):
        record = recorder.started(
            namespace="ns",
            pod=f"p{index}",
            pod_uid=f"u{index}",
            node="n",
            labels=execution_labels("tj", admission),
            at=start,
        )
        if stop is not None:
            recorder.stopped(record, stop)
    return recorder


@pytest.mark.parametrize(
    ("intervals", "expected_overlaps"),
    [
        ([(1, 0.0, 10.0), (2, 10.0, 20.0)], 0),  # half-open: back to back is not an overlap
        ([(1, 0.0, 10.0), (2, 9.5, 20.0)], 1),
        ([(1, 0.0, None), (2, 100.0, None)], 1),  # still running on a frozen node
        ([(1, 0.0, 10.0), (1, 5.0, 20.0)], 0),  # two pods of one execution
        ([(1, 0.0, None), (2, 5.0, 6.0), (3, 7.0, 8.0)], 2),
        ([(None, 0.0, 10.0), (1, 5.0, 20.0)], 1),  # without A the pod is its own (job id, submission) execution
    ],
)
def test_overlaps(intervals: list[tuple[int | None, float, float | None]], expected_overlaps: int) -> None:
    recorder = _recorder_with(*intervals)
    assert len(recorder.overlaps("ns", "tj")) == expected_overlaps
    assert recorder.overlaps("other-ns", "tj") == []
    assert recorder.overlaps("ns", "other-trainjob") == []


def test_overlap_interval_and_executions() -> None:
    recorder = _recorder_with((1, 0.0, 30.0), (2, 10.0, None))
    (overlap,) = recorder.overlaps("ns", "tj")
    assert (overlap.start, overlap.end) == (10.0, 30.0)
    assert "ns/p0" in overlap.describe()
    assert "ns/p1" in overlap.describe()
    assert recorder.executions("ns", "tj") == {ExecutionKey("job-1", "1", "1"), ExecutionKey("job-1", "1", "2")}


def test_a_process_stops_once_and_not_before_it_started() -> None:
    recorder = OverlapRecorder()
    record = recorder.started(namespace="ns", pod="p", pod_uid="u", node="n", labels={}, at=10.0)
    with pytest.raises(ValueError, match="before it started"):
        recorder.stopped(record, 5.0)
    recorder.stopped(record, 12.0)
    with pytest.raises(ValueError, match="already stopped"):
        recorder.stopped(record, 13.0)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["True", "True"], "Normal"),
        (["True", "Unknown"], "Normal"),
        (["Unknown"], "FullDisruption"),
        ([None, "False"], "FullDisruption"),
        (["True", "Unknown", "Unknown", "False"], "PartialDisruption"),
        (["True", "True", "Unknown", "Unknown", "False"], "PartialDisruption"),
        (["True", "True", "True", "Unknown", "Unknown", "False"], "Normal"),
    ],
)
def test_zone_state(statuses: list[str | None], expected: str) -> None:
    assert zone_state(statuses) == expected


def test_zone_of_joins_region_and_zone() -> None:
    labels = {"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "z"}
    assert zone_of({"metadata": {"labels": labels}}) == "r:\x00:z"
    assert zone_of({"metadata": {"labels": {}}}) == ""


def test_node_conditions_change_only_on_status_reason_or_message() -> None:
    node = {"status": {"conditions": node_conditions(None, True, "2026-01-01T00:00:00Z")}}
    assert not node_conditions_changed(node, True)
    assert node_conditions_changed(node, False)
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    ready.update(status="Unknown", reason="NodeStatusUnknown")
    assert node_conditions_changed(node, True)


def _node(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n", "labels": {"disk": "ssd"}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "2"}},
    }


def _pod(cpu: str = "0", **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec}}


@pytest.mark.parametrize(
    ("pod", "node", "bound", "expected"),
    [
        (_pod(), _node(), [], None),
        (_pod(), _node(unschedulable=True), [], "node(s) were unschedulable"),
        (
            _pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
            _node(unschedulable=True),
            [],
            None,
        ),
        (
            _pod(),
            _node(taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]),
            [],
            "node(s) had untolerated taint {k: v}",
        ),
        (_pod(), _node(taints=[{"key": "k", "effect": "PreferNoSchedule"}]), [], None),
        (_pod(nodeSelector={"disk": "hdd"}), _node(), [], "node(s) didn't match Pod's node affinity/selector"),
        (_pod(cpu="1500m"), _node(), [_pod(cpu="1")], "Insufficient cpu"),
        (_pod(cpu="1"), _node(), [_pod(cpu="1")], None),
        (_pod(), _node(), [_pod(), _pod()], "Too many pods"),
    ],
)
def test_filter_node(pod: dict[str, Any], node: dict[str, Any], bound: list[dict[str, Any]], expected: Any) -> None:
    assert filter_node(pod, node, bound) == expected


def test_least_allocated_prefers_the_emptier_node_even_without_requests() -> None:
    empty = {"spec": {"containers": [{"name": "c"}]}}
    assert least_allocated_score(empty, _node(), []) > least_allocated_score(empty, _node(), [empty])
