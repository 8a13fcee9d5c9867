"""`--condition` selections: ids, slugs, prefixes, hashes, globs; clear errors otherwise."""

from __future__ import annotations

import pytest

from itemeval.errors import ExitCode, InputError
from itemeval.store import select_conditions

KNOWN = [
    "gpt-4o_default--3fa9c2d1e0b4",
    "gpt-4o_cot--77aa00bb11cc",
    "claude-3-5_default--0123456789ab",
]


def test_no_selection_means_all() -> None:
    assert select_conditions(KNOWN, None) == KNOWN
    assert select_conditions(KNOWN, []) == KNOWN


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ("gpt-4o_cot--77aa00bb11cc", ["gpt-4o_cot--77aa00bb11cc"]),  # exact id
        ("claude-3-5_default", ["claude-3-5_default--0123456789ab"]),  # slug
        ("gpt-4o_d", ["gpt-4o_default--3fa9c2d1e0b4"]),  # id prefix
        ("3fa9c2", ["gpt-4o_default--3fa9c2d1e0b4"]),  # hash prefix
        ("gpt-4o*", ["gpt-4o_default--3fa9c2d1e0b4", "gpt-4o_cot--77aa00bb11cc"]),  # glob
        ("*_default", ["gpt-4o_default--3fa9c2d1e0b4", "claude-3-5_default--0123456789ab"]),
    ],
)
def test_selections(selection: str, expected: list[str]) -> None:
    assert select_conditions(KNOWN, [selection]) == expected


def test_results_keep_known_order_and_merge() -> None:
    chosen = select_conditions(KNOWN, ["claude-3-5_default", "gpt-4o_cot", "claude"])
    assert chosen == ["gpt-4o_cot--77aa00bb11cc", "claude-3-5_default--0123456789ab"]


def test_ambiguous_selection_lists_candidates() -> None:
    with pytest.raises(InputError) as info:
        select_conditions(KNOWN, ["gpt-4o"])
    text = str(info.value)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    assert "matches 2 conditions" in text
    assert "gpt-4o_default--3fa9c2d1e0b4" in text and "gpt-4o_cot--77aa00bb11cc" in text


def test_unknown_selections_are_all_reported_with_suggestions() -> None:
    with pytest.raises(InputError) as info:
        select_conditions(KNOWN, ["gpt-4o_cto", "nothing-like-it*"])
    assert len(info.value.problems) == 2
    assert "did you mean" in str(info.value) and "gpt-4o_cot" in str(info.value)
