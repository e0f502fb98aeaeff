"""What the simulated controllers are given, and how the lab runs them.

A controller is anything with a `name` and an `async run()` that works until cancelled. It is built by a
factory from a `ClusterContext`: the lab's URL and a token to reach its API (controllers use the API like real
ones, never the store), the lab clock for every timer, and the admission chain where a controller registers its
webhooks. The lab runs each controller as a background task and cancels them when it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from airflow_provider_dispatch_lab.apiserver.registry.admission import AdmissionChain
from airflow_provider_dispatch_lab.client import LabClient
from airflow_provider_dispatch_lab.clock import LabClock
from airflow_provider_dispatch_lab.truth.overlap import AdmissionLedger


class Controller(Protocol):
    name: str

    async def run(self) -> None: ...


@dataclass
class ClusterContext:
    url: str
    clock: LabClock
    admission: AdmissionChain
    token: str
    ledger: AdmissionLedger | None = None
    """The lab's ground truth of admissions, for the overlap recorder (not for simulated controllers to read)."""
    ca_file: str | None = None
    """The CA bundle of an https API server (the real control plane); None for the lab's plain HTTP."""

    def client(self, user_agent: str) -> LabClient:
        """A client of the lab's API as the controllers' identity; the caller closes it."""
        return LabClient(self.url, self.token, user_agent=user_agent, ca_file=self.ca_file)


ControllerFactory = Callable[[ClusterContext], Controller]
