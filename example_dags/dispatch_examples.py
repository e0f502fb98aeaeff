"""What the example DAGs share: the connection, the retry defaults, the DAG frame and the TrainJob they open.

The DAGs beside this file import it by name: Airflow puts a DAG bundle's folder on `sys.path` when it parses a
DAG file or runs its tasks, so a module next to the DAGs is importable from them. Copying an example DAG into
another DAG folder, copy this file along. It defines no DAG: the DAG processor parses it and finds none.

Each DAG still says in full what it runs: its params, its tasks and their options. Only what would be the same
in every one of them is here.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param

#: dispatch's operators and sensors do not template their connection id, so it is fixed here
KUBERNETES_CONN_ID = "kubernetes_default"
#: a 409 (Trainer writing the TrainJob's status between dispatch's read and its admitting write) is retryable:
#: the next try checks again. Refusals (AirflowFailException) are never retried.
DEFAULT_ARGS = {"retries": 3, "retry_delay": timedelta(seconds=5)}
#: the run's TrainJob, as the templated fields of dispatch's operators and sensors take it: from the params
NAMESPACE = "{{ params.namespace }}"
NAME = "{{ params.name }}"

_TRAINJOB = string.Template(
    """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: "$name"
  namespace: "{{ params.namespace }}"
  labels:
$labels
spec:
  runtimeRef:
    name: "{{ params.runtime }}"
    apiGroup: trainer.kubeflow.org
    kind: ClusterTrainingRuntime
  trainer:
    numNodes: {{ params.num_nodes }}
"""
)


def example_dag(
    dag_id: str,
    doc_md: str | None,
    *,
    params: Mapping[str, Param],
    tags: tuple[str, ...] = (),
    schedule: str | None = None,
) -> DAG:
    """A DAG that runs when triggered (or on `schedule`, a cron expression; no catch-up) with the retry defaults
    above, tagged `dispatch` and `example` (and `tags`); `params` are what a run is triggered with."""
    return DAG(
        dag_id,
        schedule=schedule,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        default_args=DEFAULT_ARGS,
        tags=["dispatch", "example", *tags],
        doc_md=doc_md,
        params=dict(params),
    )


def runtime_param() -> Param:
    """The param `runtime`: the ClusterTrainingRuntime the TrainJob runs (the lab's default one)."""
    return Param("torch-distributed", type="string", description="ClusterTrainingRuntime to run.")


def trainjob_manifest(
    *, name: str = NAME, submission: str | None = "1", labels: Mapping[str, str] | None = None
) -> str:
    """The TrainJob a DAG opens, as YAML templated on the params: named `name`, in the namespace `namespace`, of
    job id `name` and submission `submission` (dispatch's labels, which make it an object of dispatch), running
    `num_nodes` pods of the runtime `runtime`. `labels` go after dispatch's two (Kueue's queue name, say).
    `submission` None: no submission label (the restart operator numbers the submissions itself)."""
    numbered = {} if submission is None else {"dispatch.phpboyscout.uk/submission": submission}
    every = {"dispatch.phpboyscout.uk/job-id": NAME, **numbered, **(labels or {})}
    lines = "\n".join(f'    {key}: "{value}"' for key, value in every.items())
    return _TRAINJOB.substitute(name=name, labels=lines)
