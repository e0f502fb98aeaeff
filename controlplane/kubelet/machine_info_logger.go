//go:build machineinfo_logger

package main

import (
	cadvisorapi "github.com/google/cadvisor/info/v1"
	"k8s.io/klog/v2"
)

// MachineInfo as cadvisor.Interface declares it from Kubernetes 1.37 (built with -tags machineinfo_logger).
func (m *machine) MachineInfo(logger klog.Logger) (*cadvisorapi.MachineInfo, error) {
	return m.sized(m.Fake.MachineInfo(logger))
}
