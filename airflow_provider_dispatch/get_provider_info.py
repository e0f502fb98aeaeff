"""The `apache_airflow_provider` entry point: what Airflow's provider manager shows for this package.

`package-name` must equal the distribution's canonical name, or Airflow's provider discovery raises for every
provider (research airflow.md section 1). The `kubernetes` connection type is reused from cncf-kubernetes and is
deliberately not declared here: two providers declaring one type make one of them lose.

The integration's `how-to-guide` lists pages of this repository's docs/ in the form ASF providers use
(`/docs/...`, provider.yaml's schema); each must exist (tests/airflow/test_airflow_hooks.py). There is no
`external-doc-url` and no logo: the project has no public address yet, and none is invented.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_dispatch import __version__

INTEGRATION = "Kubeflow Trainer (dispatch)"
#: the how-to guides of the integration, as paths of the repository (its Sphinx site's sources)
HOW_TO_GUIDES = ("/docs/quickstart.md", "/docs/airflow.rst", "/docs/kueue.md", "/docs/runbook.md")


def get_provider_info() -> dict[str, Any]:
    """Return the provider's metadata; imported by Airflow without importing any operator."""
    return {
        "package-name": "airflow-provider-dispatch",
        "name": "Dispatch",
        "description": (
            "Restart Kubeflow Trainer v2 TrainJobs, plainly or under Kueue, and never admit a new execution "
            "while any pod of the previous one may still run."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "how-to-guide": list(HOW_TO_GUIDES),
                "tags": ["software"],
            }
        ],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": ["airflow_provider_dispatch.hooks.dispatch"]}],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_dispatch.operators.trainjob",
                    "airflow_provider_dispatch.operators.restarts",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_dispatch.sensors.pods_drained",
                    "airflow_provider_dispatch.sensors.trainjob_outcome",
                ],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_provider_dispatch.triggers.pods_drained",
                    "airflow_provider_dispatch.triggers.trainjob_outcome",
                ],
            }
        ],
    }
