"""The documentation: the Sphinx site builds with warnings as errors, and what it shows is true.

* The build (`sphinx-build -W --keep-going -b html docs <tmp>`, what CI runs through this test) fails on any
  warning: a broken reference, an unimportable module, a malformed docstring. It runs with Airflow's database
  pointed at a path that cannot exist, so an import that touched the database would fail the build.
* The pages show what they claim to show: the RBAC page includes the shipped ClusterRoles, the API reference has
  the adapters, the Airflow page documents each module the provider metadata declares (or names it as missing).
* The examples are real: the status outputs are what `status_view.render_text` prints for the state they
  describe, and the Kueue setup YAML is accepted by the lab's Kueue CRDs (schema and CEL validation).
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from airflow_provider_dispatch.cli.status_view import render_text
from airflow_provider_dispatch.dispatch import reasons
from airflow_provider_dispatch.dispatch.assessment import assess
from airflow_provider_dispatch.dispatch.evidence import HoldEvidence
from airflow_provider_dispatch.dispatch.fencing import recorded
from airflow_provider_dispatch.dispatch.vocabulary import TAINT_OUT_OF_SERVICE
from airflow_provider_dispatch.get_provider_info import get_provider_info
from airflow_provider_dispatch_lab.runtime import Lab

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    airflow_home = tmp_path_factory.mktemp("airflow-home")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(airflow_home),
        # any database access while autodoc imports the package fails here, and so fails the build
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////nonexistent-dispatch-docs-db/airflow.db",
    }
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", str(DOCS), str(out)]
    started = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if result.returncode != 0:
        pytest.fail(
            f"sphinx-build failed (exit {result.returncode}, {elapsed:.1f}s):\n{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    print(f"docs built in {elapsed:.1f}s")
    return out


def page_text(site: Path, page: str) -> str:
    """A built page's visible text: tags removed (highlighted code is split into spans), entities decoded."""
    raw = (site / page).read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)\b.*?</\1>", " ", raw, flags=re.DOTALL)
    return html.unescape(re.sub(r"<[^>]+>", "", raw))


def test_every_page_is_built(site: Path) -> None:
    sources = [p for p in DOCS.rglob("*") if p.suffix in (".md", ".rst") and "_build" not in p.parts]
    sources = [p for p in sources if EXAMPLES not in p.parents]
    assert sources
    for source in sources:
        built = site / source.relative_to(DOCS).with_suffix(".html")
        assert built.is_file(), f"{source} was not built"


def test_rbac_page_shows_the_shipped_roles(site: Path) -> None:
    text = page_text(site, "rbac.html")
    manifest = ROOT / "deploy/rbac/dispatch-clusterroles.yaml"
    roles = [d["metadata"]["name"] for d in yaml.safe_load_all(manifest.read_text()) if d]
    assert roles == [
        "dispatch-writer",
        "dispatch-reader",
        "dispatch-node-reader",
        "dispatch-fence-reader",
        "dispatch-admission-controller",
    ]
    for line in manifest.read_text().splitlines():
        if line.strip():
            assert " ".join(line.split()) in " ".join(text.split()), f"rbac page lacks: {line}"


def test_api_reference_has_the_adapters(site: Path) -> None:
    text = page_text(site, "api/dispatch.html")
    for name in ("DispatchAdapter", "AsyncDispatchAdapter", "from_kubeconfig", "PodsRemainError", "Status"):
        assert name in text


def test_cli_page_documents_the_commands_and_exit_codes(site: Path) -> None:
    text = page_text(site, "cli.html")
    for expected in ("dispatch status", "dispatch find", "--output", "--job-id", "--kubeconfig", "--context"):
        assert expected in text
    assert "Unreachable" in text


def test_every_runbook_section_a_wait_reason_names_is_an_anchor_of_the_runbook(site: Path) -> None:
    """Wait reasons say `Runbook: docs/runbook.md#<section>` (dispatch/reasons.py): each such section is a stable
    anchor (an explicit label, not a heading's slug) of the built runbook, and is given in the source as one."""
    built = (site / "runbook.html").read_text(encoding="utf-8")
    source = (DOCS / "runbook.md").read_text(encoding="utf-8")
    assert reasons.RUNBOOK == "docs/runbook.md"
    for section in reasons.RUNBOOK_SECTIONS:
        assert f"({section})=" in source.splitlines(), f"docs/runbook.md has no label ({section})="
        assert re.search(rf'id="{re.escape(section)}"', built), f"runbook.html has no anchor #{section}"


@pytest.mark.parametrize("kind", ["hooks", "operators", "sensors", "triggers"])
def test_airflow_page_documents_each_declared_module_or_says_it_is_missing(site: Path, kind: str) -> None:
    raw = (site / "airflow.html").read_text(encoding="utf-8")
    text = page_text(site, "airflow.html")
    declared = [m for entry in get_provider_info().get(kind, []) for m in entry["python-modules"]]
    assert declared
    for module in declared:
        documented = f'id="module-{module}"' in raw
        notes = re.findall(r"not in this build yet: ((?:[\w.]+ ?,? ?)+)", " ".join(text.split()))
        names = {found.rstrip(".") for note in notes for found in re.findall(r"[\w.]+", note)}
        missing = module in names
        assert documented != missing, module


# --- the examples ---------------------------------------------------------------------------------------------

NOW = datetime(2026, 8, 21, 10, 12, 0, tzinfo=UTC)
CREATED = datetime(2026, 8, 21, 10, 0, 0, tzinfo=UTC)


def lost_node_state(*, out_of_service: bool) -> tuple[Any, ...]:
    # the arguments of `assess`: the TrainJob, the evidence of its hold, its pods, their nodes
    """TrainJob ml/ft-7 held after execution 1, its pod Terminating on node gpu-n14, whose kubelet went silent."""
    trainjob = {
        "metadata": {
            "name": "ft-7",
            "namespace": "ml",
            "resourceVersion": "4711",
            "labels": {"dispatch.phpboyscout.uk/job-id": "ft-7", "dispatch.phpboyscout.uk/submission": "1"},
            "annotations": {
                "dispatch.phpboyscout.uk/admission": "1",
                # dispatch's hold, at 10:05:00: it recorded the pod (dispatch/fencing.py), and has settled by NOW
                "dispatch.phpboyscout.uk/execution-pods": (
                    '{"admission":1,"nodes":{"gpu-n14":["ft-7-node-0-0-x7k2p"]},"since":"2026-08-21T10:05:00Z",'
                    '"uids":{"ft-7-node-0-0-x7k2p":"u1"}}'
                ),
            },
        },
        "spec": {"suspend": True},
        "status": {"conditions": [{"type": "Suspended", "status": "True"}]},
    }
    jobset = {"metadata": {"name": "ft-7", "namespace": "ml"}, "spec": {"suspend": True}}
    pod = {
        "metadata": {
            "name": "ft-7-node-0-0-x7k2p",
            "namespace": "ml",
            "uid": "u1",
            "deletionTimestamp": "2026-08-21T10:05:30Z",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "ft-7"},
        },
        "spec": {"nodeName": "gpu-n14"},
        "status": {"phase": "Running"},
    }
    node: dict[str, Any] = {
        "metadata": {"name": "gpu-n14"},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }
    if out_of_service:
        node["spec"] = {"taints": [{"key": TAINT_OUT_OF_SERVICE, "value": "nodeshutdown", "effect": "NoExecute"}]}
    evidence = HoldEvidence(jobset, record=recorded(trainjob, 1, "ml/ft-7"), server_now=NOW)
    return trainjob, evidence, [pod], {"gpu-n14": node}


@pytest.mark.parametrize(
    ("example", "out_of_service"),
    [("status-lost-node.txt", False), ("status-out-of-service.txt", True)],
)
def test_status_examples_are_what_dispatch_prints(example: str, out_of_service: bool) -> None:
    status = assess(*lost_node_state(out_of_service=out_of_service), now=NOW)
    printed = render_text(status, created=CREATED, now=NOW)
    assert (EXAMPLES / example).read_text(encoding="utf-8") == printed + "\n"


@pytest.fixture(scope="module")
def kueue_lab() -> Iterator[kubernetes.client.ApiClient]:
    with Lab(speed=0.0) as lab:
        client = kubernetes.config.new_client_from_config(config_file=str(lab.kubeconfig("docs")))
        yield client
        client.close()


def test_kueue_setup_example_is_accepted_by_the_kueue_crds(kueue_lab: kubernetes.client.ApiClient) -> None:
    custom = kubernetes.client.CustomObjectsApi(kueue_lab)
    documents = [d for d in yaml.safe_load_all((EXAMPLES / "kueue-setup.yaml").read_text()) if d]
    assert [d["kind"] for d in documents] == ["AdmissionCheck", "ClusterQueue", "LocalQueue"]
    for document in documents:
        group, version = document["apiVersion"].split("/")
        plural = document["kind"].lower() + "s"
        namespace = document["metadata"].get("namespace")
        if namespace:
            created = custom.create_namespaced_custom_object(group, version, namespace, plural, document)
        else:
            created = custom.create_cluster_custom_object(group, version, plural, document)
        assert created["spec"].items() >= document["spec"].items() or created["kind"] == "ClusterQueue"
    check = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "admissionchecks", "dispatch-drained")
    assert check["spec"]["controllerName"] == "dispatch.phpboyscout.uk/drained"
    queue = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "training")
    assert queue["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"] == "dispatch-drained"
