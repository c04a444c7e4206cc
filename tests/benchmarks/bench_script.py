"""The tool against a hand-tight script of the same steps, side by side on one sandbox (issue 39).

The script is what an operator would write by hand, as tight as it goes: for each node, allocation
restricted to primaries, a flush, `systemctl stop` and `systemctl start` over SSH (one multiplexed
connection per host, as with ControlMaster), a poll every 0.1 s for the node's new JVM in the cluster,
allocation put back, then one server-side wait for green. The tool runs `orchestrate restart --by node
--yes` (which also checks tuning, the gate, retention leases, its journal and lock). Rounds alternate
(script, tool, script, tool, ...) after one warm-up restart of each, so both see the same steady state
(every copy reused) and the same machine.

    python -m tests.benchmarks.bench_script [--rounds 2] [--out reports/bench-script.json]   (root; ~6 min)
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from elasticsearch import Elasticsearch

from tests.benchmarks.bench_restart import REPO, irreducible, orchestrate, sandbox, where_it_went
from tests.helpers import es_client

POLL_S = 0.1


class Script:
    """The hand-tight script, over the sandbox's SSH config and the superuser's client."""

    def __init__(self, info: dict[str, Any], es: Elasticsearch, control_dir: Path) -> None:
        self.info, self.es = info, es
        inventory = yaml.safe_load(Path(info["inventory"]).read_text())
        self.unit = inventory["service"]["unit"]
        self.ssh = ["ssh", "-F", info["ssh_config"], "-o", "ControlMaster=auto", "-o",
                    f"ControlPath={control_dir}/%h", "-o", "ControlPersist=300"]

    def on(self, node: str, command: str) -> None:
        subprocess.run([*self.ssh, node, command], check=True, capture_output=True, timeout=120)

    def jvm_started(self, node: str) -> float | None:
        try:
            found = self.es.nodes.info(node_id=node, metric="jvm")["nodes"]
        except Exception:  # the cluster answers nothing for a moment while a master moves
            return None
        return next((n["jvm"]["start_time_in_millis"] / 1000 for n in found.values()), None)

    def restart(self) -> dict[str, Any]:
        nodes = [n["name"] for n in self.info["nodes"]]
        for node in nodes:
            self.on(node, "true")  # the connections open before the clock starts, as a script's would be warm
        began = time.monotonic()
        for node in nodes:
            before = self.jvm_started(node)
            self.es.cluster.put_settings(persistent={"cluster.routing.allocation.enable": "primaries"})
            self.es.indices.flush()
            self.on(node, f"systemctl stop {shlex.quote(self.unit)}")
            self.on(node, f"systemctl start {shlex.quote(self.unit)}")
            deadline = time.monotonic() + 300
            while self.jvm_started(node) in (None, before):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{node} did not rejoin within 300 s")
                time.sleep(POLL_S)
            self.es.cluster.put_settings(persistent={"cluster.routing.allocation.enable": None})
            self.es.cluster.health(wait_for_status="green", timeout="300s")
        return {"wall_s": round(time.monotonic() - began, 2), "nodes": len(nodes)}


def tool_restart() -> dict[str, Any]:
    began = time.monotonic()
    proc = orchestrate("restart", "--cluster", "sandbox", "--by", "node", "--yes", "--json")
    wall = time.monotonic() - began
    if proc.returncode != 0:
        raise SystemExit(f"restart failed: {proc.stderr[-2000:]}")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    end = time.time()
    return {"wall_s": round(wall, 2), "nodes": len(events[-1]["nodes"]), "summary": events[-1], "events": events,
            "command_s": (end - wall, end)}


def with_irreducible(info: dict[str, Any], es: Elasticsearch, run: dict[str, Any], since: float,
                     nodes: list[str]) -> dict[str, Any]:
    """The nodes' own time (stop, boot, recovery, from their logs and the cluster), as bench_restart reads
    it, for both: what is left is each one's overhead."""
    summary = run.pop("summary", None) or {"nodes": [{"name": n} for n in nodes],
                                           "batches": [{"nodes": [n]} for n in nodes]}
    events, command_s = run.pop("events", None), run.pop("command_s", None)
    irr = irreducible(info, es, summary, since)
    went = {"where_it_went_s": where_it_went(events, irr, command_s)} if events and command_s else {}
    return {**run, "irreducible_s": irr["sum_s"],
            "overhead_s_per_node": round((run["wall_s"] - irr["sum_s"]) / run["nodes"], 2), **went}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-script.json")
    args = parser.parse_args()
    sandbox(3, 1, docs=30_000)
    info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
    es = es_client(info, max_retries=len(info["endpoints"]), retry_on_timeout=True)
    nodes = [n["name"] for n in info["nodes"]]
    control = Path("/tmp/bench-script-ssh")
    control.mkdir(exist_ok=True)
    script = Script(info, es, control)
    script.restart()  # warm-up: replicas in step, every later copy reused
    tool_restart()
    rounds = []
    for number in range(1, args.rounds + 1):
        since = time.time() - 1
        by_script = with_irreducible(info, es, script.restart(), since, nodes)
        since = time.time() - 1
        by_tool = with_irreducible(info, es, tool_restart(), since, nodes)
        rounds.append({"round": number, "script": by_script, "tool": by_tool,
                       "tool_over_script": round(by_tool["wall_s"] / by_script["wall_s"], 3)})
    orchestrate("sandbox", "down")
    figures = {"rounds": rounds, "targets": {"tool_over_script": 1.0, "overhead_s_per_node": 0.5}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    print(f"{'round':>5} {'script s':>9} {'tool s':>7} {'tool/script':>11} {'script s/node':>13} "
          f"{'tool s/node':>11}  (s/node: above the nodes' own stop, boot and recovery)")
    for r in rounds:
        print(f"{r['round']:>5} {r['script']['wall_s']:>9.1f} {r['tool']['wall_s']:>7.1f} {r['tool_over_script']:>11} "
              f"{r['script']['overhead_s_per_node']:>13.2f} {r['tool']['overhead_s_per_node']:>11.2f}")
    print("targets: tool/script <= 1.0, tool s/node <= 0.5")
    print("the tool's time, s per run (start: until the first event; end: after the last batch):")
    for r in rounds:
        went = r["tool"].get("where_it_went_s", {})
        print(f"  round {r['round']}: " + ", ".join(f"{k} {v}" for k, v in went.items()))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
