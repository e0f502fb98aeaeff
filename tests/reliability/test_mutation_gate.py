"""The mutation gate's own checks (mutation_gate.py): every mutant still finds its snippet exactly once, so a
refactor of a safety check fails here rather than silently disabling its mutant; the gate itself runs apart
(`python tests/reliability/mutation_gate.py`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from .mutation_gate import (
    MUTANTS,
    Mutant,
    SnippetError,
    check,
    invariant_of,
    materialise,
    snapshot,
    weights_of,
)
from .mutation_tests_judge import FAILED, PASSED, run_tests


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_every_mutant_finds_its_snippet_exactly_once(mutant: Mutant) -> None:
    mutated = check(mutant)
    assert mutant.replacement in mutated
    assert mutated.count(mutant.original) == 0 or mutant.original in mutant.replacement


def test_a_snippet_that_is_not_found_once_is_refused() -> None:
    with pytest.raises(SnippetError, match="0 times"):
        check(replace(MUTANTS[0], original="this text is nowhere in the package"))
    with pytest.raises(SnippetError, match="times"):
        check(replace(MUTANTS[0], original="return"))


def test_names_are_unique() -> None:
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))


def test_a_mutant_made_from_the_gates_snapshot_has_the_lab_and_the_mutation(tmp_path: Path) -> None:
    """The gate makes every copy from one snapshot of the checkout (`snapshot`), whose lab package sits beside the
    provider's rather than under lab/: a copy of that copy must find it (the gate failed at its baseline when
    it did not)."""
    frozen = snapshot(tmp_path / "frozen")
    mutant = next(m for m in MUTANTS if m.name == "cessation-taint")
    root = materialise(mutant, tmp_path / "copy", frozen)
    assert (root / "airflow_provider_dispatch_lab" / "__init__.py").is_file()
    assert mutant.replacement in (root / "airflow_provider_dispatch" / mutant.file).read_text()


def test_a_mutant_is_applied_to_a_copy_only(tmp_path: Path) -> None:
    mutant = next(m for m in MUTANTS if m.name == "cessation-taint")
    root = materialise(mutant, tmp_path)
    copied = (root / "airflow_provider_dispatch" / mutant.file).read_text()
    assert mutant.replacement in copied
    original = (Path(__file__).resolve().parents[2] / "airflow_provider_dispatch" / mutant.file).read_text()
    assert mutant.original in original


@pytest.mark.parametrize(
    ("violation", "invariant"),
    [
        ("rel/tj-a: two processes of rank node/0/0: ...", "two processes of one rank (ledger)"),
        ("x overlaps rel/tj-a-1 on n1 (...) (both rank tj-a/node/0/0) from 1 to 2", "two processes of one rank"),
        ("MODIFIED rel/tj-a by caller-0 at rv 9: A 1->2, suspend True->False: admitted while p ...", "earlier"),
        ("rel/p: label A='1' but created under admission A=2", "admission label"),
        ("the crafted name 'rel/a,b' was not refused before any request", "names refused"),
    ],
)
def test_violations_are_told_by_their_invariant(violation: str, invariant: str) -> None:
    assert invariant in invariant_of(violation)


def test_weights_bias_the_generator_and_refuse_what_the_model_lacks() -> None:
    assert weights_of(["relabel=12", "partition=0"]) == {"relabel": 12.0, "partition": 0.0}
    for wrong in ("no_such_rule=3", "relabel=-1", "relabel=many", "relabel"):
        with pytest.raises(ValueError, match="--weight"):
            weights_of([wrong])


def test_the_tests_judge_tells_failing_tests_from_passing_ones(tmp_path: Path) -> None:
    """`--judge tests` kills a mutant when the tests fail on its copy (pytest exit 1) and names the first failing
    test; it passes (exit 0) on a copy where they pass. A copy here is a folder with one test file."""
    ini = Path(__file__).resolve().parents[2] / "pyproject.toml"
    for name, body, expected in (("good", "assert 1 + 1 == 2", PASSED), ("bad", "assert 1 + 1 == 3", FAILED)):
        root = tmp_path / name
        (root / "tests").mkdir(parents=True)
        (root / "tests" / "test_one.py").write_text(f"def test_sum() -> None:\n    {body}\n")
        code, summary, _ = run_tests(root, ["tests"], ini)
        assert code == expected, summary
        if expected == FAILED:
            assert summary.startswith("FAILED tests/test_one.py::test_sum"), summary
