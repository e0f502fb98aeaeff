"""Server-side field validation (`fieldValidation=Ignore|Warn|Strict`) of a create or an update.

What kubectl relies on once the OpenAPI document says the server validates (`lab.apiserver.openapi`): it sends
`fieldValidation=Strict` and no longer checks fields itself. The apiserver decodes the body strictly
(`apiserver/pkg/endpoints/handlers/create.go`, `update.go`): an unknown field is, under `Strict`, a 400
`<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: unknown field "spec.x"`
(`rest.go` `transformDecodeError`, `runtime.NewStrictDecodingError`); under `Warn`, the default when the parameter
is absent (`rest.go` `fieldValidation`), one `Warning` header per field; under `Ignore`, nothing. The fields are
those the schema drops (decoding into the Go types, or structural pruning for a CRD), with list items as `[i]`.
"""

from __future__ import annotations

import copy
from typing import Any

from airflow_provider_dispatch_lab.apiserver import errors
from airflow_provider_dispatch_lab.apiserver.registry.resources import ResourceType

DIRECTIVES = ("Ignore", "Warn", "Strict")


def directive(value: str | None) -> str:
    """The directive of a request; absent is `Warn`. Anything else is refused before the body is read."""
    if not value:
        return "Warn"
    if value not in DIRECTIVES:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"'
        )
    return value


def _dropped(before: Any, after: Any, path: str, found: list[str]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            child = f"{path}.{key}" if path else str(key)
            if key not in after:
                found.append(child)
            else:
                _dropped(value, after[key], child, found)
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            _dropped(old, new, f"{path}[{index}]", found)


def unknown_fields(resource: ResourceType, obj: dict[str, Any]) -> list[str]:
    """The paths of the fields the schema would drop from `obj`, sorted."""
    pruned = copy.deepcopy(obj)
    resource.schema.prune(pruned)
    found: list[str] = []
    _dropped(obj, pruned, "", found)
    return sorted(found)


def check(resource: ResourceType, obj: dict[str, Any], validation: str) -> list[str]:
    """Raise the strict decoding error, or return the warnings to send (none under `Ignore`)."""
    if validation == "Ignore":
        return []
    fields = unknown_fields(resource, obj)
    sentences = [f'unknown field "{field}"' for field in fields]
    if sentences and validation == "Strict":
        kind = resource.kind
        raise errors.bad_request(
            f'{kind} in version "{resource.version}" cannot be handled as a {kind}: strict decoding error: '
            + ", ".join(sentences)
        )
    return sentences


def warning_headers(sentences: list[str]) -> list[tuple[str, str]]:
    """`Warning: 299 - "<text>"` headers (RFC 7234, as `apiserver/pkg/warning` writes them)."""
    return [("Warning", '299 - "' + sentence.replace("\\", "\\\\").replace('"', '\\"') + '"') for sentence in sentences]
