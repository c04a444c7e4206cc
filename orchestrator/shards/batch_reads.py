"""What a batch reads of a shard cluster: its own nodes, the copies they hold and the other copies of those
shards, never the whole cluster.

A plan reads the whole cluster once. Before this, every batch read it again, several times: every node's
info, every shard copy (`_cat/shards`), shard-level stats of every copy and every recovery the cluster
remembers, each built by the elected master from the whole routing table while the cluster is short of a
node: reads that grew with the cluster times its batches (docs/benchmarks.md, `bench_scale`). Here each read names
what it is about:

- the copies a batch's nodes hold: node-level shard stats of those nodes alone (`_nodes/IDS/stats`);
- the other copies of their shards: in a settled green cluster every copy is started, so a shard has its
  replicas count (`INDICES/_settings`) plus one, wherever they are; otherwise, or for an index whose
  settings the user may not read, every copy of the index from the routing table
  (`_cluster/state/routing_table/INDICES`);
- the master-eligible nodes (`_nodes/master:true`), for the quorum; health and the elected master;
- a yellow's unassigned copies, to explain them: the routing table of the indices that are not green;
- retention leases, recoveries and the flush: of the batch's indices only.

Reads that name indices ask the routing table and health (cluster privileges) where a restricted system
index (`.security-7`) must be seen, and index APIs with `ignore_unavailable` elsewhere: those leave out an
index deleted since it was listed, and the restricted ones the tool's role may not name (as the whole-cluster
reads they replace did). The tool's own lock index (restart/lock.py) is left out: it has a copy on every
node (`auto_expand_replicas: 0-all`), so no batch holds all its copies, and each read of it is of the whole
cluster. Index names go into the path in chunks that keep the request line under Elasticsearch's 4 KB
limit (`http.max_initial_line_length`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from orchestrator.errors import IncompleteAnswer
from orchestrator.reading import whole_number
from orchestrator.restart.lock import LOCK_INDEX
from orchestrator.shards.answers import (
    NODES_HOLDING,
    ROUTING_TABLE,
    HealthByIndex,
    IndicesSettings,
    RoutingNodes,
    ShardStats,
    not_its_shape,
    parsed,
    parsed_as,
)
from orchestrator.shards.leases import STATS_FIELDS
from orchestrator.shards.requests import ShardRequests
from orchestrator.shards.rest import part
from orchestrator.shards.snapshot import ShardCopy
from orchestrator.units import counted

MAX_NAMES_IN_PATH = 3000  # characters of quoted index names per request (the request line's limit is 4 KB)
ROUTING = ",".join(f"routing_table.indices.*.shards.*.{f}" for f in ("state", "primary", "node"))
# What a copy on a stopping node says of its own lease (shards/leases.py: kept_in_its_own_view).
OWN_VIEW_FIELDS = ("retention_leases.leases.id", "retention_leases.leases.retaining_seq_no",
                   "commit.user_data.local_checkpoint", "docs.count")
# `_cat/recovery`'s columns the run reports, by their short names: index, shard, type, stage, bytes to copy,
# copied, in all, start; the target and source nodes last (a name is the only value that can hold a space).
RECOVERY_KEYS = ("i", "s", "ty", "st", "b", "br", "tb", "start_millis", "tnode", "snode")
RECOVERY_COLUMNS = ",".join(RECOVERY_KEYS)


def in_chunks(names: Collection[str], limit: int = MAX_NAMES_IN_PATH) -> Iterator[list[str]]:
    """``names`` (sorted) in groups whose path part (quoted, comma-separated) stays within ``limit`` characters."""
    chunk: list[str] = []
    size = 0
    for name in sorted(names):
        length = len(part(name)) + 1
        if chunk and size + length > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(name)
        size += length
    if chunk:
        yield chunk


class BatchReads(ShardRequests):

    def each_chunk(self, indices: Collection[str], read: Callable[[str], Any]) -> list[Any]:
        """``read`` of each chunk of ``indices`` (as one path part), its answers in order."""
        return [read(part(*chunk)) for chunk in in_chunks(indices)]

    def _held(self, node_ids: Collection[str], fields: Sequence[str], answered: bool = False,
              present: bool = False) -> dict[str, dict[tuple[str, int], Any]]:
        """node id -> (index, shard) -> the fields of its copy there (node-level shard stats of these nodes
        alone). An answer listing a node not asked for is not Elasticsearch's. What was asked and not answered
        is never "holds nothing" where a decision rests on it (IncompleteAnswer):
        - ``answered``: a node whose stats failed (Elasticsearch answers 200, counts it in `_nodes.failed` and
          leaves it out: a busy node, a circuit breaker, a timeout);
        - ``present``: a node not in the answer at all (not in the cluster under the id asked: gone, or back
          under another id after its data path was wiped). Without it such a node holds none, as a gate reads
          a node that is away (it waits for the node on its own count).
        Without either, the figures and courtesies of a run (a flush, a lease wait, recovery figures) read a
        node that did not answer as holding none."""
        if not node_ids:
            return {}
        kept = ["_nodes.failed", "nodes.*.name", *(f"nodes.*.indices.shards.*.*.{f}" for f in fields),
                f"-nodes.*.indices.shards.{LOCK_INDEX}"]
        what = "list the batch's shard copies"
        raw = parsed_as(NODES_HOLDING, self._do(what, "GET", f"/_nodes/{part(*sorted(node_ids))}/stats/indices/"
                                                "docs,store", {"level": "shards", "filter_path": ",".join(kept)}), what)
        listed, asked = only_asked(raw.get("nodes", {}), node_ids, what), set(node_ids)
        if answered or present:
            if "_nodes" not in raw:
                raise not_its_shape(what, "it has no `_nodes` header, which says whether every node answered")
            failed = raw["_nodes"].get("failed", 0)
            if failed:
                raise IncompleteAnswer(f"{what}: {counted(failed, 'node')} of the {len(asked)} asked did not answer "
                                       "(its stats failed: a busy node, a circuit breaker, a timeout); what it holds "
                                       "is not known, so no node is stopped on this answer")
        if present and asked - listed:
            raise IncompleteAnswer(f"{what}: node id(s) {', '.join(sorted(asked - listed))} are not in the "
                                   "cluster's answer (not in the cluster under the id the plan has: a node whose "
                                   "data path was wiped comes back under another); what it holds is not known, so "
                                   "no node is stopped on this answer")
        held: dict[str, dict[tuple[str, int], Any]] = {}
        for node_id, node in raw.get("nodes", {}).items():
            mine = held.setdefault(node_id, {})
            for index, shards in node.get("indices", {}).get("shards", {}).items():
                for entry in shards if index != LOCK_INDEX else ():
                    for number, copy in entry.items():  # a shard's number: checked where parsed
                        mine[(index, int(number))] = copy
        return held

    def assigned_to(self, node_ids: Collection[str]) -> list[ShardCopy]:
        """The copies the elected master assigns these nodes (`_cluster/state/routing_nodes`, filtered to them):
        what a node holds, said by another than the node itself. The master walks its whole routing table for
        it; what crosses the wire is these nodes' copies alone (their ids in the filter, in chunks that keep the
        request line short)."""
        what = "list the copies the master assigns the batch's nodes"
        out: list[ShardCopy] = []
        for chunk in in_chunks(node_ids, MAX_NAMES_IN_PATH // 2):
            wanted = ",".join(f"routing_nodes.nodes.{node_id}" for node_id in chunk)
            raw = parsed(RoutingNodes, self._do(what, "GET", "/_cluster/state/routing_nodes",
                                                {"filter_path": wanted}) or {}, what)
            only_asked(raw.routing_nodes.nodes, chunk, what)
            out += [ShardCopy(c.index, c.shard, c.primary, c.state, node_id, 0)
                    for node_id, copies in raw.routing_nodes.nodes.items() for c in copies if c.index != LOCK_INDEX]
        return out

    def held_by(self, node_ids: Collection[str]) -> dict[str, dict[tuple[str, int], int]]:
        """node id -> (index, shard) -> the size of its copy there."""
        return {node_id: {key: int((copy.get("store") or {}).get("size_in_bytes") or 0) for key, copy in held.items()}
                for node_id, held in self._held(node_ids, ("store.size_in_bytes",)).items()}

    def indices_on(self, node_ids: Collection[str]) -> list[str]:
        """The indices with a copy on these nodes."""
        return sorted({index for held in self._held(node_ids, ("routing.state",)).values() for index, _ in held})

    def copies_held(self, node_ids: Collection[str], proof: bool = False) -> list[ShardCopy]:
        """The copies these nodes hold, with their role and state (no size): every node asked must have
        answered, and with ``proof`` (a stop is decided on it) be in the cluster (see `_held`)."""
        return [ShardCopy(index, shard, bool((copy.get("routing") or {}).get("primary")),
                          str((copy.get("routing") or {}).get("state") or "STARTED"), node_id, 0)
                for node_id, held in self._held(node_ids, ("routing.state", "routing.primary"), answered=True,
                                                present=proof).items()
                for (index, shard), copy in held.items()]

    def lease_views(self, node_ids: Collection[str]) -> dict[str, dict[tuple[str, int], Any]]:
        """What the copies on these nodes know of their shard's retention leases (shards/leases.py)."""
        return self._held(node_ids, OWN_VIEW_FIELDS)

    def replicas_of(self, indices: Collection[str]) -> dict[str, int]:
        """index -> its number of replicas now (what auto-expansion set, if it expands); an index the user may
        not read the settings of (a restricted system index) is not in the answer."""
        found: dict[str, int] = {}
        what = "read the batch's indices' replicas"
        for answer in self.each_chunk(indices, lambda names: self._do(
                what, "GET", f"/{names}/_settings/index.number_of_replicas",
                {"ignore_unavailable": "true", "filter_path": "*.settings.index.number_of_replicas"})):
            for index, body in parsed(IndicesSettings, answer or {}, what).root.items():
                value = whole_number(body.settings.index.number_of_replicas, 9)
                if value is not None:
                    found[index] = value
        return found

    def present_nodes(self, node_ids: Collection[str]) -> set[str]:
        """Which of these node ids the cluster lists now (node info of those nodes alone, without a metric)."""
        what = "check that the copies' nodes are in the cluster"
        present: set[str] = set()
        for chunk in in_chunks(node_ids):
            raw = parsed_as(NODES_HOLDING, self._do(what, "GET", f"/_nodes/{part(*chunk)}/none",
                                                    {"filter_path": "nodes.*.name"}), what)
            present |= only_asked(raw.get("nodes", {}), chunk, what)
        return present

    def shards_of(self, indices: Collection[str],
                  shards: Collection[tuple[str, int]] | None = None) -> list[ShardCopy]:
        """Every copy of these indices, assigned or not, from the routing table (cluster privileges: a
        restricted system index is listed too), without sizes; of ``shards`` alone, when given (a proof's: the
        copies of the other shards are not built, a third of a turn's read at thousands of nodes)."""
        what = "list the batch's shards"
        copies: list[ShardCopy] = []
        copy = tuple.__new__  # a named tuple built as a tuple: a turn's read builds thousands
        for answer in self.each_chunk(indices, lambda names: self._do(
                what, "GET", f"/_cluster/state/routing_table/{names}",
                {"ignore_unavailable": "true", "filter_path": ROUTING})):
            table = parsed_as(ROUTING_TABLE, answer or {}, what).get("routing_table", {}).get("indices", {})
            for index, body in table.items():
                for number, listed in body.get("shards", {}).items():  # a shard's number: checked where parsed
                    shard = int(number)
                    if shards is None or (index, shard) in shards:
                        copies += [copy(ShardCopy, (index, shard, c["primary"], c["state"], c.get("node") or None, 0))
                                   for c in listed]
        return copies

    def unassigned_copies(self) -> list[ShardCopy]:
        """The unassigned copies of a yellow cluster: those of the indices that are not green (health by index
        and the routing table: cluster privileges, so hidden and restricted indices are seen too)."""
        what = "list the indices that are not green"
        answer = parsed(HealthByIndex, self._do(what, "GET", "/_cluster/health",
                                                {"level": "indices", "filter_path": "indices.*.status"}) or {}, what)
        waiting = [index for index, body in answer.indices.items() if body.status != "green"]
        return [c for c in self.shards_of(waiting) if c.state == "UNASSIGNED"]

    def lease_stats_of(self, indices: Collection[str]) -> dict[str, Any]:
        """Shard-level stats of these indices' copies, as `shard_lease_stats` reads them for the whole cluster."""
        what = "read retention leases"
        merged: dict[str, Any] = {}
        for answer in self.each_chunk(indices, lambda names: self._do(
                what, "GET", f"/{names}/_stats/docs,store",
                {"level": "shards", "ignore_unavailable": "true", "filter_path": STATS_FIELDS})):
            merged.update(parsed(ShardStats, answer or {}, what).model_dump()["indices"])
        return {"indices": merged}

    def recoveries_of(self, indices: Collection[str], targets: Collection[str],
                      active_only: bool = False) -> list[dict[str, Any]]:
        """The last recovery of each copy of these indices onto the nodes named ``targets`` (or those under
        way), as the run reports them. `_cat/recovery` as text: half the bytes of the same rows as JSON (a
        third of `_recovery`'s). Node names are its last two columns; a name with a space in it (a row of
        more columns) has its chunk read again as JSON."""
        onto = set(targets)
        params = {"bytes": "b", "active_only": "true" if active_only else "false", "h": RECOVERY_COLUMNS,
                  "ignore_unavailable": "true"}

        def read(names: str) -> list[dict[str, Any]]:
            text = self._do("read recoveries", "GET", f"/_cat/recovery/{names}", {**params, "format": "txt"})
            rows = [line.split() for line in str(text or "").splitlines() if line.strip()]
            if all(len(row) == len(RECOVERY_KEYS) for row in rows):
                return [recovery_row(dict(zip(RECOVERY_KEYS, row, strict=True))) for row in rows if row[-2] in onto]
            answer = self._do("read recoveries", "GET", f"/_cat/recovery/{names}", {**params, "format": "json"})
            if not isinstance(answer, list):
                raise not_its_shape("read recoveries", f"a list of rows was expected, not {type(answer).__name__}")
            return [recovery_row(r) for r in answer if isinstance(r, dict) and r.get("tnode") in onto]

        return [row for rows in self.each_chunk(indices, read) for row in rows]

    def flush_indices(self, indices: Collection[str]) -> None:
        self.each_chunk(indices, lambda names: self._do("flush", "POST", f"/{names}/_flush", {
            "allow_no_indices": "true", "ignore_unavailable": "true", "wait_if_ongoing": "true"}))


def only_asked(listed: Collection[str], asked: Collection[str], what: str) -> set[str]:
    """The node ids an answer lists, every one of them asked for: an answer naming another is not the cluster's."""
    extra = set(listed) - set(asked)
    if extra:
        raise not_its_shape(what, f"it lists {len(extra)} node(s) that were not asked for")
    return set(listed)


def recovery_row(r: dict[str, Any]) -> dict[str, Any]:
    """A `_cat/recovery` row as the run reports a recovery (`b` is what was to be copied: total less reused)."""
    def number(key: str) -> int:
        return whole_number(r.get(key)) or 0

    total = number("tb")
    source = r.get("snode")
    return {"index": r.get("i"), "shard": number("s"), "type": str(r.get("ty") or "").upper(),
            "stage": str(r.get("st") or "").upper(), "target": r.get("tnode"),
            "source": None if source in (None, "n/a") else source, "start_ms": number("start_millis"),
            "total_bytes": total, "reused_bytes": max(total - number("b"), 0), "recovered_bytes": number("br")}
