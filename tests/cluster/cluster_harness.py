"""A multi-node Ray cluster on this machine, driven over stdin/stdout by the cluster tests.

Run as its own process (`python cluster_harness.py WORKER_NODES`) so that the test process keeps
its own Ray: Ray's test harness (`ray.cluster_utils.Cluster`) starts a head with no CPUs and
worker nodes of one CPU each, every node a separate raylet, with health checks tightened so a
lost node is noticed in about three seconds. It prints one JSON line, then answers one JSON
line per command (each prefixed with `@@harness `: Ray prints lines of its own):

    {"cmd": "nodes"}                          -> {"nodes": [node ids of the worker nodes]}
    {"cmd": "busy"}                           -> {"nodes": [worker nodes with no CPU free]}
    {"cmd": "remove", "node": NODE_ID}        -> {"removed": NODE_ID}   (ungracefully, like a crash)
    {"cmd": "add"}                            -> {"added": NODE_ID}
    {"cmd": "limiter", "name": ..., "node": NODE_ID, "limits": [rpm, tpm, max_concurrency]}
                                              -> {"node": NODE_ID}   a detached limiter there
    {"cmd": "where", "name": ...}             -> {"node": NODE_ID or null}
    {"cmd": "quit"}
"""

from __future__ import annotations

import json
import os
import sys
import time

import ray
from ray.cluster_utils import Cluster

MARK = "@@harness "
FAST_HEALTH = {
    "health_check_initial_delay_ms": 1000,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 1000,
    "health_check_failure_threshold": 3,
}


def main() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # token auth comes from the env
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={
            "num_cpus": 0,
            "_system_config": FAST_HEALTH,
            "include_dashboard": False,
        },
    )
    ray.init(address=cluster.address, namespace="itemeval", log_to_driver=False)
    nodes = {}
    for _ in range(int(sys.argv[1])):
        node = cluster.add_node(num_cpus=1)
        nodes[_node_id(node)] = node
    _reply({"address": cluster.address, "nodes": list(nodes)})
    for line in sys.stdin:
        command = json.loads(line)
        kind = command["cmd"]
        if kind == "quit":
            break
        if kind == "nodes":
            reply = {"nodes": list(nodes)}
        elif kind == "busy":
            free = ray._private.state.state.available_resources_per_node()
            reply = {"nodes": [n for n in nodes if free.get(n, {}).get("CPU", 0) < 1]}
        elif kind == "remove":
            cluster.remove_node(nodes.pop(command["node"]), allow_graceful=False)
            reply = {"removed": command["node"]}
        elif kind == "add":
            node = cluster.add_node(num_cpus=1)
            nodes[_node_id(node)] = node
            reply = {"added": node.node_id}
        elif kind == "limiter":
            reply = {"node": _limiter_on(command)}
        elif kind == "where":
            reply = {"node": _where(command["name"])}
        else:
            reply = {"error": f"unknown command {kind!r}"}
        _reply(reply)
    ray.shutdown()
    cluster.shutdown()


def _node_id(node) -> str:
    """The id the cluster knows a node by (matched by its raylet's socket: every node of this
    harness shares one IP, and a `Node` object's own id can name another)."""
    for entry in ray.nodes():
        if entry["Alive"] and entry["RayletSocketName"] == node._raylet_socket_name:
            return entry["NodeID"]
    raise RuntimeError("a node the harness started is not in the cluster")


def _reply(message: dict) -> None:
    # Ray prints its own lines to stdout too (a raylet's death, for one): ours are marked.
    print(MARK + json.dumps(message), flush=True)


def _limiter_on(command: dict) -> str:
    """A limiter on a worker node, as the first design placed them (Ray's default puts a
    zero-CPU actor on any node): created with the default placement until it lands on
    `command["node"]` (at most 40 tries). Ray restarts it anywhere when that node is lost."""
    from itemeval.providers.limits import EndpointLimits
    from itemeval.runtime._actors import LIMITER_IDLE_EXIT_S, LimiterActor

    for _ in range(40):
        actor = LimiterActor.options(
            name=command["name"], namespace="itemeval", lifetime="detached"
        ).remote(EndpointLimits(*command["limits"]), LIMITER_IDLE_EXIT_S)
        node = ray.get(actor.state.remote(), timeout=60)["node"]
        if node == command["node"]:
            return node
        ray.kill(actor)
        time.sleep(0.2)  # the name is free again once the kill is through
    return node


def _where(name: str) -> str | None:
    try:
        actor = ray.get_actor(name, namespace="itemeval")
        return ray.get(actor.state.remote(), timeout=60)["node"]
    except Exception:
        return None


if __name__ == "__main__":
    main()
