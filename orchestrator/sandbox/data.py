"""Sample data for the sandbox: a few indices with replicas, so a restart has shards to recover."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator

from orchestrator.errors import SandboxError
from orchestrator.sandbox.rest import INSECURE, SandboxAccess, rest_for
from orchestrator.shards.rest import HttpError, Rest

WORDS = ("restart", "shard", "replica", "recovery", "zone", "node", "segment", "merge", "flush", "allocation")
CHUNK = 2000  # documents per bulk request


def _docs(index: str, count: int, seed: int) -> Iterator[str]:
    """The bulk request's lines, two per document."""
    rng = random.Random(seed)
    for i in range(count):
        yield json.dumps({"index": {"_index": index, "_id": f"{index}-{i}"}})
        yield json.dumps({"n": i, "msg": " ".join(rng.choices(WORDS, k=8)), "value": rng.random()})


def create_index(rest: Rest, index: str, shards: int = 3, replicas: int = 1) -> None:
    """Create ``index`` unless it exists."""
    try:
        rest.request(f"create {index}", "PUT", f"/{index}", body={
            "settings": {"number_of_shards": shards, "number_of_replicas": replicas}})
    except HttpError as exc:
        if "resource_already_exists" not in str(exc.body):
            raise


def bulk_index(rest: Rest, lines: Iterator[str]) -> int:
    """Send the bulk lines in chunks; the number of documents the cluster refused."""
    def send(chunk: list[str]) -> int:
        answer = rest.request("bulk index", "POST", "/_bulk", body="\n".join(chunk) + "\n")
        return sum(1 for item in answer["items"] if next(iter(item.values())).get("error")) \
            if answer.get("errors") else 0

    refused = 0
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= 2 * CHUNK:
            refused, chunk = refused + send(chunk), []
    return refused + (send(chunk) if chunk else 0)


def load_sample_data(endpoints: list[str], docs: int, indices: int, say: Callable[[str], None],
                     product: str = "elasticsearch", access: SandboxAccess = INSECURE) -> dict[str, int]:
    """Bulk-index ``docs`` documents spread over ``indices`` indices (1 replica); return counts per index."""
    rest = rest_for(product, endpoints, timeout_s=60, access=access)
    counts: dict[str, int] = {}
    per_index = max(docs // max(indices, 1), 1)
    for n in range(1, indices + 1):
        index = f"sample-{n}"
        create_index(rest, index)
        refused = bulk_index(rest, _docs(index, per_index, n))
        if refused:
            raise SandboxError(f"{refused} documents of {index} were not indexed")
        rest.request("refresh", "POST", f"/{index}/_refresh")
        counts[index] = int(rest.request("count", "GET", f"/{index}/_count")["count"])
        say(f"{index}: {counts[index]} documents")
    rest.request("wait for green", "GET", "/_cluster/health", {"wait_for_status": "green", "timeout": "60s"})
    return counts
