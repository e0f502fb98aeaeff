"""Airflow version flags for the Airflow layer, and the import-time guard of its packages.

Copied in the style of the official providers' `version_compat.py` (each provider keeps its own copy rather than
importing another provider's): `AIRFLOW_V_3_x_PLUS` compare the installed Airflow's base version. The flags
that matter here: 3.3 brought the task state store (`context["task_state_store"]`, AIP-103), which the
release operator uses to keep the execution identity across retries; below 3.3 it is skipped.

`require_supported_airflow()` is what `hooks`, `operators`, `sensors` and `triggers` call when imported, as
each ASF provider's `__init__.py` does: an Airflow older than `MINIMUM_AIRFLOW` fails at import with a clear
message instead of deep inside a task. The top-level package does not call it, so the rule and the lab stay
importable without Airflow.
"""

from __future__ import annotations

from typing import Final


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    from airflow import __version__
    from packaging.version import Version

    airflow_version = Version(__version__)
    return airflow_version.major, airflow_version.minor, airflow_version.micro


#: the oldest Airflow this provider is tested on (pyproject's `apache-airflow>=3.3`; docs/airflow.rst, "Airflow
#: versions", says what 3.1.0 and 3.2.0 did)
MINIMUM_AIRFLOW: Final = (3, 3, 0)

AIRFLOW_V_3_0_PLUS: Final = get_base_airflow_version_tuple() >= (3, 0, 0)
AIRFLOW_V_3_1_PLUS: Final = get_base_airflow_version_tuple() >= (3, 1, 0)
AIRFLOW_V_3_2_PLUS: Final = get_base_airflow_version_tuple() >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS: Final = get_base_airflow_version_tuple() >= (3, 3, 0)
AIRFLOW_V_3_4_PLUS: Final = get_base_airflow_version_tuple() >= (3, 4, 0)


def require_supported_airflow(found: tuple[int, int, int] | None = None) -> None:
    """Raise RuntimeError when the installed Airflow (or `found`) is older than `MINIMUM_AIRFLOW`."""
    found = found if found is not None else get_base_airflow_version_tuple()
    if found < MINIMUM_AIRFLOW:
        wanted = ".".join(map(str, MINIMUM_AIRFLOW))
        raise RuntimeError(
            f"airflow-provider-dispatch needs Apache Airflow {wanted}+, but Airflow "
            f"{'.'.join(map(str, found))} is installed."
        )


__all__ = [
    "AIRFLOW_V_3_0_PLUS",
    "AIRFLOW_V_3_1_PLUS",
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AIRFLOW_V_3_4_PLUS",
    "MINIMUM_AIRFLOW",
    "get_base_airflow_version_tuple",
    "require_supported_airflow",
]
