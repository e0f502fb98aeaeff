"""OpenLineage: the operators' facets as the OpenLineage provider's extractor reads them, and none without it.

The hold runs for real (`dag.test()` against the lab) and leaves its XCom; the provider's `DefaultExtractor`
then asks the operator for its facets with that run's task instance, as the listener does on the worker after a
success. Without the provider, the operator answers None without touching the task instance: a fresh
interpreter where the provider's package cannot be imported shows it (the wheel test shows it with the provider
not installed at all, tests/test_lean_install.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from airflow.providers.openlineage.extractors.base import DefaultExtractor
from airflow_lab import RunDag
from dispatch_lab.cluster import Cluster

from airflow_provider_dispatch.lineage.facets import ExecutionRunFacet, TrainJobJobFacet
from airflow_provider_dispatch.lineage.trainjob import JOB_FACET, RUN_FACET
from airflow_provider_dispatch.operators.trainjob import TrainJobHoldOperator

pytestmark = pytest.mark.airflow

ROOT = Path(__file__).resolve().parents[2]


def test_a_hold_gives_the_trainjob_as_the_job_and_the_execution_as_a_run_facet(
    cluster: Cluster, run_dag: RunDag
) -> None:
    cluster.trainjob("ft-7", runtime=cluster.runtime(), admission=3, suspend=False)
    result = run_dag("dispatch_hold", namespace=cluster.namespace, name="ft-7")
    assert result.state == "success"
    operator = TrainJobHoldOperator(task_id="hold", namespace=cluster.namespace, name="ft-7")

    lineage = DefaultExtractor(operator).extract_on_complete(result._ti("hold"))

    assert lineage is not None
    assert lineage.job_facets == {JOB_FACET: TrainJobJobFacet(namespace=cluster.namespace, name="ft-7", jobId="ft-7")}
    assert lineage.run_facets == {RUN_FACET: ExecutionRunFacet(jobId="ft-7", submission="1", admission=3)}
    assert (lineage.inputs, lineage.outputs) == ([], [])


def test_without_the_openlineage_provider_there_are_no_facets() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["airflow.providers.openlineage.extractors"] = None  # as if not installed: importing it fails
        from airflow_provider_dispatch.operators.trainjob import TrainJobHoldOperator
        operator = TrainJobHoldOperator(task_id="hold", namespace="ml", name="ft-7")
        print(operator.get_openlineage_facets_on_complete(object()))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "None"
