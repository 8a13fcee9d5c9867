"""Fixtures of the spec tests (helpers live in spec_files.py)."""

import pytest
from spec_files import WriteRaw, raw_writer


@pytest.fixture
def write_raw() -> WriteRaw:
    """write_raw(directory_url, parts={name: text}, **meta overrides) -> directory url."""
    return raw_writer()
