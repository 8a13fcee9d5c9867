"""The cluster configs, checked as far as a machine without a cloud or Kubernetes can.

`cluster/aws.yaml`: Ray's launcher prepares and validates it as `ray up` does before it calls
AWS (defaults merged, then `ray-schema.json`); the head's and the workers' start commands run
in bash up to `ray start`, where Ray's own token check (the one `ray start` makes first) must find
the token in the folder `file_mounts` puts on every node, with the variables of its env file.

`cluster/kuberay-rayjob.yaml`: every pod that talks to Ray (head, workers, the submitter that
runs `ray job submit`) gets token mode and the token from the Secret that docs/cluster.md tells
the user to create; its fields are RayJob fields of KubeRay's API reference; versions and
requirements agree with this checkout. Neither file is run here (docs/cluster.md says so).
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import ray
import yaml

REPO = Path(__file__).resolve().parents[2]
AWS = REPO / "cluster" / "aws.yaml"
KUBERAY = REPO / "cluster" / "kuberay-rayjob.yaml"
DOCS = REPO / "docs" / "cluster.md"

#: What a node's `ray start` would see, and whether Ray's token check passes (without starting).
PROBE = """
import json, os
from ray._private.authentication.authentication_token_setup import ensure_token_if_auth_enabled
from ray._raylet import AuthenticationTokenLoader
ensure_token_if_auth_enabled(None, create_token_if_missing=False)
token = AuthenticationTokenLoader.instance().get_raw_token(ignore_auth_mode=True)
print(json.dumps({"token": token, "mode": os.environ.get("RAY_AUTH_MODE"),
                  "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY"),
                  "AWS_ENDPOINT_URL": os.environ.get("AWS_ENDPOINT_URL")}))
"""


def _aws() -> dict:
    return yaml.safe_load(AWS.read_text())


def test_aws_config_passes_the_launchers_own_preparation_and_schema():
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = prepare_config(copy.deepcopy(_aws()))
    validate_config(config)  # raises on any field ray-schema.json does not know
    broken = copy.deepcopy(_aws())
    broken["file_mount"] = broken.pop("file_mounts")
    with pytest.raises(Exception, match="file_mount"):
        validate_config(prepare_config(broken))


@pytest.mark.parametrize("commands", ["head_start_ray_commands", "worker_start_ray_commands"])
def test_every_aws_node_starts_ray_with_the_token_and_the_env_file(commands, tmp_path):
    config = _aws()
    [(remote, local)] = config["file_mounts"].items()
    assert local == "~/.itemeval/cluster"  # where docs/cluster.md tells the user to put them
    start = config[commands][-1]
    prefix, ray_start = start.split("ray start", 1)
    assert "--head" in ray_start if commands.startswith("head") else "--address" in ray_start
    # The node as the launcher leaves it: the folder mounted at `remote` under the home.
    home = tmp_path / "home"
    folder = home / remote.removeprefix("~/")
    folder.mkdir(parents=True)
    (folder / "auth_token").write_text("f" * 64)
    (folder / "env").write_text(
        "OPENAI_API_KEY=sk-test-key\nAWS_ENDPOINT_URL=https://minio.example.org:9000\n"
    )
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    script = f"{prefix} {shlex.quote(sys.executable)} -c {shlex.quote(PROBE)}"
    seen = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert seen.returncode == 0, seen.stderr[-2000:]
    assert json.loads(seen.stdout.strip().splitlines()[-1]) == {
        "token": "f" * 64,
        "mode": "token",
        "OPENAI_API_KEY": "sk-test-key",
        "AWS_ENDPOINT_URL": "https://minio.example.org:9000",
    }
    # Without the token file, Ray's check stops the start (never a node without auth) ...
    (folder / "auth_token").unlink()
    no_token = subprocess.run(["bash", "-c", script], env=env, capture_output=True, timeout=60)
    assert no_token.returncode != 0 and b"RAY_AUTH_TOKEN_PATH" in no_token.stderr
    # ... and without the mounted folder the command stops before `ray start`.
    (folder / "env").unlink()
    no_folder = subprocess.run(["bash", "-c", script], env=env, capture_output=True, timeout=60)
    assert no_folder.returncode != 0 and b"No such file" in no_folder.stderr


def _kuberay() -> dict:
    return yaml.safe_load(KUBERAY.read_text())


def _containers(rayjob: dict) -> dict[str, dict]:
    spec = rayjob["spec"]
    cluster = spec["rayClusterSpec"]
    pods = {"head": cluster["headGroupSpec"]["template"]}
    pods |= {f"workers:{g['groupName']}": g["template"] for g in cluster["workerGroupSpecs"]}
    pods["submitter"] = spec["submitterPodTemplate"]
    return {name: pod["spec"]["containers"][0] for name, pod in pods.items()}


def test_every_kuberay_pod_that_talks_to_ray_gets_the_token_from_the_documented_secret():
    created = re.search(
        r"kubectl create secret generic (\S+) --from-literal=(\w+)=\$RAY_AUTH_TOKEN",
        DOCS.read_text(),
    )
    assert created, "docs/cluster.md no longer shows how to create the token's Secret"
    secret = {"name": created.group(1), "key": created.group(2)}
    containers = _containers(_kuberay())
    assert set(containers) == {"head", "workers:workers", "submitter"}
    for name, container in containers.items():
        env = {e["name"]: e for e in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token", name
        assert env["RAY_AUTH_TOKEN"]["valueFrom"] == {"secretKeyRef": secret}, name


#: RayJob fields in KubeRay's API reference (ray.io/v1 RayJobSpec, RayClusterSpec).
RAYJOB_SPEC = {
    "activeDeadlineSeconds", "backoffLimit", "rayClusterSpec", "submitterPodTemplate",
    "metadata", "clusterSelector", "submitterConfig", "managedBy", "deletionStrategy",
    "entrypoint", "runtimeEnvYAML", "jobId", "submissionMode", "entrypointResources",
    "entrypointNumCpus", "entrypointNumGpus", "ttlSecondsAfterFinished",
    "shutdownAfterJobFinishes", "suspend",
}  # fmt: skip
RAYCLUSTER_SPEC = {
    "suspend", "managedBy", "autoscalerOptions", "headServiceAnnotations",
    "enableInTreeAutoscaling", "gcsFaultToleranceOptions", "headGroupSpec", "rayVersion",
    "workerGroupSpecs", "authOptions",
}  # fmt: skip


def test_kuberay_fields_versions_and_requirements():
    rayjob = _kuberay()
    assert (rayjob["apiVersion"], rayjob["kind"]) == ("ray.io/v1", "RayJob")
    assert set(rayjob["spec"]) <= RAYJOB_SPEC
    assert set(rayjob["spec"]["rayClusterSpec"]) <= RAYCLUSTER_SPEC
    assert rayjob["spec"]["rayClusterSpec"]["rayVersion"] == ray.__version__
    for name, container in _containers(rayjob).items():
        assert container["image"].startswith(f"rayproject/ray:{ray.__version__}-"), name
    assert _aws()["docker"]["image"].startswith(f"rayproject/ray:{ray.__version__}-")


def _declared() -> set[str]:
    """pyproject's runtime dependencies, without ray (the cluster image's)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return {d.replace(" ", "") for d in deps if not d.startswith("ray")}


def test_cluster_requirements_are_the_declared_ones():
    runtime_env = yaml.safe_load(_kuberay()["spec"]["runtimeEnvYAML"])
    assert set(runtime_env["pip"]) == _declared()
    [setup] = _aws()["setup_commands"]
    assert {w.strip('"') for w in shlex.split(setup)[3:]} == _declared()
