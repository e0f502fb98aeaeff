"""Names and label values are refused before they reach a selector or a URL (DESIGN §3.3)."""

from __future__ import annotations

import pytest

from airflow_provider_dispatch.dispatch.errors import InvalidNameError, InvalidParameterError, RefusedError
from airflow_provider_dispatch.dispatch.validation import (
    Ref,
    parse_admission_number,
    parse_ref,
    rendered_integer,
    validate_job_id,
    validate_namespace,
    validate_node_name,
    validate_submission,
    validate_trainjob_name,
)

BAD_EVERYWHERE = ["", "a,b", "x=y", "../", "a/b", "a b", "a\n", "a!", "a;b", "a&b", "a*"]


@pytest.mark.parametrize("name", ["a", "ft-7", "trainjob-0", "a" * 63, "a-b-c1"])
def test_trainjob_name_accepted(name: str) -> None:
    assert validate_trainjob_name(name) == name


@pytest.mark.parametrize(
    "name", [*BAD_EVERYWHERE, "a" * 64, "A", "Ft-7", "1abc", "-a", "a-", "a.b", "a_b", "ft-7\n", None, 7]
)
def test_trainjob_name_refused(name: object) -> None:
    with pytest.raises(InvalidNameError, match="RFC 1035 label"):
        validate_trainjob_name(name)


@pytest.mark.parametrize("namespace", ["ml", "1ns", "a" * 63, "team-a"])
def test_namespace_accepted(namespace: str) -> None:
    assert validate_namespace(namespace) == namespace


@pytest.mark.parametrize("namespace", [*BAD_EVERYWHERE, "ML", "a" * 64, "a.b", "-ns", "ns-", None])
def test_namespace_refused(namespace: object) -> None:
    with pytest.raises(InvalidNameError, match="RFC 1123 label"):
        validate_namespace(namespace)


@pytest.mark.parametrize("value", ["job-1", "Job_1.x", "A", "0", "a" * 63, "2026.08.21"])
@pytest.mark.parametrize("validator", [validate_job_id, validate_submission])
def test_label_values_accepted(validator: object, value: str) -> None:
    assert validator(value) == value  # type: ignore[operator]


@pytest.mark.parametrize("value", [*BAD_EVERYWHERE, "-a", "a-", "_a", "a.", "a" * 64, None])
@pytest.mark.parametrize("validator", [validate_job_id, validate_submission])
def test_label_values_refused(validator: object, value: object) -> None:
    with pytest.raises(InvalidNameError, match="label value: at most 63"):
        validator(value)  # type: ignore[operator]


@pytest.mark.parametrize("name", ["n1", "node-1.example.com", "10.0.0.1", ("a" * 63 + ".") * 3 + "a" * 61])
def test_node_name_accepted(name: str) -> None:
    assert len(name) <= 253
    assert validate_node_name(name) == name


@pytest.mark.parametrize("name", [*BAD_EVERYWHERE, "N1", "a..b", ".a", "a.", "a" * 254, "node_1"])
def test_node_name_refused(name: object) -> None:
    with pytest.raises(InvalidNameError, match="RFC 1123 subdomain"):
        validate_node_name(name)


def test_parse_ref_gives_both_parts() -> None:
    ref = parse_ref("ml/ft-7")
    assert (ref.namespace, ref.name, str(ref)) == ("ml", "ft-7", "ml/ft-7")
    assert parse_ref(ref) is ref


@pytest.mark.parametrize(
    "text", ["ml", "ml/ft/7", "/ft-7", "ml/", "ML/ft-7", "ml/a,b", "ml/x=y", "../etc", "ml/../x", "", None, 5]
)
def test_parse_ref_refused(text: object) -> None:
    with pytest.raises(InvalidNameError) as caught:
        parse_ref(text)
    assert isinstance(caught.value, RefusedError)
    assert not caught.value.retryable


def test_ref_validates_when_built_directly() -> None:
    with pytest.raises(InvalidNameError):
        Ref("ml", "a,b")


def test_refusal_says_what_is_allowed_and_names_the_value() -> None:
    with pytest.raises(InvalidNameError) as caught:
        validate_trainjob_name("a,b", ref="ml/a,b")
    message = str(caught.value)
    assert "'a,b'" in message
    assert "at most 63 lowercase letters" in message
    assert caught.value.ref == "ml/a,b"


def test_too_long_names_the_length() -> None:
    with pytest.raises(InvalidNameError, match="64 characters long"):
        validate_trainjob_name("a" * 64)


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("7", 7), ("123", 123)])
def test_admission_number_accepted(text: str, number: int) -> None:
    assert parse_admission_number(text) == number


@pytest.mark.parametrize("text", ["", "-1", "01", "+1", "1.0", "x", " 1", "1 ", "1\n", None, 3])
def test_admission_number_refused(text: object) -> None:
    with pytest.raises(InvalidNameError, match="decimal non-negative integer"):
        parse_admission_number(text)


# --- rendered parameters (issue 17 item 4) -------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(3, 3), ("3", 3), (" 7 ", 7), (1, 1)])
def test_rendered_integer_reads_ints_and_their_text(value: object, expected: int) -> None:
    assert rendered_integer(value, "admission", minimum=1) == expected


@pytest.mark.parametrize("value", [None, "None", "", "  ", "null"])
def test_a_rendered_integer_that_rendered_nothing_says_so(value: object) -> None:
    with pytest.raises(InvalidParameterError, match="what a template renders when it pulls nothing"):
        rendered_integer(value, "admission", minimum=1)


@pytest.mark.parametrize("value", [0, -2, "0", "x", "3.5", True, 2.0, "1e3", 21])
def test_a_rendered_integer_out_of_bounds_or_not_an_integer_is_refused(value: object) -> None:
    with pytest.raises(InvalidParameterError, match="must be an integer from 1 to 20") as refused:
        rendered_integer(value, "conflict attempts", minimum=1, maximum=20)
    assert "pulls nothing" not in str(refused.value)


@pytest.mark.parametrize("value", ["None", "", None])
def test_a_name_that_rendered_nothing_says_so(value: object) -> None:
    with pytest.raises(InvalidNameError, match="pulls nothing"):
        validate_trainjob_name(value)
