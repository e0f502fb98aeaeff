"""What the browser test's fixtures hand it: the lab's handles, and the folder of artifacts it leaves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import kubernetes

from airflow_provider_dispatch.lab.runtime import Lab
from airflow_provider_dispatch.lab.scenario.scenario import Scenario


@dataclass
class Artifacts:
    """The folder the browser test writes to, and what it wrote (listed in the terminal summary)."""

    root: Path
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def path(self, name: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def keep(self, path: Path) -> Path:
        self.written.append(path)
        print(f"browser test artifact: {path}")
        return path


@dataclass
class DrillLab:
    lab: Lab
    scenario: Scenario
    kubeconfigs: dict[str, Path]

    def admin(self) -> kubernetes.client.ApiClient:
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfigs["admin"]))


__all__ = ["Artifacts", "DrillLab"]
