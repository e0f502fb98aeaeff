"""deploy/ on the real control plane: the chart and the kustomization built with the pinned Helm and kustomize,
applied to the real API server (a server-side dry run, then `helm install` and `kubectl apply`), and two replicas
of the controller, run with the installed chart's ServiceAccount and arguments, surviving the loss of the
leader's node (docs/deploy.md).

The real tier runs no containers (deploy_steps.py), and its controller manager runs no Deployment controller: the
chart's Deployment and PodDisruptionBudget are applied and stored (their Pods would stay Pending, with a
nodeSelector no node has, so they would take no simulated node's cpu), while the controller itself runs as two
processes with the Pod's identity and settings. The leader's node is lost by stopping its process (SIGSTOP); the
judges are the Lease, the Workloads' states, the admissions the ledger counted from the TrainJobs' watch, and the
machines' overlap recorder.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from cluster.kueue_steps import checks, has
from kubernetes.client import ApiException

from airflow_provider_dispatch.dispatch.fence import manifests as pod_fence
from airflow_provider_dispatch.kueue.leader import JITTER_FACTOR
from airflow_provider_dispatch_lab.real import RealCluster
from airflow_provider_dispatch_lab.scenario import manifests

from .deploy_steps import (
    CHART,
    KUSTOMIZATION,
    ROOT,
    ControllerProcess,
    by_kind,
    documents,
    dump,
    kubectl,
    run,
    service_account_kubeconfig,
)
from .steps import SETTLE, RealSteps, unique

pytestmark = pytest.mark.slow

KUEUE = ("kueue.x-k8s.io", "v1beta2")
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
NOWHERE = {"dispatch.example/no-such-node": "true"}
"""The rendered Pods' nodeSelector in the real tier: no node has it, so they stay Pending."""
Obj = dict[str, Any]


class Release:
    """The chart for one namespace: rendered (`helm template`, every object, the ClusterRoles included), then
    installed (`helm install` against the real API server, after a server-side dry run of the rendering). The
    install leaves dispatch's ClusterRoles out (`rbac.createClusterRoles=false`): the cluster has them already, as
    the lab's identities use them, and Helm installs nothing it does not own. `close` uninstalls."""

    def __init__(self, cluster: RealCluster, api: kubernetes.client.ApiClient, tools_bin: Path) -> None:
        self.cluster = cluster
        self.api = api
        self.helm = tools_bin / "helm"
        self.namespace = unique("dispatch")
        self.name = "dispatch"
        self.check = unique("drained")
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": self.namespace}})
        self.values: list[str | Path] = ["--set", f"admissionCheck.name={self.check}"]
        self.values += ["--set", f"controller.settleSeconds={SETTLE:g}"]
        for key, value in NOWHERE.items():
            self.values += ["--set-string", f"nodeSelector.{key.replace('.', chr(92) + '.')}={value}"]
        where: list[str | Path] = [self.name, CHART, "--namespace", self.namespace]
        self.rendered = documents(run([self.helm, "template", *where, *self.values]))
        self.installed = False

    @property
    def deployment(self) -> Obj:
        [deployment] = by_kind(self.rendered, "Deployment")
        return deployment

    @property
    def args(self) -> list[str]:
        [container] = self.deployment["spec"]["template"]["spec"]["containers"]
        return list(container["args"])

    @property
    def account(self) -> str:
        [account] = by_kind(self.rendered, "ServiceAccount")
        return str(account["metadata"]["name"])

    def install(self) -> str:
        """The dry run, then `helm install`; returns what Helm printed (its NOTES included)."""
        kubectl(self.cluster, "apply", "--dry-run=server", "-f", "-", stdin=dump(self.rendered))
        kubeconfig = f"--kubeconfig={self.cluster.kubeconfig('admin')}"
        where: list[str | Path] = [self.name, CHART, "--namespace", self.namespace, kubeconfig]
        printed = run([self.helm, "install", *where, *self.values, "--set", "rbac.createClusterRoles=false"])
        self.installed = True
        return printed

    def close(self) -> None:
        if self.installed:
            kubeconfig = f"--kubeconfig={self.cluster.kubeconfig('admin')}"
            run([self.helm, "uninstall", self.name, "--namespace", self.namespace, kubeconfig])
        kubernetes.client.CoreV1Api(self.api).delete_namespace(self.namespace)


@pytest.fixture
def release(real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, tools: Path) -> Iterator[Release]:
    made = Release(real_cluster, real_admin, tools)
    yield made
    made.close()


def test_the_chart_and_the_kustomization_build_check_and_apply(
    real_cluster: RealCluster, real_admin: kubernetes.client.ApiClient, tools: Path, release: Release
) -> None:
    """`helm lint`, `helm template` and `kustomize build`: the same objects, each accepted by the real API server
    (dry-run=server), then each applied for real: the chart by `helm install`, the kustomization by
    `kubectl apply`."""
    run([tools / "helm", "lint", "--strict", CHART])
    built = documents(run([tools / "kustomize", "build", KUSTOMIZATION]))
    kinds = sorted(d["kind"] for d in built)
    assert kinds == sorted(["Namespace", *(d["kind"] for d in release.rendered)])  # helm's namespace is the release's

    # one copy of dispatch's ClusterRoles: the chart's (files/ links to deploy/rbac) are the kustomization's
    def roles(docs: list[Obj]) -> dict[str, Obj]:
        return {d["metadata"]["name"]: d for d in by_kind(docs, "ClusterRole")}

    assert roles(release.rendered) == roles(built)  # (kustomize orders them by name)
    # the same controller settings, but what the chart names after the release or sets by value
    chart_args = {a for a in release.args if not a.startswith(("--leader-election-id", "--settle-seconds"))}
    [kustomized] = by_kind(built, "Deployment")
    [container] = kustomized["spec"]["template"]["spec"]["containers"]
    defaults = {"--lease-duration-seconds=15", "--renew-deadline-seconds=10", "--retry-period-seconds=2"}
    defaults |= {"--workers=4", "--resync-seconds=300"}
    assert chart_args == set(container["args"]) | defaults
    kubectl(real_cluster, "apply", "--dry-run=server", "-f", "-", stdin=dump(built))
    # and for real: its namespace, ServiceAccount and binding are the lab identities' own (the same objects); what
    # is only the kustomization's goes again afterwards
    shared = {("Namespace", "dispatch-system"), ("ServiceAccount", "dispatch-admission-controller")}
    shared |= {("ClusterRoleBinding", "dispatch-admission-controller")}
    own = [d for d in built if d["kind"] != "ClusterRole" and (d["kind"], d["metadata"]["name"]) not in shared]
    kubectl(real_cluster, "apply", "-f", "-", stdin=dump(built))
    try:
        lease_role = kubernetes.client.RbacAuthorizationV1Api(real_admin).read_namespaced_role(
            "dispatch-admission-controller-leader-election", "dispatch-system"
        )
        assert [rule.verbs for rule in lease_role.rules] == [["get", "create", "update"]]
    finally:
        kubectl(real_cluster, "delete", "--ignore-not-found", "-f", "-", stdin=dump(own))

    printed = release.install()
    assert "STATUS: deployed" in printed
    assert f"kubectl -n {release.namespace} get lease" in printed  # the chart's NOTES
    # stored as rendered: the real tier's controller manager runs no Deployment, ReplicaSet or disruption
    # controller (lab/real/cluster.py KCM_CONTROLLERS), so nothing more happens to them here
    name = release.deployment["metadata"]["name"]
    stored = kubernetes.client.AppsV1Api(real_admin).read_namespaced_deployment(name, release.namespace)
    assert (stored.spec.replicas, stored.spec.strategy.rolling_update.max_unavailable) == (2, 0)
    budget = kubernetes.client.PolicyV1Api(real_admin).read_namespaced_pod_disruption_budget(name, release.namespace)
    assert budget.spec.selector.match_labels == release.deployment["spec"]["selector"]["matchLabels"]
    check = steps_custom(real_admin).get_cluster_custom_object(*KUEUE, "admissionchecks", release.check)
    assert check["spec"]["controllerName"] == "dispatch.phpboyscout.uk/drained"


def test_the_pod_fence_from_the_chart_and_from_deploy_pod_fence_is_dispatchs(
    real_cluster: RealCluster, tools: Path
) -> None:
    """The fence a production install applies (`kubectl apply -k deploy/pod-fence`, or the chart with
    `podFence.create`) is exactly `dispatch pod-fence`'s, so dispatch's check finds it its own; the chart leaves it
    out by default; and the real API server accepts it (dry-run=server: the real tier's tests install and remove
    the fence themselves, test_real_lost_pods.py)."""
    assert not [d for d in documents(run([tools / "helm", "template", "d", CHART])) if "Policy" in d["kind"]]
    charted = documents(run([tools / "helm", "template", "d", CHART, "--set", "podFence.create=true"]))
    fence = [d for d in charted if d["kind"].startswith("ValidatingAdmissionPolicy")]
    built = documents(run([tools / "kustomize", "build", ROOT / "deploy" / "pod-fence"]))
    assert fence == built == list(pod_fence())
    kubectl(real_cluster, "apply", "--dry-run=server", "-f", "-", stdin=dump(fence))


def steps_custom(api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


def _lease(api: kubernetes.client.ApiClient, namespace: str, name: str) -> Any:
    """The Lease's spec (None while there is none)."""
    try:
        return kubernetes.client.CoordinationV1Api(api).read_namespaced_lease(name, namespace).spec
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _lease_holder(api: kubernetes.client.ApiClient, namespace: str, name: str) -> str:
    spec = _lease(api, namespace, name)
    return str(spec.holder_identity or "") if spec is not None else ""


def _queued(steps: RealSteps, name: str, runtime: str, local_queue: str) -> None:
    body = manifests.trainjob(name, queue=local_queue, runtime=runtime, num_nodes=2, suspend=False)
    steps.custom.create_namespaced_custom_object(*TRAINER, steps.namespace, "trainjobs", body)


def _workload_of(steps: RealSteps, trainjob: str) -> Obj:
    uid = steps.trainjob(trainjob)["metadata"]["uid"]

    def owned() -> Obj | None:
        listed = steps.custom.list_namespaced_custom_object(*KUEUE, steps.namespace, "workloads")
        for workload in listed["items"]:
            if any(r.get("uid") == uid for r in workload["metadata"].get("ownerReferences") or []):
                return dict(workload)
        return None

    return steps.wait(f"the Workload of {trainjob}", owned)


def _admitted_by(steps: RealSteps, trainjob: str, check: str, timeout: float = 90.0) -> Obj:
    def admitted() -> Obj | None:
        workload = _workload_of(steps, trainjob)
        entry = checks(workload).get(check, {})
        return workload if has(workload, "Admitted", "True") and entry.get("state") == "Ready" else None

    return steps.wait(f"{trainjob} admitted with {check} Ready", admitted, timeout)


def test_two_replicas_survive_the_loss_of_the_leaders_node(
    real_cluster: RealCluster,
    real_admin: kubernetes.client.ApiClient,
    release: Release,
    steps: RealSteps,
    tmp_path: Path,
) -> None:
    release.install()
    lease_name = release.deployment["metadata"]["name"]  # --leader-election-id: the release's full name
    args = release.args
    settings = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
    lease_duration = float(settings["--lease-duration-seconds"])
    retry = float(settings["--retry-period-seconds"])
    kubeconfig = service_account_kubeconfig(
        real_cluster, real_admin, release.namespace, release.account, tmp_path / "sa.yaml"
    )
    replicas = [
        ControllerProcess(f"{lease_name}-{i}", release.namespace, args, kubeconfig, tmp_path / f"replica-{i}.log")
        for i in (1, 2)
    ]
    try:
        first, second = replicas
        first.start()
        steps.wait(
            "replica 1 to lead",
            lambda: _lease_holder(real_admin, release.namespace, lease_name).startswith(first.name + "_") or None,
        )
        second.start()
        for replica in replicas:
            steps.wait(f"{replica.name} ready", lambda r=replica: r.get("/readyz")[0] == 200 or None)
        assert (first.metric("dispatch_admission_leader"), second.metric("dispatch_admission_leader")) == (1.0, 0.0)

        # Kueue's side, as docs/deploy.md sets it up: a ClusterQueue requiring the chart's AdmissionCheck
        flavor, queue, local = unique("flavor"), unique("cq"), unique("lq")
        custom = steps.custom
        custom.create_cluster_custom_object(
            *KUEUE,
            "resourceflavors",
            {"apiVersion": "/".join(KUEUE), "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        )
        cluster_queue = manifests.cluster_queue(queue, cpu="32", admission_checks=[release.check], flavor=flavor)
        custom.create_cluster_custom_object(*KUEUE, "clusterqueues", cluster_queue)
        custom.create_namespaced_custom_object(
            *KUEUE, steps.namespace, "localqueues", manifests.local_queue(local, cluster_queue_name=queue)
        )
        try:
            for node in ("a", "b", "c", "d"):
                steps.node(node)
            runtime = steps.runtime()
            _queued(steps, "before", runtime, local)
            _admitted_by(steps, "before", release.check)
            steps.running_pods("before", 2, admission=1)

            # the leader's node is lost: its process stops, neither working nor renewing
            first.signal(signal.SIGSTOP)
            lost = time.monotonic()
            _queued(steps, "during", runtime, local)  # queued while nobody leads: it must not be left waiting
            seen: list[Any] = []

            def taken_over() -> Any:
                spec = _lease(real_admin, release.namespace, lease_name)
                seen.append(spec)
                return spec if str(spec.holder_identity).startswith(second.name + "_") else None

            taken = steps.wait("replica 2 to take the Lease", taken_over, timeout=90)
            stopped_for = time.monotonic() - lost
            done = _admitted_by(steps, "during", release.check)
            admitted_after = time.monotonic() - lost
            # Measured on the Lease itself, in the two replicas' own clock (one machine): from the old leader's last
            # renewal to the standby's acquisition. client-go's bound: never before the lease ran out; at most one
            # jittered retry to see the last renewal and one more after the lease ran out
            last_renewal = max(s.renew_time for s in seen if str(s.holder_identity).startswith(first.name + "_"))
            took_over = (taken.acquire_time - last_renewal).total_seconds()
            bound = lease_duration + 2 * (1 + JITTER_FACTOR) * retry
            print(
                f"leader lost: the standby took the Lease {took_over:.1f} s after the last renewal (lease "
                f"{lease_duration:g} s, bound {bound:.1f} s), {stopped_for:.1f} s after the leader stopped; the "
                f"TrainJob queued meanwhile was admitted {admitted_after:.1f} s after the leader stopped"
            )
            assert lease_duration <= took_over <= bound + 1.0
            assert "as execution 1" in checks(done)[release.check]["message"]
            steps.running_pods("during", 2, admission=1)
            assert second.metric("dispatch_admission_leader") == 1.0

            # the old leader wakes long after its lease ran out: it stops leading and writes nothing
            woke = time.time()
            first.signal(signal.SIGCONT)
            steps.wait("the old leader to step down", lambda: first.metric("dispatch_admission_leader") == 0.0 or None)
            after = [line for line in first.log_lines() if _after(line, woke)]
            assert any("stopped leading" in str(line.get("message")) for line in after)
            assert [
                line["message"]
                for line in after
                if "check" in str(line.get("message")) and "Workload" in str(line.get("message"))
            ] == []
            assert steps.admissions("before") == ["1"]  # nothing admitted twice
            assert steps.admissions("during") == ["1"]
            assert steps.overlaps("before") == []
            assert steps.overlaps("during") == []
            for replica in replicas:
                assert replica.get("/healthz")[0] == 200
                # the old leader, woken, is ready once it has reached the API server again (its next Lease read, a
                # retry period after waking: runner.Probes.ready); until then it answers 503, which CI met once
                steps.wait(f"{replica.name} ready again", lambda r=replica: r.get("/readyz")[0] == 200 or None)
            assert (second.metric("dispatch_admission_admissions_total") or 0) >= 1
            assert first.metric("dispatch_admission_leader_changes_total") == 2  # itself, then replica 2

            # a rolling update's hand-over: the leader stops on SIGTERM and frees the Lease; the other takes it at
            # its next try, not a lease duration later
            handed = time.monotonic()
            assert second.stop() == 0
            steps.wait(
                "replica 1 to take the freed Lease",
                lambda: _lease_holder(real_admin, release.namespace, lease_name).startswith(first.name + "_") or None,
            )
            print(f"graceful hand-over after {time.monotonic() - handed:.1f} s")
            assert time.monotonic() - handed < lease_duration
        finally:
            for plural, name in (("clusterqueues", queue), ("resourceflavors", flavor)):
                try:
                    custom.delete_cluster_custom_object(*KUEUE, plural, name)
                except ApiException as error:
                    if error.status != 404:
                        raise
    finally:
        codes = [replica.stop() for replica in replicas]
        assert codes == [0, 0]


def _after(line: Obj, since: float) -> bool:
    """Whether a JSON log line was written at or after `since` (seconds since the epoch)."""
    try:
        written = datetime.fromisoformat(str(line.get("time", "")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return written >= since
