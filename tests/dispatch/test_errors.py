"""Errors and the mapping of API failures to them (DESIGN §5)."""

from __future__ import annotations

import pickle

import pytest

from airflow_provider_dispatch.dispatch.blocking import remaining_pods
from airflow_provider_dispatch.dispatch.errors import (
    ConflictError,
    DispatchError,
    ForbiddenError,
    NotFoundError,
    PodsRemainError,
    RefusedError,
    SpecRejectedError,
    SuspensionNotObservedError,
    UnreachableError,
    classify_api_failure,
    scrub,
)

from .support import node, pod, status_body


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (None, "", UnreachableError),
        (500, "InternalError", UnreachableError),
        (502, "", UnreachableError),
        (503, "ServiceUnavailable", UnreachableError),
        (504, "Timeout", UnreachableError),
        (408, "Timeout", UnreachableError),
        (429, "TooManyRequests", UnreachableError),
        (410, "Expired", UnreachableError),
        (409, "Conflict", ConflictError),
        (404, "NotFound", NotFoundError),
        (403, "Forbidden", ForbiddenError),
        (401, "Unauthorized", ForbiddenError),
        (422, "Invalid", SpecRejectedError),
        (400, "BadRequest", SpecRejectedError),
        (405, "MethodNotAllowed", RefusedError),
        (302, "", UnreachableError),
    ],
)
def test_classification(code: int | None, reason: str, expected: type[DispatchError]) -> None:
    error = classify_api_failure(
        code, status_body(code or 0, reason, "msg"), "ml/ft-7", "get", "trainjobs.trainer.kubeflow.org"
    )
    assert type(error) is expected
    assert error.ref == "ml/ft-7"
    assert "ml/ft-7" in str(error)
    assert error.retryable is issubclass(expected, UnreachableError)


def test_family_tree() -> None:
    assert issubclass(ConflictError, UnreachableError)
    assert issubclass(SuspensionNotObservedError, UnreachableError)
    assert issubclass(PodsRemainError, UnreachableError)
    for refusal in (NotFoundError, ForbiddenError, SpecRejectedError):
        assert issubclass(refusal, RefusedError)
        assert not refusal.retryable


def test_forbidden_names_the_missing_permission() -> None:
    error = classify_api_failure(
        403,
        status_body(403, "Forbidden", 'nodes "n1" is forbidden: User "ro" cannot get resource "nodes"'),
        "n1",
        "get",
        "nodes",
    )
    assert "`get nodes`" in str(error)
    assert "at cluster scope" in str(error)
    namespaced = classify_api_failure(403, None, "ml/ft-7", "update", "trainjobs.trainer.kubeflow.org")
    assert '`update trainjobs.trainer.kubeflow.org` in namespace "ml"' in str(namespaced)


def test_conflict_says_the_check_runs_again() -> None:
    error = classify_api_failure(
        409,
        status_body(409, "Conflict", "the object has been modified"),
        "ml/ft-7",
        "update",
        "trainjobs.trainer.kubeflow.org",
    )
    assert "Nothing was admitted" in str(error)
    assert "the check runs again" in str(error)


def test_connection_failure_uses_the_text() -> None:
    error = classify_api_failure(None, "Connection refused", "ml/ft-7", "get", "trainjobs.trainer.kubeflow.org")
    assert "could not be reached" in str(error)
    assert "Connection refused" in str(error)


def test_unprocessable_includes_the_causes_when_there_is_no_message() -> None:
    body = {
        "kind": "Status",
        "code": 422,
        "reason": "Invalid",
        "details": {"causes": [{"field": "spec.runtimePatches", "message": "Too many"}]},
    }
    error = classify_api_failure(422, body, "ml/ft-7", "update", "trainjobs.trainer.kubeflow.org")
    assert "spec.runtimePatches: Too many" in str(error)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer eyJhbGciOi.secret.sig rejected", "eyJhbGciOi.secret.sig"),
        ("token=abc123def for user", "abc123def"),
        ('{"client-key-data": "LS0tLS1CRUdJTi"}', "LS0tLS1CRUdJTi"),
        ("GET https://admin:hunter2@10.0.0.1:6443/api failed", "hunter2"),
        ("password: s3cr3t", "s3cr3t"),
    ],
)
def test_no_credentials_in_messages(text: str, secret: str) -> None:
    assert secret not in scrub(text)
    for code in (None, 401, 403, 500):
        assert secret not in str(classify_api_failure(code, text, "ml/ft-7", "get", "trainjobs.trainer.kubeflow.org"))
        assert secret not in str(classify_api_failure(code, status_body(code or 0, "", text), "ml/ft-7", "get", "x"))


def test_long_details_are_cut() -> None:
    assert len(scrub("x " * 1000)) <= 400


def test_errors_survive_pickling() -> None:
    remaining = remaining_pods([pod("p")], {"n1": node("n1", ready="Unknown")})
    for error in (
        PodsRemainError("ml/ft-7", remaining),
        ConflictError("changed", ref="ml/ft-7"),
        classify_api_failure(404, None, "ml/ft-7", "get", "trainjobs.trainer.kubeflow.org"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert copy.ref == error.ref
    copied = pickle.loads(pickle.dumps(PodsRemainError("ml/ft-7", remaining)))
    assert isinstance(copied, PodsRemainError)
    assert copied.remaining == remaining
