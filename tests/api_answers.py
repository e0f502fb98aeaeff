"""The API's answers in assertions: check an answer's code (and reason), and when it is not the one expected, fail
with the whole answer: code, reason, message, details.

A bare `assert raised.value.status == 422` that fails says only `409 == 422`: not who refused, nor why (a
webhook that timed out, a concurrent write, an authorizer that has not seen a binding yet), which is what a
failure on a loaded CI machine must tell. So every test that asserts what the API answered goes through
`expect_answer`:

    with pytest.raises(ApiException) as refused:
        custom.replace_namespaced_custom_object(...)
    status = expect_answer(refused.value, 422, "Invalid")   # the decoded Status, for the checks that follow

It takes the official clients' `ApiException` (`kubernetes` and `kubernetes_asyncio`), an answer read by hand as
`(code, body)` (a raw HTTP status and its decoded or undecoded body), or the lab's own error objects (`code`,
`reason`, `message`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Answer:
    """What the API answered: the HTTP code, and the Status body's reason and message where there is one."""

    code: int | None
    reason: str = ""
    message: str = ""
    status: dict[str, Any] = field(default_factory=dict)
    body: str = ""

    def __str__(self) -> str:
        text = f"{self.code} {self.reason or '(no reason)'}: {self.message or '(no message)'}"
        details = self.status.get("details")
        if details:
            text += f"\n  details: {json.dumps(details, sort_keys=True)}"
        if not self.status and self.body:
            text += f"\n  body: {self.body[:2000]}"
        return text


def _decoded(body: Any) -> tuple[dict[str, Any], str]:
    """The body as a Status (or any JSON object), and as text."""
    if isinstance(body, dict):
        return body, json.dumps(body)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = "" if body is None else str(body)
    try:
        decoded = json.loads(text)
    except ValueError:
        return {}, text
    return (decoded if isinstance(decoded, dict) else {}), text


def answer_of(answer: Any) -> Answer:
    """The answer of an `ApiException`, a `(code, body)` pair or an object with `code`/`reason`/`message`."""
    if isinstance(answer, Answer):
        return answer
    if isinstance(answer, tuple) and len(answer) == 2:
        code, body = answer
        status, text = _decoded(body)
        return Answer(code, str(status.get("reason", "")), str(status.get("message", "")), status, text)
    if hasattr(answer, "status") and hasattr(answer, "body"):  # ApiException, sync or async client
        status, text = _decoded(answer.body)
        reason = str(status.get("reason") or getattr(answer, "reason", "") or "")
        return Answer(answer.status, reason, str(status.get("message", "")), status, text)
    if hasattr(answer, "code"):  # the lab's ApiError (its Status from `status()`) and the like
        status = answer.status() if callable(getattr(answer, "status", None)) else {}
        reason, message = str(getattr(answer, "reason", "") or ""), str(getattr(answer, "message", "") or "")
        return Answer(answer.code, reason, message, status if isinstance(status, dict) else {})
    raise TypeError(f"not an API answer: {answer!r}")


def expect_answer(answer: Any, code: int, reason: str | None = None) -> dict[str, Any]:
    """Check the answer's code, and its reason when one is given; fail showing the whole answer otherwise.
    Returns the decoded Status body ({} when there was none)."""
    got = answer_of(answer)
    if got.code != code or (reason is not None and got.reason != reason):
        wanted = f"{code} {reason}" if reason is not None else str(code)
        raise AssertionError(f"expected the API to answer {wanted}; it answered {got}")
    return got.status


__all__ = ["Answer", "answer_of", "expect_answer"]
