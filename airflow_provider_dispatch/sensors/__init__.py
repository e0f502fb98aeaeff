"""The sensors: `PodsDrainedSensor` (the previous execution's pods are gone or ceased) and `TrainJobOutcomeSensor`
(the TrainJob finished: Complete or Failed).

Importing this package checks the installed Airflow version (`version_compat.require_supported_airflow`).
"""

from __future__ import annotations

from airflow_provider_dispatch.version_compat import require_supported_airflow

require_supported_airflow()
