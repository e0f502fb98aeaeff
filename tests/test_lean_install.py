"""A lean install: the Airflow layer never imports the lab, and a wheel without the `lab` extra works on a worker.

Each import runs in a fresh interpreter: this test session has imported the lab already (tests/conftest.py), so
only a new process shows what importing one module pulls in. The lab-only dependencies are those of the `lab`
extra that nothing a worker installs imports anyway: `cryptography` is in the extra for the real control plane's
CA but Airflow itself requires and imports it, so only `celpy` and `jsonpatch` can tell.

The wheel test builds the wheel as a release would (pip, build isolation, the package index only), installs it
into a new virtual environment, and runs there what a worker runs; then it adds the extra (the lab's own wheel,
built from lab/, and what that requires) and checks that the demo finds its DAG in the provider's wheel. The new
environment gets its dependencies from this test environment rather than from the package index: a folder of
links to exactly the distributions the wheel's requirements need, transitively (their installed metadata says
which), and for the extra a second folder with those of the lab. A worker's dependencies are some 290
distributions; downloading them again took 17 minutes on a busy machine (this package index sends nothing pip
may cache), this takes seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest
from installs import lab_requirements, link_site, requirement_closure, top_level, worker_requirements

from airflow_provider_dispatch.cli.extras import EXIT_MISSING_EXTRA, missing_extra_message
from airflow_provider_dispatch.get_provider_info import get_provider_info

ROOT = Path(__file__).resolve().parents[1]
LAB_ONLY_MODULES = ("celpy", "jsonpatch")
LAB_ONLY_DISTRIBUTIONS = ("cel-python", "jsonpatch")
#: a subprocess prints what it imported of the lab and of the lab-only dependencies as one JSON line
PROBE = textwrap.dedent(
    """
    import importlib, json, sys
    importlib.import_module(sys.argv[1])
    lab_only = set(sys.argv[2:])
    print(json.dumps(sorted(
        name for name in sys.modules
        if name.startswith("airflow_provider_dispatch_lab") or name.split(".")[0] in lab_only
    )))
    """
)


def airflow_layer_modules() -> list[str]:
    """Every module the provider info lists (importing one runs its package's `__init__` too), and the info."""
    info = get_provider_info()
    listed = [
        module
        for kind in ("hooks", "operators", "sensors", "triggers")
        for entry in info[kind]
        for module in entry["python-modules"]
    ]
    return sorted({*listed, "airflow_provider_dispatch.get_provider_info"})


def imported_lab_modules(python: str | Path, module: str, env: dict[str, str] | None = None) -> list[str]:
    result = subprocess.run(
        [str(python), "-c", PROBE, module, *LAB_ONLY_MODULES],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return imported


def test_the_lab_only_distributions_come_with_the_lab() -> None:
    assert set(LAB_ONLY_DISTRIBUTIONS) <= set(lab_requirements())
    assert len(airflow_layer_modules()) >= 7


@pytest.mark.parametrize("module", airflow_layer_modules())
def test_importing_the_airflow_layer_never_imports_the_lab(module: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    assert imported_lab_modules(sys.executable, module, env) == []


def test_the_probe_sees_a_lab_import() -> None:
    """The check can fail: a module that does use the lab is reported."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lab")])}
    imported = imported_lab_modules(sys.executable, "airflow_provider_dispatch_lab.apiserver.registry.patching", env)
    assert "airflow_provider_dispatch_lab.apiserver.registry.patching" in imported
    assert "jsonpatch" in imported


# --- the wheel, installed without and with the extra --------------------------------------------------------


def test_no_requirement_of_a_worker_pulls_in_a_lab_only_distribution() -> None:
    closure = requirement_closure(worker_requirements())
    assert {"apache-airflow-core", "apache-airflow-task-sdk", "kubernetes"} <= closure  # the walk walks
    assert closure.isdisjoint(LAB_ONLY_DISTRIBUTIONS)
    assert "apache-airflow-providers-openlineage" not in closure


def pip(python: Path, *args: str) -> None:
    command = [str(python), "-m", "pip", "--disable-pip-version-check", "--quiet", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def run(command: list[str], home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """A command in the new environment, outside the checkout (so that nothing is imported from it)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["AIRFLOW_HOME"] = str(home)
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout, cwd=home, env=env)


@pytest.fixture(scope="module")
def lean_venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A new virtual environment with the wheel installed and a worker's dependencies: (its python, its site)."""
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--quiet", "--disable-pip-version-check"]
    result = subprocess.run([*command, "-w", str(out)], capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = out.glob("airflow_provider_dispatch-*.whl")
    target = tmp_path_factory.mktemp("lean-venv")
    venv.create(target / "venv", with_pip=True)
    python = target / "venv" / "bin" / "python"
    site = Path(
        run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], target).stdout.strip()
    )
    # what `pip install airflow-provider-dispatch` brings, as this environment has it installed
    worker_entries = top_level(requirement_closure(worker_requirements()))
    worker = link_site(target / "worker-site", lambda name: name in worker_entries)
    (site / "worker-site.pth").write_text(f"import site; site.addsitedir({str(worker)!r})\n")
    pip(python, "install", "--no-deps", "--no-index", str(wheel))
    return python, site


def test_the_wheel_without_the_extra_runs_the_airflow_layer_and_says_what_the_lab_needs(
    lean_venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _ = lean_venv
    found = run([str(python), "-c", "import airflow_provider_dispatch as p; print(p.__file__)"], tmp_path)
    assert Path(found.stdout.strip()).is_relative_to(python.parents[1]), "the wheel, not the checkout"
    for module in LAB_ONLY_MODULES:
        spec = run([str(python), "-c", f"import importlib.util as u; print(u.find_spec({module!r}))"], tmp_path)
        assert spec.stdout.strip() == "None", f"{module} is there without the lab extra"
    env = {"AIRFLOW_HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    for module in airflow_layer_modules():
        assert imported_lab_modules(python, module, env) == []
    lineage = "from airflow_provider_dispatch.operators.trainjob import TrainJobHoldOperator as H; "
    lineage += "print(H(task_id='h', namespace='ml', name='ft-7').get_openlineage_facets_on_complete(object()))"
    assert run([str(python), "-c", lineage], tmp_path).stdout.strip().splitlines()[-1] == "None"

    dispatch = str(python.parent / "dispatch")
    asked = (["demo"], ["lab", "serve"], ["lab", "real"], ["lab", "verdict", "--kubeconfig", "k.yaml"], ["lab"])
    for command in asked:
        result = run([dispatch, *command], tmp_path)
        assert result.returncode == EXIT_MISSING_EXTRA, result.stdout + result.stderr
        (line,) = result.stderr.strip().splitlines()
        assert line == missing_extra_message(" ".join(["dispatch", *command[:2]]))
        assert result.stdout == ""
    assert run([dispatch, "status", "--help"], tmp_path).returncode == 0  # a worker's command needs no extra
    listed = run([dispatch, "--help"], tmp_path)
    assert "status" in listed.stdout
    assert " demo " not in listed.stdout, "without the lab, `dispatch --help` lists none of its commands"


def test_the_wheel_with_the_lab_extra_finds_the_demo_dag(lean_venv: tuple[Path, Path], tmp_path: Path) -> None:
    """The lab's wheel beside the provider's: `dispatch demo` is found (the lab's entry point) and finds its DAG
    in the provider's wheel."""
    python, site = lean_venv
    command = [sys.executable, "-m", "pip", "wheel", str(ROOT / "lab"), "--no-deps", "--quiet", "-w", str(tmp_path)]
    built = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("airflow_provider_dispatch_lab-*.whl")
    lab_entries = top_level(requirement_closure(lab_requirements()))
    lab = link_site(tmp_path / "lab-site", lambda name: name in lab_entries)
    (site / "lab-site.pth").write_text(f"{lab}\n")
    pip(python, "install", "--no-deps", "--no-index", str(wheel))
    try:
        script = textwrap.dedent(
            """
            import runpy, sys
            from airflow_provider_dispatch_lab.demo import DAG_ID, find_dags_folder
            folder = find_dags_folder()
            sys.path.insert(0, str(folder))  # as Airflow puts the DAG folder on the path
            dags = runpy.run_path(str(folder / f"{DAG_ID}.py"))
            print(folder)
            print(sorted(v.dag_id for v in dags.values() if type(v).__name__ == "DAG"))
            """
        )
        result = run([str(python), "-c", script], tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        folder, dag_ids = result.stdout.strip().splitlines()[-2:]
        assert Path(folder) == site / "airflow_provider_dispatch" / "example_dags"
        assert dag_ids == "['lost_node_drill']"
        usage = run([str(python.parent / "dispatch"), "demo", "--dags-folder", str(tmp_path)], tmp_path)
        assert usage.returncode == 2, "with the extra the demo gets past the check, to its own usage error"
        assert "has no lost_node_drill.py" in usage.stderr
    finally:
        pip(python, "uninstall", "--yes", "airflow-provider-dispatch-lab")
        (site / "lab-site.pth").unlink()
