"""Sample data for the sandbox: a few indices with replicas, so a restart has shards to recover."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

from elasticsearch import helpers

from orchestrator.errors import SandboxError
from orchestrator.es.connect import Connection, make_client, translated

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
    with translated("load sample data", conn.endpoints):
        for n in range(1, indices + 1):
            index = f"sample-{n}"
            if not es.indices.exists(index=index):
                es.indices.create(index=index, settings={"number_of_shards": 3, "number_of_replicas": 1})
            _indexed, errors = helpers.bulk(es, _docs(index, per_index, n), chunk_size=2000,
                                            raise_on_error=False, stats_only=True)
            if errors:
                raise SandboxError(f"{errors} documents of {index} were not indexed")
            es.indices.refresh(index=index)
            counts[index] = int(es.count(index=index)["count"])
            say(f"{index}: {counts[index]} documents")
        es.cluster.health(wait_for_status="green", timeout="60s")
    return counts
