package main

import (
	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
)

// machine is kubemark's fake cadvisor with the machine's size as the project sets it (machine_info*.go: the
// method's signature changed in Kubernetes 1.37).
type machine struct {
	cadvisortest.Fake
	cores  int
	memory uint64
}

func (m *machine) sized(info *cadvisorapi.MachineInfo, err error) (*cadvisorapi.MachineInfo, error) {
	if err != nil {
		return nil, err
	}
	info.NumCores = m.cores
	info.MemoryCapacity = m.memory
	return info, nil
}
