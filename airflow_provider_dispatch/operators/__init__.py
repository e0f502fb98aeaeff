"""The TrainJob operators: hold, release and open (`operators.trainjob`).

Importing this package checks the installed Airflow version (`version_compat.require_supported_airflow`).
"""

from __future__ import annotations

from airflow_provider_dispatch.version_compat import require_supported_airflow

require_supported_airflow()
