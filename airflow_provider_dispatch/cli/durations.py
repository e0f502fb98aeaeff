"""kubectl's durations for timeouts: `5s`, `1m30s`, `500ms`, or a bare number of seconds.

`parse_timeout` reads what `--request-timeout` takes exactly as kubectl reads it: client-go's
`clientcmd.ParseTimeout` (k8s.io/client-go/tools/clientcmd/helpers.go), which accepts a non-negative integer as
seconds, else anything Go's `time.ParseDuration` accepts (a sequence of decimal numbers, each with a unit
`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`, optionally signed: `1h2m3.5s`, `.5s`). `0.5` (no unit) and `2d`
are refused, as kubectl refuses them. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Final

#: client-go's message, word for word, so a person who knows kubectl's error recognises it
INVALID_TIMEOUT: Final = (
    "Invalid timeout value. Timeout must be a single integer in seconds, or an integer followed by a "
    "corresponding time unit (e.g. 1s | 2m | 3h)"
)

#: Go's time.ParseDuration units, in seconds
_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,  # U+00B5 micro sign
    "\u03bcs": 1e-6,  # U+03BC Greek letter mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
#: one element of a Go duration: digits with an optional fraction (at least one digit overall), then a unit
_ELEMENT: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]+)")


def _go_duration(text: str) -> float | None:
    """Go's `time.ParseDuration` in seconds, or None where Go answers an error."""
    sign = -1.0 if text.startswith("-") else 1.0
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    if not body:
        return None
    total = 0.0
    position = 0
    while position < len(body):
        match = _ELEMENT.match(body, position)
        if match is None:
            return None
        whole, fraction, unit = match.groups()
        if not whole and not fraction:  # "." or a unit alone
            return None
        if unit not in _UNITS:
            return None
        total += float(f"{whole or '0'}.{fraction or '0'}") * _UNITS[unit]
        position = match.end()
    return sign * total


def parse_timeout(text: str) -> float:
    """Seconds, as client-go's `ParseTimeout` reads `text`; ValueError (its message) where kubectl refuses it."""
    if _INTEGER.fullmatch(text) and int(text) >= 0:
        return float(int(text))
    seconds = _go_duration(text)
    if seconds is None:
        raise ValueError(INVALID_TIMEOUT)
    return seconds


__all__ = ["INVALID_TIMEOUT", "parse_timeout"]
