"""Names, ids and keys checked by a pattern end where the string ends.

`$` also matches before a final line break, so `re.match(r"^[a-z]+$", "name\\n")` succeeds: a
partition directory, a header name or an item identifier with a line break at its end would
pass. Every such pattern ends in `\\Z`; each is tried here with a valid value, then with a line
break after it.
"""

from __future__ import annotations

import importlib

import pytest

PATTERNS = [
    ("itemeval.datasets.format._attributes", "IDENTIFIER_PATTERN", "gsm8k.test-0001"),
    ("itemeval.datasets.format._dataset", "_DATE", "2026-11-27"),
    ("itemeval.datasets.format._dialect", "_READER_IDENTIFIER", "gsm8k.test-0001"),
    ("itemeval.providers._settings", "_ENV_NAME", "OPENAI_API_KEY"),
    ("itemeval.providers._settings", "_HEADER_NAME", "X-Request-Id"),
    ("itemeval.simulator._anthropic_batches", "_CUSTOM_ID", "cell-17"),
    ("itemeval.plugins", "_REFERENCE", "my_scorers.exact:score"),
    ("itemeval.plugins", "_ENTRY_POINT_NAME", "my-scorer"),
    ("itemeval.store._layout", "_PARTITION_VALUE", "sim-strong_direct--006913fb1c0f"),
    ("itemeval.store._items", "_SAFE_NAME", "gsm8k"),
    ("itemeval.datasets.adapters._source", "NAME_PATTERN", "gsm8k"),
    ("itemeval.datasets.adapters._hf", "_COMMIT_SHA", "0123456789abcdef0123456789abcdef01234567"),
]


@pytest.mark.parametrize(("module", "name", "valid"), PATTERNS)
@pytest.mark.parametrize("ending", ["\n", "\r\n", "\nmore"])
def test_a_line_break_after_a_valid_name_is_refused(module, name, valid, ending):
    pattern = getattr(importlib.import_module(module), name)
    assert pattern.match(valid)
    assert not pattern.match(valid + ending)


def test_a_partition_value_with_a_line_break_is_a_store_error():
    from itemeval.errors import StoreError
    from itemeval.store._layout import check_partition_value

    assert check_partition_value("sim-strong--006913fb1c0f") == "sim-strong--006913fb1c0f"
    with pytest.raises(StoreError):
        check_partition_value("sim-strong--006913fb1c0f\n")
