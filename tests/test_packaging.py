"""The wheels a release is built from: what `pip install airflow-provider-dispatch[lab]` puts on a machine.

The provider's wheel is what every Airflow worker installs: the provider's code, dispatch's ClusterRoles
(deploy/rbac/, mapped into the package by hatch's `force-include`), `py.typed`, the `dispatch` console script and
Airflow's provider entry point, and the example DAGs inside the package (hatch's `force-include` maps the
repository's top-level `example_dags/` there, where `dispatch demo` finds them), and nothing of the lab. The
lab's wheel (lab/) carries the lab's code and data: the upstream CRDs it serves and its identities, and the
entry points by which `dispatch` finds `dispatch lab` and `dispatch demo`. The two are released at one version.
The metadata must render on PyPI (Markdown readme) and carry no invented URLs. (hatchling leaves out what
.gitignore names, caches included.)
"""

from __future__ import annotations

import configparser
import email.message
import email.parser
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import airflow_provider_dispatch
import airflow_provider_dispatch_lab
from airflow_provider_dispatch.cli.extras import COMMANDS_GROUP, LAB_COMMANDS, LAB_DISTRIBUTION

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "airflow_provider_dispatch"
LAB_PACKAGE = ROOT / "lab" / "airflow_provider_dispatch_lab"


def build_wheel(project: Path, out: Path, name: str) -> zipfile.ZipFile:
    command = [sys.executable, "-m", "pip", "wheel", str(project), "--no-deps", "--quiet", "-w", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob(f"{name}-*.whl")
    return zipfile.ZipFile(built)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return build_wheel(ROOT, tmp_path_factory.mktemp("wheel"), "airflow_provider_dispatch")


@pytest.fixture(scope="module")
def lab_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return build_wheel(ROOT / "lab", tmp_path_factory.mktemp("lab-wheel"), "airflow_provider_dispatch_lab")


def metadata_of(wheel: zipfile.ZipFile) -> email.message.Message:
    (metadata_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(wheel.read(metadata_name).decode("utf-8"))


def entry_points_of(wheel: zipfile.ZipFile) -> configparser.ConfigParser:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parsed = configparser.ConfigParser()
    parsed.read_string(wheel.read(entry_points).decode("utf-8"))
    return parsed


def test_the_provider_wheel_holds_no_lab(wheel: zipfile.ZipFile) -> None:
    """Every file of the provider's wheel is the provider's package or its metadata: no lab code, no CRDs."""
    names = wheel.namelist()
    assert all(n.startswith(("airflow_provider_dispatch/", "airflow_provider_dispatch-")) for n in names), names
    assert not [n for n in names if "crds/" in n or "rbac_manifests/" in n or n.endswith("cri_stubs.py")]


def test_the_lab_wheel_has_the_lab_and_its_data(lab_wheel: zipfile.ZipFile) -> None:
    names = set(lab_wheel.namelist())
    data = [
        p
        for p in (LAB_PACKAGE / "crds").rglob("*")
        if p.is_file() and p.suffix in (".yaml", ".md") and "/." not in p.as_posix()
    ]
    data += list((LAB_PACKAGE / "rbac_manifests").glob("*.yaml"))
    assert len(data) >= 10
    for path in data:
        assert path.relative_to(LAB_PACKAGE.parent).as_posix() in names
    code = [p.relative_to(LAB_PACKAGE.parent).as_posix() for p in LAB_PACKAGE.rglob("*.py")]
    assert len(code) > 100
    assert set(code) <= names
    assert all(n.startswith(("airflow_provider_dispatch_lab/", "airflow_provider_dispatch_lab-")) for n in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    metadata = metadata_of(lab_wheel)
    assert metadata["Name"] == LAB_DISTRIBUTION
    assert metadata["License-Expression"] == "Apache-2.0"
    requirements = {Requirement(r).name: Requirement(r) for r in metadata.get_all("Requires-Dist")}
    assert str(requirements["airflow-provider-dispatch"].specifier) == f"=={airflow_provider_dispatch.__version__}"
    assert {"cel-python", "jsonpatch", "cryptography", "grpcio", "grpcio-tools"} <= set(requirements)
    commands = dict(entry_points_of(lab_wheel)[COMMANDS_GROUP])
    assert sorted(commands) == sorted(LAB_COMMANDS)
    assert commands == {name: f"airflow_provider_dispatch_lab.cli:{name}" for name in LAB_COMMANDS}


def test_the_two_distributions_are_released_at_one_version(wheel: zipfile.ZipFile) -> None:
    """The provider's `lab` extra asks for the lab at the provider's own version, which is the lab's."""
    version = airflow_provider_dispatch.__version__
    assert airflow_provider_dispatch_lab.__version__ == version
    assert metadata_of(wheel)["Version"] == version
    requirements = [Requirement(r) for r in metadata_of(wheel).get_all("Requires-Dist")]
    (lab,) = [r for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "lab"})]
    assert (lab.name, str(lab.specifier)) == (LAB_DISTRIBUTION, f"=={version}")


def test_wheel_has_the_package_data(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    # deploy/rbac/ ships inside the package (force-include), where the lab finds dispatch's ClusterRoles
    roles = sorted(p.name for p in (ROOT / "deploy" / "rbac").glob("*.yaml"))
    assert "dispatch-clusterroles.yaml" in roles
    for name in roles:
        assert f"airflow_provider_dispatch/deploy/rbac/{name}" in names
    assert "airflow_provider_dispatch/py.typed" in names
    assert "airflow_provider_dispatch/cli/commands.py" in names
    dags = sorted(p.name for p in (ROOT / "example_dags").glob("*.py"))
    assert "lost_node_drill.py" in dags
    for dag in dags:
        assert f"airflow_provider_dispatch/example_dags/{dag}" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_metadata(wheel: zipfile.ZipFile) -> None:
    metadata = metadata_of(wheel)
    assert metadata["Name"] == "airflow-provider-dispatch"
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Framework :: Apache Airflow :: Provider" in metadata.get_all("Classifier")
    assert metadata.get_all("Project-URL") is None, "project.urls must name real pages only"
    assert metadata.get_payload().startswith("# airflow-provider-dispatch")
    assert set(metadata.get_all("Provides-Extra")) == {"lab", "controller", "test", "docs"}
    requirements = [Requirement(r) for r in metadata.get_all("Requires-Dist")]
    core = {r.name.lower().replace("_", "-") for r in requirements if r.marker is None}
    assert core == {
        "apache-airflow",
        "apache-airflow-providers-cncf-kubernetes",
        "apache-airflow-providers-common-compat",
        "apache-airflow-providers-standard",
        "kubernetes",
        "kubernetes-asyncio",
        "aiohttp",
        "pyyaml",
        "click",
    }
    lab = {r.name for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "lab"})}
    assert lab == {LAB_DISTRIBUTION}

    parsed = entry_points_of(wheel)
    assert COMMANDS_GROUP not in parsed, "the provider offers no command to itself: the lab does"
    assert dict(parsed["console_scripts"]) == {"dispatch": "airflow_provider_dispatch.cli.commands:main"}
    assert dict(parsed["apache_airflow_provider"]) == {
        "provider_info": "airflow_provider_dispatch.get_provider_info:get_provider_info"
    }


def test_the_sdist_has_every_tracked_file_but_ci(tmp_path: Path) -> None:
    """The sdist is the whole source tree the tests need (hatch's sdist `include`): every file git tracks except
    the CI script, and nothing .gitignore names."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if tracked.returncode != 0:
        pytest.skip("not a git checkout: nothing to compare the sdist with")
    command = [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (sdist,) = tmp_path.glob("airflow_provider_dispatch-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    expected = {name for name in tracked.stdout.splitlines() if not name.startswith(".ci/")}
    assert expected - names == set()
    assert not [
        name for name in names if "__pycache__" in name or name.startswith((".venv/", "tests/browser/artifacts/"))
    ]


#: a provider package imported only where it is optional (inside a function, behind an ImportError): lineage.py
OPTIONAL_PROVIDERS = {"apache-airflow-providers-openlineage"}


def test_every_airflow_provider_imported_is_a_declared_dependency() -> None:
    """A module-level `from airflow.providers.<a>.<b>` in the package needs `apache-airflow-providers-<a>-<b>`
    among its dependencies: installed as another package's dependency today, it may not be tomorrow."""
    import ast
    import tomllib

    root = Path(__file__).resolve().parents[1]
    declared = {
        Requirement(r).name.lower()
        for r in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    imported: dict[str, str] = {}
    for path in sorted((root / "airflow_provider_dispatch").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:  # module level only: a function's import may be optional
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("airflow.providers."):
                parts = (node.module or "").split(".")[2:]
                name = "apache-airflow-providers-" + "-".join(
                    parts[:2] if parts[0] in {"cncf", "common"} else parts[:1]
                )
                imported.setdefault(name, str(path.relative_to(root)))
    assert imported, "no airflow.providers import found: the scan is broken"
    missing = {name: where for name, where in imported.items() if name not in declared | OPTIONAL_PROVIDERS}
    assert missing == {}


# --- the controller's image (deploy/admission-controller/Containerfile), checked without a container engine ----

CONTAINERFILE = ROOT / "deploy" / "admission-controller" / "Containerfile"


def containerfile_stages() -> list[list[tuple[str, str]]]:
    """The Containerfile's instructions, (keyword, rest), by stage."""
    stages: list[list[tuple[str, str]]] = []
    for line in CONTAINERFILE.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        keyword, _, rest = line.strip().partition(" ")
        if keyword == "FROM":
            stages.append([])
        stages[-1].append((keyword, rest))
    return stages


def test_the_image_is_the_wheel_built_from_exactly_what_its_first_stage_copies(
    wheel: zipfile.ZipFile, tmp_path: Path
) -> None:
    """Stage one's COPY lines, run here: the wheel built from only those files is the release's wheel, file for
    file. Stage two installs only that wheel, with the controller extra, and runs `dispatch admission-controller`
    with arguments the command accepts."""
    import json
    import shlex
    import shutil

    from airflow_provider_dispatch.cli.commands import main as dispatch_cli

    build, image = containerfile_stages()
    context = tmp_path / "src"
    context.mkdir()
    for keyword, rest in build:
        if keyword == "COPY":
            *sources, destination = shlex.split(rest)
            assert not rest.startswith("--from")
            for source in sources:
                # `COPY a b ./` puts each into the folder; `COPY dir ./path` makes that path
                where = context / destination
                target = where / Path(source).name if destination.endswith("/") else where
                target.parent.mkdir(parents=True, exist_ok=True)
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(ROOT / source, target)
    [run] = [rest for keyword, rest in build if keyword == "RUN"]
    assert run.startswith("pip wheel ")
    assert "--no-deps" in run
    assert run.endswith(" .")
    out = tmp_path / "wheels"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), "."]
    result = subprocess.run(command, cwd=context, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (built,) = out.glob("airflow_provider_dispatch-*.whl")
    assert sorted(zipfile.ZipFile(built).namelist()) == sorted(wheel.namelist())

    keywords = [keyword for keyword, _ in image]
    assert keywords == ["FROM", "COPY", "RUN", "USER", "ENTRYPOINT", "CMD"]
    assert dict(image)["COPY"] == "--from=wheel /wheels /wheels"
    assert dict(image)["RUN"].startswith(
        'pip install --no-cache-dir "$(ls /wheels/airflow_provider_dispatch-*.whl)[controller]"'
    )
    assert json.loads(dict(image)["ENTRYPOINT"]) == ["dispatch"]
    args = json.loads(dict(image)["CMD"])
    assert args[0] == "admission-controller"
    context_ = dispatch_cli.make_context("dispatch", list(args), resilient_parsing=False)
    sub = context_.command.get_command(context_, args[0])  # type: ignore[attr-defined]
    assert sub is not None
    parsed = sub.make_context(args[0], args[1:], parent=context_).params
    assert parsed["leader_elect"] is True
    assert parsed["http_bind_address"] == ":8080"
