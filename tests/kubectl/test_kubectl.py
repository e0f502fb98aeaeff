"""The real kubectl (v1.36.3) against `dispatch lab serve`: apply with server-side field validation, the columns of
`get` and `get -o wide`, `describe`. The expected refusals are the real API server's words (the same manifests
against the real control plane give the same lines: tests/real/test_real_tables.py checks the columns)."""

from __future__ import annotations

from pathlib import Path

from .conftest import KubectlRun, Served

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"

JOB = """\
apiVersion: batch/v1
kind: Job
metadata: {name: %s}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox%s}]
"""


def _header(output: str) -> list[str]:
    """The header line's column names (kubectl separates columns by at least three spaces)."""
    return [cell.strip() for cell in output.splitlines()[0].split("   ") if cell.strip()]


def test_the_quickstart_applies_with_server_side_validation(lab_served: Served, kubectl: KubectlRun) -> None:
    kubeconfig = lab_served.kubeconfigs["admin"]
    manifest = str(EXAMPLES / "quickstart-trainjob.yaml")
    first = kubectl(kubeconfig, "apply", "-f", manifest, "-v=6")
    assert first.returncode == 0, first.stderr
    assert first.stdout == (
        "clustertrainingruntime.trainer.kubeflow.org/torch-distributed created\n"
        "trainjob.trainer.kubeflow.org/quickstart created\n"
    )
    # kubectl found fieldValidation in the lab's OpenAPI v3 and left validation to the server.
    assert "fieldValidation=Strict" in first.stderr
    assert "/openapi/v2" not in first.stderr
    again = kubectl(kubeconfig, "apply", "-f", manifest)
    assert again.returncode == 0, again.stderr
    assert "trainjob.trainer.kubeflow.org/quickstart unchanged" in again.stdout.splitlines()

    shown = kubectl(kubeconfig, "get", "trainjobs")
    assert _header(shown.stdout) == ["NAME", "STATE", "AGE"]
    described = kubectl(kubeconfig, "describe", "trainjob", "quickstart")
    assert described.returncode == 0, described.stderr
    assert "dispatch.phpboyscout.uk/job-id=quickstart" in described.stdout
    explained = kubectl(kubeconfig, "explain", "trainjob.spec.suspend")
    assert explained.returncode == 0, explained.stderr
    assert "FIELD: suspend <boolean>" in explained.stdout


def test_an_unknown_field_is_refused_in_the_real_servers_words(
    lab_served: Served, kubectl: KubectlRun, tmp_path: Path
) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(JOB % ("typo", ", bogus: 1"))
    done = kubectl(lab_served.kubeconfigs["admin"], "apply", "-f", str(manifest))
    assert done.returncode == 1
    assert done.stderr == (
        f'Error from server (BadRequest): error when creating "{manifest}": Job in version "v1" cannot be handled '
        'as a Job: strict decoding error: unknown field "spec.template.spec.containers[0].bogus"\n'
    )
    warned = kubectl(lab_served.kubeconfigs["admin"], "apply", "--validate=warn", "-f", str(manifest))
    assert warned.returncode == 0, warned.stderr
    assert 'Warning: unknown field "spec.template.spec.containers[0].bogus"' in warned.stderr


def test_get_shows_the_real_servers_columns(lab_served: Served, kubectl: KubectlRun, tmp_path: Path) -> None:
    kubeconfig = lab_served.kubeconfigs["admin"]
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB % ("columns", ""))
    assert kubectl(kubeconfig, "apply", "-f", str(manifest)).returncode == 0

    nodes = kubectl(kubeconfig, "get", "nodes")
    assert _header(nodes.stdout) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [line.split()[:3] for line in nodes.stdout.splitlines()[1:]] == [
        [f"node-{index}", "Ready", "<none>"] for index in (1, 2, 3)
    ]
    wide = kubectl(kubeconfig, "get", "nodes", "-o", "wide")
    assert _header(wide.stdout)[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]

    jobs = kubectl(kubeconfig, "get", "jobs", "columns")
    assert _header(jobs.stdout) == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jobs.stdout.splitlines()[1].split()[:3] in (["columns", "Running", "0/1"], ["columns", "Complete", "1/1"])
    wide_jobs = kubectl(kubeconfig, "get", "jobs", "columns", "-o", "wide")
    assert _header(wide_jobs.stdout)[5:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert "batch.kubernetes.io/controller-uid=" in wide_jobs.stdout

    pods = kubectl(kubeconfig, "get", "pods", "-l", "job-name=columns")
    assert pods.returncode == 0, pods.stderr
    assert _header(pods.stdout) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    wide_pods = kubectl(kubeconfig, "get", "pods", "-l", "job-name=columns", "-o", "wide")
    assert _header(wide_pods.stdout)[5:] == ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"]

    events = kubectl(kubeconfig, "get", "events", "-A")
    if events.stdout:
        assert _header(events.stdout) == ["NAMESPACE", "LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]

    for plural, header in (
        ("jobsets", ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]),
        ("workloads", ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]),
    ):
        listed = kubectl(kubeconfig, "get", plural, "-A")
        assert listed.returncode == 0, listed.stderr
        if listed.stdout:
            assert _header(listed.stdout) == ["NAMESPACE", *header]
