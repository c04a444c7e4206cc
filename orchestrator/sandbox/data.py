"""Sample data for the sandbox: a few indices with replicas, so a restart has shards to recover."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from elasticsearch import helpers

from orchestrator.errors import SandboxError
from orchestrator.es.connect import Connection, call, make_client

WORDS = ("restart", "shard", "replica", "recovery", "zone", "node", "segment", "merge", "flush", "allocation")


def _docs(index: str, count: int, seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for i in range(count):
        yield {"_index": index, "_id": f"{index}-{i}",
               "_source": {"n": i, "msg": " ".join(rng.choices(WORDS, k=8)), "value": rng.random()}}


def load_sample_data(endpoints: list[str], docs: int, indices: int, say: Callable[[str], None]) -> dict[str, int]:
    """Bulk-index ``docs`` documents spread over ``indices`` indices (1 replica); return counts per index."""
    conn = Connection(endpoints=tuple(endpoints), request_timeout_s=60)
    es = make_client(conn)
    counts: dict[str, int] = {}
    per_index = max(docs // max(indices, 1), 1)
    for n in range(1, indices + 1):
        index = f"sample-{n}"
        if not call("check index", conn, lambda i=index: es.indices.exists(index=i)):
            call("create index", conn, lambda i=index: es.indices.create(
                index=i, settings={"number_of_shards": 3, "number_of_replicas": 1}))
        _indexed, errors = call("bulk index", conn, lambda i=index, k=n: helpers.bulk(
            es, _docs(i, per_index, k), chunk_size=2000, raise_on_error=False, stats_only=True))
        if errors:
            raise SandboxError(f"{errors} documents of {index} were not indexed")
        call("refresh", conn, lambda i=index: es.indices.refresh(index=i))
        counts[index] = int(call("count", conn, lambda i=index: es.count(index=i))["count"])
        say(f"{index}: {counts[index]} documents")
    call("wait for green", conn, lambda: es.cluster.health(wait_for_status="green", timeout="60s"))
    return counts
