"""What the browser test's fixtures hand it: the lab's handles, and the folder of artifacts it leaves."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import kubernetes

from airflow_provider_dispatch.dispatch.vocabulary import CLUSTER_TRAINING_RUNTIME, LABEL_JOBSET_NAME
from airflow_provider_dispatch_lab.runtime import Lab
from airflow_provider_dispatch_lab.scenario import manifests
from airflow_provider_dispatch_lab.scenario.scenario import Scenario

#: the taints the node lifecycle controller puts on a node that stops reporting
LOST_NODE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


@dataclass
class Artifacts:
    """The folder the browser test writes to, and what it wrote (listed in the terminal summary)."""

    root: Path
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def path(self, name: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def keep(self, path: Path) -> Path:
        self.written.append(path)
        print(f"browser test artifact: {path}")
        return path


@dataclass
class DrillLab:
    lab: Lab
    scenario: Scenario
    kubeconfigs: dict[str, Path]

    def admin(self) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfigs["admin"]))

    def finite_runtime(self, annotations: dict[str, str] | None = None, *, stay_on_lost_nodes: bool = False) -> str:
        """A ClusterTrainingRuntime of the test's own whose pods are not restarted and whose Job fails on one
        failed pod (restartPolicy Never, backoffLimit 0); `annotations` go on its pods (the lab's workload
        controls: how long a process runs, which exit code a submission ends with). `stay_on_lost_nodes`: its pods
        tolerate the `not-ready` and `unreachable` taints for ever (no `tolerationSeconds`), so a node that stops
        reporting does not evict them (taint-based eviction, after the 300 s DefaultTolerationSeconds adds)."""
        name = f"rt-{uuid.uuid4().hex[:8]}"
        body = manifests.cluster_training_runtime(name)
        job_spec = body["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        if annotations:
            job_spec["template"]["metadata"] = {"annotations": dict(annotations)}
        job_spec["backoffLimit"] = 0
        job_spec["template"]["spec"]["restartPolicy"] = "Never"
        if stay_on_lost_nodes:
            job_spec["template"]["spec"]["tolerations"] = [
                {"key": key, "operator": "Exists", "effect": "NoExecute"} for key in LOST_NODE_TAINTS
            ]
        client = self.admin()
        try:
            coords = CLUSTER_TRAINING_RUNTIME
            custom = kubernetes.client.CustomObjectsApi(client)
            custom.create_cluster_custom_object(coords.group, coords.version, coords.plural, body)
        finally:
            client.close()
        return name

    def running_pods(self, namespace: str, trainjob: str) -> list[tuple[str, str]]:
        """(pod, node) of the TrainJob's Running pods, by name."""
        client = self.admin()
        try:
            core = kubernetes.client.CoreV1Api(client)
            found = core.list_namespaced_pod(namespace, label_selector=f"{LABEL_JOBSET_NAME}={trainjob}").items
        finally:
            client.close()
        return sorted((p.metadata.name, p.spec.node_name) for p in found if p.status.phase == "Running")


__all__ = ["Artifacts", "DrillLab"]
