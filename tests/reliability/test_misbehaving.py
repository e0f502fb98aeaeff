"""Issue 15: the promise against a cluster that misbehaves, class by class, on the whole simulated cluster with the
overlap recorder as the judge (docs/reliability.md, "A cluster that misbehaves").

* a pod whose labels someone removed (the usual way to take a pod out of its controller to debug it), after the
  hold and before it: neither label selection sees it, but the hold recorded it by a lineage no label edit
  defeats (its name and controller), and a drain check looks it up by name and uid (dispatch/fencing.py);
* a TrainJob suspended by a plain patch outside dispatch while its node is partitioned, then held by dispatch:
  the hold finds it held without a record of the execution's pods and writes one, so a later force deletion of
  the Terminating pod on the lost node is still seen;
* the evidence of a hold must be about the current execution and settled (dispatch/evidence.py): a release
  right after the hold waits the settle, and says until when.

Each of these admitted beside a running process before the change; each test asserts both that release refuses
while the process may run and that it admits once it has ended, and that the recorder saw no overlap.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import kubernetes
import pytest

from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.dispatch.errors import HoldSettlingError, PodsRemainError
from airflow_provider_dispatch.dispatch.evidence import DEFAULT_SETTLE_SECONDS
from airflow_provider_dispatch.dispatch.nodes import DEFAULT_CLOCK_SKEW_SECONDS

from .harness import HOSTILE
from .one_pod import core, do, hold, one_pod_world, only_process, overlaps, release, require
from .schedule import Step
from .world import NAMESPACE, TRAINER, World

#: the labels a person removes to take a pod out of its Job (and out of both of dispatch's selections)
SELECTOR_LABELS = (
    v.LABEL_JOBSET_NAME,
    v.LABEL_JOB_ID,
    v.LABEL_SUBMISSION,
    v.POD_LABEL_ADMISSION,
    v.LABEL_JOB_NAME,
    "batch.kubernetes.io/controller-uid",
    "controller-uid",
    "job-name",
)
SETTLE = Step.of("advance", seconds=DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS + 1)


@pytest.fixture
def world() -> Iterator[World]:
    """One TrainJob of one pod on three nodes, running its first execution; a process stops 8 s after SIGTERM."""
    yield from one_pod_world(8, 30)


@pytest.fixture
def slow_world() -> Iterator[World]:
    """As `world`, but the process takes 200 s to stop after SIGTERM and may (grace 300 s): its pod stays
    Terminating on a Ready node for longer than a hold takes to settle."""
    yield from one_pod_world(200, 300)


def _relabel(world: World, pod: str) -> None:
    """A person takes the pod out of its controller: every selector label removed (a JSON merge patch)."""
    core(world, HOSTILE).patch_namespaced_pod(pod, NAMESPACE, {"metadata": {"labels": dict.fromkeys(SELECTOR_LABELS)}})
    world.rlab.settle()


def _record(world: World) -> dict[str, object]:
    live = kubernetes.client.CustomObjectsApi(world.rlab.api()).get_namespaced_custom_object(
        *TRAINER, NAMESPACE, "trainjobs", world.objects[0].name
    )
    return dict(json.loads(live["metadata"]["annotations"][v.ANNOTATION_EXECUTION_PODS]))


def _process_of(world: World, pod: str) -> bool:
    """Whether the process of `pod` still runs, as the recorder knows (whatever its labels say now)."""
    return any(r.pod == pod and r.running for r in world.rlab.sc.recorder.records)


# --- a relabelled pod ------------------------------------------------------------------------------------------


def test_a_pod_relabelled_after_the_hold_still_blocks_while_it_terminates(slow_world: World) -> None:
    """The hold recorded the pod; a person then removes its labels while it is Terminating on a Ready node. The
    label selections no longer see it, and its node is Ready, so fencing alone would take it as gone; the drain
    check looks it up by name and uid and finds it, so release waits until its kubelet has ended it."""
    world = slow_world
    pod, _node = only_process(world)
    held = hold(world)
    require(held.error is None, held.describe())
    recorded = _record(world)
    require(pod in json.dumps(recorded), f"the hold did not record {pod}: {recorded}")
    do(world, SETTLE)
    require(_process_of(world, pod), "the pod's process stopped before the test could relabel it")
    _relabel(world, pod)

    blocked = release(world)
    assert isinstance(blocked.error, PodsRemainError), f"admitted beside a relabelled pod: {blocked.describe()}"
    (remaining,) = blocked.error.remaining
    assert (remaining.name, remaining.relabelled) == (pod, True)
    assert "no longer carries" in str(blocked.error)
    assert overlaps(world) == []

    do(world, Step.of("advance", seconds=150))
    require(not _process_of(world, pod), "the relabelled pod's process still runs after its grace period")
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []
    assert world.violations == []


def test_a_pod_relabelled_before_the_hold_is_recorded_by_its_name_and_blocks_until_it_is_gone(world: World) -> None:
    """The labels go while the pod runs: neither selection sees it any more, and its Job no longer counts it. The
    hold's one full read finds it by the name its Job gave it and records it with its uid; release refuses while
    it exists, naming it, until the person who took it out deletes it and its process has ended."""
    pod, _node = only_process(world)
    _relabel(world, pod)
    require(_process_of(world, pod), "the relabelled pod's process stopped")
    held = hold(world)
    require(held.error is None, held.describe())
    assert pod in json.dumps(_record(world)), "the hold did not record the relabelled pod"
    do(world, SETTLE, Step.of("advance", seconds=30))

    # Upstream's Job controller released the pod when its labels stopped matching (it dropped its ownerReference:
    # `ClaimPods`), so nothing ends it: it runs on after the hold, whatever the TrainJob says
    require(_process_of(world, pod), "the relabelled pod's process stopped with the hold")
    blocked = release(world)
    assert isinstance(blocked.error, PodsRemainError), f"admitted beside a relabelled pod: {blocked.describe()}"
    assert pod in [p.name for p in blocked.error.remaining]
    assert any(p.relabelled for p in blocked.error.remaining if p.name == pod)
    # the person is done debugging and deletes the pod; its kubelet ends it within the grace period
    core(world).delete_namespaced_pod(pod, NAMESPACE)
    do(world, Step.of("advance", seconds=40))
    require(not _process_of(world, pod), "the pod's process still runs")
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []


# --- suspended outside dispatch, then held ---------------------------------------------------------------------


def test_a_trainjob_suspended_outside_dispatch_is_recorded_by_the_hold_and_a_force_deletion_is_seen(
    world: World,
) -> None:
    """A plain patch suspends the TrainJob while its node is partitioned; dispatch's hold finds it held without
    a record of execution 1's pods and writes one. The Terminating pod on the lost node is then force-deleted:
    release still refuses, naming it, until the node is fenced."""
    pod, node = only_process(world)
    do(world, Step.of("lose", host=0), Step.of("advance", seconds=60))
    custom = kubernetes.client.CustomObjectsApi(world.rlab.api(HOSTILE))
    custom.patch_namespaced_custom_object(
        *TRAINER, NAMESPACE, "trainjobs", world.objects[0].name, {"spec": {"suspend": True}}
    )
    world.rlab.settle()
    do(world, Step.of("advance", seconds=5))
    held = hold(world)
    require(held.error is None, held.describe())
    record = _record(world)
    assert pod in json.dumps(record), f"the hold did not record the pod of the lost node: {record}"
    assert record["admission"] == 1

    core(world).delete_namespaced_pod(pod, NAMESPACE, grace_period_seconds=0)  # kubectl delete --force
    world.rlab.settle()
    do(world, SETTLE)
    require(_process_of(world, pod), "the partitioned process stopped")
    blocked = release(world)
    assert isinstance(blocked.error, PodsRemainError), f"admitted beside the partitioned process: {blocked.describe()}"
    assert f"{pod} on {node} (Ready=Unknown" in str(blocked.error)
    assert "deleted from the API" in str(blocked.error)
    assert overlaps(world) == []

    do(world, Step.of("fence", host=0, effect="NoExecute"), Step.of("advance", seconds=5))
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
    do(world, Step.of("advance", seconds=5))
    assert overlaps(world) == []


# --- the settle ---------------------------------------------------------------------------------------------


def test_a_release_right_after_the_hold_waits_the_settle_and_says_until_when(world: World) -> None:
    """Even with every pod gone, a release within the settle of the hold refuses, retryably, with the time it
    has left on the API server's clock; after it, it admits."""
    held = hold(world)
    require(held.error is None, held.describe())
    do(world, Step.of("advance", seconds=20))
    require(not world._running(world.objects[0]), "the process did not stop after the hold")
    early = release(world)
    assert isinstance(early.error, HoldSettlingError), early.describe()
    assert early.error.retryable
    assert 60 <= early.error.seconds_left <= DEFAULT_SETTLE_SECONDS + DEFAULT_CLOCK_SKEW_SECONDS - 19
    assert "settles until" in str(early.error)
    do(world, Step.of("advance", seconds=early.error.seconds_left + 1))
    admitted = release(world)
    assert admitted.execution is not None, admitted.describe()
    assert admitted.execution.admission == 2
