"""The CRI's Python bindings: generated from the very `api.proto` the hollow kubelet was compiled with.

`controlplane/build` copies `pkg/apis/runtime/v1/api.proto` of the `k8s.io/cri-api` module it built the kubelet
from into the build's folder (`cri/api.proto`). The first cluster that needs them generates the message and
service modules from it with `grpc_tools.protoc` (grpcio-tools, in the `lab` extra), into
`cri/python-<grpcio-tools version>/` of that folder, once (a file lock keeps two test processes from writing at
once). They are generated, not committed: they follow the built version (the version matrix builds other
kubelets, whose CRI may have grown), and the generated code must match the protobuf runtime it is imported with,
which the environment that imports it decides (grpcio-tools pins a compatible protobuf).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_dispatch_lab.real.processes import ControlPlaneError

PACKAGE = "dispatch_cri_v1"
"""The generated modules' package (the proto's import path inside the generation folder)."""


@dataclass(frozen=True)
class CriStubs:
    """`api` holds the messages (`api_pb2`), `services` the servicer bases and registration (`api_pb2_grpc`)."""

    api: Any
    services: Any


def _generate(proto: Path, out: Path) -> None:
    try:
        from grpc_tools import protoc
    except ImportError as error:
        raise ControlPlaneError(
            "the hollow kubelets' container runtime needs grpcio-tools: install the `lab` extra"
        ) from error
    with tempfile.TemporaryDirectory(dir=out.parent) as work:
        source = Path(work) / "src"
        (source / PACKAGE).mkdir(parents=True)
        shutil.copyfile(proto, source / PACKAGE / "api.proto")
        target = Path(work) / "out"
        target.mkdir()
        include = Path(protoc.__file__).parent / "_proto"
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{source}",
                f"-I{include}",
                f"--python_out={target}",
                f"--grpc_python_out={target}",
                f"{PACKAGE}/api.proto",
            ]
        )
        if code != 0:
            raise ControlPlaneError(f"grpc_tools.protoc failed ({code}) on {proto}")
        (target / "complete").touch()
        target.rename(out)


def load(build_root: Path) -> CriStubs:
    """The bindings of the build in `build_root`, generated on first use."""
    proto = build_root / "cri" / "api.proto"
    if not proto.is_file():
        raise ControlPlaneError(f"{build_root} has no cri/api.proto: run controlplane/build")
    loaded = sys.modules.get(f"{PACKAGE}.api_pb2")
    if loaded is not None:
        origin = Path(str(getattr(loaded, "__file__", ""))).resolve()
        if build_root.resolve() not in origin.parents:
            raise ControlPlaneError(f"this process already loaded the CRI bindings of another build ({origin})")
        return CriStubs(loaded, sys.modules[f"{PACKAGE}.api_pb2_grpc"])
    version = importlib.metadata.version("grpcio-tools")
    out = build_root / "cri" / f"python-{version}"
    if not (out / "complete").is_file():
        with (build_root / "cri" / ".generate.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (out / "complete").is_file():
                with contextlib.suppress(FileNotFoundError):
                    shutil.rmtree(out)
                _generate(proto, out)
    spec = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
    spec.submodule_search_locations = [str(out / PACKAGE)]
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    return CriStubs(importlib.import_module(f"{PACKAGE}.api_pb2"), importlib.import_module(f"{PACKAGE}.api_pb2_grpc"))
