"""One hollow machine of the real cluster: its hollow kubelet, its container runtime, its network path.

A machine is three parts, and its states (the lab's, `lab/simulated/nodes/kubelet_runs.py` `MachineState`) act
on them as the failures they stand for act on a real node:

| state | the kubelet process | its path to the API server | the runtime's processes |
|---|---|---|---|
| `ready` | runs | open | run |
| `not-ready` | runs; the runtime says `NetworkReady=false`, so the kubelet reports `Ready=False` | open | run |
| `frozen` | stopped (SIGSTOP: a paused VM) | cut | paused, their exits postponed |
| `lost` | runs, cut off: it restarts and stops its containers on its own | cut | run |
| `powered-off` | killed (SIGKILL) | cut | ended at that instant; the runtime's state is forgotten |

The kubelet is `dispatch-kubelet` (`controlplane/kubelet`), the path the relay of `partition.py`, the processes
those of `containers.py`.

Back to `ready` from `frozen` the kubelet continues (SIGCONT) where it stopped; from `powered-off` the machine
boots: a new runtime with no containers, a new kubelet process with the same root directory (`/var/lib/kubelet`
survives a reboot), and its old connections are gone. Nothing here writes to the API: what the API sees is what
the kubelet writes, or fails to write.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_dispatch_lab import runtime as lab_runtime
from airflow_provider_dispatch_lab.real.containers import ContainerRuntime
from airflow_provider_dispatch_lab.real.cri import Cri
from airflow_provider_dispatch_lab.real.cri_stubs import CriStubs
from airflow_provider_dispatch_lab.real.partition import PartitionRelay
from airflow_provider_dispatch_lab.real.pki import Pki, client_pair
from airflow_provider_dispatch_lab.real.processes import Program
from airflow_provider_dispatch_lab.simulated.nodes.kubelet_runs import MachineState
from airflow_provider_dispatch_lab.truth.overlap import OverlapRecorder

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MachineSpec:
    """What a machine is: its size, the labels its kubelet registers the Node with, and the kubelet's
    `nodeStatusReportFrequency` (None: the kubelet's default, 5 minutes)."""

    name: str
    cpu: int = 32
    memory: str = "128Gi"
    labels: tuple[tuple[str, str], ...] = ()
    status_report_seconds: float | None = None


@dataclass(frozen=True)
class Wiring:
    """How a machine reaches the cluster: the kubelet program, the API server's port, and the cluster's CA, which
    the kubelet verifies the API server with and which signs the kubelet's client certificate."""

    kubelet: str
    apiserver_port: int
    pki: Pki
    stubs: CriStubs
    programs: list[Program]
    """The cluster's running programs: a machine's kubelet is in it while it runs, so a kubelet that dies by
    itself fails the cluster's waits as any other program does."""


class HollowMachine:
    """A node's machine, on the machines' event loop."""

    def __init__(
        self, spec: MachineSpec, wiring: Wiring, workdir: Path, runtime: ContainerRuntime, recorder: OverlapRecorder
    ) -> None:
        self.spec = spec
        self.wiring = wiring
        self.workdir = workdir
        self.runtime = runtime
        self.recorder = recorder
        self.relay = PartitionRelay(spec.name, wiring.apiserver_port)
        self.cri = Cri(runtime, wiring.stubs, workdir / "cri.sock")
        self.kubelet: Program | None = None
        self.state = MachineState.READY
        self.boots = 0

    @property
    def name(self) -> str:
        return self.spec.name

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = await self.relay.start()
        # The node's identity, as kubeadm gives a kubelet: the Node authorizer lets it read only what its pods
        # use, and NodeRestriction lets it write only its own Node, Lease and pods.
        user = f"system:node:{self.name}"
        self.kubeconfig = lab_runtime.write_kubeconfig(
            self.workdir / "kubelet.kubeconfig",
            f"https://127.0.0.1:{port}",
            None,
            user,
            "default",
            ca_file=self.wiring.pki.ca_file,
            cluster="real",
            inline_ca=False,
            client_pair=client_pair(self.wiring.pki, self.workdir / "pki", user, ("system:nodes",)),
        )
        await self._boot()

    async def _boot(self) -> None:
        await self.cri.serve()
        self.boots += 1
        argv = [
            self.wiring.kubelet,
            f"--node-name={self.name}",
            f"--kubeconfig={self.kubeconfig}",
            f"--container-runtime-endpoint=unix://{self.cri.socket}",
            f"--root-dir={self.workdir / 'kubelet'}",
            f"--cpu={self.spec.cpu}",
            f"--memory={self.spec.memory}",
            "--node-labels=" + ",".join(f"{k}={v}" for k, v in self.spec.labels),
            "--v=2",
        ]
        if self.spec.status_report_seconds is not None:
            argv.append(f"--node-status-report-frequency={self.spec.status_report_seconds}s")
        # One core each: a hollow kubelet is idle between a few calls a second, and many share two cores.
        self.kubelet = Program(
            f"kubelet-{self.name}", argv, self.workdir / "logs" / "kubelet.log", env={"GOMAXPROCS": "1"}
        )
        self.wiring.programs.append(self.kubelet)

    def check(self) -> None:
        """Raise (with the end of its log) if the kubelet exited by itself."""
        if self.kubelet is not None:
            self.kubelet.check()

    def _signal_kubelet(self, signum: signal.Signals) -> None:
        if self.kubelet is not None:
            self.kubelet.send_signal(signum)

    async def _kill_kubelet(self) -> None:
        kubelet, self.kubelet = self.kubelet, None
        if kubelet is None:
            return
        if kubelet in self.wiring.programs:
            self.wiring.programs.remove(kubelet)
        await asyncio.to_thread(kubelet.kill)  # the power goes: no SIGTERM first

    async def set_state(self, new: MachineState) -> None:
        old = self.state
        if new == old:
            return
        logger.info("machine %s: %s -> %s", self.name, old, new)
        # leave the old state
        if old == MachineState.FROZEN:
            self.runtime.thaw()
            self._signal_kubelet(signal.SIGCONT)
        elif old == MachineState.POWERED_OFF:
            self.relay.drop_connections()
            await self._boot()
        elif old == MachineState.NOT_READY:
            self.runtime.network_ready = True
        # enter the new one
        if new == MachineState.FROZEN:
            self.relay.cut()
            self._signal_kubelet(signal.SIGSTOP)
            self.runtime.freeze()
        elif new == MachineState.POWERED_OFF:
            self.relay.cut()
            await self._kill_kubelet()
            self.runtime.power_off()
            await self.cri.stop()
        elif new == MachineState.LOST:
            self.relay.cut()
        elif new == MachineState.NOT_READY:
            self.runtime.network_ready = False
        if new in (MachineState.READY, MachineState.NOT_READY):
            self.relay.heal()
        self.state = new

    async def stop(self) -> None:
        """The machine goes for good (its Node is removed, or the cluster stops)."""
        if self.state == MachineState.FROZEN:
            self._signal_kubelet(signal.SIGCONT)
        await self._kill_kubelet()
        self.runtime.power_off()
        await self.cri.stop()
        await self.runtime.close()
        await self.relay.stop()
