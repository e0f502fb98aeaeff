// Command dispatch-kubelet is a hollow kubelet: the real kubelet of k8s.io/kubernetes, started by its own
// cmd/kubelet/app.Run, on a machine that has no cgroups, no cadvisor and no container runtime of its own. It is
// kubemark's recipe (pkg/kubemark/hollow_kubelet.go: a stub container manager, a fake cadvisor, a fake mounter
// and OS interface), with two differences that the real cluster of airflow-provider-dispatch needs:
//
//   - the container runtime is a CRI endpoint of the project's own (--container-runtime-endpoint, a unix socket:
//     lab/real/cri.py), whose containers are the lab's simulated processes. kubemark's hollow node can only run
//     an in-process fake runtime (cmd/kubemark/app/hollow_node.go starts k8s.io/cri-client/pkg/fake itself);
//   - the API clients, the heartbeat client and what the kubelet does when a heartbeat fails are built by the
//     kubelet's own code (app.Run builds them when the dependencies carry none), as on a real node; kubemark
//     builds its own clients and drops the heartbeat-failure hook.
//
// Everything else is the kubelet's default configuration (options.NewKubeletConfiguration), changed only where
// a machine without cgroups or a port of its own needs it: see hollowConfiguration. The machine's size is what
// --cpu and --memory say (kubemark's fake cadvisor reports 1 core and 3.75 GB).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	probetest "k8s.io/kubernetes/pkg/kubelet/prober/testing"
	"k8s.io/kubernetes/pkg/util/oom"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
	"k8s.io/mount-utils"
)

type settings struct {
	nodeName        string
	kubeconfig      string
	runtimeEndpoint string
	rootDirectory   string
	cpu             int
	memory          string
	nodeLabels      string
	statusReport    time.Duration
}

func parseLabels(raw string) (map[string]string, error) {
	labels := map[string]string{}
	for _, pair := range strings.Split(raw, ",") {
		if pair == "" {
			continue
		}
		key, value, found := strings.Cut(pair, "=")
		if !found || key == "" {
			return nil, fmt.Errorf("--node-labels: %q is not key=value", pair)
		}
		labels[key] = value
	}
	return labels, nil
}

// hollowConfiguration is the kubelet's default configuration with what a hollow machine on a shared host needs.
func hollowConfiguration(s settings, labels map[string]string) (*options.KubeletServer, error) {
	flags := options.NewKubeletFlags()
	flags.HostnameOverride = s.nodeName
	flags.NodeLabels = labels
	flags.KubeConfig = s.kubeconfig
	flags.RootDirectory = s.rootDirectory
	flags.CertDirectory = filepath.Join(s.rootDirectory, "pki")

	config, err := options.NewKubeletConfiguration()
	if err != nil {
		return nil, err
	}
	config.ContainerRuntimeEndpoint = s.runtimeEndpoint
	config.ImageServiceEndpoint = s.runtimeEndpoint
	config.PodLogsDir = filepath.Join(s.rootDirectory, "pod-logs")
	config.StaticPodPath = ""
	// No cgroups: the stub container manager (as kubemark), so no per-QoS cgroups and nothing to enforce.
	config.CgroupsPerQOS = false
	config.EnforceNodeAllocatable = []string{}
	config.KubeletCgroups = ""
	config.SystemCgroups = ""
	config.FailSwapOn = false
	config.FailCgroupV1 = false // the machines may be on cgroup v1 hosts; the stub container manager uses no cgroups
	// Many kubelets share one host: no listening ports (the API server's logs and exec are not used here), no
	// iptables chains, no cadvisor-based eviction or image garbage collection (a hollow machine has no disk or
	// memory of its own to run out of; the fake cadvisor reports none).
	config.EnableServer = false
	config.ReadOnlyPort = 0
	config.HealthzPort = 0
	config.MakeIPTablesUtilChains = false
	config.EvictionHard = map[string]string{}
	config.EvictionSoft = map[string]string{}
	config.ImageGCHighThresholdPercent = 100
	config.ImageGCLowThresholdPercent = 99
	if s.statusReport > 0 {
		config.NodeStatusReportFrequency = metav1.Duration{Duration: s.statusReport}
	}
	return &options.KubeletServer{KubeletFlags: *flags, KubeletConfiguration: *config}, nil
}

func dependencies(ctx context.Context, s settings) (*kubelet.Dependencies, error) {
	memory, err := resource.ParseQuantity(s.memory)
	if err != nil {
		return nil, fmt.Errorf("--memory: %w", err)
	}
	plugins, err := kubeletapp.ProbeVolumePlugins(ctx, utilfeature.DefaultFeatureGate)
	if err != nil {
		return nil, err
	}
	// No clients, no runtime services and no startup latency trackers: app.Run makes them as the kubelet does, the
	// clients from the kubeconfig, the runtime services from the CRI endpoint.
	return &kubelet.Dependencies{
		CAdvisorInterface: &machine{Fake: cadvisortest.Fake{NodeName: s.nodeName}, cores: s.cpu, memory: uint64(memory.Value())},
		ContainerManager:  cm.NewStubContainerManager(),
		ProbeManager:      probetest.FakeManager{},
		OSInterface:       &containertest.FakeOS{},
		VolumePlugins:     plugins,
		OOMAdjuster:       oom.NewFakeOOMAdjuster(),
		Mounter:           &mount.FakeMounter{},
		Subpather:         &subpath.FakeSubpath{},
		HostUtil:          hostutil.NewFakeHostUtil(nil),
		TracerProvider:    noop.NewTracerProvider(),
	}, nil
}

func main() {
	var s settings
	klog.InitFlags(nil)
	flag.StringVar(&s.nodeName, "node-name", "", "the Node's name (required)")
	flag.StringVar(&s.kubeconfig, "kubeconfig", "", "the kubelet's kubeconfig (required)")
	flag.StringVar(&s.runtimeEndpoint, "container-runtime-endpoint", "", "the CRI endpoint, unix:///path (required)")
	flag.StringVar(&s.rootDirectory, "root-dir", "", "the kubelet's root directory; kept across restarts (required)")
	flag.IntVar(&s.cpu, "cpu", 32, "cores the machine reports")
	flag.StringVar(&s.memory, "memory", "128Gi", "memory the machine reports")
	flag.StringVar(&s.nodeLabels, "node-labels", "", "labels the kubelet registers its Node with, key=value,...")
	flag.DurationVar(&s.statusReport, "node-status-report-frequency", 0, "nodeStatusReportFrequency (0: the kubelet's default, 5m)")
	flag.Parse()
	if s.nodeName == "" || s.kubeconfig == "" || s.runtimeEndpoint == "" || s.rootDirectory == "" {
		fmt.Fprintln(os.Stderr, "dispatch-kubelet: --node-name, --kubeconfig, --container-runtime-endpoint and --root-dir are required")
		os.Exit(2)
	}
	labels, err := parseLabels(s.nodeLabels)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dispatch-kubelet:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	server, err := hollowConfiguration(s, labels)
	if err == nil {
		var deps *kubelet.Dependencies
		deps, err = dependencies(ctx, s)
		if err == nil {
			err = kubeletapp.Run(ctx, server, deps, utilfeature.DefaultFeatureGate)
		}
	}
	if err != nil {
		klog.ErrorS(err, "dispatch-kubelet failed")
		klog.Flush()
		os.Exit(1)
	}
}
