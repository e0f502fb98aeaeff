"""Resource quantities (`apimachinery/pkg/api/resource/quantity.go`) and what a pod requests.

`parse_quantity` reads the canonical forms the API accepts: a decimal number with an optional binary suffix
(Ki, Mi, Gi, Ti, Pi, Ei), decimal suffix (n, u, m, k, M, G, T, P, E) or exponent (`1e3`). It raises ValueError on
anything else, so a bad value is reported rather than read as zero.

`pod_requests` is the scheduler's view of a pod's requests (`component-helpers/resource/helpers.go`
`PodRequests`, without pod overhead or in-place resize): per resource, the larger of the sum over the containers
and the largest init container. A container's limit stands in for a request it does not state, as the API's
defaulting does (`pkg/apis/core/v1/defaults.go` `SetDefaults_Pod`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

_SUFFIXES = {
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$")


def parse_quantity(value: Any) -> Decimal:
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if not match:
        raise ValueError(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', "
            f"not {value!r}"
        )
    number, exponent, suffix = match.groups()
    try:
        base = Decimal(number)
    except InvalidOperation as error:  # pragma: no cover - the regular expression admits only numbers
        raise ValueError(f"not a quantity: {value!r}") from error
    if exponent:
        return base * (Decimal(10) ** int(exponent[1:]))
    return base * _SUFFIXES[suffix or ""]


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    requests = dict(resources.get("requests") or {})
    for name, limit in (resources.get("limits") or {}).items():
        requests.setdefault(name, limit)
    return {str(name): parse_quantity(amount) for name, amount in requests.items()}


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or ():
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or ():
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total
