"""Recovery throughput on the sandbox: how fast copies that must be copied are copied, under Elasticsearch's
defaults, under the limits the tool raises, and unthrottled, in one session; with what the hosts carry
beside it (the data path's disk written and read, the link between two hosts, CPU seconds per MiB copied),
so that it says what binds.

Each way: an index of incompressible data (random bytes, base64) with no replica gets one, so that every
replica copy goes file by file from its primary; the time until green and the bytes each recovery copied
give MiB/s. The replicas are dropped again before the next way.

    python -m tests.benchmarks.bench_recovery [--mib 750] [--out reports/bench-recovery.json]   (root; ~10 min)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from elasticsearch import Elasticsearch

from orchestrator.config.inventory import load_inventory
from orchestrator.hosts.transport import make_transport
from tests.benchmarks.bench_restart import orchestrate
from tests.helpers import es_client

REPO = Path(__file__).resolve().parents[2]
MIB = 2**20
INDEX = "bench-recovery"
RATE, CHUNKS, CONCURRENT = ("indices.recovery.max_bytes_per_sec", "indices.recovery.max_concurrent_file_chunks",
                            "cluster.routing.allocation.node_concurrent_recoveries")
TARGET = 0.9  # the tool's limits against unthrottled (issue 39)


def load(es: Elasticsearch, mib: int) -> int:
    """The index, filled with about ``mib`` MiB of incompressible documents; its store size in bytes."""
    es.indices.delete(index=INDEX, ignore_unavailable=True)
    es.indices.create(index=INDEX, settings={"number_of_shards": 3, "number_of_replicas": 0, "refresh_interval": "-1"},
                      mappings={"properties": {"blob": {"type": "binary"}}})
    per_doc = 3 * 1024  # random bytes, 4 KiB once in base64
    docs = mib * MIB // per_doc
    for start in range(0, docs, 500):
        body: list[dict[str, Any]] = []
        for _ in range(min(500, docs - start)):
            body += [{"index": {"_index": INDEX}}, {"blob": base64.b64encode(os.urandom(per_doc)).decode()}]
        es.bulk(operations=body)
    es.indices.refresh(index=INDEX)
    es.indices.flush(index=INDEX)
    stats = es.indices.stats(index=INDEX, metric="store")
    return int(stats["_all"]["primaries"]["store"]["size_in_bytes"])


def jvm_cpu_s(pids: list[int]) -> float:
    """User and system CPU seconds the nodes' JVMs have used (their /proc/PID/stat)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def recover(es: Elasticsearch, settings: dict[str, Any], pids: list[int]) -> dict[str, Any]:
    """Replicas added under ``settings``: seconds to green, bytes copied from peers, MiB/s, CPU s per MiB."""
    es.cluster.put_settings(persistent={RATE: None, CHUNKS: None, CONCURRENT: None, **settings})
    es.indices.put_settings(index=INDEX, settings={"number_of_replicas": 0})
    es.cluster.health(index=INDEX, wait_for_status="green", timeout="120s")
    time.sleep(2)
    cpu = jvm_cpu_s(pids)
    started = time.monotonic()
    es.indices.put_settings(index=INDEX, settings={"number_of_replicas": 1})
    health = es.cluster.health(index=INDEX, wait_for_status="green", timeout="900s",
                               wait_for_no_initializing_shards=True)
    seconds = time.monotonic() - started
    cpu_s = jvm_cpu_s(pids) - cpu
    copied = 0
    for shard in es.indices.recovery(index=INDEX)[INDEX]["shards"]:
        if shard["type"] == "PEER":
            copied += int(shard["index"]["size"]["recovered_in_bytes"])
    mib_s = copied / MIB / seconds
    return {"settings": settings, "green": health["status"] == "green", "seconds": round(seconds, 2),
            "bytes_copied": copied, "mib_s": round(mib_s, 1), "cpu_s_per_mib": round(cpu_s / (copied / MIB), 3)}


def disk_mb_s(data_path: Path) -> dict[str, float]:
    """The data path's disk: 512 MiB written and read back with direct IO (`dd`, no page cache of this
    machine's; a virtual disk's own host may still cache it), then removed."""
    probe = data_path / "bench-recovery-disk.tmp"

    def dd(*args: str) -> float:
        said = subprocess.run(["dd", "bs=4M", *args], capture_output=True, text=True, check=True).stderr
        found = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s", said, re.MULTILINE)
        if found is None:
            raise SystemExit(f"dd said: {said}")
        return round(int(found[1]) / MIB / float(found[2]), 1)

    try:
        return {"write_mib_s": dd("if=/dev/zero", f"of={probe}", "count=128", "oflag=direct"),
                "read_mib_s": dd(f"if={probe}", "of=/dev/null", "iflag=direct")}
    finally:
        probe.unlink(missing_ok=True)


def link_mib_s(inventory: Path) -> float:
    """TCP between two test hosts: 512 MiB sent from the first host to a receiver on the second."""
    inv, _ = load_inventory(None, inventory)
    transport = make_transport(inv)
    sender, receiver = inv.nodes[0], inv.nodes[1]
    port = 47321
    server = (f"timeout 120 python3 -c \"import socket,time\ns=socket.socket()\n"
              f"s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('{receiver.host}',{port}))\n"
              "s.listen(1)\nc,_=s.accept()\nn=0\nt=time.monotonic()\nwhile True:\n b=c.recv(1<<20)\n if not b: break\n"
              " n+=len(b)\nprint(n, time.monotonic()-t)\"")
    said: list[str] = []
    listening = threading.Thread(target=lambda: said.append(transport.run(receiver, server, 150).stdout))
    try:
        listening.start()
        time.sleep(2)
        transport.run(sender, f"bash -c 'head -c {512 * MIB} /dev/zero > /dev/tcp/{receiver.host}/{port}'", 150)
        listening.join(150)
    finally:
        transport.close()
    received, seconds = said[0].split()
    return round(int(received) / MIB / float(seconds), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=750)
    parser.add_argument("--out", type=Path, default=REPO / "reports" / "bench-recovery.json")
    args = parser.parse_args()
    orchestrate("sandbox", "down")
    up = orchestrate("sandbox", "up")
    if up.returncode != 0:
        raise SystemExit(f"sandbox up failed: {up.stderr[-2000:]}")
    info = json.loads(orchestrate("sandbox", "status", "--json").stdout)
    es = es_client(info, request_timeout=900)
    pids = [int(n["pid"]) for n in info["nodes"]]
    stored = load(es, args.mib)
    plan = json.loads(orchestrate("plan", "--cluster", "sandbox", "--json").stdout)
    raised = {s["key"]: s["during"] for s in plan["settings"] if s["key"] in (RATE, CHUNKS, CONCURRENT)}
    ways = {"Elasticsearch's defaults": {},
            "the tool's limits": raised,
            "unthrottled": {**raised, RATE: "0b", CHUNKS: 8}}
    results = {name: recover(es, settings, pids) for name, settings in ways.items()}
    inv, _ = load_inventory(None, Path(info["inventory"]))
    capacity = {**disk_mb_s(Path(inv.nodes[0].data_paths[0])), "link_mib_s": link_mib_s(Path(info["inventory"])),
                "cores": os.cpu_count()}
    es.indices.delete(index=INDEX, ignore_unavailable=True)
    orchestrate("sandbox", "down")
    tool, free = results["the tool's limits"]["mib_s"], results["unthrottled"]["mib_s"]
    cpu = results["unthrottled"]["cpu_s_per_mib"]
    cpu_bound_mib_s = round((capacity["cores"] or 1) / cpu, 1) if cpu else None
    figures = {"stored_bytes": stored, "ways": results, "capacity": capacity,
               "cpu_bound_mib_s": cpu_bound_mib_s, "tool_vs_unthrottled": round(tool / free, 3) if free else None,
               "target": TARGET, "rate_why": next((s["why"] for s in plan["settings"] if s["key"] == RATE), None)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    print(f"recovery of {stored / MIB:.0f} MiB stored (3 primaries, one replica each added)")
    print(f"{'way':<26} {'MiB/s':>7} {'seconds':>8} {'copied MiB':>11} {'CPU s/MiB':>10}  settings")
    for name, r in results.items():
        print(f"{name:<26} {r['mib_s']:>7} {r['seconds']:>8} {r['bytes_copied'] / MIB:>11.0f} "
              f"{r['cpu_s_per_mib']:>10}  {r['settings'] or 'none set'}")
    print(f"the tool's limits / unthrottled: {figures['tool_vs_unthrottled']} (target >= {TARGET})")
    print(f"hosts: disk write {capacity['write_mib_s']} MiB/s, read {capacity['read_mib_s']} MiB/s (data path); "
          f"link {capacity['link_mib_s']} MiB/s (host to host); {capacity['cores']} cores: at "
          f"{cpu} CPU s per MiB the nodes' CPUs carry {cpu_bound_mib_s} MiB/s")
    binds = min((("the disk", capacity["write_mib_s"]), ("the link", capacity["link_mib_s"]),
                 ("the CPUs", cpu_bound_mib_s or float("inf"))), key=lambda b: b[1])
    print(f"what binds: {binds[0]} ({binds[1]} MiB/s; unthrottled reached {free})")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
