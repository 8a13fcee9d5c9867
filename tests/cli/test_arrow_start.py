"""A command does not import pandas (0.3-0.45 s) to tell pyarrow it is there
(`itemeval._util.arrow_start`), and pyarrow still gives and takes pandas objects when asked."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

pytest.importorskip("pandas", reason="pandas is not installed: there is no import to avoid")

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "configs" / "datasets"


def _study(tmp_path: Path) -> Path:
    """Generate and grade (verifiable scorer and judge) on the in-process simulated provider."""
    study = {
        "study": "no-pandas",
        "datasets": [
            {"name": name, "path": str(DATASETS / name)}
            for name in ("arithmetic", "science-mc", "capitals-short")
        ],
        "endpoints": {"sim": {"kind": "sim"}},
        "models": [{"id": "sim/strong", "endpoint": "sim"}, {"id": "sim/weak", "endpoint": "sim"}],
        "facets": {
            "scorer": ["auto"],
            "grader": ["judge"],
            "rubric": ["builtin:correctness"],
        },
        "graders": {"judge": {"model": "sim/judge", "endpoint": "sim"}},
        "store": str(tmp_path / "store"),
        "cache": {"location": str(tmp_path / "cache")},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    return path


def _imported(*args: str) -> set[str]:
    """Run `itemeval *args` as a user does; the modules it imported (Python's -X importtime)."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "itemeval", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }


def test_a_run_and_what_follows_it_never_import_pandas(tmp_path):
    study = str(_study(tmp_path))
    commands = [
        ("run", study, "--no-ray", "--yes"),
        ("status", study),
        ("export", study, "--out", str(tmp_path / "out")),
        ("report", study, "--out", str(tmp_path / "report")),
    ]
    for command in commands:
        imported = _imported(*command)
        # the blocked attempt is listed too (`pandas`), a real import brings its submodules
        assert not {m for m in imported if m.startswith("pandas.")}, command[0]
    assert any((tmp_path / "out").iterdir())  # the export wrote its tables without pandas


def _python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_pyarrow_gives_and_takes_pandas_objects_when_asked():
    out = _python(
        """
        import math
        import pyarrow as pa
        from itemeval._util.arrow_start import restore_pandas_probe, skip_pandas_probe

        skip_pandas_probe()
        import pandas as pd
        frame = pa.table({"x": pa.array([1.0, None], pa.float64())}).to_pandas()
        print("to_pandas", type(frame).__name__, math.isnan(frame["x"][1]))
        """
    )
    assert out.split() == ["to_pandas", "DataFrame", "True"]
    out = _python(
        """
        import pyarrow as pa
        from itemeval._util.arrow_start import restore_pandas_probe, skip_pandas_probe

        skip_pandas_probe()
        import pandas as pd
        series = pd.Series([1.0, float("nan")])
        print("skipped", pa.array(series).null_count)  # a plain sequence to pyarrow: NaN stays
        restore_pandas_probe()
        print("restored", pa.array(series).null_count)  # pandas' NaN is a null again
        """
    )
    assert out.split() == ["skipped", "0", "restored", "1"]


def test_the_hugging_face_adapter_gets_pyarrow_that_knows_pandas():
    pytest.importorskip("datasets", reason="the `hf` extra is not installed")
    out = _python(
        """
        import pyarrow as pa
        from itemeval.datasets.adapters._hf import import_datasets
        from itemeval._util.arrow_start import skip_pandas_probe

        skip_pandas_probe()  # before anything imports pandas, as at a command's start
        import_datasets()
        import pandas as pd
        print(pa.array(pd.Series([1.0, float("nan")])).null_count)
        """
    )
    assert out.split() == ["1"]


def test_a_plugin_that_imports_pandas_gets_pyarrow_that_knows_pandas(tmp_path):
    (tmp_path / "pandas_scorer.py").write_text(
        "import pandas as pd\n\ndef score(answer, reference):\n    return 1.0\n"
    )
    out = _python(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import pyarrow as pa
        from itemeval._util.arrow_start import skip_pandas_probe
        from itemeval.plugins import SCORER_GROUP, load_plugin

        skip_pandas_probe()  # at a command's start
        load_plugin(SCORER_GROUP, "pandas_scorer:score", what="scorer")
        import pandas as pd
        print(pa.array(pd.Series([1.0, float("nan")])).null_count)
        """
    )
    assert out.split() == ["1"]


def test_the_workers_of_a_local_ray_start_with_pandas_out_of_pyarrows_sight():
    # In a process of its own: the suite's Ray (if any) is not the local Ray a command starts.
    out = _python(
        """
        import ray
        from itemeval.runtime._cluster import ray_cluster

        def convert():
            import sys
            import pyarrow as pa
            pa.array([1.0])  # pyarrow's first conversion imports pandas, unless the hook ran
            return "pandas" in sys.modules

        with ray_cluster(None, quiet=True):
            print(ray.get(ray.remote(num_cpus=0)(convert).remote()))
        """
    )
    assert out.split() == ["False"]
