"""A real Kubernetes control plane for tests and for people: the lab held to the real thing (DESIGN.md §9a).

etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from `k8s.io/kubernetes`, and the JobSet,
Trainer and Kueue controllers built from their modules (`controlplane/build`), with hollow machines as the nodes:
the real kubelet (`controlplane/kubelet`) on a CRI server whose containers are the lab's simulated processes.
`RealCluster` has the face of `Lab`: start/stop, a context manager, `kubeconfig(identity)`.
"""

from airflow_provider_dispatch_lab.real.cluster import NodeTimings, RealCluster
from airflow_provider_dispatch_lab.real.processes import ControlPlaneError

__all__ = ["ControlPlaneError", "NodeTimings", "RealCluster"]
