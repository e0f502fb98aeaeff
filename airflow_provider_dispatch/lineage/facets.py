"""The OpenLineage facets dispatch adds: imported only when the OpenLineage provider is installed (lineage.py).

Custom facets are `attrs` classes deriving from the client's `JobFacet` and `RunFacet`, as the OpenLineage
provider's own (`airflow.providers.openlineage.plugins.facets`) are. They keep the client's default schema URL:
the project publishes no schema of its own, and a facet must not point at an address that does not exist.
"""

from __future__ import annotations

from attrs import define
from openlineage.client.facet_v2 import JobFacet, RunFacet


@define
class TrainJobJobFacet(JobFacet):
    """The TrainJob a task acted on: the job that lineage follows across its submissions and executions."""

    namespace: str
    name: str
    jobId: str


@define
class ExecutionRunFacet(RunFacet):
    """The execution identity the task left (its XCom): submission and admission number of the job."""

    jobId: str
    submission: str
    admission: int
