"""Where the built control plane is: the folder `controlplane/build` fills, outside the clone.

`DISPATCH_CONTROLPLANE_BIN` names the `bin/` folder (`scripts/test` exports it). Without it, a source checkout's
`controlplane/build` is asked for the folder, which it prints at once when the pinned versions are built already.
Otherwise `locate(build=True)` (`dispatch lab real`) builds them, which takes a while on a cold machine (the build
says so on stderr), and `locate(build=False)` (the test fixture, whose time is bounded) refuses.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from airflow_provider_dispatch_lab.real.processes import ControlPlaneError

ENV_BIN = "DISPATCH_CONTROLPLANE_BIN"
PROGRAMS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "jobset",
    "trainer-controller-manager",
    "kueue",
    "dispatch-kubelet",
)
BUILD_SCRIPT = Path(__file__).resolve().parents[3] / "controlplane" / "build"
"""`controlplane/build` in a source checkout (absent from an installed wheel)."""


@dataclass(frozen=True)
class ControlPlaneBuild:
    """One complete build: `bin/` with the programs, `manifests/` with the controllers' YAML, `versions`."""

    bin: Path

    @property
    def root(self) -> Path:
        return self.bin.parent

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    def program(self, name: str) -> str:
        return str(self.bin / name)

    @property
    def versions(self) -> dict[str, str]:
        """The pinned versions the build was made from (`controlplane/versions`)."""
        pinned: dict[str, str] = {}
        for line in (self.root / "versions").read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                pinned[key.strip()] = value.strip()
        return pinned

    def check(self) -> ControlPlaneBuild:
        missing = [name for name in PROGRAMS if not (self.bin / name).is_file()]
        if not (self.root / "cri" / "api.proto").is_file():
            missing.append("cri/api.proto")
        if missing or not self.manifests.is_dir() or not (self.root / "versions").is_file():
            raise ControlPlaneError(
                f"{self.root} is not a complete control plane build (missing: {', '.join(missing) or 'manifests'});"
                " run controlplane/build"
            )
        return self


def locate(*, build: bool = True) -> ControlPlaneBuild:
    """The build named by `DISPATCH_CONTROLPLANE_BIN`, or the one `controlplane/build` finds (or makes, if
    `build`)."""
    named = os.environ.get(ENV_BIN)
    if named:
        return ControlPlaneBuild(Path(named).resolve()).check()
    if not BUILD_SCRIPT.is_file():
        raise ControlPlaneError(
            f"no control plane: set {ENV_BIN} to the bin/ folder controlplane/build printed"
            " (the build script is in the project's source checkout)"
        )
    mode = "--quiet" if build else "--cached"
    done = subprocess.run([str(BUILD_SCRIPT), mode], check=False, stdout=subprocess.PIPE, text=True)
    if done.returncode == 3 and not build:
        raise ControlPlaneError(
            "the pinned control plane is not built on this machine: run controlplane/build (about 15 minutes"
            " cold), or ./scripts/test, which runs it first"
        )
    if done.returncode != 0:
        raise ControlPlaneError(f"controlplane/build failed with {done.returncode} (its errors are above)")
    return ControlPlaneBuild(Path(done.stdout.strip().splitlines()[-1])).check()
