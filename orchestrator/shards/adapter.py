"""The adapter to an Elasticsearch or OpenSearch cluster: the only code that talks to one, through its
product's `Rest` (shards/rest.py). Every answer is read into the snapshot's types, here and in the
adapter's parts (requests.py, batch_reads.py, lock_documents.py, cluster_facts.py, merge_requests.py).

The plan reads the whole cluster once (`snapshot`); a batch reads only what it is about (`batch_snapshot`
and the reads of batch_reads.py), so that a run's reads grow with its batches, not with the cluster
times its batches."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from orchestrator.errors import ClusterError, ClusterUnreachable, OrchestratorError, PreflightFailed
from orchestrator.restart.plan import Plan
from orchestrator.restart.search_figures import SearchCounters
from orchestrator.shards import privileges
from orchestrator.shards.answers import (
    Blocks,
    BlocksState,
    NodesMemory,
    RunningSnapshot,
    RunningSnapshots,
    State,
    copies_from_cat,
    disk_rows,
    not_its_shape,
    parsed,
    search_counters_of,
)
from orchestrator.shards.batch_reads import BatchReads, in_chunks
from orchestrator.shards.cluster_facts import ClusterFacts
from orchestrator.shards.lock_documents import LockDocuments
from orchestrator.shards.merge_requests import MergeRequests
from orchestrator.shards.node_info import IDENTITY_FIELDS, NODE_FIELDS, node_ids_in, nodes_in
from orchestrator.shards.preflight import PREFLIGHT_SETTINGS, DiskUsage, Preflight
from orchestrator.shards.rest import HttpError, part
from orchestrator.shards.settled import MAX_EXPLAINED, UnassignedCopy, reason_for
from orchestrator.shards.snapshot import ClusterSnapshot, EsNode, Health, ShardCopy


class ShardClusterAdapter(BatchReads, LockDocuments, ClusterFacts, MergeRequests):
    """One cluster of the shard model (Elasticsearch, OpenSearch), whichever client its `Rest` uses: its
    state and the run's settings here; its requests, lock, facts and force-merge in the parts it is made of."""

    def nodes(self) -> list[EsNode]:
        """Every node, with what the plan reads of each (never read per batch: see `nodes_by_id`)."""
        raw = self._do("list nodes", "GET", "/_nodes/jvm,process,settings,os",
                       {"flat_settings": "true", "filter_path": NODE_FIELDS})
        return nodes_in(raw, self.awareness_attribute, "list nodes")

    def nodes_by_id(self, node_ids: Sequence[str]) -> list[EsNode]:
        """These nodes alone (those in the cluster), as `nodes` reads them."""
        if not node_ids:
            return []
        raw = self._do("read the batch's nodes", "GET", f"/_nodes/{part(*node_ids)}/jvm,process,settings,os",
                       {"flat_settings": "true", "filter_path": NODE_FIELDS})
        return nodes_in(raw, self.awareness_attribute, "read the batch's nodes")

    def zones(self) -> dict[str, str | None]:
        """node id -> its zone (the awareness attribute), for every node: a light list (OpenSearch's zone batches)."""
        raw = self._do("list the nodes' zones", "GET", "/_nodes/_all/none",
                       {"filter_path": f"nodes.*.name,nodes.*.attributes.{self.awareness_attribute}"})
        return {n.id: n.zone for n in nodes_in(raw, self.awareness_attribute, "list the nodes' zones")}

    def master_eligible(self) -> list[EsNode]:
        """The master-eligible nodes in the cluster (what the quorum is counted from), by name and roles."""
        raw = self._do("list the master-eligible nodes", "GET", "/_nodes/master:true/none",
                       {"filter_path": "nodes.*.name,nodes.*.roles"})
        return nodes_in(raw, self.awareness_attribute, "list the master-eligible nodes")

    def memory_by_node(self) -> dict[str, int]:
        """node id -> its host's memory in bytes (what Elasticsearch's default recovery rate of a
        dedicated cold or frozen node depends on)."""
        what = "read the nodes' memory"
        raw = parsed(NodesMemory, self._do(what, "GET", "/_nodes/stats/os",
                                           {"filter_path": "nodes.*.os.mem.total_in_bytes"}), what)
        return {node_id: n.os.mem.total_in_bytes for node_id, n in raw.nodes.items() if n.os.mem.total_in_bytes}

    def search_counters(self) -> dict[str, SearchCounters] | None:
        """node name -> its search totals since its start (restart/search_figures.py): one light read of every
        node's stats, only the four figures (`filter_path`). A node that does not answer is left out: it is
        away, and the figures count the nodes that serve."""
        what = "read the nodes' search figures"
        return search_counters_of(self._do(what, "GET", "/_nodes/stats/indices,thread_pool/search", {
            "filter_path": "nodes.*.name,nodes.*.indices.search.query_total,nodes.*.indices.search."
                           "query_time_in_millis,nodes.*.thread_pool.search.queue,nodes.*.thread_pool.search.rejected"}),
                                  what)

    def search_once(self, index: str, query: dict[str, Any]) -> bool:
        """The inventory's probe: no hits sent back, and not from the request cache (a cached answer says
        nothing of the nodes' load)."""
        self._do(f"search {index} (the search probe)", "POST", f"/{part(index)}/_search",
                 {"request_cache": "false", "size": "0", "filter_path": "took"}, {"query": query})
        return True

    def master_id(self) -> str | None:
        what = "find elected master"
        return parsed(State, self._do(what, "GET", "/_cluster/state/master_node"), what).master_node or None

    def shards(self) -> list[ShardCopy]:
        """Every copy of the cluster (the plan's; a batch reads its indices' own: `shards_of`)."""
        return copies_from_cat(self._do("list shards", "GET", "/_cat/shards", {"format": "json", "bytes": "b",
                                        "h": "index,shard,prirep,state,id,store"}), "list shards")

    def shutdown_records(self) -> list[dict[str, Any]] | None:
        """Node shutdown records, or None without the shutdown API. Without its plugin, GET
        /_nodes/shutdown is node info for a node named 'shutdown' (a dict of nodes); the shutdown
        API answers a list of records."""
        try:
            body = self._do("read node shutdowns", "GET", "/_nodes/shutdown")
        except HttpError:
            return None
        records = body.get("nodes") if isinstance(body, dict) else None
        return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else None

    def preflight_reads(self, lacking: Callable[[], list[str] | None]) -> tuple[Callable[[], Any], ...]:
        """What the plan checks before a run besides nodes and shards, as reads to send with the plan's
        others (never per batch): disk use, blocks, and running snapshots. Snapshot status needs `manage`:
        a user refused for missing privileges (``lacking``, waited for by that read alone) is not asked for it."""
        def disk() -> Any:
            what = "read disk use"
            return disk_rows(self._do(what, "GET", "/_cat/allocation", {"format": "json", "bytes": "b",
                                      "h": "node,disk.percent,disk.avail"}), what)

        def blocks() -> Any:
            what = "read blocks"
            return parsed(BlocksState, self._do(what, "GET", "/_cluster/state/blocks"), what).blocks

        def running() -> Any:
            what = "read running snapshots"
            return [] if lacking() else parsed(RunningSnapshots, self._do(what, "GET", "/_snapshot/_status"),
                                               what).snapshots
        return disk, blocks, running

    @staticmethod
    def preflight(settings_in_force: dict[str, Any], shutdowns: list[dict[str, Any]], lacking: list[str] | None,
                  disk: list[tuple[str, float, int]], blocks: Blocks, running: list[RunningSnapshot]) -> Preflight:
        """The preflight's findings from the answers of `preflight_reads` and the plan's other reads."""
        return Preflight(
            disk=tuple(DiskUsage(*row) for row in disk),
            disk_settings={k: str(settings_in_force[k]) for k in PREFLIGHT_SETTINGS if k in settings_in_force},
            index_blocks={index: tuple(sorted({b.description or i for i, b in found.items()}))
                          for index, found in blocks.indices.items()},
            global_blocks=tuple(b.description or i for i, b in blocks.global_.items()),
            shutdowns=tuple(f"{r.get('node_id')} ({str(r.get('type', '?')).lower()})" for r in shutdowns),
            running_snapshots=tuple(f"{s.repository}:{s.snapshot} ({s.state})" for s in running),
            missing_privileges=None if lacking is None else tuple(lacking),
        )

    def snapshot(self) -> ClusterSnapshot:
        """The cluster's state, as the plan reads it: everything, once. Independent reads are sent together:
        a snapshot costs about one request's time."""
        h, shards, nodes, master, lacking, plan_only = self._plan_reads()
        (persistent, transient, defaults), shutdowns, memory, disk_rows, blocks, running = plan_only
        preflight = self.preflight({**defaults, **persistent, **transient}, shutdowns or [], lacking,
                                   disk_rows, blocks, running)
        nodes = [replace(n, memory_bytes=memory.get(n.id)) for n in nodes]
        unassigned = self.explain_unassigned(shards) if settling(h) else ()
        return snapshot_of(h, tuple(nodes), master, tuple(shards), unassigned, persistent=persistent,
                           transient=transient, has_shutdown_api=shutdowns is not None, preflight=preflight)

    def batch_snapshot(self, node_ids: Sequence[str], proof: bool, explain: bool) -> ClusterSnapshot:
        """What a batch's gate and last look decide from, bounded by the batch: health, the elected master,
        the master-eligible nodes (its `nodes`: the quorum), and as `shards` every copy of each shard the
        batch's nodes hold, so that the plan's checks (shards/safety.py) answer for the batch exactly as
        over the whole cluster:
        - the batch's own copies, from their nodes' stats: every node asked must answer (batch_reads.py); with
          ``proof``, with those the elected master assigns them;
        - a green cluster with nothing moving has every copy of every shard started: the copies a shard
          has beside the batch's are its replicas count (read now, and no more than the data nodes can
          hold) plus one, less those on the batch's nodes, each a started copy on a node outside the batch
          (`ELSEWHERE`); a batch copy that is not started there is an answer that contradicts itself;
        - otherwise, and for an index whose settings the user may not read, every copy of the index from the
          routing table, those on a node the cluster does not list left out; with ``proof`` (the last look
          before a stop, a window's admission: each copy is shown on the node that holds it), every copy of
          each shard the batch holds, and of no other shard (the proof decides shard by shard).
        A yellow with nothing moving has its unassigned copies explained (those of its indices not green), unless
        ``explain`` is False (a window's proof, which a yellow the window makes does not concern)."""
        h, masters, master, held, assigned = read_together(
            self.health, self.master_eligible, self.master_id, lambda: self.copies_held(node_ids, proof),
            lambda: self.assigned_to(node_ids) if proof else [])
        # With ``proof``, what the batch holds is what its nodes say and what the master assigns them, together: a
        # node that leaves a copy out of its own answer does not have it proven by omission.
        seen = {(c.index, c.shard, c.node_id) for c in held}
        held += [c for c in assigned if (c.index, c.shard, c.node_id) not in seen]
        green = settled_green(h)
        if green and (moving := next((c for c in held if c.state != "STARTED"), None)):
            raise not_its_shape("list the batch's shard copies", f"health says green with nothing moving, yet "
                                f"[{moving.index}][{moving.shard}] on {moving.node_id} is {moving.state[:40]}")
        indices = {c.index for c in held}
        replicas = {} if proof or not green else within(self.replicas_of(indices), data_nodes(h))
        proved = [c for c in held if c.index in replicas]
        listed = self.listed_copies(indices - set(replicas), {(c.index, c.shard) for c in held} if proof else None)
        # A copy the batch's node says it holds stays counted on that node, whatever the table says.
        routed = {(c.index, c.shard, c.node_id) for c in listed}
        unlisted = [c for c in held if c.index not in replicas and (c.index, c.shard, c.node_id) not in routed]
        shards = [*proved, *elsewhere(proved, replicas), *listed, *unlisted]
        unassigned = self.explain_unassigned(self.unassigned_copies()) if explain and settling(h) else ()
        return snapshot_of(h, tuple(masters), master, tuple(shards), unassigned)

    def listed_copies(self, indices: Collection[str],
                      shards: Collection[tuple[str, int]] | None = None) -> list[ShardCopy]:
        """Every copy of these indices in the routing table (of ``shards`` alone, when given), but those it says
        are on a node the cluster does not list (a copy there serves nothing): their nodes asked, bounded by the
        nodes they name. A proof names the shards its batch holds: their copies are all it decides on, and the
        other shards of the same indices name most of a large cluster's nodes (3,000 nodes, 200 copies a node:
        about 1,300 nodes, ten requests, against about 200 nodes for the shards held)."""
        copies = self.shards_of(indices, shards)
        named = {c.node_id for c in copies if c.node_id}
        present = self.present_nodes(named) if named else set()
        return [c for c in copies if c.node_id is None or c.node_id in present]

    def _plan_reads(self) -> tuple[Any, ...]:
        """The plan's reads and the privileges check, sent together (the check alone took as long as all
        the reads). A user lacking `monitor` hears which privileges it lacks, not the first read's 403."""
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="privileges") as one:
            checked = one.submit(self.missing_privileges)

            def lacking() -> list[str] | None:
                found = checked.result()
                if found and "cluster:monitor" in found:
                    raise PreflightFailed([privileges.refusal(found)])
                return found

            try:
                h, shards, nodes, master, *plan_only = read_together(
                    self.health, self.shards, self.nodes, self.master_id,
                    lambda: self.cluster_settings(include_defaults=True), self.shutdown_records,
                    self.memory_by_node, *self.preflight_reads(lacking))
            except OrchestratorError:
                lacking()  # the check's refusal or error first, as when it was asked before the reads
                raise
            return h, shards, nodes, master, lacking(), plan_only

    def explain_unassigned(self, shards: Iterable[ShardCopy],
                           until_blocking: Collection[str] | None = None) -> tuple[UnassignedCopy, ...]:
        """The allocation explain API's answer for each unassigned shard copy (one call per shard and
        role, at most MAX_EXPLAINED): what a settled yellow is judged on. With ``until_blocking`` (the
        planned node ids), the look stops at the first copy that blocks: one is enough to wait."""
        counts = Counter((c.index, c.shard, c.primary) for c in shards if c.state == "UNASSIGNED")
        out = []
        for (index, shard, primary), n in sorted(counts.items())[:MAX_EXPLAINED]:
            try:
                raw = self._do("explain an unassigned shard", "POST", "/_cluster/allocation/explain",
                               body={"index": index, "shard": shard, "primary": primary})
            except ClusterUnreachable:
                raise
            except ClusterError:
                continue  # assigned meanwhile (or not explainable): counted as unexplained, so it waits
            if not isinstance(raw, dict):
                raise not_its_shape("explain an unassigned shard", "not an object")
            try:
                out.append(UnassignedCopy.from_explain(raw, copies=n))
            except (AttributeError, TypeError, ValueError) as exc:
                raise not_its_shape("explain an unassigned shard", type(exc).__name__) from None
            if until_blocking is not None and reason_for(out[-1], until_blocking) is None:
                break
        return tuple(out)

    # --- what the restart engine asks of every product (restart/adapter.py) -------------------
    def gate_snapshot(self, plan: Plan, restarting: Collection[str], proof: bool = False,
                      window: Collection[str] | None = None) -> ClusterSnapshot:
        snap = self.batch_snapshot([plan.node_ids[n] for n in restarting if n in plan.node_ids], proof,
                                   explain=window is None)
        # A node away: which, for the operator, from a list of every node in the cluster. A window's nodes are
        # away by design, so its proof (asked at each admission and each last look) reads that list only when a
        # node beyond them is missing: a read of the whole cluster per admission would grow with the cluster.
        expected = len(plan.node_ids) - len((set(window) - set(restarting)) & plan.node_ids.keys()) \
            if window is not None else len(plan.node_ids)
        if snap.health.number_of_nodes < expected:
            snap = replace(snap, absent=tuple(self.absent(plan)))
        return snap

    def absent(self, plan: Plan) -> list[str]:
        """The plan's nodes (inventory names) that are not in the cluster: a light list of every node's id,
        read only when a node is away."""
        raw = self._do("list the nodes in the cluster", "GET", "/_nodes/_all/none", {"filter_path": "nodes.*.name"})
        present = node_ids_in(raw, "list the nodes in the cluster")
        return sorted(name for name, node_id in plan.node_ids.items() if node_id not in present)

    def live_identity(self, plan: Plan, name: str) -> str | None:
        """The node's process, asked of it alone: by its id, and by its name (a node whose data path was
        wiped comes back with a new id), in one request."""
        node_id = plan.node_ids.get(name)
        spec = [*([node_id] if node_id else []), *([name] if not set(name) & {",", "*"} else [])]
        raw = self._do("read the node's process", "GET", f"/_nodes/{part(*spec)}/jvm,process",
                       {"filter_path": IDENTITY_FIELDS})
        return identity_in(nodes_in(raw, self.awareness_attribute, "read the node's process"), plan, name)

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        identity = self.live_identity(plan, name)
        if identity is not None or timeout_s < 1:
            return identity
        # The node is away: one server-side wait until the cluster has as many nodes as with one node of
        # its batch back (counted from the plan, as the gate counts: a count read now could still include
        # the node that left). No elected master while the node was one: health needs one, node info not.
        with contextlib.suppress(ClusterError):
            self.health(wait_for_nodes=f">={one_back(plan, name)}", timeout_s=timeout_s)
        return self.live_identity(plan, name)

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        persistent, transient = self.cluster_settings() if any(s != INDEX_SCOPE for s, _ in wanted) else ({}, {})
        per_index = {setting: self.index_settings_of(setting) for setting in
                     {index_setting_of(key)[1] for scope, key in wanted if scope == INDEX_SCOPE}}
        return [per_index[index_setting_of(key)[1]].get(index_setting_of(key)[0]) if scope == INDEX_SCOPE
                else (transient if scope == "transient" else persistent).get(key) for scope, key in wanted]

    def index_settings_of(self, setting: str) -> dict[str, str | None]:
        """Each open index's own value of ``setting`` (an `index.` key; None: none of its own, its default
        applies). `_all` expands to the open indices that are not hidden: a system index is not the run's."""
        what = f"read the indices' {setting}"
        raw = self._do(what, "GET", "/_all/_settings", {"filter_path": f"*.settings.index.uuid,*.settings.{setting}"})
        out: dict[str, str | None] = {}
        for index, body in (raw or {}).items():
            if not isinstance(body, dict):  # an index listed without its settings: not "none of its own"
                raise not_its_shape(what, f"{str(index)[:80]} is listed with {str(body)[:40]!r}, not its settings")
            value: Any = body.get("settings")
            for part_of_key in setting.split("."):
                value = value.get(part_of_key) if isinstance(value, dict) else None
            if value is not None and not isinstance(value, str):
                raise not_its_shape(what, f"{setting} of {str(index)[:80]} is {str(value)[:40]!r}")
            out[str(index)] = value
        return out

    def put_index_settings(self, values: dict[str, Any]) -> None:
        """Index settings as `index_setting_key` names them, one request per setting and value (in chunks of
        indices that keep the request line short); None puts the default back."""
        groups: dict[tuple[str, Any], list[str]] = {}
        for key, value in values.items():
            index, setting = index_setting_of(key)
            groups.setdefault((setting, value), []).append(index)
        for (setting, value), indices in groups.items():
            for chunk in in_chunks(sorted(indices)):
                self._do(f"set {setting} of {len(chunk)} indices", "PUT", f"/{part(*chunk)}/_settings",
                         {"ignore_unavailable": "true"}, body={setting: value})

    def health_summary(self) -> dict[str, Any]:
        h = self.health()
        out = {k: h[k] for k in ("status", "number_of_nodes", "initializing_shards", "relocating_shards",
                                 "unassigned_shards")}
        out["text"] = (f"{h['status']}, {h['number_of_nodes']} nodes, {h['initializing_shards']} initializing, "
                       f"{h['unassigned_shards']} unassigned")
        return out

    # --- writes ------------------------------------------------------------------------------
    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        if scope == INDEX_SCOPE:
            self.put_index_settings(values)
            return
        if scope not in ("persistent", "transient"):
            raise ClusterError(f"cannot write a setting in scope {scope!r}")
        self._do(f"set {', '.join(values)}", "PUT", "/_cluster/settings", body={scope: values})



# Index settings a run changes are journaled in this scope, each by `index_setting_key` (restart/steps.py).
INDEX_SCOPE = "index"


def index_setting_key(index: str, setting: str) -> str:
    """An index's setting as one journal key: an index name never holds a slash."""
    return f"{index}/{setting}"


def index_setting_of(key: str) -> tuple[str, str]:
    index, _, setting = key.partition("/")
    return index, setting


def settled_green(h: dict[str, Any]) -> bool:
    """Green with nothing initializing or relocating: every copy of every shard is started."""
    return bool(h["status"] == "green" and not (h["initializing_shards"] or h["relocating_shards"]))


# A node that is not one of the batch's: where the started copies of a settled green cluster's shards are,
# beside those on the batch's nodes (which node does not matter to the batch's checks).
ELSEWHERE = "(a node outside the batch)"


def elsewhere(held: Sequence[ShardCopy], replicas: dict[str, int]) -> list[ShardCopy]:
    """For each shard held on the batch's nodes, its other started copies in a settled green cluster."""
    in_batch = Counter((c.index, c.shard) for c in held)
    return [ShardCopy(index, shard, False, "STARTED", ELSEWHERE, 0)
            for (index, shard), n in sorted(in_batch.items()) for _ in range(replicas[index] + 1 - n)]


def data_nodes(h: dict[str, Any]) -> int:
    """The data nodes health counts (all its nodes, where it does not say)."""
    said = h.get("number_of_data_nodes")
    return said if isinstance(said, int) and not isinstance(said, bool) and said >= 0 else h["number_of_nodes"]


def within(replicas: dict[str, int], data: int) -> dict[str, int]:
    """The replica counts a green cluster can hold: each copy of a shard on a data node of its own. A count
    past that (a forged `"99999999999"`) is not believed: that index's copies are listed instead."""
    return {index: n for index, n in replicas.items() if n + 1 <= data}


def settling(h: dict[str, Any]) -> bool:
    """A yellow with nothing moving: its unassigned copies are explained (shards/settled.py)."""
    return bool(h["status"] == "yellow" and not (h["initializing_shards"] or h["relocating_shards"]))


def snapshot_of(h: dict[str, Any], nodes: tuple[EsNode, ...], master: str | None, shards: tuple[ShardCopy, ...],
                unassigned: tuple[UnassignedCopy, ...], **plan_only: Any) -> ClusterSnapshot:
    return ClusterSnapshot(
        cluster_name=h["cluster_name"],
        health=Health(status=h["status"], number_of_nodes=h["number_of_nodes"],
                      relocating_shards=h["relocating_shards"], initializing_shards=h["initializing_shards"],
                      unassigned_shards=h["unassigned_shards"],
                      delayed_unassigned_shards=h["delayed_unassigned_shards"]),
        nodes=nodes, master_id=master, shards=shards, unassigned=unassigned, **plan_only)


def one_back(plan: Plan, name: str) -> int:
    """The cluster's node count once one node of ``name``'s batch is back (the others may still be away)."""
    batch = next((b for b in plan.batches if name in b.nodes), None)
    return len(plan.node_ids) - (len(batch.nodes) if batch else 1) + 1


def identity_in(nodes: Sequence[EsNode], plan: Plan, name: str) -> str | None:
    """The process identity of the node ``name`` among ``nodes`` (None: not among them)."""
    node_id = plan.node_ids.get(name)
    return next((n.process_identity for n in nodes if n.id == node_id or n.name == name), None)


def read_together(*reads: Callable[[], Any]) -> list[Any]:
    """Independent reads, each a request, sent at once; their answers in order. The first read's error
    (in that order) is raised, as it would have been had they been sent one after the other."""
    with ThreadPoolExecutor(max_workers=len(reads), thread_name_prefix="read") as pool:
        futures = [pool.submit(read) for read in reads]
    return [f.result() for f in futures]
