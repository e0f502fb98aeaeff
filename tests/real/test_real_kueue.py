"""Kueue mode on the real control plane: real Kueue v0.19 with dispatch's admission check controller
(`dispatch admission-controller`'s `run_admission_controller`, as the lab's `controller` identity).

The lab versions: tests/kueue/test_admission.py (a queued TrainJob: A raised, the check Ready, admitted) and
tests/kueue/test_preemption.py (preemption beside a frozen node). Here the preemption is Kueue's own: a TrainJob of
a higher WorkloadPriorityClass arrives in the same ClusterQueue (`withinClusterQueue: LowerPriority`), and Kueue
evicts the running one, releases its quota as soon as no Job is active (the upstream flaw, docs/promise.md), and,
once the preemptor is gone, reserves quota for it again. The check stays Pending, naming the pod on the frozen
node, until the operator fences the machine and the real PodGC removes the pod; then the TrainJob is admitted once
more, as execution 2, and the overlap recorder saw no overlap.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from cluster.kueue_steps import KueueObjects, checks, condition, has

from airflow_provider_dispatch.backoff import BackoffSchedule
from airflow_provider_dispatch.dispatch import vocabulary as v
from airflow_provider_dispatch.kueue.controller import ControllerOptions
from airflow_provider_dispatch.kueue.runner import run_admission_controller
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.scenario import manifests

from .steps import SETTLE, TRAINER, RealSteps, unique

pytestmark = pytest.mark.slow

KUEUE = ("kueue.x-k8s.io", "v1beta2")
#: our check's waiting message lists the pods of the previous execution on this line, below what to do first
WAITING = "\npods of the previous execution remain: "
Obj = dict[str, Any]


class ControllerThread:
    """dispatch's admission check controller on a thread of its own, for one AdmissionCheck; stopped gracefully."""

    def __init__(self, kubeconfig: Path, check: str) -> None:
        self.kubeconfig = kubeconfig
        self.options = ControllerOptions(
            check_names=frozenset({check}),
            seed=7,
            resync_seconds=10.0,
            waiting_backoff=BackoffSchedule(initial=1.0, maximum=4.0),
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"dispatch-admission-controller-{check}", daemon=True)

    def start(self) -> ControllerThread:
        self._thread.start()
        assert self._started.wait(30), "the admission check controller did not start"
        return self

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as error:  # re-raised in the test's thread by stop()
            self._error = error

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._started.set()
        await run_admission_controller(
            self.kubeconfig, options=self.options, stop=self._stop, grace_seconds=5.0, settle_seconds=SETTLE
        )

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        assert not self._thread.is_alive(), "the admission check controller did not stop"
        if self._error is not None:
            raise self._error


def _kueue_object(kind: str, name: str) -> Obj:
    return {"apiVersion": "/".join(KUEUE), "kind": kind, "metadata": {"name": name}}


class RealKueue(KueueObjects):
    """Kueue's objects for one test: a flavor, a ClusterQueue with quota for one TrainJob of two 8-cpu pods that
    preempts by priority, our AdmissionCheck on it (unless `with_check` is False: Kueue alone), a LocalQueue, and
    a high WorkloadPriorityClass."""

    def __init__(self, steps: RealSteps, *, with_check: bool = True) -> None:
        super().__init__(steps.api, steps.namespace)
        self.steps = steps
        self.flavor, self.cluster_queue, self.check = unique("flavor"), unique("cq"), unique("drained")
        self.local_queue, self.high = unique("lq"), unique("high")
        self._cluster_scoped: list[tuple[str, str]] = []
        self._create("resourceflavors", _kueue_object("ResourceFlavor", self.flavor))
        if with_check:
            self._create("admissionchecks", manifests.admission_check(self.check))
        checks = [self.check] if with_check else None
        queue = manifests.cluster_queue(self.cluster_queue, cpu="16", admission_checks=checks, flavor=self.flavor)
        queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
        self._create("clusterqueues", queue)
        self._create("workloadpriorityclasses", {**_kueue_object("WorkloadPriorityClass", self.high), "value": 1000})
        local = manifests.local_queue(self.local_queue, cluster_queue_name=self.cluster_queue)
        self.custom.create_namespaced_custom_object(*KUEUE, self.namespace, "localqueues", local)

    def _create(self, plural: str, body: Obj) -> None:
        self.custom.create_cluster_custom_object(*KUEUE, plural, body)
        self._cluster_scoped.append((plural, str(body["metadata"]["name"])))

    def close(self) -> None:
        for plural, name in reversed(self._cluster_scoped):
            try:
                self.custom.delete_cluster_custom_object(*KUEUE, plural, name)
            except kubernetes.client.ApiException as error:
                if error.status != 404:
                    raise

    def queued(self, name: str, runtime: str, *, priority: str | None = None) -> str:
        """A dispatch TrainJob of two pods in the LocalQueue (job id = its name, submission 1); Kueue's webhook
        suspends it on create."""
        body = manifests.trainjob(name, queue=self.local_queue, runtime=runtime, num_nodes=2, suspend=False)
        if priority is not None:
            body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
        self.create_trainjob(body)
        return self.workload_name(name)

    def entry(self, workload: Obj | None) -> Obj:
        return checks(workload).get(self.check, {})


@pytest.fixture
def kueue(steps: RealSteps) -> Iterator[RealKueue]:
    made = RealKueue(steps)
    yield made
    made.close()


@pytest.fixture
def controller(real_cluster: RealCluster, kueue: RealKueue) -> Iterator[ControllerThread]:
    running = ControllerThread(real_cluster.kubeconfig("controller"), kueue.check).start()
    yield running
    running.stop()


def _admitted(workload: Obj | None) -> bool:
    return has(workload, "Admitted", "True")


def test_a_queued_trainjob_is_checked_then_admitted(
    steps: RealSteps, kueue: RealKueue, controller: ControllerThread
) -> None:
    """Kueue reserves quota; dispatch raises A once and sets the check Ready; Kueue admits and unsuspends."""
    steps.node("a"), steps.node("b")
    kueue.wait_admission_check(kueue.check, lambda c: has(c, "Active", "True"), timeout=30)
    wl = kueue.queued("tj", steps.runtime())
    done = kueue.wait_workload(wl, lambda w: _admitted(w) and kueue.entry(w).get("state") == "Ready", timeout=60)
    assert kueue.entry(done)["message"] == (
        f"no pod of the previous execution remains: TrainJob {steps.namespace}/tj is admitted as execution 1 "
        "(job id tj, submission 1)"
    )
    trainjob = steps.trainjob("tj")
    assert trainjob["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "1"
    pods = steps.running_pods("tj", 2, admission=1)
    assert {p.metadata.labels[v.LABEL_JOB_ID] for p in pods} == {"tj"}
    assert steps.admissions("tj") == ["1"]


def _preempted_beside_a_frozen_node(
    steps: RealSteps, kueue: RealKueue, *, admission: int | None, pod_replacement_policy: str | None = "Failed"
) -> tuple[str, Any]:
    """TrainJob `low` runs on two of four nodes; the machine under one of its pods freezes (its process runs on);
    TrainJob `high`, of a higher priority, arrives: Kueue preempts `low` and admits `high`, then `high` is deleted.
    Returns `low`'s Workload and the pod on the frozen node."""
    for node in ("a", "b", "c", "d"):
        steps.node(node)
    runtime = steps.runtime(pod_replacement_policy=pod_replacement_policy)
    wl = kueue.queued("low", runtime)
    kueue.wait_workload(wl, _admitted, timeout=60)
    first = steps.running_pods("low", 2, admission=admission)
    stuck = first[0]
    steps.set_state(stuck.spec.node_name, "frozen")

    preemptor_wl = kueue.queued("high", runtime, priority=kueue.high)
    evicted = kueue.wait_workload(wl, lambda w: has(w, "Evicted", "True"), timeout=60)
    assert condition(evicted, "Evicted")["reason"] == "Preempted"
    kueue.wait_workload(preemptor_wl, _admitted, timeout=90)
    steps.running_pods("high", 2, admission=admission)
    live = steps.core.read_namespaced_pod(stuck.metadata.name, steps.namespace)
    assert live.metadata.deletion_timestamp is not None  # quota released while the pod still terminates
    assert steps.process_runs(stuck.metadata.uid)
    steps.custom.delete_namespaced_custom_object(*TRAINER, steps.namespace, "trainjobs", "high")
    return wl, stuck


def test_preemption_beside_a_frozen_node_waits_for_cessation_and_readmits_once(
    steps: RealSteps, kueue: RealKueue, controller: ControllerThread
) -> None:
    wl, stuck = _preempted_beside_a_frozen_node(steps, kueue, admission=1)
    frozen = stuck.spec.node_name

    # The preemptor is gone; Kueue reserves quota for the preempted TrainJob again: the check stays Pending.
    waiting = kueue.wait_workload(
        wl,
        lambda w: (
            has(w, "QuotaReserved", "True")
            and kueue.entry(w).get("state") == "Pending"
            and WAITING + f"{stuck.metadata.name} on {frozen}" in str(kueue.entry(w).get("message", ""))
        ),
        timeout=90,
    )
    assert not _admitted(waiting)
    trainjob = steps.trainjob("low")
    assert trainjob["spec"]["suspend"] is True
    assert trainjob["metadata"]["annotations"][v.ANNOTATION_ADMISSION] == "1"
    assert steps.overlaps("low") == []

    steps.fence(frozen)  # the operator: power off, then the out-of-service taint; the real PodGC deletes the pod
    done = kueue.wait_workload(wl, lambda w: _admitted(w) and kueue.entry(w).get("state") == "Ready", timeout=120)
    assert "as execution 2" in kueue.entry(done)["message"]
    second = steps.running_pods("low", 2, admission=2)
    assert frozen not in {p.spec.node_name for p in second}
    assert steps.overlaps("low") == []
    assert steps.admissions("low") == ["1", "2"]  # admitted once more, by the ledger's own count
    processes = steps.processes("low")
    old = [p for p in processes if p.labels.get(v.POD_LABEL_ADMISSION) == "1"]
    new = [p for p in processes if p.labels.get(v.POD_LABEL_ADMISSION) == "2"]
    assert old
    assert new
    assert all(p.stop is not None for p in old)
    assert max(p.stop for p in old if p.stop is not None) <= min(p.start for p in new)


def test_control_kueue_alone_readmits_beside_the_frozen_pod_and_two_executions_overlap(steps: RealSteps) -> None:
    """The same preemption without dispatch's check: real Kueue re-admits the TrainJob while the pod on the frozen
    machine still runs, and the recorder sees two executions at once (the upstream flaw of docs/promise.md, as
    tests/kueue/test_preemption.py shows it in the lab)."""
    kueue = RealKueue(steps, with_check=False)
    try:
        # upstream's runtime, as it ships (the Job default `TerminatingOrFailed`): Kueue alone
        wl, stuck = _preempted_beside_a_frozen_node(steps, kueue, admission=None, pod_replacement_policy=None)
        frozen = stuck.spec.node_name
        kueue.wait_workload(wl, _admitted, timeout=90)
        steps.running_pods("low", 2, admission=None, timeout=90, alone=False)
        assert steps.process_runs(stuck.metadata.uid)  # the frozen machine still runs the first execution
        overlaps = steps.overlaps("low")
        assert overlaps, "Kueue re-admitted, yet the recorder saw no overlap"
        assert {(o.first.admission, o.second.admission) for o in overlaps} == {(1, 2)}
        assert frozen in {r.node for o in overlaps for r in (o.first, o.second)}
        assert steps.admissions("low") == [None, None]  # Kueue's own two admissions; dispatch made none
    finally:
        kueue.close()
