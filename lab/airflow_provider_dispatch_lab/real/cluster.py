"""`RealCluster`: a real Kubernetes control plane on loopback, with the lab's machines as its nodes.

What it starts, in order, each program in its own process group with a log in the work folder:

1. etcd (`--unsafe-no-fsync`: test data);
2. kube-apiserver: TLS with a certificate from a CA made at start (`pki.py`); a static token file for the admin
   and the control plane's own components (all `system:masters`), service account tokens (TokenRequest) for the
   lab's identities, and client certificates of that CA for the kubelets (`system:node:<name>` in
   `system:nodes`); the Node and RBAC authorizers; the default admission plugins and `NodeRestriction`, so that a
   kubelet may write only its own Node, Lease and pods, as on an upstream cluster (kubeadm's setup);
3. the RBAC of the project's own manifests (`lab/rbac_manifests/`), applied as the lab applies them, and one token
   per identity: `admin`, `writer`, `reader`, `no-nodes`, `controller` (the lab's names and ServiceAccounts);
4. kube-controller-manager with the controllers the lab simulates (Job, PodGC, node lifecycle, taint eviction,
   garbage collector, namespace) plus the ServiceAccount and TTL-after-finished controllers a cluster has, and a
   short node monitor grace period; kube-scheduler;
5. the CRDs and webhook configurations of JobSet, Trainer and Kueue, from the built modules (`manifests.py`),
   then the three controllers, webhooks on loopback ports; the cluster waits until a dry-run write passes each
   controller's webhooks;
6. the hollow machines (`simulation.py`, `machine.py`) on a background thread's event loop: per node a real
   kubelet (`dispatch-kubelet`) that registers the Node with its own client certificate, its CRI server of
   simulated processes, and the relay a partition cuts.

`RealCluster(apiserver_only=True)` stops after step 3: etcd and the API server alone, for measuring what the API
server itself costs (`tests/benchmarks/real_drain_cost.py`), where a controller's reads would be noise;
`install_crds()` then adds the CRDs of step 5 without their controllers or webhooks.

`stop()` ends everything it started, in reverse order, each program's process group SIGTERM then SIGKILL, and
removes the work folder (it holds keys and tokens) unless asked to keep it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
import shutil
import ssl
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

from airflow_provider_dispatch_lab import runtime
from airflow_provider_dispatch_lab.apiserver.auth.rbac_setup import (
    ADMIN_USER,
    IDENTITIES,
    IDENTITY_NAMESPACE,
    SERVICE_ACCOUNTS,
    dispatch_manifests,
)
from airflow_provider_dispatch_lab.real import cri_stubs
from airflow_provider_dispatch_lab.real import manifests as real_manifests
from airflow_provider_dispatch_lab.real.binaries import ControlPlaneBuild, locate
from airflow_provider_dispatch_lab.real.machine import Wiring
from airflow_provider_dispatch_lab.real.pki import Pki, install_serving_pair, make_pki
from airflow_provider_dispatch_lab.real.processes import ControlPlaneError, Program, free_port, wait_for
from airflow_provider_dispatch_lab.real.simulation import Machines
from airflow_provider_dispatch_lab.runtime import BOOTSTRAP_NAMESPACES

T = TypeVar("T")
Obj = dict[str, Any]
logger = logging.getLogger(__name__)

KCM_CONTROLLERS = (
    "job-controller",
    "pod-garbage-collector-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "ttl-after-finished-controller",
    "root-ca-certificate-publisher-controller",
)
"""The controller manager's controllers (canonical names, `cmd/kube-controller-manager/names`). The root CA
publisher writes the `kube-root-ca.crt` ConfigMap of every namespace, which the kubelet mounts into each pod's
service account token volume (without it no pod starts)."""
FIELD_MANAGER = "dispatch-real-cluster"
TOKEN_SECONDS = 2 * 24 * 3600
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Kueue v0.19 reads its metrics certificate from this fixed path whenever its own certificate management is off
(`cmd/kueue/main.go`); the metrics server itself is off here, but the files must exist and parse."""

_KIND_PATHS = {
    ("v1", "Namespace"): ("/api/v1", "namespaces", False),
    ("v1", "ServiceAccount"): ("/api/v1", "serviceaccounts", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): (
        "/apis/rbac.authorization.k8s.io/v1",
        "clusterrolebindings",
        False,
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): (
        "/apis/apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        False,
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        False,
    ),
}


@dataclass(frozen=True)
class NodeTimings:
    """The node lifecycle settings: short enough for tests; the kubelet's 10 s lease renewals fit."""

    monitor_period: str = "1s"
    monitor_grace_period: str = "20s"
    startup_grace_period: str = "30s"
    not_ready_toleration_seconds: int = 300
    unreachable_toleration_seconds: int = 300


def component_user(name: str) -> str:
    """The user the API server authenticates a control-plane component as (`tokens.csv`): with
    `--use-service-account-credentials=false`, every controller of kube-controller-manager (the Job controller
    among them) acts as `component_user("kube-controller-manager")`."""
    return f"system:dispatch:{name}"


def write_kubeconfig(path: Path, server: str, ca_file: Path, token: str, user: str, namespace: str) -> Path:
    """A kubeconfig for the real API server: a bearer token and the path of its CA file (the lab's writer, with
    the cluster named `real`)."""
    return runtime.write_kubeconfig(
        path, server, token, user, namespace, ca_file=ca_file, cluster="real", inline_ca=False
    )


class ApiError(Exception):
    def __init__(self, code: int, body: str) -> None:
        super().__init__(f"{code}: {body[:500]}")
        self.code = code
        self.body = body


class RealCluster:
    """The real control plane: `with RealCluster() as cluster: ... cluster.kubeconfig("writer") ...`."""

    def __init__(
        self,
        *,
        build: ControlPlaneBuild | None = None,
        nodes: Sequence[str] = ("node-1", "node-2"),
        node_cpu: str = "32",
        node_memory: str = "128Gi",
        timings: NodeTimings = NodeTimings(),
        workdir: Path | None = None,
        keep_workdir: bool = False,
        start_timeout: float = 120.0,
        apiserver_only: bool = False,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.build = build
        self.node_names = list(nodes)
        self.node_cpu, self.node_memory = node_cpu, node_memory
        self.timings = timings
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="dispatch-real-"))
        self.keep_workdir = keep_workdir
        self.start_timeout = start_timeout
        self.apiserver_only = apiserver_only
        self.apiserver_args = tuple(apiserver_args)
        self.programs: list[Program] = []
        self.url = ""
        self.etcd_url = ""
        self.pki: Pki | None = None
        self._tokens: dict[str, str] = {}
        self._ssl: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._machines: Machines | None = None

    # ----------------------------------------------------------------------------------------- the face

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def machines(self) -> Machines:
        if self._machines is None:
            raise RuntimeError("the real cluster is not started")
        return self._machines

    @property
    def ca_file(self) -> Path:
        if self.pki is None:
            raise RuntimeError("the real cluster is not started")
        return self.pki.ca_file

    @property
    def versions(self) -> dict[str, str]:
        if self.build is None:
            raise RuntimeError("the real cluster is not started")
        return self.build.versions

    def pid(self, program: str) -> int:
        """The process id of one of the cluster's programs (`etcd`, `kube-apiserver`, ...)."""
        for running in self.programs:
            if running.name == program:
                return running.pid
        raise KeyError(f"the real cluster runs no {program!r}; it runs {', '.join(p.name for p in self.programs)}")

    def token_for(self, identity: str) -> str:
        if identity not in IDENTITIES:
            raise KeyError(f"unknown identity {identity!r}; the real cluster provisions {', '.join(IDENTITIES)}")
        return self._tokens[identity]

    def kubeconfig(self, identity: str = "admin", namespace: str = "default") -> Path:
        """A kubeconfig as one of the lab's identities: admin, writer, reader, no-nodes, controller."""
        user = ADMIN_USER if identity == "admin" else identity
        path = self.workdir / "kubeconfigs" / f"{identity}-{namespace}.yaml"
        return write_kubeconfig(path, self.url, self.ca_file, self.token_for(identity), user, namespace)

    kubeconfig_for = kubeconfig
    """The lab's name for the same thing (`Lab.kubeconfig_for(identity, namespace)`)."""

    def run(self, function: Callable[[], Awaitable[T]], timeout: float | None = 60.0) -> T:
        """Run `function()` on the machines' event loop (where the kubelets and the recorder live)."""
        if self._loop is None:
            raise RuntimeError("the real cluster is not started")

        async def call() -> T:
            return await function()

        future: Future[T] = asyncio.run_coroutine_threadsafe(call(), self._loop)
        return future.result(timeout)

    def add_node(
        self,
        name: str,
        *,
        cpu: str | None = None,
        labels: dict[str, str] | None = None,
        status_report_seconds: float | None = None,
    ) -> Obj:
        """A hollow machine whose kubelet registers the Node (the cluster's node size unless `cpu` says
        otherwise); returns the Node once it is Ready. `status_report_seconds` sets the kubelet's
        `nodeStatusReportFrequency` (its default is 5 minutes)."""
        return self.run(
            lambda: self.machines.add_node(
                name,
                cpu=cpu or self.node_cpu,
                memory=self.node_memory,
                labels=labels,
                status_report_seconds=status_report_seconds,
            ),
            timeout=120.0,
        )

    def remove_node(self, name: str) -> None:
        """The machine stops for good and its Node is deleted."""
        self.run(lambda: self.machines.remove_node(name))

    def set_node_state(self, node: str, state: str) -> None:
        """`ready`, `not-ready`, `frozen`, `lost` or `powered-off` (the lab's machine states, `machine.py`)."""
        self.run(lambda: self.machines.set_state(node, state))

    def exit_process(self, node: str, namespace: str, pod: str, code: int) -> None:
        """The pod's process on that node's machine exits now with `code` (the lab's `exit-now`)."""

        async def act() -> None:
            self.machines.exit_process(node, namespace, pod, code)

        self.run(act)

    # ------------------------------------------------------------------------------------------ start

    def start(self) -> RealCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        self.build = self.build or locate()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki = make_pki(self.workdir / "pki")
        self._ssl = ssl.create_default_context(cafile=str(self.pki.ca_file))
        logs = self.workdir / "logs"
        component_tokens = self._write_token_file()
        started = time.monotonic()

        def done(what: str) -> None:
            logger.info("real cluster: %s (%.1f s)", what, time.monotonic() - started)

        self._start_etcd(logs)
        done("etcd up")
        self._start_apiserver(logs)
        done("kube-apiserver ready")
        self._bootstrap_rbac()
        done("identities provisioned")
        if self.apiserver_only:
            return
        kube = {name: self._component_kubeconfig(name, token) for name, token in component_tokens.items()}
        self._start_kcm(logs, kube["kube-controller-manager"])
        self._start_scheduler(logs, kube["kube-scheduler"])
        done("controller manager and scheduler up")
        self._start_workload_controllers(logs, kube)
        done("JobSet, Trainer and Kueue up, their webhooks answering")
        self._start_machines(component_tokens["dispatch-machines"])
        done("nodes Ready")

    def _write_token_file(self) -> dict[str, str]:
        """tokens.csv: the admin and each component, all in system:masters (the lab's controllers are admins too).

        `dispatch-machines` is the machines' own (`simulation.py`: the ground truth's watches and the scenario's
        reads), not the kubelets': each kubelet has its node's client certificate (`machine.py`)."""
        names = [
            "kube-controller-manager",
            "kube-scheduler",
            "jobset",
            "trainer",
            "kueue",
            "dispatch-machines",
        ]
        tokens = {name: _token() for name in names}
        self._tokens["admin"] = _token()
        lines = [f'{self._tokens["admin"]},{ADMIN_USER},{ADMIN_USER},"system:masters"']
        lines += [f'{token},{component_user(name)},{name},"system:masters"' for name, token in tokens.items()]
        path = self.workdir / "tokens.csv"
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)
        return tokens

    def _component_kubeconfig(self, name: str, token: str) -> Path:
        return write_kubeconfig(
            self.workdir / "components" / f"{name}.kubeconfig", self.url, self.ca_file, token, name, "default"
        )

    def _program(self, name: str, argv: list[str], logs: Path, **options: Any) -> Program:
        program = Program(name, argv, logs / f"{name}.log", **options)
        self.programs.append(program)
        return program

    def _start_etcd(self, logs: Path) -> None:
        assert self.build is not None
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._program(
            "etcd",
            [
                self.build.program("etcd"),
                "--name=dispatch",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=dispatch=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            logs,
        )
        wait_for("etcd /health", lambda: _http_ok(f"{self.etcd_url}/health"), timeout=30, programs=[etcd])

    def _start_apiserver(self, logs: Path) -> None:
        assert self.build is not None
        assert self.pki is not None
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        apiserver = self._program(
            "kube-apiserver",
            [
                self.build.program("kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={self.pki.serving_cert}",
                f"--tls-private-key-file={self.pki.serving_key}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                f"--client-ca-file={self.pki.ca_file}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={self.pki.sa_public_key}",
                f"--service-account-signing-key-file={self.pki.sa_private_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--endpoint-reconciler-type=none",
                f"--default-not-ready-toleration-seconds={self.timings.not_ready_toleration_seconds}",
                f"--default-unreachable-toleration-seconds={self.timings.unreachable_toleration_seconds}",
                "--profiling=false",
                "--v=1",
                *self.apiserver_args,
            ],
            logs,
        )
        wait_for(
            "kube-apiserver /readyz",
            functools.partial(self._exists, "/readyz"),
            timeout=self.start_timeout,
            programs=[*self.programs[:-1], apiserver],
        )
        for namespace in BOOTSTRAP_NAMESPACES:
            wait_for(
                f"namespace {namespace}",
                functools.partial(self._exists, f"/api/v1/namespaces/{namespace}"),
                timeout=30,
                programs=self.programs,
            )

    def _bootstrap_rbac(self) -> None:
        """The project's RBAC manifests, applied as the lab applies them, and a token per identity."""
        for document in dispatch_manifests():
            self.apply(document)
        for identity, account in SERVICE_ACCOUNTS.items():
            request = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": TOKEN_SECONDS},
            }
            path = f"/api/v1/namespaces/{IDENTITY_NAMESPACE}/serviceaccounts/{account}/token"
            answer = wait_for(
                f"a token for {identity}",
                functools.partial(self.request, "POST", path, request),
                timeout=30,
                programs=self.programs,
            )
            self._tokens[identity] = str(answer["status"]["token"])

    def _start_kcm(self, logs: Path, kubeconfig: Path) -> None:
        """kube-controller-manager with only the lab's controllers and its node lifecycle timings."""
        self._start_component(
            "kube-controller-manager",
            "kcm-certs",
            logs,
            kubeconfig,
            [
                f"--controllers={','.join(KCM_CONTROLLERS)}",
                f"--node-monitor-period={self.timings.monitor_period}",
                f"--node-monitor-grace-period={self.timings.monitor_grace_period}",
                f"--node-startup-grace-period={self.timings.startup_grace_period}",
                "--use-service-account-credentials=false",
                f"--root-ca-file={self.ca_file}",
            ],
        )

    def _start_scheduler(self, logs: Path, kubeconfig: Path) -> None:
        self._start_component("kube-scheduler", "scheduler-certs", logs, kubeconfig, [])

    def _start_component(
        self, name: str, cert_dir: str, logs: Path, kubeconfig: Path, extra_flags: Sequence[str]
    ) -> None:
        """Start the control-plane binary `name` and wait for its /healthz.

        kube-controller-manager and kube-scheduler take the same flags: one kubeconfig for the API and for
        delegated authentication and authorization, no leader election, a secure port on loopback and a
        self-signed serving pair in `cert_dir` (under the workdir; each its own). `extra_flags` go before `--v=1`.
        """
        assert self.build is not None
        port = free_port()
        program = self._program(
            name,
            [
                self.build.program(name),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / cert_dir}",
                *extra_flags,
                "--v=1",
            ],
            logs,
        )
        wait_for(
            f"{name} /healthz",
            lambda: _https_ok(f"https://127.0.0.1:{port}/healthz"),
            timeout=60,
            programs=[program],
        )

    def _start_workload_controllers(self, logs: Path, kube: dict[str, Path]) -> None:
        assert self.build is not None
        assert self.pki is not None
        ports = {name: free_port() for name in ("jobset", "trainer", "kueue")}
        components = self.install_crds(ports)
        ca = self.pki.ca_bundle
        probes = {name: free_port() for name in ports}
        certs = {name: install_serving_pair(self.pki, self.workdir / name / "certs") for name in ports}
        configs = self.workdir / "configs"
        configs.mkdir(parents=True, exist_ok=True)

        jobset_config = _write_yaml(
            configs / "jobset.yaml",
            {
                "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": False},
                "webhook": {"port": ports["jobset"], "host": "127.0.0.1", "certDir": str(certs["jobset"])},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"127.0.0.1:{probes['jobset']}"},
            },
        )
        trainer_config = _write_yaml(
            configs / "trainer.yaml",
            {
                "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": False},
                "certManagement": {"enable": False},
                "webhook": {"port": ports["trainer"], "host": "127.0.0.1"},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"127.0.0.1:{probes['trainer']}"},
            },
        )
        kueue_config = _write_yaml(
            configs / "kueue.yaml",
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "leaderElection": {"leaderElect": False},
                "internalCertManagement": {"enable": False},
                "webhook": {"port": ports["kueue"], "host": "127.0.0.1", "certDir": str(certs["kueue"])},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": f"127.0.0.1:{probes['kueue']}"},
                "integrations": {"frameworks": list(real_manifests.KUEUE_FRAMEWORKS)},
            },
        )
        _install_kueue_metrics_certs(self.pki)
        # Trainer has no certDir setting: controller-runtime's default is $TMPDIR/k8s-webhook-server/serving-certs.
        trainer_tmp = self.workdir / "trainer" / "tmp"
        install_serving_pair(self.pki, trainer_tmp / "k8s-webhook-server" / "serving-certs")
        started = [
            self._program(
                "jobset",
                [self.build.program("jobset"), f"--config={jobset_config}", "--zap-log-level=info"],
                logs,
                env={"KUBECONFIG": str(kube["jobset"])},
            ),
            self._program(
                "trainer",
                [self.build.program("trainer-controller-manager"), f"--config={trainer_config}"],
                logs,
                env={"KUBECONFIG": str(kube["trainer"]), "TMPDIR": str(trainer_tmp)},
            ),
            self._program(
                "kueue",
                # The on-demand visibility API is an aggregated API server with certificates in /visibility;
                # nothing here reads it.
                [self.build.program("kueue"), f"--config={kueue_config}", "--feature-gates=VisibilityOnDemand=false"],
                logs,
                env={"KUBECONFIG": str(kube["kueue"])},
            ),
        ]
        for program, name in zip(started, probes, strict=True):
            wait_for(
                f"{name} /readyz",
                functools.partial(_http_ok, f"http://127.0.0.1:{probes[name]}/readyz"),
                timeout=self.start_timeout,
                programs=[program],
            )
        for component in components:
            for configuration in real_manifests.webhook_configurations(component, ca):
                self.apply(configuration)
        self._wait_webhooks()

    def install_crds(self, ports: dict[str, int] | None = None) -> list[real_manifests.Component]:
        """Create the CRDs of JobSet, Trainer and Kueue and wait until each is Established; the components.

        `ports` are the controllers' webhook ports their conversion webhooks point at; without them (an
        `apiserver_only` cluster, which runs no controller) the ports are unused ones, so a version that needs
        conversion (Kueue's v1beta1) fails, and the CRDs' stored versions serve as usual.
        """
        if self.build is None or self.pki is None:
            raise RuntimeError("the real cluster is not started")
        ports = ports or {name: free_port() for name in ("jobset", "trainer", "kueue")}
        components = real_manifests.components(self.build.manifests, ports)
        for component in components:
            crds = real_manifests.crds(component, self.pki.ca_bundle)
            for crd in crds:
                # A create, not an apply: server-side apply of CRDs with whole pod templates in their schema
                # (Trainer's are megabytes) takes the API server tens of seconds; the etcd is new, so nothing
                # is there to merge with.
                self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
            for name in real_manifests.crd_names(crds):
                wait_for(
                    f"CRD {name} Established",
                    functools.partial(self._established, name),
                    timeout=60,
                    programs=self.programs,
                )
        return components

    def _wait_webhooks(self) -> None:
        """Dry-run writes that pass through each controller's webhooks (and Kueue's conversion)."""
        jobset = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "probe",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {"containers": [{"name": "probe", "image": "probe"}]},
                                }
                            }
                        },
                    }
                ]
            },
        }
        runtime = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "webhook-probe"},
            "spec": {"template": {"spec": jobset["spec"]}},
        }
        flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "probe"}}
        queue = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "probe", "namespace": "default"},
            "spec": {"clusterQueue": "probe"},
        }
        probes = [
            ("JobSet's webhooks", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets", jobset),
            ("Trainer's webhooks", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", runtime),
            ("Kueue's webhooks", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors", flavor),
            ("Kueue's conversion webhook", "/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues", queue),
        ]
        for what, path, body in probes:
            wait_for(what, functools.partial(self._webhook_answers, path, body), timeout=60, programs=self.programs)

    def _webhook_answers(self, path: str, body: Obj) -> bool | None:
        """A dry-run create that reaches the webhooks: True if they admitted it or denied it (either way they
        answered), None if the API server could not call them yet."""
        try:
            self.request("POST", path + "?dryRun=All", body)
        except ApiError as error:
            if "denied the request" in error.body:
                return True
            return None
        return True

    def _start_machines(self, token: str) -> None:
        assert self.pki is not None
        assert self.build is not None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="dispatch-real-machines", daemon=True)
        self._thread.start()
        ca_file = self.pki.ca_file
        wiring = Wiring(
            kubelet=self.build.program("dispatch-kubelet"),
            apiserver_port=int(self.url.rsplit(":", 1)[1]),
            pki=self.pki,
            stubs=cri_stubs.load(self.build.root),
            programs=self.programs,
        )

        async def make() -> Machines:
            return Machines(self.url, token, str(ca_file), wiring, self.workdir / "machines")

        self._machines = self.run(make)
        self.run(self._machines.start)
        for name in self.node_names:
            self.add_node(name)
        for name in self.node_names:
            wait_for(
                f"node {name} Ready and schedulable",
                functools.partial(self._schedulable, name),
                timeout=60,
                programs=self.programs,
            )

    # ------------------------------------------------------------------------------------------- stop

    def stop(self) -> None:
        """Stop everything that was started, newest first; safe to call twice, and after a failed start."""
        if self._machines is not None and self._loop is not None:
            machines = self._machines
            try:
                self.run(machines.stop, timeout=30)
            except Exception:  # the processes below must stop whatever happened here
                logger.exception("stopping the simulated machines failed")
            self._machines = None
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)
            self._loop.close()
            self._loop, self._thread = None, None
        for program in reversed(self.programs):
            program.stop()
        self.programs = []
        if self._own_workdir and not self.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -------------------------------------------------------------------------------------- API access

    def request(self, method: str, path: str, body: Obj | None = None, content_type: str = "application/json") -> Obj:
        """One request as the admin; the decoded answer, or ApiError."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self._tokens['admin']}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self._ssl, timeout=30) as answer:
                payload = answer.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")) from None
        if not payload:
            return {}
        try:
            decoded: Obj = json.loads(payload)
        except ValueError:
            return {"text": payload.decode(errors="replace")}  # /readyz, /healthz answer plain text
        return decoded

    def apply(self, document: Obj) -> Obj:
        """Server-side apply of one document as the admin (the kinds the cluster's setup writes)."""
        api_version, kind = str(document["apiVersion"]), str(document["kind"])
        found = _KIND_PATHS.get((api_version, kind))
        if found is None:
            raise ValueError(f"the real cluster's setup does not apply {api_version} {kind}")
        prefix, plural, namespaced = found
        metadata = document["metadata"]
        where = f"/namespaces/{metadata['namespace']}" if namespaced else ""
        path = f"{prefix}{where}/{plural}/{metadata['name']}?fieldManager={FIELD_MANAGER}&force=true"
        return self.request("PATCH", path, document, "application/apply-patch+yaml")

    def _exists(self, path: str) -> bool | None:
        """True once GET `path` answers 200 (None on any error: the caller polls)."""
        try:
            self.request("GET", path)
        except (ApiError, urllib.error.URLError, OSError):
            return None
        return True

    def _established(self, name: str) -> bool | None:
        crd = self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        for condition in (crd.get("status") or {}).get("conditions") or []:
            if condition.get("type") == "Established" and condition.get("status") == "True":
                return True
        return None

    def _schedulable(self, name: str) -> bool | None:
        node = self.request("GET", f"/api/v1/nodes/{name}")
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
        taints = (node.get("spec") or {}).get("taints") or []
        return True if ready and not taints else None


def _token() -> str:
    return secrets.token_urlsafe(32)


def _write_yaml(path: Path, document: Obj) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _http_ok(url: str) -> bool | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return True if answer.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None


def _https_ok(url: str) -> bool | None:
    """A component's own /healthz over its self-signed certificate (always allowed without credentials)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            return True if answer.status == 200 else None
    except (urllib.error.URLError, OSError):
        return None


def _install_kueue_metrics_certs(pki: Pki) -> None:
    """The files Kueue insists on (see `KUEUE_METRICS_CERTS`); written once, shared by every cluster."""
    cert, key = KUEUE_METRICS_CERTS / "tls.crt", KUEUE_METRICS_CERTS / "tls.key"
    if cert.is_file() and key.is_file():
        return
    try:
        install_serving_pair(pki, KUEUE_METRICS_CERTS)
    except OSError as error:
        raise ControlPlaneError(
            f"Kueue needs a certificate pair in {KUEUE_METRICS_CERTS} (a path it hard-codes) and it cannot be"
            f" written here ({error}); create that folder writable for this user, or run as root"
        ) from error
