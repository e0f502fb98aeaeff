"""Where the lab finds the production manifests it applies: deploy/, the one copy.

dispatch's ClusterRoles live in the repository's `deploy/rbac/dispatch-clusterroles.yaml`, where an operator
finds what to apply to a cluster; the lab applies the same file when it starts with RBAC (and the real control
plane of `lab/real` too), so the roles a cluster gets are the roles the tests exercise. The wheel carries
`deploy/rbac/` as `airflow_provider_dispatch/deploy/rbac/` (pyproject's hatch `force-include`, as for the example
DAGs); a source checkout (an editable install) has no such copy and reads the checkout's `deploy/`, next to the
package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import airflow_provider_dispatch

CLUSTER_ROLES: Final = "rbac/dispatch-clusterroles.yaml"
"""dispatch's five ClusterRoles (writer, reader, node reader, fence reader, admission controller), relative to
deploy/."""


def deploy_file(relative: str) -> Path:
    """`deploy/<relative>`: the wheel's copy inside the package, else the checkout's; FileNotFoundError if neither
    exists (an installation built without it)."""
    package = Path(airflow_provider_dispatch.__file__).resolve().parent
    candidates = (package / "deploy" / relative, package.parent / "deploy" / relative)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"deploy/{relative} is in neither {candidates[0]} nor {candidates[1]}")


__all__ = ["CLUSTER_ROLES", "deploy_file"]
