"""Force-merge on the real sandbox: many segments down to the target, counts kept, write indices refused."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from elasticsearch import ConnectionTimeout, Elasticsearch, helpers

from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape, es_client


def many_segments(es: Elasticsearch, index: str, batches: int = 40, per_batch: int = 200) -> None:
    """Frequent refreshes, merging held back: every shard ends with about one segment per batch."""
    if es.indices.exists(index=index):
        es.indices.delete(index=index)
    es.indices.create(index=index, settings={
        "number_of_shards": 2, "number_of_replicas": 1, "refresh_interval": "-1",
        "merge.policy.segments_per_tier": 100, "merge.policy.max_merge_at_once": 100})
    for b in range(batches):
        helpers.bulk(es, ({"_index": index, "_id": f"{b}-{i}", "_source": {"n": i, "text": f"doc {b} {i} " * 8}}
                          for i in range(per_batch)), refresh="true")
    es.cluster.health(index=index, wait_for_status="green", timeout="60s")


def max_segments(es: Elasticsearch, index: str) -> int:
    counts: dict[tuple[str, str, str], int] = {}
    for r in es.cat.segments(index=index, format="json", h="shard,prirep,ip"):
        key = (r["shard"], r["prirep"], r["ip"])
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values())


def test_merge_to_target_keeps_documents_and_skips_merged(sandboxes: SandboxManager) -> None:
    es = es_client(sandboxes.get(Shape()))
    many_segments(es, "fm-a")
    many_segments(es, "fm-b")
    assert max_segments(es, "fm-a") > 20
    counts = {i: es.count(index=i)["count"] for i in ("fm-a", "fm-b")}

    dry = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-*", "--dry-run", "--json")
    assert dry.returncode == 0 and {d["verdict"] for d in json_lines(dry.stdout)} == {"merge"}
    assert max_segments(es, "fm-a") > 20, "a dry run changes nothing"

    refused = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-*", "--json")
    assert refused.returncode == 5 and "no --yes: refusing to force-merge" in refused.stderr
    assert max_segments(es, "fm-a") > 20, "nothing merged without a confirmation"
    proc = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-*", "--json", "--yes")
    assert proc.returncode == 0, proc.stderr
    assert_no_traceback(proc)
    summary = json_lines(proc.stdout)[-1]
    assert summary["result"] == "success" and summary["merged"] == 2
    assert max_segments(es, "fm-a") <= 5 and max_segments(es, "fm-b") <= 5
    assert {i: es.count(index=i)["count"] for i in ("fm-a", "fm-b")} == counts

    one = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-a", "--max-segments", "1", "--json",
                      "--yes")
    assert one.returncode == 0 and max_segments(es, "fm-a") == 1

    again = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-a", "--max-segments", "1")
    assert again.returncode == 0 and "already at 1 segment" in again.stderr


def test_write_index_and_live_writes_are_refused(sandboxes: SandboxManager) -> None:
    es = es_client(sandboxes.get(Shape()))
    many_segments(es, "fm-write", batches=8)
    es.indices.put_alias(index="fm-write", name="fm-alias", is_write_index=True)
    proc = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-write", "--json")
    result = json_lines(proc.stdout)[-1]["indices"][0]
    assert result["verdict"] == "refuse" and "write index of alias fm-alias" in result["reason"]
    assert max_segments(es, "fm-write") > 5

    many_segments(es, "fm-live", batches=8)
    stop = threading.Event()

    def keep_writing() -> None:
        n = 0
        while not stop.is_set() and n < 2000:  # bounded in count and time
            es.index(index="fm-live", id=f"live-{n}", document={"n": n})
            n += 1
            time.sleep(0.01)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        live = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-live", "--json")
    finally:
        stop.set()
        writer.join(30)
    assert json_lines(live.stdout)[-1]["indices"][0]["verdict"] == "refuse"
    forced = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-write", "--include-write-indices",
                         "--yes")
    assert forced.returncode == 0 and max_segments(es, "fm-write") <= 5


def test_merge_longer_than_the_request_timeout_survives(sandboxes: SandboxManager, tmp_path: Path) -> None:
    info = sandboxes.get(Shape())
    es = es_client(info)
    timeout = 0.1  # the merge takes longer (0.3 s was sometimes not: the hosts got quicker)
    many_segments(es, "fm-slow-control", batches=60, per_batch=500)
    many_segments(es, "fm-slow", batches=60, per_batch=500)
    # Control: the same merge held open as one request outlives this timeout.
    impatient = es_client(info, request_timeout=timeout, max_retries=0)
    with pytest.raises(ConnectionTimeout):
        impatient.indices.forcemerge(index="fm-slow-control", max_num_segments=1)
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv["cluster"]["request_timeout_s"] = 5  # every other call is quick; the merge must not be one request
    (tmp_path / "inv.yaml").write_text(yaml.safe_dump(inv))
    proc = orchestrate("forcemerge", "--config", str(tmp_path / "inv.yaml"), "--indices", "fm-slow",
                       "--max-segments", "1", "--json", "--yes")
    assert proc.returncode == 0, proc.stderr
    merged = json_lines(proc.stdout)[-1]["indices"][0]
    assert merged["segments_after"] == 1 and merged["seconds"] > timeout


def test_forcemerge_then_restart_is_one_resumable_run(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    es = es_client(info)
    many_segments(es, "fm-then", batches=20)
    count = es.count(index="fm-then")["count"]
    proc = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "fm-then", "--then-restart", "--yes",
                       "--json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json_lines(proc.stdout)[-1]
    assert summary["result"] == "succeeded" and summary["forcemerge"]["merged"] == 1
    assert all(n["restarted"] for n in summary["nodes"])
    assert max_segments(es, "fm-then") <= 5 and es.count(index="fm-then")["count"] == count
    journal = json.loads(Path(summary["journal"]).read_text())
    assert journal["preludes_done"] == ["forcemerge"]


def test_unknown_pattern_is_a_clear_error(sandboxes: SandboxManager) -> None:
    sandboxes.get(Shape())
    proc = orchestrate("forcemerge", "--cluster", "sandbox", "--indices", "nothing-like-this-*")
    assert proc.returncode == 2 and "matches no open index" in proc.stderr
    assert_no_traceback(proc)
