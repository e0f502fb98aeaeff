"""The Airflow layer's hooks: `DispatchHook` (sync, for operators and sensors) and `AsyncDispatchHook` (triggers),
both on the cncf-kubernetes `kubernetes` connection; and the one mapping from dispatch errors to Airflow exceptions.

Importing this package checks the installed Airflow version (`version_compat.require_supported_airflow`).
"""

from __future__ import annotations

from airflow_provider_dispatch.version_compat import require_supported_airflow

require_supported_airflow()
