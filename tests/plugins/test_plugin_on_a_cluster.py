"""Custom code on a cluster: `ray job submit --runtime-env-json '{"py_modules": [...]}'` ships
a plugin package that is installed nowhere; the study names its scorer and its provider as
`module:attribute`, and the job's driver and workers import them from the shipped copy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_files import sim_server, sim_stats, write_module, write_study

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from test_ray_job_submit import RAY, head_node

pytestmark = [pytest.mark.ray, pytest.mark.slow]
__all__ = ["head_node"]

PACKAGE = "shipped_plugin"

SCORERS = """
import itemeval


@itemeval.scorer(name="last_number", version="1")
def last_number(text, target, modality):
    words = [w.strip(".,") for w in text.split()]
    numbers = [w for w in words if w.lstrip("-").isdigit()]
    got = numbers[-1] if numbers else None
    ok = got is not None and got == target.strip()
    return itemeval.Score(float(ok), ok, got)
"""

CLIENTS = '''
from itemeval.providers import OpenAIChatProvider


class Tagged(OpenAIChatProvider):
    """The OpenAI wire with a routing header from the endpoint's options."""

    def __init__(self, settings, **kwargs):
        super().__init__(settings, **kwargs)
        self._headers["X-Route"] = settings.options["route"]
'''


def test_a_job_ships_its_plugins_with_py_modules(tmp_path, head_node):
    url, env = head_node
    package = tmp_path / "code" / PACKAGE
    write_module(package, "", name="__init__")
    write_module(package, SCORERS, name="scorers")
    write_module(package, CLIENTS, name="clients")
    with sim_server() as root:
        path = write_study(
            tmp_path / "study",
            **{
                "endpoints": {
                    "gw": {
                        "kind": f"{PACKAGE}.clients:Tagged",
                        "base_url": f"{root}/v1",
                        "options": {"route": "blue"},
                    }
                },
                "models": [{"id": "sim/strong", "endpoint": "gw", "name": "strong"}],
                "facets.scorer": [f"{PACKAGE}.scorers:last_number"],
                "budget.dev_items": 3,
            },
        )
        runtime_env = {"py_modules": [str(package)]}
        submit = [RAY, "job", "submit", "--address", url]
        submit += ["--runtime-env-json", json.dumps(runtime_env), "--"]
        job = subprocess.run(
            [*submit, sys.executable, "-m", "itemeval", "run", str(path), "--yes", "--json"],
            env=env | {"ITEMEVAL_CACHE_DIR": str(tmp_path / "job-cache")},
            cwd=tmp_path,  # not the repository, and the package is on no path here
            capture_output=True,
            text=True,
            timeout=600,
        )
        stats = sim_stats(root)
    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-4000:]
    start = output.index('{\n  "status"')
    outcome = json.JSONDecoder().raw_decode(output[start:])[0]
    assert outcome["status"] == "completed"
    assert outcome["stages"]["generate"]["done"] == 2 * 3  # datasets x items
    assert outcome["stages"]["grade"]["done"] == 2 * 3
    assert stats["ok"] == 6  # the provider plugin reached the server from the cluster
    with pytest.raises(ModuleNotFoundError):  # and this process never had the package
        __import__(PACKAGE)
