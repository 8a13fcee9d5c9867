"""pyarrow at a command's start, without importing pandas to learn whether it is there.

pyarrow looks for pandas, so that it can recognise pandas objects, and imports it to find out
at the first conversion from Python objects (`pa.array`, `pa.table`). Where pandas is installed
(the `hf` extra brings it) that import took 0.30-0.45 s of every command, before a run's first
request (measured on the 2-core machine, issue 14). itemeval hands pyarrow no pandas objects, so
a command lets pyarrow look while pandas is out of sight, once (`skip_pandas_probe`); pyarrow
keeps the answer, and later imports of its modules (`pyarrow.dataset` too) ask no more. The probe
used to import `pyarrow.dataset` as well, which no command uses: 0.03-0.06 s of every start.

Nothing that needs pandas breaks: pyarrow imports pandas for real whenever pandas is asked for
(`to_pandas()` works as before). Code that may hand pyarrow pandas objects calls
`restore_pandas_probe` first, so that pyarrow treats them as pandas objects again (pandas' NaN
as a null, for one): the Hugging Face adapter (`datasets`), and a plugin that imports pandas.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

import pyarrow as pa


class _WithoutPandas:
    """An import finder that says pandas is not installed (while pyarrow asks)."""

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def skip_pandas_probe() -> None:
    """Import pyarrow's modules and make its first conversion with pandas out of sight, if
    pandas is not imported yet. Once per process, at a command's start (`cli.main.entry`) and
    in the workers of a local Ray (`runtime._cluster`), never in a library user's process."""
    if "pandas" in sys.modules:
        return  # already paid for: pyarrow may as well use it
    finder = _WithoutPandas()
    sys.meta_path.insert(0, finder)
    try:
        importlib.import_module("pyarrow.parquet")
        pa.array([0])  # pyarrow asks at its first conversion of a non-empty sequence, once
    finally:
        sys.meta_path.remove(finder)


def restore_pandas_probe() -> None:
    """pyarrow recognises pandas objects again (imports pandas if it is installed)."""
    with contextlib.suppress(ImportError):  # no pandas: nothing to recognise
        pa.array([], pa.null()).to_pandas()  # pyarrow imports pandas for real, and remembers
