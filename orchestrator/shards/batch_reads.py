"""What a batch reads of a shard cluster: its own nodes, the copies they hold and the other copies of those
shards, never the whole cluster.

A plan reads the whole cluster once. Before this, every batch read it again, several times: every node's
info, every shard copy (`_cat/shards`), shard-level stats of every copy and every recovery the cluster
remembers, each built by the elected master from the whole routing table while the cluster is short of a
node; on 3,000 nodes and 600,000 copies about 1 GB per batch (docs/benchmarks.md). Here each read names
what it is about:

- the indices a batch's nodes hold: node-level shard stats of those nodes alone (`_nodes/IDS/stats`);
- every copy of those indices, wherever it is (`_cat/shards/INDICES`): what proves that each copy the batch
  holds has another started copy, with the same pure check as the plan's (shards/safety.py), since every
  copy of a shard is a copy of its index;
- the master-eligible nodes (`_nodes/master:true`), for the quorum; health and the elected master (one
  line each);
- a yellow's unassigned copies, to explain them: the copies of the yellow indices only;
- retention leases, recoveries and the flush: of the batch's indices only.

The tool's own lock index (restart/lock.py) is left out: it has a copy on every node (`auto_expand_replicas:
0-all`), so no batch holds all of its copies, and each read of it is of the whole cluster (a lease and a
recovery per node).

Index names go into the request path in chunks that keep the request line under Elasticsearch's 4 KB limit
(`http.max_initial_line_length`); an index deleted between two reads is left out, not an error.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from orchestrator.restart.lock import LOCK_INDEX
from orchestrator.shards.leases import STATS_FIELDS
from orchestrator.shards.requests import ShardRequests
from orchestrator.shards.rest import HttpError, part
from orchestrator.shards.snapshot import ShardCopy

MAX_NAMES_IN_PATH = 3000  # characters of quoted index names per request (the request line's limit is 4 KB)
SHARD_COLUMNS = "index,shard,prirep,state,id,store"
# Node stats at shard level, kept to the index names (a key each) and one short field per copy.
# What a copy on a stopping node says of its own lease (shards/leases.py: kept_in_its_own_view).
OWN_VIEW_FIELDS = ("retention_leases.leases.id", "retention_leases.leases.retaining_seq_no",
                   "commit.user_data.local_checkpoint", "docs.count")
# `_cat/recovery`'s columns the run reports, by their short names: index, shard, type, stage, bytes to copy,
# copied, in all, start; the target and source nodes last (a name is the only value that can hold a space).
RECOVERY_KEYS = ("i", "s", "ty", "st", "b", "br", "tb", "start_millis", "tnode", "snode")
RECOVERY_COLUMNS = ",".join(RECOVERY_KEYS)


def in_chunks(names: Sequence[str], limit: int = MAX_NAMES_IN_PATH) -> Iterator[list[str]]:
    """``names`` in groups whose path part (quoted, comma-separated) stays within ``limit`` characters."""
    chunk: list[str] = []
    size = 0
    for name in names:
        length = len(part(name)) + 1
        if chunk and size + length > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(name)
        size += length
    if chunk:
        yield chunk


def missing_index(exc: HttpError) -> str | None:
    """The index a 404 says does not exist (deleted since it was listed), if that is what it says."""
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error")
    if not isinstance(error, dict) or exc.status != 404 or error.get("type") != "index_not_found_exception":
        return None
    name = error.get("index") or error.get("resource.id")
    return str(name) if name else None


def copies_from_cat(rows: Any) -> list[ShardCopy]:
    return [ShardCopy(index=r["index"], shard=int(r["shard"]), primary=r["prirep"] == "p", state=r["state"],
                      node_id=r.get("id") or None, size_bytes=int(r.get("store") or 0)) for r in rows]


class BatchReads(ShardRequests):

    def per_index_chunk(self, indices: Collection[str], read: Callable[[list[str]], Any]) -> list[Any]:
        """``read`` of each chunk of ``indices``; an index that no longer exists is dropped and the chunk read
        again (for APIs without `ignore_unavailable`)."""
        answers = []
        for chunk in in_chunks(sorted(indices)):
            while chunk:
                try:
                    answers.append(read(chunk))
                    break
                except HttpError as exc:
                    gone = missing_index(exc)
                    if gone is None or gone not in chunk:
                        raise
                    chunk.remove(gone)
        return answers

    def _held(self, node_ids: Collection[str], fields: Sequence[str]) -> dict[str, dict[tuple[str, int], Any]]:
        """node id -> (index, shard) -> the fields of its copy there (node-level shard stats of these nodes
        alone; a node not in the cluster holds none)."""
        if not node_ids:
            return {}
        kept = [*(f"nodes.*.indices.shards.*.*.{f}" for f in fields), f"-nodes.*.indices.shards.{LOCK_INDEX}"]
        raw = self._do("list the batch's shard copies", "GET",
                       f"/_nodes/{part(*sorted(node_ids))}/stats/indices/docs,store",
                       {"level": "shards", "filter_path": ",".join(kept)})
        held: dict[str, dict[tuple[str, int], Any]] = {}
        for node_id, node in (raw.get("nodes") or {}).items():
            mine = held.setdefault(node_id, {})
            for index, shards in (((node.get("indices") or {}).get("shards") or {}).items()):
                if index == LOCK_INDEX:
                    continue
                for entry in shards if isinstance(shards, list) else ():
                    for number, copy in (entry.items() if isinstance(entry, dict) else ()):
                        mine[(index, int(number))] = copy or {}
        return held

    def held_by(self, node_ids: Collection[str]) -> dict[str, dict[tuple[str, int], int]]:
        """node id -> (index, shard) -> the size of its copy there."""
        return {node_id: {key: int((copy.get("store") or {}).get("size_in_bytes") or 0) for key, copy in held.items()}
                for node_id, held in self._held(node_ids, ("store.size_in_bytes",)).items()}

    def indices_on(self, node_ids: Collection[str]) -> list[str]:
        """The indices with a copy on these nodes."""
        return sorted({index for held in self._held(node_ids, ("routing.state",)).values() for index, _ in held})

    def copies_held(self, node_ids: Collection[str]) -> list[ShardCopy]:
        """The copies these nodes hold, with their role and state (no size)."""
        return [ShardCopy(index, shard, bool((copy.get("routing") or {}).get("primary")),
                          str((copy.get("routing") or {}).get("state") or "STARTED"), node_id, 0)
                for node_id, held in self._held(node_ids, ("routing.state", "routing.primary")).items()
                for (index, shard), copy in held.items()]

    def lease_views(self, node_ids: Collection[str]) -> dict[str, dict[tuple[str, int], Any]]:
        """What the copies on these nodes know of their shard's retention leases (shards/leases.py)."""
        return self._held(node_ids, OWN_VIEW_FIELDS)

    def replicas_of(self, indices: Collection[str]) -> dict[str, int]:
        """index -> its number of replicas now (what auto-expansion set, if it expands)."""
        found: dict[str, int] = {}
        for chunk in in_chunks(sorted(indices)):
            answer = self._do("read the batch's indices' replicas", "GET",
                              f"/{part(*chunk)}/_settings/index.number_of_replicas",
                              {"ignore_unavailable": "true", "filter_path": "*.settings.index.number_of_replicas"})
            for index, body in (answer or {}).items():
                value = (((body or {}).get("settings") or {}).get("index") or {}).get("number_of_replicas")
                if value is not None and str(value).isdigit():
                    found[index] = int(value)
        return found

    def shards_of(self, indices: Collection[str]) -> list[ShardCopy]:
        """Every copy of these indices, assigned or not, from the routing table."""
        answers = self.per_index_chunk(indices, lambda chunk: self._do(
            "list the batch's shards", "GET", f"/_cat/shards/{part(*chunk)}",
            {"format": "json", "bytes": "b", "h": SHARD_COLUMNS}))
        return [c for rows in answers for c in copies_from_cat(rows)]

    def unassigned_copies(self) -> list[ShardCopy]:
        """The unassigned copies of a yellow cluster: those of its yellow indices (hidden ones too)."""
        rows = self._do("list the yellow indices", "GET", "/_cat/indices", {
            "health": "yellow", "expand_wildcards": "all", "format": "json", "h": "index"})
        yellow = [str(r["index"]) for r in rows if isinstance(r, dict) and r.get("index")]
        return [c for c in self.shards_of(yellow) if c.state == "UNASSIGNED"]

    def lease_stats_of(self, indices: Collection[str]) -> dict[str, Any]:
        """Shard-level stats of these indices' copies, as `shard_lease_stats` reads them for the whole cluster."""
        merged: dict[str, Any] = {}
        for chunk in in_chunks(sorted(indices)):
            answer = self._do("read retention leases", "GET", f"/{part(*chunk)}/_stats/docs,store", {
                "level": "shards", "ignore_unavailable": "true", "filter_path": STATS_FIELDS})
            merged.update((answer or {}).get("indices") or {})
        return {"indices": merged}

    def recoveries_of(self, indices: Collection[str], targets: Collection[str],
                      active_only: bool = False) -> list[dict[str, Any]]:
        """The last recovery of each copy of these indices onto the nodes named ``targets`` (or those under
        way), as the run reports them. `_cat/recovery` as text: half the bytes of the same rows as JSON (a
        third of `_recovery`'s). Node names are its last two columns; a name with a space in it (a row of
        more columns) has its chunk read again as JSON."""
        onto = set(targets)

        def read(chunk: list[str]) -> list[dict[str, Any]]:
            params = {"bytes": "b", "active_only": "true" if active_only else "false", "h": RECOVERY_COLUMNS}
            path = f"/_cat/recovery/{part(*chunk)}"
            text = self._do("read recoveries", "GET", path, {**params, "format": "txt"})
            rows = [line.split() for line in str(text or "").splitlines() if line.strip()]
            if all(len(row) == len(RECOVERY_KEYS) for row in rows):
                return [recovery_row(dict(zip(RECOVERY_KEYS, row, strict=True))) for row in rows if row[-2] in onto]
            answer = self._do("read recoveries", "GET", path, {**params, "format": "json"})
            return [recovery_row(r) for r in answer if isinstance(r, dict) and r.get("tnode") in onto]

        return [row for rows in self.per_index_chunk(indices, read) for row in rows]

    def flush_indices(self, indices: Collection[str]) -> None:
        for chunk in in_chunks(sorted(indices)):
            self._do("flush", "POST", f"/{part(*chunk)}/_flush", {
                "allow_no_indices": "true", "ignore_unavailable": "true", "wait_if_ongoing": "true"})


def recovery_row(r: dict[str, Any]) -> dict[str, Any]:
    """A `_cat/recovery` row as the run reports a recovery (`b` is what was to be copied: total less reused)."""
    def number(key: str) -> int:
        value = r.get(key)
        return int(value) if isinstance(value, str | int) and str(value).isdigit() else 0

    total = number("tb")
    source = r.get("snode")
    return {"index": r.get("i"), "shard": number("s"), "type": str(r.get("ty") or "").upper(),
            "stage": str(r.get("st") or "").upper(), "target": r.get("tnode"),
            "source": None if source in (None, "n/a") else source, "start_ms": number("start_millis"),
            "total_bytes": total, "reused_bytes": max(total - number("b"), 0), "recovered_bytes": number("br")}
