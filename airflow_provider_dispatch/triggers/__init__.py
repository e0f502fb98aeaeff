"""The triggers the deferrable operators and sensors wait on, and the per-event-loop hub that lets every trigger in a
triggerer share one client per connection and one watch per namespace.

Importing this package checks the installed Airflow version (`version_compat.require_supported_airflow`).
"""

from __future__ import annotations

from airflow_provider_dispatch.version_compat import require_supported_airflow

require_supported_airflow()
