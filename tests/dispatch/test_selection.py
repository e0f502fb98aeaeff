"""The two independent selections and their union (DESIGN §3.3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_provider_dispatch.dispatch.errors import InvalidNameError
from airflow_provider_dispatch.dispatch.selection import Selection, pod_key, union
from airflow_provider_dispatch.dispatch.vocabulary import LABEL_JOB_ID, LABEL_JOBSET_NAME, LABEL_SUBMISSION

from .support import JOB_ID, NAME, NS, SUBMISSION, pod

SELECTION = Selection(NS, NAME, JOB_ID, SUBMISSION)


def test_selector_strings() -> None:
    assert SELECTION.dispatch_selector == f"{LABEL_JOB_ID}={JOB_ID},{LABEL_SUBMISSION}={SUBMISSION}"
    assert SELECTION.jobset_selector == f"{LABEL_JOBSET_NAME}={NAME}"
    assert SELECTION.selectors == (SELECTION.dispatch_selector, SELECTION.jobset_selector)


def test_jobset_only_selection_when_labels_unknown() -> None:
    selection = Selection(NS, NAME, None, None)
    assert selection.selectors == (f"{LABEL_JOBSET_NAME}={NAME}",)
    assert not selection.matches(pod("p", jobset_name=None))
    assert selection.matches(pod("p", job_id=None, submission=None))


@pytest.mark.parametrize(
    ("namespace", "name", "job_id", "submission"),
    [
        ("ml", "a,b", JOB_ID, SUBMISSION),
        ("ml", "x=y", JOB_ID, SUBMISSION),
        ("ml,kube-system", NAME, JOB_ID, SUBMISSION),
        ("ml", NAME, "a,b", SUBMISSION),
        ("ml", NAME, JOB_ID, "x=y"),
        ("ml", NAME, JOB_ID, "s1,dispatch.phpboyscout.uk/job-id!=z"),
        ("ml", NAME, "", SUBMISSION),
    ],
)
def test_values_are_validated_before_they_become_selectors(
    namespace: str, name: str, job_id: str, submission: str
) -> None:
    with pytest.raises(InvalidNameError):
        Selection(namespace, name, job_id, submission)


@pytest.mark.parametrize(
    ("case", "subject", "selected"),
    [
        ("both selections", pod("p"), True),
        ("dispatch labels only (no JobSet label)", pod("p", jobset_name=None), True),
        ("renamed runtime patch: no dispatch labels", pod("p", job_id=None, submission=None), True),
        ("rewritten patch: other dispatch values", pod("p", job_id="other", submission="other"), True),
        ("dispatch labels with another jobset-name", pod("p", jobset_name="other-job"), True),
        ("another admission number", pod("p", admission="7"), True),
        ("job id matches, submission differs", pod("p", jobset_name=None, submission="s2"), False),
        ("submission matches, job id differs", pod("p", jobset_name=None, job_id="job-2"), False),
        ("job id only", pod("p", jobset_name=None, submission=None), False),
        (
            "another JobSet, no dispatch labels",
            pod("p", jobset_name="ft-70", job_id=None, submission=None),
            False,
        ),
        ("no labels", pod("p", jobset_name=None, job_id=None, submission=None, admission=None), False),
        ("matching labels in another namespace", pod("p", namespace="other"), False),
        ("no namespace field: from the namespaced list", pod("p", namespace=None), True),
    ],
)
def test_selection_table(case: str, subject: dict[str, Any], selected: bool) -> None:
    assert SELECTION.matches(subject) is selected, case
    assert (SELECTION.select([subject]) == (subject,)) is selected, case


def test_union_by_uid_counts_a_pod_once() -> None:
    a = pod("a", uid="u-a")
    b = pod("b", uid="u-b")
    assert union([a, b], [b, a]) == (a, b)
    assert SELECTION.select([a], [a, b], [b]) == (a, b)


def test_union_keeps_a_recreated_pod_of_the_same_name() -> None:
    old = pod("p", uid="u-old", deletion="2026-08-21T10:00:30Z")
    new = pod("p", uid="u-new")
    assert union([old], [new]) == (old, new)


def test_union_without_uid_falls_back_to_namespace_and_name() -> None:
    a = pod("a", uid=None)
    a_again = pod("a", uid=None)
    b = pod("b", uid=None)
    assert pod_key(a) == "name:ml/a"
    assert union([a, b], [a_again]) == (a, b)


def _selector_matches(selector: str, labels: Mapping[str, str]) -> bool:
    """The apiserver's meaning of an equality-only selector: every `k=v` term holds."""
    terms = [term.split("=", 1) for term in selector.split(",")]
    return all(len(t) == 2 and labels.get(t[0]) == t[1] for t in terms)


values = st.sampled_from([JOB_ID, SUBMISSION, NAME, "job-2", "s2", "other", None])
pods = st.lists(
    st.builds(
        lambda i, js, jid, sub, ns: pod(f"p{i}", jobset_name=js, job_id=jid, submission=sub, namespace=ns),
        st.integers(0, 5),
        values,
        values,
        values,
        st.sampled_from([NS, "other"]),
    ),
    max_size=12,
)


@given(pods)
def test_server_side_selectors_select_what_the_local_matcher_selects(
    namespace_pods: list[dict[str, Any]],
) -> None:
    local = SELECTION.select([p for p in namespace_pods if p["metadata"]["namespace"] == NS])
    per_selector = [
        [
            p
            for p in namespace_pods
            if p["metadata"]["namespace"] == NS and _selector_matches(s, p["metadata"]["labels"])
        ]
        for s in SELECTION.selectors
    ]
    assert {pod_key(p) for p in union(*per_selector)} == {pod_key(p) for p in local}
    assert {pod_key(p) for p in SELECTION.select(*per_selector)} == {pod_key(p) for p in local}
