"""OpenLineage facets of the TrainJob operators, when the OpenLineage provider is installed; None otherwise.

Airflow's OpenLineage listener calls `get_openlineage_facets_on_complete(task_instance)` on an operator after it
succeeded, in the worker, if the provider is installed (the `apache-airflow-providers-openlineage` extractor
contract; the SQL operators of common-sql implement it the same way). The operators answer with:

* job facet `dispatch_trainjob`: the TrainJob (namespace, name, job id), the job lineage follows;
* run facet `dispatch_execution`: the execution identity the task returned as its XCom (job id, submission,
  admission).

Without the provider (or its client) the import fails and the answer is None: nothing is emitted and nothing is
logged above debug, so a worker without OpenLineage sees no difference.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow_provider_dispatch.dispatch.validation import Ref

log = logging.getLogger(__name__)

JOB_FACET = "dispatch_trainjob"
RUN_FACET = "dispatch_execution"


def trainjob_lineage(ref: Ref, task_instance: Any) -> Any:
    """The `OperatorLineage` of a task that acted on TrainJob `ref`, from the execution it returned, or None.

    None when the OpenLineage provider is not installed (then `task_instance` is not touched), or when the task
    returned no execution identity.
    """
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage

        from airflow_provider_dispatch.lineage.facets import ExecutionRunFacet, TrainJobJobFacet
    except ImportError:
        log.debug("OpenLineage is not installed: no lineage facets")
        return None
    execution = task_instance.xcom_pull(task_ids=task_instance.task_id, map_indexes=task_instance.map_index)
    if not isinstance(execution, Mapping) or not {"job_id", "submission", "admission"} <= execution.keys():
        return None
    job_id = str(execution["job_id"])
    return OperatorLineage(
        job_facets={JOB_FACET: TrainJobJobFacet(namespace=ref.namespace, name=ref.name, jobId=job_id)},
        run_facets={
            RUN_FACET: ExecutionRunFacet(
                jobId=job_id, submission=str(execution["submission"]), admission=int(execution["admission"])
            )
        },
    )
