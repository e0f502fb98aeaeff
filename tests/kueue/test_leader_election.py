"""Two replicas of the controller with leader election in the lab: one works, the standby writes nothing and takes
over when the leader stops; and a paused old leader's stale verdict is refused.

Each replica runs as a ServiceAccount of its own (the lab's `controller`, and a second one bound to the same roles
here), so the lab sees each replica's requests apart. The Lease is the Deployment's (`leader-election.yaml` applied
as it is). Its times are scaled to lab time (300/200/40 lab seconds, the ratio of controller-runtime's 15/10/2):
at this lab speed a renewal then has as many wall seconds as in a cluster, so a loaded machine cannot make the
leader miss one. A leader that stops is crossed with `advance()`, never slept on. The takeover's time against the
lease's bound is measured in the real tier (tests/real/test_real_deploy.py), where requests take real time.

The paused old leader (docs/reliability.md, "A paused old leader"): the leader raised A, built its Ready for the
Workload's first reservation, and stopped before that write reached the server (held by a gate: the request is
sent, as built, only when the test opens it). The standby takes over, admits, the TrainJob runs, a node freezes,
Kueue preempts and reserves quota again; the check is Pending for that new reservation. Then the old write lands.
It carries the resourceVersion it was decided from, so the API server refuses it (409) and nothing is admitted
beside the frozen pod. Without that precondition (a mutant of `status_patch.workload_status_patch`) the stale
Ready lands on the new reservation, Kueue admits, and the recorder sees two executions at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from airflow_provider_dispatch.kueue.api import ApiCallError
from airflow_provider_dispatch.kueue.checks import ADMISSION_CHECK
from airflow_provider_dispatch.kueue.leader import ElectionConfig
from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import IDENTITY_NAMESPACE, apply_documents
from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.runtime import Lab

from .conftest import CLUSTER, options
from .support import (
    ControllerTraffic,
    Gate,
    RunningController,
    Steps,
    admission_of,
    admitted,
    check_entry,
    is_true,
    ready,
    waiting_message,
    waiting_only_for,
    workload_status_prefix,
)

LAB_SPEED = 50.0
ROOT = Path(__file__).resolve().parents[2]
STANDBY = "dispatch-admission-controller-b"
STANDBY_USER = f"system:serviceaccount:{IDENTITY_NAMESPACE}:{STANDBY}"
LEASE_NAME = "dispatch-admission-controller"
TIMEOUT = 30.0
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
LEASE_SECONDS = 300.0
RENEW_SECONDS = 200.0
Obj = dict[str, Any]


def election(identity: str) -> ElectionConfig:
    return ElectionConfig(
        namespace=IDENTITY_NAMESPACE,
        identity=identity,
        name=LEASE_NAME,
        lease_duration=LEASE_SECONDS,
        renew_deadline=RENEW_SECONDS,
        retry_period=40.0,
    )


@pytest.fixture(scope="module")
def standby_traffic() -> ControllerTraffic:
    return ControllerTraffic(user=STANDBY_USER)


@pytest.fixture(scope="module")
def kueue_lab(traffic: ControllerTraffic, standby_traffic: ControllerTraffic) -> Iterator[Lab]:
    middlewares = (traffic.middleware, standby_traffic.middleware)
    with Lab(speed=LAB_SPEED, rbac=True, controllers=CLUSTER, middlewares=middlewares) as lab:
        _install_replicas(lab)
        yield lab
        crashes = lab.call(lambda: list(lab.inner.crashes))
        assert not crashes, f"lab tasks crashed: {crashes}"


def _install_replicas(lab: Lab) -> None:
    """The Deployment's Lease Role for its ServiceAccount, and a second ServiceAccount with the same roles."""
    lease_rbac = [
        d for d in yaml.safe_load_all((ROOT / "deploy/admission-controller/leader-election.yaml").read_text()) if d
    ]
    standby: list[Obj] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": STANDBY, "namespace": IDENTITY_NAMESPACE}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": STANDBY},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "dispatch-admission-controller",
            },
            "subjects": [{"kind": "ServiceAccount", "name": STANDBY, "namespace": IDENTITY_NAMESPACE}],
        },
    ]
    for binding in (d for d in lease_rbac if d["kind"] == "RoleBinding"):
        binding["subjects"].append({"kind": "ServiceAccount", "name": STANDBY, "namespace": IDENTITY_NAMESPACE})

    async def apply() -> None:
        client = LabClient(lab.url, "lab-admin-token", user_agent="kubectl")
        try:
            await apply_documents(client, lab.inner.registry, [*lease_rbac, *standby])
        finally:
            await client.close()

    lab.run(apply)


def standby_token(lab: Lab) -> str:
    assert lab.inner.rbac is not None
    return lab.call(lambda: lab.inner.rbac.service_accounts.issue(IDENTITY_NAMESPACE, STANDBY))  # type: ignore[union-attr]


@pytest.fixture
def replicas(
    kueue_lab: Lab,
    admin_api: kubernetes.client.ApiClient,
    traffic: ControllerTraffic,
    standby_traffic: ControllerTraffic,
) -> Iterator[list[Any]]:
    """The replicas a test starts; killed at the end, the Lease deleted, the traffic forgotten."""
    started: list[RunningController] = []
    yield started
    for running in started:
        running.kill()
    kueue_lab.call(lambda: [gate.open(forward=False) for gate in traffic.gates])
    kubernetes.client.CoordinationV1Api(admin_api).delete_namespaced_lease(LEASE_NAME, IDENTITY_NAMESPACE)
    traffic.reset()
    standby_traffic.reset()


def start_pair(lab: Lab, check: str, replicas: list[Any]) -> tuple[RunningController, RunningController]:
    """The leader (the lab's `controller`), then the standby (the second account), both for `check`."""
    leader = RunningController(lab, options(check), None, election("replica-1")).start()
    replicas.append(leader)
    standby = RunningController(lab, options(check), standby_token(lab), election("replica-2")).start(leading=False)
    replicas.append(standby)
    assert leader.leads
    return leader, standby


def lease(admin_api: kubernetes.client.ApiClient) -> Any:
    return kubernetes.client.CoordinationV1Api(admin_api).read_namespaced_lease(LEASE_NAME, IDENTITY_NAMESPACE).spec


def non_lease_writes(traffic: ControllerTraffic) -> list[str]:
    return [f"{c.method} {c.path}" for c in traffic.calls if c.writes and "/leases" not in c.path]


def test_the_standby_writes_nothing_and_takes_over_when_the_leader_stops(
    steps: Steps,
    kueue_lab: Lab,
    admin_api: kubernetes.client.ApiClient,
    replicas: list[Any],
    standby_traffic: ControllerTraffic,
) -> None:
    for node in ("a", "b"):
        steps.node(node)
    setup = steps.queues()
    [check] = setup.admission_checks
    leader, standby = start_pair(kueue_lab, check, replicas)
    first = steps.queued_trainjob(setup, steps.runtime())
    steps.wait_workload(steps.workload_name(first), lambda w: admitted(w) and ready(check)(w))
    assert lease(admin_api).holder_identity == "replica-1"
    assert not standby.leads
    assert standby_traffic.calls, "the standby made no request at all"
    assert non_lease_writes(standby_traffic) == []  # it only reads the Lease (and tries it once it is free)

    leader.kill()  # its node is lost: no release, its Lease simply stops being renewed
    steps.scenario.advance(LEASE_SECONDS + 10)
    standby.wait_leading()
    taken = lease(admin_api)
    assert (taken.holder_identity, taken.lease_transitions) == ("replica-2", 1)
    assert admission_of(steps.trainjob(first)) == "1"  # nothing was admitted twice
    # the queue's quota is for one TrainJob: the first goes, the next is the new leader's to check
    steps.custom.delete_namespaced_custom_object(*TRAINER, steps.namespace, "trainjobs", first)
    second = steps.queued_trainjob(setup, steps.runtime())
    done = steps.wait_workload(steps.workload_name(second), lambda w: admitted(w) and ready(check)(w), timeout=60)
    assert "as execution 1" in check_entry(done, check)["message"]
    assert [c.path for c in standby_traffic.calls if c.writes and "/trainjobs/" in c.path] == [
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{steps.namespace}/trainjobs/{second}"
    ]


def test_a_paused_old_leaders_stale_verdict_is_refused_after_the_standby_took_over(
    steps: Steps, kueue_lab: Lab, replicas: list[Any], traffic: ControllerTraffic
) -> None:
    for node in ("a", "b", "c"):
        steps.node(node)
    setup = steps.queues()
    [check] = setup.admission_checks
    gate = Gate("PATCH", workload_status_prefix(steps.namespace), "/status")
    traffic.gates.append(gate)  # the old leader's first entry write: held, then sent as built
    old, new = start_pair(kueue_lab, check, replicas)
    name = steps.queued_trainjob(setup, steps.runtime())
    wl = steps.workload_name(name)
    assert gate.reached.wait(TIMEOUT), "the leader never tried to set its check"
    assert admission_of(steps.trainjob(name)) == "1"  # it raised A, then built Ready for this reservation
    old.kill()  # and its process stopped there: no renewal, the write still unsent

    steps.scenario.advance(LEASE_SECONDS + 10)
    new.wait_leading()
    steps.wait_workload(wl, lambda w: admitted(w) and ready(check)(w))  # the new leader found A raised: Ready
    assert admission_of(steps.trainjob(name)) == "1"
    running = steps.running_pods(name)
    stuck, frozen = running[0].metadata.name, running[0].spec.node_name
    steps.scenario.freeze(frozen)
    steps.kueue.preempt(steps.namespace, wl)
    steps.wait_workload(
        wl, lambda w: is_true(w, "QuotaReserved") and is_true(w, "Requeued") and waiting_message(check)(w)
    )

    old.open_gate(gate, forward=True)  # the old process wakes: its Ready for the first reservation goes out now
    [stale] = [c for c in traffic.calls if c.method == "PATCH" and c.path.endswith(f"/workloads/{wl}/status")]
    deadline = time.monotonic() + TIMEOUT
    while stale.status == "open" and time.monotonic() < deadline:
        time.sleep(0.05)  # a poll of the recorded answer, which the lab's loop writes
    assert stale.status == 409  # the Workload changed since it was read: refused, not applied

    steps.scenario.advance(40)  # past the grace period: only the frozen machine's pod remains
    waiting = steps.wait_workload(wl, waiting_only_for(check, stuck, frozen))
    assert not admitted(waiting)
    assert admission_of(steps.trainjob(name)) == "1"
    assert steps.scenario.overlaps(steps.namespace, name) == []


def test_a_leader_that_has_not_renewed_within_the_renew_deadline_sends_no_write(
    steps: Steps, kueue_lab: Lab, replicas: list[Any], traffic: ControllerTraffic
) -> None:
    """What a leader sees when it wakes from a pause longer than the renew deadline (its clock moved on, its Lease
    did not): before its renewal can even run, a write it was about to send is refused unsent (the write permit,
    kueue/leader.py). The lab clock's jump and the write happen in one turn of the lab's loop."""
    setup = steps.queues()
    [check] = setup.admission_checks
    leader = RunningController(kueue_lab, options(check), None, election("replica-1")).start()
    replicas.append(leader)
    instance = leader.instance
    assert instance is not None
    path = f"/apis/kueue.x-k8s.io/v1beta2/admissionchecks/{check}/status"
    steps.wait_admission_check(check, lambda c: is_true(c, "Active"))  # its own first write is done

    def patches() -> int:
        return len([c for c in traffic.calls if c.method == "PATCH" and c.path == path])

    async def woken() -> tuple[bool, bool, str]:
        elector, controller = instance.running.elector, instance.controller
        assert elector is not None
        assert controller is not None
        before = elector.may_write()
        kueue_lab.inner.clock.advance(RENEW_SECONDS + 1)
        after = elector.may_write()
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": check}}
        try:
            await controller.api.apply_status(ADMISSION_CHECK, body, "dispatch-admission-controller")
        except ApiCallError as error:
            return before, after, str(error)
        return before, after, "sent"

    sent = kueue_lab.call(patches)
    before, after, outcome = kueue_lab.run(woken)
    assert (before, after) == (True, False)
    assert "not the leader" in outcome
    assert "no answer" in outcome
    assert kueue_lab.call(patches) == sent  # nothing reached the server
    leader.wait_leading()  # its renewal then succeeds (the lease had not run out), and it leads on
