"""A sandbox node's boot, from `systemctl start` on its host to its join: what every restart of every integration
test waits for, so what CI's time is mostly made of. A fresh 3-node sandbox; one node is stopped and started
``--boots`` times through its host's systemd (over the sandbox's SSH config), each timed until the cluster
counts every node again, with the new JVM's CPU time at that moment (/proc: user + system, all its threads).

    python -m tests.benchmarks.bench_boot [--boots 6] [--node es-3] [--out reports/bench-boot.json]
        (root; about 2 min; the sandbox is taken down at the end)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from orchestrator.sandbox import lifecycle
from orchestrator.sandbox.layout import SandboxPaths
from tests.benchmarks.bench_restart import orchestrate
from tests.helpers import es_client

JOIN_LIMIT_S = 120  # a boot that takes longer than this is a failure, not a figure
SETTLE_S = 3  # after a join, before the next stop: the node's own start-up work (keys, license) ends


def ssh(info: dict[str, Any], host: str, command: str) -> None:
    subprocess.run(["ssh", "-F", info["ssh_config"], host, command], check=True, capture_output=True, timeout=120)


def wait_for_nodes(es: Any, wanted: str, limit_s: float) -> None:
    """Until the cluster's node count is ``wanted`` (`_cluster/health?wait_for_nodes=`, a wait on the server);
    the client goes to another node while the one booting does not answer."""
    health = es.options(request_timeout=limit_s + 10).cluster.health(wait_for_nodes=wanted, timeout=f"{limit_s:.0f}s")
    if health.get("timed_out"):
        raise SystemExit(f"the cluster's node count was not {wanted} within {limit_s:.0f} s")


def jvm_cpu_s(node: str) -> float:
    """The node's JVM's CPU time so far (user + system of all its threads), from /proc as seen from here."""
    status = lifecycle.status(SandboxPaths.default())  # read here, as the integration tests do: no command
    pid = next(n.pid for n in status.nodes if n.name == node)
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_boot(info: dict[str, Any], es: Any, node: str, nodes: int) -> dict[str, float]:
    ssh(info, node, "systemctl stop elasticsearch")
    wait_for_nodes(es, f"<{nodes}", JOIN_LIMIT_S)  # the cluster has seen it leave
    began = time.monotonic()
    ssh(info, node, "systemctl start elasticsearch")
    wait_for_nodes(es, str(nodes), JOIN_LIMIT_S)
    joined = time.monotonic() - began
    return {"join_s": round(joined, 2), "jvm_cpu_s": round(jvm_cpu_s(node), 2)}


def spread(values: list[float]) -> dict[str, float]:
    return {"mean": round(statistics.mean(values), 2), "min": min(values), "max": max(values)}


def spread_text(values: list[float]) -> str:
    return f"{min(values)}-{max(values)} s (mean {statistics.mean(values):.2f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boots", type=int, default=6)
    parser.add_argument("--node", default="es-3")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    orchestrate("sandbox", "down")
    up = orchestrate("sandbox", "up")
    if up.returncode != 0:
        raise SystemExit(f"sandbox up failed: {up.stderr[-2000:]}")
    try:
        info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
        es = es_client(info, max_retries=len(info["endpoints"]), retry_on_timeout=True)
        nodes = len(info["nodes"])
        boots = []
        for i in range(args.boots):
            boots.append(one_boot(info, es, args.node, nodes))
            print(f"boot {i + 1}: joined in {boots[-1]['join_s']} s, JVM CPU {boots[-1]['jvm_cpu_s']} s", flush=True)
            time.sleep(SETTLE_S)
    finally:
        orchestrate("sandbox", "down")
    joins, cpus = [b["join_s"] for b in boots], [b["jvm_cpu_s"] for b in boots]
    summary = {"boots": boots, "join_s": spread(joins), "jvm_cpu_s": spread(cpus)}
    print(f"{args.node}: start to join {spread_text(joins)}, JVM CPU {spread_text(cpus)}, {len(boots)} boots")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
