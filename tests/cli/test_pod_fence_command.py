"""`dispatch pod-fence` and the file a production install applies (deploy/pod-fence/pod-fence.yaml, also the Helm
chart's, through its files/ link): the same two objects, dispatch's own (fence.py), so that an install from
either passes dispatch's check that the fence is its own."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from airflow_provider_dispatch.cli.commands import main
from airflow_provider_dispatch.dispatch.fence import (
    FenceState,
    binding_differences,
    judge_fence,
    manifests,
    policy_differences,
)

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "pod-fence" / "pod-fence.yaml"
CHART_COPY = ROOT / "deploy" / "helm" / "dispatch-admission-controller" / "files" / "pod-fence.yaml"


def test_the_command_prints_the_shipped_file_and_both_are_dispatchs_fence() -> None:
    printed = CliRunner().invoke(main, ["pod-fence"])
    assert printed.exit_code == 0, printed.output
    shipped = SHIPPED.read_text()
    # the file is the command's output under a comment that says where it comes from
    assert shipped.endswith(printed.output)
    policy, binding = yaml.safe_load_all(shipped)
    assert [policy, binding] == list(manifests())
    assert policy_differences(policy) == []
    assert binding_differences(binding) == []
    stored = [
        {**obj, "metadata": {**obj["metadata"], "uid": f"u{i}", "generation": 1}}
        for i, obj in enumerate((policy, binding))
    ]
    assert judge_fence(stored[0], stored[1]).state is FenceState.IN_FORCE


def test_the_chart_reads_the_same_file() -> None:
    assert CHART_COPY.resolve() == SHIPPED.resolve()
