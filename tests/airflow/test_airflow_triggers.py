"""The triggers' run() against the lab under asyncio, as the triggerer runs them (no dag.test here).

Each test starts `run()` as a task, waits on the lab's probe until the trigger's first consistent check has
been answered (so the trigger is waiting on its watches), then changes the cluster as the admin and awaits the
event. `recheck_interval` is an hour, so an event that arrives at all came through the watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.sdk._shared.module_loading import import_string
from airflow.sdk.serde import deserialize, serialize
from airflow.triggers.base import BaseTrigger
from airflow_lab import AirflowLab, Seen
from dispatch.support import remaining_across
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.dispatch import payloads
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.assessment import Execution, remaining_report
from airflow_provider_dispatch.dispatch.explain import pod_on_node
from airflow_provider_dispatch.dispatch.payloads import fingerprint
from airflow_provider_dispatch.dispatch.selection import Selection
from airflow_provider_dispatch.hooks.checks import DrainCheck
from airflow_provider_dispatch.hooks.errors import exception_for_event
from airflow_provider_dispatch.sensors.pods_drained import PodsDrainedSensor, drain_wait_reason
from airflow_provider_dispatch.triggers.hub import Hub, current_hub
from airflow_provider_dispatch.triggers.pods_drained import PodsDrainedTrigger, remaining_summary
from airflow_provider_dispatch.triggers.trainjob_outcome import TrainJobOutcomeTrigger
from airflow_provider_dispatch.triggers.watch import RECONNECT_BACKOFF, Changes
from airflow_provider_dispatch_lab.apiserver.faults import FaultRule
from airflow_provider_dispatch_lab.runtime import write_kubeconfig

pytestmark = pytest.mark.airflow
HOUR = 3600.0
SELECTION = ("ml", "ft-7", "ft-7", "1")


def connection(airflow_lab: AirflowLab, identity: str = "writer") -> dict[str, Any]:
    return {"connection_extras": airflow_lab.connection(identity)}


def trigger_gets(seen: list[Seen], path_end: str) -> int:
    return sum(
        1 for s in seen if s.by_trigger and s.phase == "done" and s.method == "GET" and s.path.endswith(path_end)
    )


def checks_answered(name: str, count: int, nodes: tuple[str, ...] = ()) -> Callable[[list[Seen]], bool]:
    """The trigger's `count`-th drain check was answered: its TrainJob read and, last of all, its node reads."""

    def answered(seen: list[Seen]) -> bool:
        if trigger_gets(seen, f"/trainjobs/{name}") < count:
            return False
        return all(trigger_gets(seen, f"/nodes/{node}") >= count for node in nodes)

    return answered


async def first_event(trigger: BaseTrigger) -> dict[str, Any]:
    event = await anext(trigger.run())
    payload: dict[str, Any] = event.payload
    return payload


async def wait_for(airflow_lab: AirflowLab, predicate: Callable[[list[Seen]], bool], mark: int) -> None:
    await asyncio.to_thread(airflow_lab.probe.wait_for, predicate, mark)


def held_with_terminating_pods(cluster: Cluster, count: int = 1, *, lost: bool = False) -> tuple[str, list[str]]:
    """A held TrainJob whose previous execution left `count` Terminating pods on one node."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    if lost:
        cluster.lose_node(node)
    _, pods = cluster.held_after_execution("ft-7", runtime=runtime, admission=2, pods_on=[node] * count)
    return node, pods


def kubelet_confirms(cluster: Cluster, pod: str) -> None:
    """The kubelet confirmed the containers stopped: it deletes the pod object with grace 0 (k8s-apis §5.2)."""
    cluster.core.delete_namespaced_pod(pod, cluster.namespace, grace_period_seconds=0)


# --- serialization ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "trigger",
    [
        PodsDrainedTrigger("ns", "ft-7"),
        PodsDrainedTrigger(
            "ns",
            "ft-7",
            accept_ceased=False,
            stop_when_running=True,
            known_fingerprint=fingerprint([{"pod": "p-0", "node": "n1", "node_state": "Ready=Unknown"}]),
            deadline=1_900_000_000.5,
            quiet_until=1_899_999_000.25,
            connection_extras={"kube_config_path": "/k", "cluster_context": "c"},
            kubernetes_conn_id="other",
        ),
        TrainJobOutcomeTrigger("ns", "ft-7"),
        TrainJobOutcomeTrigger("ns", "ft-7", admission=3, recheck_interval=30.0, in_cluster=True),
        TrainJobOutcomeTrigger("ns", "ft-7", known_fingerprint="f" * 64, report_progress=False),
    ],
    ids=["drained-defaults", "drained-all", "outcome-defaults", "outcome-admission", "outcome-progress"],
)
def test_serialize_round_trips_through_serde_and_omits_defaults(trigger: BaseTrigger) -> None:
    classpath, kwargs = trigger.serialize()
    rebuilt = import_string(classpath)(**deserialize(serialize(kwargs)))
    assert rebuilt.serialize() == (classpath, kwargs)
    defaults = type(trigger).kwarg_defaults()  # type: ignore[attr-defined]
    assert {key for key in kwargs if key in defaults and kwargs[key] == defaults[key]} == set()
    assert {"namespace", "name"} <= set(kwargs)


# --- the drain, seen through the watch --------------------------------------------------------------------


async def test_a_drain_is_seen_through_the_watch_without_polling(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    node, (pod,) = held_with_terminating_pods(cluster)
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab))
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    payload = await asyncio.wait_for(running, 30)

    assert (payload["status"], payload["report"]["remaining"], payload["ref"]) == (
        "drained",
        [],
        f"{cluster.namespace}/ft-7",
    )
    seen = airflow_lab.probe.since(mark)
    assert trigger_gets(seen, "/trainjobs/ft-7") == 2  # the first check, and the one the DELETED event caused
    assert [s for s in seen if s.writes] == []
    assert any(s.is_watch_of("pods", cluster.namespace) and s.by_trigger for s in seen)
    assert current_hub().stats()["connections"] == 0  # released when run() ended


async def test_a_changed_remaining_set_yields_progress(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    node, pods = held_with_terminating_pods(cluster, count=2)
    known = fingerprint({"pod": pod, "node": node, "node_state": "Ready=True"} for pod in pods)
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(
        cluster.namespace, "ft-7", known_fingerprint=known, recheck_interval=HOUR, **connection(airflow_lab)
    )
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    assert not running.done()  # the set the worker knows is the set there is: no event
    await asyncio.to_thread(kubelet_confirms, cluster, pods[0])
    payload = await asyncio.wait_for(running, 30)
    assert payload["status"] == "progress"
    assert remaining_summary(payload["report"]) == [{"pod": pods[1], "node": node, "node_state": "Ready=True"}]


#: the quiet period of the tests below, wall seconds: long enough for a check inside it, short for the suite
QUIET = 3.0


async def test_progress_inside_the_quiet_period_waits_for_its_end(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    """A change that is only progress, right after the deferral, is logged and held back: the task hears of it
    when the quiet period is over (Airflow's stale executor race, apache/airflow#72716), from a check made then.

    The change is made before the trigger starts, so its first check sees it; the event must still not come before
    the period ends. The number of checks is not fixed (a pod's deletion may reach the watch as more than one event,
    each a check), only that the one sent was not the first."""
    node, pods = held_with_terminating_pods(cluster, count=2)
    known = fingerprint({"pod": pod, "node": node, "node_state": "Ready=True"} for pod in pods)
    kubelet_confirms(cluster, pods[0])
    mark = airflow_lab.probe.mark()
    quiet_until = time.time() + QUIET
    trigger = PodsDrainedTrigger(
        cluster.namespace,
        "ft-7",
        known_fingerprint=known,
        quiet_until=quiet_until,
        recheck_interval=HOUR,
        **connection(airflow_lab),
    )
    payload = await asyncio.wait_for(first_event(trigger), 30 + QUIET)
    arrived = time.time()
    assert payload["status"] == "progress"
    assert remaining_summary(payload["report"]) == [{"pod": pods[1], "node": node, "node_state": "Ready=True"}]
    assert quiet_until <= arrived  # never sent inside the period
    assert trigger_gets(airflow_lab.probe.since(mark), "/trainjobs/ft-7") >= 2  # held back, checked again at its end


async def test_a_decision_inside_the_quiet_period_is_sent_at_once(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    """The quiet period holds back progress only: the drain it waits for ends the wait as soon as it is seen."""
    node, (pod,) = held_with_terminating_pods(cluster)
    mark = airflow_lab.probe.mark()
    quiet_until = time.time() + HOUR
    trigger = PodsDrainedTrigger(
        cluster.namespace, "ft-7", quiet_until=quiet_until, recheck_interval=HOUR, **connection(airflow_lab)
    )
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    payload = await asyncio.wait_for(running, 30)
    assert payload["status"] == "drained"
    assert time.time() < quiet_until


async def test_the_outcome_trigger_holds_back_progress_too(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    """The node of the running execution's pod goes not Ready right after the deferral: the outcome trigger holds
    the new explanation back until its quiet period is over, then reports it.

    As for the drained trigger above, the change is made before the trigger starts (against the explanation the
    worker last showed, read by a first trigger), so its first check sees it inside the period whatever the load."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution = cluster.running_execution("ft-7", runtime=runtime, admission=2)
    cluster.pod("ft-7", node=node, execution=execution)
    shown = await asyncio.wait_for(
        first_event(
            TrainJobOutcomeTrigger(
                cluster.namespace, "ft-7", known_fingerprint="", recheck_interval=HOUR, **connection(airflow_lab)
            )
        ),
        30,
    )
    assert (shown["status"], shown["outcome"]) == ("progress", None)
    assert "Ready=Unknown" not in shown["waiting"]["headline"]
    await asyncio.to_thread(cluster.lose_node, node)
    mark = airflow_lab.probe.mark()
    quiet_until = time.time() + QUIET
    trigger = TrainJobOutcomeTrigger(
        cluster.namespace,
        "ft-7",
        known_fingerprint=shown["waiting"]["fingerprint"],
        quiet_until=quiet_until,
        recheck_interval=HOUR,
        **connection(airflow_lab),
    )
    payload = await asyncio.wait_for(first_event(trigger), 30 + QUIET)
    assert (payload["status"], payload["outcome"]) == ("progress", None)
    assert "Ready=Unknown" in payload["waiting"]["headline"]
    assert quiet_until <= time.time()  # never sent inside the period
    assert trigger_gets(airflow_lab.probe.since(mark), "/trainjobs/ft-7") >= 2  # held back, checked again at its end


async def test_a_node_state_change_yields_progress(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    node, (pod,) = held_with_terminating_pods(cluster)
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab))
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(cluster.lose_node, node)  # the kubelet went silent: Ready=Unknown
    payload = await asyncio.wait_for(running, 30)
    assert payload["status"] == "progress"
    assert remaining_summary(payload["report"]) == [{"pod": pod, "node": node, "node_state": "Ready=Unknown"}]
    assert "kubectl taint node" in payload["report"]["detail"]


@pytest.mark.parametrize("accept_ceased", [True, False])
async def test_cessation_ends_the_wait_only_when_accepted(
    airflow_lab: AirflowLab, cluster: Cluster, accept_ceased: bool
) -> None:
    node, (pod,) = held_with_terminating_pods(cluster, lost=True)
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(
        cluster.namespace,
        "ft-7",
        accept_ceased=accept_ceased,
        report_progress=False,
        recheck_interval=HOUR,
        **connection(airflow_lab),
    )
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(cluster.taint_out_of_service, node)  # shutdown confirmed by the operator
    if accept_ceased:
        payload = await asyncio.wait_for(running, 30)
        assert (payload["status"], payload["report"]["ceased"]) == ("ceased", True)
        assert remaining_summary(payload["report"])[0]["node_state"] == "Ready=Unknown, out-of-service"
    else:
        await wait_for(airflow_lab, checks_answered("ft-7", 2, (node,)), mark)
        assert not running.done()  # ceased, but the pod object is still there: a release must wait
        await asyncio.to_thread(cluster.podgc_force_deletes, pod)
        payload = await asyncio.wait_for(running, 30)
        assert payload["status"] == "drained"


async def test_a_release_elsewhere_ends_the_wait_with_running(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    node, _ = held_with_terminating_pods(cluster)
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(
        cluster.namespace,
        "ft-7",
        accept_ceased=False,
        stop_when_running=True,
        recheck_interval=HOUR,
        **connection(airflow_lab),
    )
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(
        cluster.custom.patch_namespaced_custom_object,
        "trainer.kubeflow.org",
        "v1alpha1",
        cluster.namespace,
        "trainjobs",
        "ft-7",
        {"spec": {"suspend": False}},
        _content_type="application/merge-patch+json",
    )  # another caller released it; its pods do not exist yet, the TrainJob watch wakes the trigger
    payload = await asyncio.wait_for(running, 30)
    assert (payload["status"], payload["held"]) == ("running", False)


# --- errors come back as events ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def closed_port_extras(airflow_lab: AirflowLab, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = write_kubeconfig(tmp_path_factory.mktemp("closed") / "kubeconfig", f"http://127.0.0.1:{port}", "x")
    return {"kube_config_path": str(path)}


@pytest.mark.parametrize(
    ("case", "error_class", "retryable", "airflow_error"),
    [
        ("missing", "NotFoundError", False, AirflowFailException),
        ("forbidden", "ForbiddenError", False, AirflowFailException),
        ("unreachable", "UnreachableError", True, AirflowException),
        ("bad-kubeconfig", "RefusedError", False, AirflowFailException),
    ],
)
@pytest.mark.parametrize("trigger_class", [PodsDrainedTrigger, TrainJobOutcomeTrigger])
async def test_errors_come_back_as_events_the_worker_maps(
    airflow_lab: AirflowLab,
    cluster: Cluster,
    closed_port_extras: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
    trigger_class: type[PodsDrainedTrigger] | type[TrainJobOutcomeTrigger],
    case: str,
    error_class: str,
    retryable: bool,
    airflow_error: type[AirflowException],
) -> None:
    if case != "missing":
        cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=1)
    extras = {
        "missing": airflow_lab.connection("writer"),
        "forbidden": airflow_lab.connection("nobody"),
        "unreachable": closed_port_extras,
        "bad-kubeconfig": {"kube_config": "just: [a, list"},
    }[case]
    trigger = trigger_class(cluster.namespace, "ft-7", unreachable_timeout=0, connection_extras=extras)
    payload = await asyncio.wait_for(first_event(trigger), 30)
    assert (payload["status"], payload["error_class"], payload["retryable"]) == ("error", error_class, retryable)
    assert payload["ref"] == f"{cluster.namespace}/ft-7"
    if case in ("missing", "forbidden"):
        assert f"{cluster.namespace}/ft-7" in payload["message"]
    mapped = exception_for_event(payload)
    assert type(mapped) is airflow_error
    assert str(mapped) == payload["message"]


async def test_an_unreachable_api_is_retried_with_backoff_before_it_is_an_error(
    airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    """Two 500s on the TrainJob read, then answers: within unreachable_timeout the trigger keeps going."""
    node, (pod,) = held_with_terminating_pods(cluster)
    airflow_lab.hooks.faults(FaultRule("500", verbs=frozenset({"get"}), resources=frozenset({"trainjobs"}), count=2))
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab))
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, lambda seen: trigger_gets(seen, f"/nodes/{node}") >= 1, mark)
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    payload = await asyncio.wait_for(running, 30)
    assert payload["status"] == "drained"
    statuses = [s.status for s in airflow_lab.probe.since(mark) if s.by_trigger and s.path.endswith("/trainjobs/ft-7")]
    assert statuses[:3] == [500, 500, 200]


# --- the watch: relist, resume, backoff -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        FaultRule("410", verbs=frozenset({"watch"}), resources=frozenset({"pods"}), count=1),
        FaultRule("end-watch", verbs=frozenset({"watch"}), resources=frozenset({"pods"}), count=2),
        FaultRule("500", verbs=frozenset({"watch"}), resources=frozenset({"pods"}), count=2),
        FaultRule("drop", verbs=frozenset({"watch"}), resources=frozenset({"pods"}), count=1),
    ],
    ids=["410-relist", "stream-ends", "500-backoff", "dropped"],
)
async def test_the_watch_survives_its_faults(airflow_lab: AirflowLab, cluster: Cluster, fault: FaultRule) -> None:
    node, (pod,) = held_with_terminating_pods(cluster)
    airflow_lab.hooks.faults(fault, when=lambda request: request.query.get("watch") == "true")
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab))
    running = asyncio.create_task(first_event(trigger))
    fired = fault.count or 0

    def watch_recovered(seen: list[Seen]) -> bool:
        opened = [s for s in seen if s.is_watch_of("pods", cluster.namespace)]
        return len(opened) > fired and checks_answered("ft-7", 1, (node,))(seen)

    await wait_for(airflow_lab, watch_recovered, mark)
    assert fault.fired == fired
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    payload = await asyncio.wait_for(running, 60)
    assert payload["status"] == "drained"
    if fault.kind == "410":  # the watch listed again, and its subscribers were told to re-check
        lists = [s for s in airflow_lab.probe.since(mark) if s.by_trigger and s.query.get("limit") == "1"]
        assert len([s for s in lists if s.path.endswith("/pods")]) >= 2


# --- the watch's pacing: reconnects that deliver nothing wait on the backoff schedule ------------------------

STRETCH = 120.0  # seconds of the watches' own clock they are left to run while every watch ends at once
CAP = 60  # watch requests after which the watch is taken as unpaced (the test then fails on the count)


@dataclass
class PauseClock:
    """The watches' pauses, counted instead of waited: each is recorded and passes at once (one turn of the event
    loop), so the stretch of the watches' time they add up to is exact and no test waits on wall time."""

    pauses: list[float] = field(default_factory=list)

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await asyncio.sleep(0)

    @property
    def elapsed(self) -> float:
        return sum(self.pauses)


async def watch_until(
    airflow_lab: AirflowLab, cluster: Cluster, counted: Callable[[list[Seen]], int], stretch: float
) -> tuple[list[Seen], PauseClock]:
    """Subscribe to the shared pod watch of the cluster's namespace through a hub whose watches pause on a
    `PauseClock`; stop once their pauses add up to `stretch` or `counted` requests reached CAP."""
    clock = PauseClock()
    mark = airflow_lab.probe.mark()
    async with contextlib.AsyncExitStack() as stack:
        shared = await stack.enter_async_context(Hub(sleep=clock.sleep).connection(connection(airflow_lab)))
        await stack.enter_async_context(
            shared.watching(v.POD, cluster.namespace, lambda kind, obj: True, Changes(), "pods")
        )
        await wait_for(airflow_lab, lambda seen: counted(seen) >= CAP or clock.elapsed >= stretch, mark)
    return airflow_lab.probe.since(mark), clock


def pod_watches(namespace: str) -> Callable[[list[Seen]], int]:
    return lambda seen: sum(1 for s in seen if s.is_watch_of("pods", namespace))


def pod_lists(namespace: str) -> Callable[[list[Seen]], int]:
    path = f"/namespaces/{namespace}/pods"
    return lambda seen: sum(1 for s in seen if s.phase == "done" and not s.watch and s.path.endswith(path))


async def test_a_watch_that_ends_at_once_without_events_reconnects_on_the_backoff_schedule(
    airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    """Every pod watch ends at once with 200 and no event: the shared watch resumes after each pause and the
    pauses grow, so over 120 s of its clock the lab sees about fifteen watches, not a thousand a second."""
    fault = FaultRule("end-watch", verbs=frozenset({"watch"}), resources=frozenset({"pods"}))
    airflow_lab.hooks.faults(fault, when=lambda request: request.query.get("watch") == "true")
    seen, clock = await watch_until(airflow_lab, cluster, pod_watches(cluster.namespace), STRETCH)
    watches = pod_watches(cluster.namespace)(seen)
    assert pod_lists(cluster.namespace)(seen) == 1  # an empty watch is resumed from its resourceVersion
    assert watches >= 5
    # the first watch, one more after each pause that fits in the stretch, and the one the last pause let through
    assert watches <= 1 + RECONNECT_BACKOFF.most_retries_within(STRETCH) + 1
    for failures, pause in enumerate(clock.pauses):  # each pause is the schedule's, one step further each time
        ceiling = RECONNECT_BACKOFF.ceiling(failures)
        assert ceiling / 2 <= pause <= ceiling


async def test_the_watch_pauses_before_it_lists_again_after_410_gone(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    """Every pod watch is answered 410 Gone: the shared watch lists again each time, after a pause (the list that
    succeeds starts the count over, so each pause is the schedule's first step)."""
    stretch = 10.0
    fault = FaultRule("410", verbs=frozenset({"watch"}), resources=frozenset({"pods"}))
    airflow_lab.hooks.faults(fault, when=lambda request: request.query.get("watch") == "true")
    seen, clock = await watch_until(airflow_lab, cluster, pod_lists(cluster.namespace), stretch)
    lists = pod_lists(cluster.namespace)(seen)
    assert lists >= 5
    assert lists <= stretch / RECONNECT_BACKOFF.least_total(1) + 2
    assert len(clock.pauses) >= lists - 1  # one pause before every relist
    first = RECONNECT_BACKOFF.ceiling(0)
    assert all(first / 2 <= pause <= first for pause in clock.pauses)


# --- payloads at 50,000 pods: what the trigger and the sensor hand on stays bounded ---------------------------


def test_at_50000_pods_the_events_kwargs_wait_reasons_and_xcom_stay_bounded_across_re_deferrals() -> None:
    """50,000 pods on 5,000 nodes, 4,000 going before each check: each check makes the trigger yield `progress`, and
    the sensor re-defers (`make_trigger` with the event's fingerprint, as `execute_complete` does). Every event, every
    next trigger's serialized kwargs, every wait reason and the XCom stay within their limits, and still say how
    many pods remain, which come first (with node and node state), and every node state."""
    remaining = sorted(remaining_across(50_000, 5_000), key=lambda pod: pod.name)
    sensor = PodsDrainedSensor(task_id="drained", namespace="ml", name="ft-7", kubernetes_conn_id=None)
    shown = remaining_report("ml/ft-7", tuple(remaining), "6").fingerprint  # what the poke before deferring showed
    trigger = sensor.make_trigger(
        deadline=1_900_000_000.0, recheck_interval=HOUR, kubernetes_conn_id=None, known_fingerprint=shown
    )
    kwargs_sizes: list[int] = []
    for _ in range(10):
        remaining = remaining[4_000:]
        check = DrainCheck(
            remaining_report("ml/ft-7", tuple(remaining), "7"), Execution("ft-7", "1", 2), True, Selection(*SELECTION)
        )
        event = trigger.decide(check, trigger.known_fingerprint)
        assert event is not None
        assert event["status"] == "progress"
        assert len(json.dumps(serialize(event))) <= payloads.TRIGGER_EVENT_LIMIT
        report = event["report"]
        assert (report["remaining_count"], report["remaining"][0]["name"]) == (len(remaining), remaining[0].name)
        assert {entry["state"] for entry in report["node_states"]} == {pod.node.label for pod in remaining}

        _, waiting = drain_wait_reason(event, accept_ceased=True, ref="ml/ft-7")
        reason = waiting.text()
        assert len(reason) <= payloads.WAIT_REASON_LIMIT
        lines = reason.splitlines()
        first_line = lines[0]
        remaining_line = next(line for line in lines if line.startswith("remaining pods: "))
        census = lines[lines.index(remaining_line) + 1]
        first_pod = pod_on_node(remaining[0])  # `<pod> on <node> (<node state>)`
        assert first_line.startswith("Confirm ")  # what to do about the lost node first
        assert first_line.endswith("then taint it out-of-service (Ready=Unknown)")
        assert lines[1].startswith("kubectl taint node ")
        assert "Waiting until the pods of TrainJob ml/ft-7 (execution 2) are gone or proven stopped." in lines
        assert remaining_line.startswith(f"remaining pods: {first_pod}, ")
        assert waiting.short == first_line
        assert f"{len(remaining):,} pods on " in census

        trigger = sensor.make_trigger(
            deadline=1_900_000_000.0,
            recheck_interval=HOUR,
            kubernetes_conn_id=None,
            known_fingerprint=report["fingerprint"],
        )
        kwargs_sizes.append(len(json.dumps(serialize(trigger.serialize()[1]))))
    assert max(kwargs_sizes) <= payloads.TRIGGER_KWARGS_LIMIT
    assert len(set(kwargs_sizes)) == 1  # the same size at every re-deferral, however many pods remain
    xcom = PodsDrainedSensor.outcome_xcom("ceased", event)
    assert len(json.dumps(serialize(xcom))) <= payloads.DRAIN_XCOM_LIMIT
    assert xcom["remaining_count"] == 10_000  # the last check's
    assert xcom["remaining"][0]["pod"] == event["report"]["remaining"][0]["name"]


# --- a triggerer restart, two copies at once --------------------------------------------------------------


async def test_a_triggerer_restart_starts_over_from_the_kwargs(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    node, (pod,) = held_with_terminating_pods(cluster)
    mark = airflow_lab.probe.mark()
    first = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab))
    classpath, kwargs = first.serialize()
    stored = serialize(kwargs)  # what the worker sent and the DB kept
    running = asyncio.create_task(first_event(first))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    assert current_hub().stats()["connections"] == 1

    running.cancel()  # the triggerer shuts down: it cancels run(), then calls cleanup()
    with pytest.raises(asyncio.CancelledError):
        await running
    await first.cleanup()
    assert current_hub().stats() == {"connections": 0, "users": 0, "watches": {}}
    pods_path = f"/namespaces/{cluster.namespace}/pods"
    closed = lambda seen: any(s.watch and s.phase == "done" and s.path.endswith(pods_path) for s in seen)  # noqa: E731
    await wait_for(airflow_lab, closed, mark)  # its pod watch ended on the server too

    restarted = import_string(classpath)(**deserialize(stored))
    mark = airflow_lab.probe.mark()
    running = asyncio.create_task(first_event(restarted))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    payload = await asyncio.wait_for(running, 30)
    assert payload["status"] == "drained"


async def test_two_copies_at_once_agree_share_one_watch_and_write_nothing(
    airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    node, (pod,) = held_with_terminating_pods(cluster)
    before = cluster.resource_version("ft-7")
    mark = airflow_lab.probe.mark()
    kwargs = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab)).serialize()
    copies = [PodsDrainedTrigger(**deserialize(serialize(kwargs[1]))) for _ in range(2)]
    running = [asyncio.create_task(first_event(copy)) for copy in copies]
    await wait_for(airflow_lab, lambda seen: trigger_gets(seen, f"/nodes/{node}") >= 2, mark)
    stats = current_hub().stats()
    assert (stats["connections"], stats["users"]) == (1, 2)
    assert stats["watches"] == {f"watch of pods in namespace {cluster.namespace}": 2, "watch of nodes cluster-wide": 2}
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    first, second = await asyncio.wait_for(asyncio.gather(*running), 30)
    assert (first["status"], second["status"]) == ("drained", "drained")
    assert first["report"]["remaining"] == second["report"]["remaining"] == []
    seen = airflow_lab.probe.since(mark)
    assert [s for s in seen if s.writes] == []
    assert len([s for s in seen if s.is_watch_of("pods", cluster.namespace)]) == 1
    assert cluster.resource_version("ft-7") == before


# --- the outcome trigger ----------------------------------------------------------------------------------


async def test_the_outcome_trigger_waits_for_the_awaited_execution(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    """Execution 1 failed; the trigger waits for execution 2, which the cluster then admits and completes."""
    runtime = cluster.runtime()
    cluster.held_after_execution("ft-7", runtime=runtime, admission=1, terminating=False)
    cluster.trainer_finishes("ft-7", "Failed")
    mark = airflow_lab.probe.mark()
    trigger = TrainJobOutcomeTrigger(
        cluster.namespace, "ft-7", admission=2, recheck_interval=HOUR, **connection(airflow_lab)
    )
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, lambda seen: trigger_gets(seen, "/trainjobs/ft-7") >= 1, mark)
    assert not running.done()  # execution 1's Failed is not execution 2's outcome

    def admit_and_complete() -> None:
        """The conditions go first, then A: no state in between shows execution 2 with an outcome."""
        cluster.set_trainjob_status("ft-7", {"conditions": []})
        live = cluster.trainjob_object("ft-7")
        live["metadata"]["annotations"][v.ANNOTATION_ADMISSION] = "2"
        cluster.custom.replace_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", cluster.namespace, "trainjobs", "ft-7", live
        )
        cluster.trainer_finishes("ft-7", "Complete")

    await asyncio.to_thread(admit_and_complete)
    payload = await asyncio.wait_for(running, 30)
    assert (payload["status"], payload["outcome"], payload["admission"], payload["reason"]) == (
        "finished",
        "Complete",
        2,
        "AllJobsCompleted",
    )


async def test_the_outcome_trigger_reports_a_node_lost_under_the_running_execution(
    airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    """Execution 2 runs with one pod on n1. The trigger waits; the node stops reporting: the node watch wakes it,
    and it yields `progress` naming the pod, the node, its state and the taint command (the drain check's
    remedy); a trigger deferred again with that fingerprint waits on, and yields `finished` once Trainer writes
    Failed."""
    runtime = cluster.runtime()
    node = cluster.node("n1")
    execution = cluster.running_execution("ft-7", runtime=runtime, admission=2)
    pod = cluster.pod("ft-7", node=node, execution=execution)
    mark = airflow_lab.probe.mark()
    trigger = TrainJobOutcomeTrigger(cluster.namespace, "ft-7", recheck_interval=HOUR, **connection(airflow_lab))
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    assert not running.done()  # nothing blocks yet: no progress to report

    await asyncio.to_thread(cluster.lose_node, node)
    payload = await asyncio.wait_for(running, 30)
    assert (payload["status"], payload["outcome"], payload["admission"]) == ("progress", None, 2)
    waiting = payload["waiting"]
    assert waiting["headline"] == f"Confirm {node} is powered off, then taint it out-of-service (Ready=Unknown)"
    assert waiting["how"][0] == f"kubectl taint node {node} {v.TAINT_OUT_OF_SERVICE}=nodeshutdown:NoExecute"
    assert waiting["how"][1].startswith("Needs permission to patch nodes. ")
    assert f"Node {node} is not Ready (Ready=Unknown)" in waiting["detail"].splitlines()[0]
    assert pod in waiting["detail"]
    assert len(json.dumps(payload)) <= payloads.TRIGGER_EVENT_LIMIT

    mark = airflow_lab.probe.mark()
    again = TrainJobOutcomeTrigger(
        cluster.namespace,
        "ft-7",
        known_fingerprint=waiting["fingerprint"],
        recheck_interval=HOUR,
        **connection(airflow_lab),
    )
    running = asyncio.create_task(first_event(again))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    assert not running.done()  # the same explanation as shown: no progress
    await asyncio.to_thread(cluster.trainer_finishes, "ft-7", "Failed")
    payload = await asyncio.wait_for(running, 30)
    assert (payload["status"], payload["outcome"]) == ("finished", "Failed")
    assert "waiting" not in payload
    assert [s for s in airflow_lab.probe.since(mark) if s.writes] == []


async def test_the_outcome_trigger_refuses_a_superseded_execution(airflow_lab: AirflowLab, cluster: Cluster) -> None:
    cluster.held_after_execution("ft-7", runtime=cluster.runtime(), admission=3)
    trigger = TrainJobOutcomeTrigger(cluster.namespace, "ft-7", admission=2, **connection(airflow_lab))
    payload = await asyncio.wait_for(first_event(trigger), 30)
    assert (payload["status"], payload["error_class"], payload["retryable"]) == ("error", "RefusedError", False)
    assert "runs execution 3 now" in payload["message"]


async def test_the_trigger_times_out_at_its_deadline_with_its_last_check(
    airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    import time

    held_with_terminating_pods(cluster)
    trigger = PodsDrainedTrigger(
        cluster.namespace, "ft-7", deadline=time.time() + 0.5, recheck_interval=HOUR, **connection(airflow_lab)
    )
    payload = await asyncio.wait_for(first_event(trigger), 30)
    assert payload["status"] == "timeout"
    assert len(payload["report"]["remaining"]) == 1


@pytest.mark.parametrize(("namespace", "name"), [("a/../b", "ft-7"), ("ns", "ft-7,x"), ("NS", "ft-7")])
async def test_an_invalid_name_is_refused_before_anything_is_sent(
    airflow_lab: AirflowLab, namespace: str, name: str
) -> None:
    mark = airflow_lab.probe.mark()
    payload = await first_event(PodsDrainedTrigger(namespace, name, **connection(airflow_lab)))
    assert (payload["status"], payload["error_class"], payload["retryable"]) == ("error", "InvalidNameError", False)
    assert airflow_lab.probe.since(mark) == []


async def test_the_periodic_recheck_finds_the_drain_when_the_watch_never_works(
    airflow_lab: AirflowLab, cluster: Cluster
) -> None:
    node, (pod,) = held_with_terminating_pods(cluster)
    airflow_lab.hooks.faults(
        FaultRule("500", resources=frozenset({"pods"}), verbs=frozenset({"watch", "list"})),
        when=lambda request: request.query.get("limit") == "1" or request.query.get("watch") == "true",
    )
    mark = airflow_lab.probe.mark()
    trigger = PodsDrainedTrigger(cluster.namespace, "ft-7", recheck_interval=0.5, **connection(airflow_lab))
    running = asyncio.create_task(first_event(trigger))
    await wait_for(airflow_lab, checks_answered("ft-7", 1, (node,)), mark)
    await asyncio.to_thread(kubelet_confirms, cluster, pod)
    payload = await asyncio.wait_for(running, 30)
    assert payload["status"] == "drained"
    pod_watches = [
        s
        for s in airflow_lab.probe.since(mark)
        if s.by_trigger
        and s.path.endswith(f"/namespaces/{cluster.namespace}/pods")
        and s.phase == "done"
        and (s.watch or s.query.get("limit") == "1")
    ]
    assert pod_watches
    assert {s.status for s in pod_watches} == {500}  # the pod watch never got going: the safety net did it
