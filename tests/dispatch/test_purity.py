"""The rule stays pure: importing it loads no Airflow, no Kubernetes client and no HTTP library."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import airflow_provider_dispatch.dispatch.programs
heavy = sorted(m for m in sys.modules if m.split('.')[0] in
               {'airflow', 'kubernetes', 'kubernetes_asyncio', 'aiohttp', 'urllib3', 'requests', 'http'})
print(','.join(heavy))
"""


def test_importing_the_rule_loads_no_client_and_no_airflow() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
