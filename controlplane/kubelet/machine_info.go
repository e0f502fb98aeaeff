//go:build !machineinfo_logger

package main

import cadvisorapi "github.com/google/cadvisor/info/v1"

// MachineInfo as cadvisor.Interface declares it up to Kubernetes 1.36.
func (m *machine) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	return m.sized(m.Fake.MachineInfo())
}
