"""Environment variables set for the child processes a benchmark starts (the lab, its workers), then restored.

The lab process and every worker inherit the driver's environment (`workers.python_env`), so a setting they
need (where the lab clock probe writes its URL, an isolated `AIRFLOW_HOME`) is passed by setting it around
their start, never left behind in the driver's process for whatever runs next (a test session).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def scoped_env(**variables: str) -> Iterator[None]:
    """Set `variables` in `os.environ` inside the block; restore each one's previous value (or absence) after."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
