"""How a controller-runtime webhook's denial reaches the client, through the apiserver.

Trainer's validators (and JobSet's up to v0.11) return a `field.ErrorList` aggregate (`errs.ToAggregate()`),
which is not an `APIStatus`, so controller-runtime answers `admission.Denied(err.Error())`
(`controller-runtime:pkg/webhook/admission/validator_custom.go` `Handle`). `Denied` is
`ValidationResponse(false, message)`: `Result{Code: 403, Reason: Forbidden, Message: message}`
(`pkg/webhook/admission/response.go`, v0.15 onwards). The apiserver turns that into the client's Status with
`webhookerrors.ToStatusErr` (`apiserver/pkg/admission/plugin/webhook/errors/statuserror.go`): code and
reason kept, status `Failure`, message prefixed `admission webhook "<name>" denied the request: `.

Field errors print as `field.Error.Error()` (`apimachinery/pkg/util/validation/field/errors.go`):
`<path>: Forbidden: <detail>` and `<path>: Invalid value: <value>: <detail>`; an aggregate of one error is
that error's text, of several `[a, b]` with duplicates dropped (`util/errors/errors.go` `aggregate.Error`).
A struct or list value is rendered as JSON (`ErrorBody`: `json.Marshal`, `%#v` only if that fails), in the Go
struct's field order; the lab sorts the keys, which is the one place its text differs.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_dispatch_lab.apiserver.errors import ApiError, aggregate


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: {invalid_body(value, detail)}"


def invalid_body(value: Any, detail: str) -> str:
    """`field.Error.ErrorBody()` of an Invalid error: `Invalid value: <value>: <detail>`."""
    if isinstance(value, str):
        shown = json.dumps(value)
    elif isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, int | float):
        shown = str(value)
    elif value is None:
        shown = "null"
    else:
        shown = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return f"Invalid value: {shown}: {detail}"


def denied(webhook: str, messages: list[str]) -> ApiError:
    """The 403 a client sees when `webhook` denies with these field errors."""
    return ApiError(403, "Forbidden", f'admission webhook "{webhook}" denied the request: {aggregate(messages)}')
