"""Names, namespaces and label values, refused before they reach a selector or a URL (DESIGN §3.3).

A value that goes into a label selector or a REST path must be exactly one token of its grammar: a TrainJob
name such as `a,b` would otherwise become two selector terms, `x=y` a different selector, and `../` another
path. Each check is the apiserver's own grammar, so anything refused here could not name a real object anyway:

* TrainJob name: RFC 1035 label, the CRD's CEL rules (`^[a-z]([-a-z0-9]*[a-z0-9])?$`, at most 63; k8s-apis
  §1.1);
* namespace: RFC 1123 label (`apimachinery` `IsDNS1123Label`, at most 63);
* label value: `apimachinery` `IsValidLabelValue` (at most 63, `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`);
  job id and submission must moreover be non-empty;
* node and runtime names: RFC 1123 subdomain (`IsDNS1123Subdomain`, at most 253).

Every refusal is an `InvalidNameError` that says what is allowed. Matching uses `re.fullmatch`, so a trailing
newline cannot slip through as `$` would allow.

Operator and sensor parameters are often Jinja templates, checked only once rendered: a template that pulls
nothing renders `None` (native rendering) or the text `"None"` or `""`. Such a value is refused like any other
invalid one, and the message says it looks like a template that rendered nothing (`rendered_nothing`), so a
typo in a `task_ids` never turns into a silently different meaning (issue 17 item 4). Numbers that may be
templated are read by `rendered_integer`: an int, or its decimal text, within bounds (`InvalidParameterError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from airflow_provider_dispatch.dispatch.errors import InvalidNameError, InvalidParameterError

_RFC1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_RFC1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_RFC1123_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_ADMISSION_NUMBER: Final = re.compile(r"0|[1-9][0-9]{0,17}")
_DECIMAL: Final = re.compile(r"[+-]?[0-9]{1,18}")
#: what a template that pulled nothing renders to: None natively, else its text, or nothing at all
_NOTHING: Final = frozenset({"", "None", "null"})

LABEL_MAX: Final = 63
SUBDOMAIN_MAX: Final = 253


def rendered_nothing(value: object) -> str:
    """The hint a message adds when `value` is what a template that pulled nothing renders to, else ""."""
    if value is None or (isinstance(value, str) and value.strip() in _NOTHING):
        return (
            f" ({value!r} is what a template renders when it pulls nothing, e.g. an XCom of a task id that does not "
            "exist: check the template)"
        )
    return ""


def _check(value: object, pattern: re.Pattern[str], limit: int, what: str, allowed: str, ref: str | None) -> str:
    if not isinstance(value, str):
        raise InvalidNameError(
            f"{what} must be a string, not {type(value).__name__}{rendered_nothing(value)}; {allowed}", ref=ref
        )
    if not value:
        raise InvalidNameError(f"{what} is empty{rendered_nothing(value)}; {allowed}", ref=ref)
    if len(value) > limit:
        raise InvalidNameError(f"{what} {value[:80]!r} is {len(value)} characters long; {allowed}", ref=ref)
    if pattern.fullmatch(value) is None:
        raise InvalidNameError(f"{what} {value[:80]!r} is not allowed{rendered_nothing(value)}; {allowed}", ref=ref)
    return value


def validate_trainjob_name(name: object, *, ref: str | None = None) -> str:
    return _check(
        name,
        _RFC1035_LABEL,
        LABEL_MAX,
        "TrainJob name",
        "a TrainJob name is an RFC 1035 label: at most 63 lowercase letters, digits and '-', starting with a "
        "letter and ending with a letter or digit",
        ref,
    )


def validate_namespace(namespace: object, *, ref: str | None = None) -> str:
    return _check(
        namespace,
        _RFC1123_LABEL,
        LABEL_MAX,
        "namespace",
        "a namespace is an RFC 1123 label: at most 63 lowercase letters, digits and '-', starting and ending "
        "with a letter or digit",
        ref,
    )


def validate_label_value(value: object, what: str, *, ref: str | None = None) -> str:
    """A non-empty label value (the empty value is valid for Kubernetes but names nothing for dispatch)."""
    return _check(
        value,
        _LABEL_VALUE,
        LABEL_MAX,
        what,
        f"{what} must be a label value: at most 63 letters, digits, '-', '_' and '.', starting and ending "
        "with a letter or digit",
        ref,
    )


def validate_job_id(value: object, *, ref: str | None = None) -> str:
    return validate_label_value(value, "job id", ref=ref)


def validate_submission(value: object, *, ref: str | None = None) -> str:
    return validate_label_value(value, "submission", ref=ref)


def validate_node_name(name: object, *, ref: str | None = None) -> str:
    return _check(
        name,
        _RFC1123_SUBDOMAIN,
        SUBDOMAIN_MAX,
        "node name",
        "a node name is an RFC 1123 subdomain: at most 253 lowercase letters, digits, '-' and '.'",
        ref,
    )


def validate_runtime_name(name: object, *, ref: str | None = None) -> str:
    return _check(
        name,
        _RFC1123_SUBDOMAIN,
        SUBDOMAIN_MAX,
        "runtime name",
        "a runtime name is an RFC 1123 subdomain: at most 253 lowercase letters, digits, '-' and '.'",
        ref,
    )


def parse_admission_number(value: object, *, ref: str | None = None) -> int:
    """The admission number A as the annotation carries it: decimal, non-negative, no sign or padding."""
    if isinstance(value, str) and _ADMISSION_NUMBER.fullmatch(value):
        return int(value)
    raise InvalidNameError(
        f"admission number {str(value)[:40]!r} is not allowed; it is a decimal non-negative integer "
        "without sign or leading zeros",
        ref=ref,
    )


def rendered_integer(
    value: object, what: str, *, minimum: int, maximum: int | None = None, ref: str | None = None
) -> int:
    """A number parameter as rendered: an int (not a bool), or its decimal text, from `minimum` to `maximum`."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = int(value.strip())
    within = number is not None and number >= minimum and (maximum is None or number <= maximum)
    if number is None or not within:
        bounds = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
        shown = str(value)[:80] if isinstance(value, str) else value
        raise InvalidParameterError(
            f"{what} must be an integer {bounds}, not {shown!r}{rendered_nothing(value)}; nothing was read or written",
            ref=ref,
        )
    return number


@dataclass(frozen=True)
class Ref:
    """A TrainJob reference, `namespace/name`, with both parts validated."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        text = f"{self.namespace}/{self.name}"
        validate_namespace(self.namespace, ref=text)
        validate_trainjob_name(self.name, ref=text)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_ref(text: object) -> Ref:
    """`"namespace/name"` to a `Ref`; anything else (no slash, two slashes, bad parts) is refused."""
    if isinstance(text, Ref):
        return text
    if not isinstance(text, str) or text.count("/") != 1:
        raise InvalidNameError(
            f"TrainJob reference {str(text)[:80]!r} is not allowed; write it as namespace/name, for example ml/ft-7",
            ref=str(text)[:80],
        )
    namespace, name = text.split("/")
    return Ref(namespace, name)
