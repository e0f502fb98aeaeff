"""The lab's CRDs are upstream's files at the pinned releases, named in `lab/crds/SOURCES.md` (issue 16 item 5).

One version of each component: the one in `controlplane/versions`, which the real control plane is built from. The
files are checked by their git blob ids, and against the copies the build took from the same modules when the
build is on this machine.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from airflow_provider_dispatch_lab.real.binaries import locate
from airflow_provider_dispatch_lab.real.processes import ControlPlaneError

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "lab" / "airflow_provider_dispatch_lab" / "crds"
#: the module of each component, its key in controlplane/versions and its folder in the build's manifests/
MODULES = {
    "github.com/kubeflow/trainer/v2": ("TRAINER", "trainer"),
    "sigs.k8s.io/jobset": ("JOBSET", "jobset"),
    "sigs.k8s.io/kueue": ("KUEUE", "kueue"),
}
ROW = re.compile(
    r"^\| `(?P<file>[^`]+)` \| `(?P<module>[^`]+)` (?P<version>v[0-9.]+)[^|]*"
    r"\| `(?P<path>[^`]+)` \| `(?P<blob>[0-9a-f]{40})` \|$"
)


def _pinned() -> dict[str, str]:
    pinned: dict[str, str] = {}
    for line in (ROOT / "controlplane" / "versions").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            pinned[key.strip()] = value.strip()
    return pinned


def _sources() -> list[dict[str, str]]:
    rows = [m.groupdict() for line in (CRDS / "SOURCES.md").read_text().splitlines() if (m := ROW.match(line))]
    assert rows, "no file rows found in SOURCES.md"
    return rows


def _blob(data: bytes) -> str:
    """`git hash-object`: the id git gives the file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def test_every_crd_is_named_at_the_pinned_release_with_its_blob() -> None:
    pinned = _pinned()
    rows = _sources()
    assert sorted(row["file"] for row in rows) == sorted(str(path.relative_to(CRDS)) for path in CRDS.glob("*/*.yaml"))
    for row in rows:
        key, _folder = MODULES[row["module"]]
        assert row["version"] == pinned[key], f"{row['file']} is from {row['version']}, the pin is {pinned[key]}"
        assert _blob((CRDS / row["file"]).read_bytes()) == row["blob"], f"{row['file']} is not the file named"


def test_every_crd_is_the_one_the_real_control_plane_serves() -> None:
    try:
        build = locate(build=False)
    except ControlPlaneError as missing:
        pytest.skip(f"the real control plane is not built here: {missing}")
    for row in _sources():
        _key, folder = MODULES[row["module"]]
        served = build.manifests / folder / row["path"]
        assert served.read_bytes() == (CRDS / row["file"]).read_bytes(), f"{row['file']} differs from {served}"
