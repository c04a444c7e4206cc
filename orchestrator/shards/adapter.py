"""The adapter to an Elasticsearch or OpenSearch cluster: the only code that talks to one, through its
product's `Rest` (shards/rest.py). Every answer is read into the snapshot's types, here and in the
adapter's parts (requests.py, lock_documents.py, cluster_facts.py, merge_requests.py)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from orchestrator.errors import ClusterError, ClusterUnreachable, OrchestratorError, PreflightFailed
from orchestrator.restart.plan import Plan
from orchestrator.shards import privileges
from orchestrator.shards.cluster_facts import ClusterFacts
from orchestrator.shards.leases import STATS_FIELDS
from orchestrator.shards.lock_documents import LockDocuments
from orchestrator.shards.merge_requests import MergeRequests
from orchestrator.shards.preflight import PREFLIGHT_SETTINGS, DiskUsage, Preflight
from orchestrator.shards.rest import HttpError, flag, part
from orchestrator.shards.settled import MAX_EXPLAINED, UnassignedCopy, reason_for
from orchestrator.shards.snapshot import ClusterSnapshot, EsNode, Health, ShardCopy

# OpenSearch calls the master role cluster_manager; the shared decisions read "master".
ROLE_ALIASES = {"cluster_manager": "master"}
RECOVERY_SETTINGS = ("indices.recovery.", "node.bandwidth.recovery.")  # a node's own, read for the plan
# What `nodes` reads of each node: a third of node info's answer (its JVM's arguments, memory pools and
# collectors are most of it), read before every batch, for every node of the cluster.
NODE_FIELDS = ",".join(f"nodes.*.{f}" for f in (
    "name", "host", "ip", "roles", "attributes", "version", "process.id", "jvm.pid", "jvm.start_time_in_millis",
    "os.allocated_processors", "settings"))

# What the identity of one node's process is read from (see `live_identity`).
IDENTITY_FIELDS = ",".join(f"nodes.*.{f}" for f in ("name", "process.id", "jvm.pid", "jvm.start_time_in_millis"))


class ShardClusterAdapter(LockDocuments, ClusterFacts, MergeRequests):
    """One cluster of the shard model (Elasticsearch, OpenSearch), whichever client its `Rest` uses: its
    state and the run's settings here; its requests, lock, facts and force-merge in the parts it is made of."""


    def nodes(self) -> list[EsNode]:
        raw = self._do("list nodes", "GET", "/_nodes/jvm,process,settings,os",
                       {"flat_settings": "true", "filter_path": NODE_FIELDS})
        return sorted((self._node(node_id, n) for node_id, n in raw["nodes"].items()), key=lambda n: n.name)

    def _node(self, node_id: str, n: dict[str, Any]) -> EsNode:
        own = (n.get("settings") or {}).items()
        return EsNode(
            id=node_id, name=n.get("name", ""), host=n.get("host", ""), ip=n.get("ip", ""),
            roles=tuple(ROLE_ALIASES.get(r, r) for r in n.get("roles", ())),
            zone=(n.get("attributes") or {}).get(self.awareness_attribute),
            version=n.get("version", ""),
            process_id=(n.get("process") or {}).get("id") or (n.get("jvm") or {}).get("pid"),
            start_time_ms=(n.get("jvm") or {}).get("start_time_in_millis"),
            processors=(n.get("os") or {}).get("allocated_processors"),
            recovery_settings=tuple(sorted((k, str(v)) for k, v in own if k.startswith(RECOVERY_SETTINGS))),
        )

    def memory_by_node(self) -> dict[str, int]:
        """node id -> its host's memory in bytes (what Elasticsearch's default recovery rate of a
        dedicated cold or frozen node depends on)."""
        raw = self._do("read the nodes' memory", "GET", "/_nodes/stats/os",
                       {"filter_path": "nodes.*.os.mem.total_in_bytes"})
        return {node_id: int(n["os"]["mem"]["total_in_bytes"]) for node_id, n in (raw.get("nodes") or {}).items()
                if isinstance(((n.get("os") or {}).get("mem") or {}).get("total_in_bytes"), int)}

    def master_id(self) -> str | None:
        state = self._do("find elected master", "GET", "/_cluster/state/master_node")
        master = state.get("master_node")
        return str(master) if master else None

    def shards(self) -> list[ShardCopy]:
        rows = self._do("list shards", "GET", "/_cat/shards", {"format": "json", "bytes": "b",
                        "h": "index,shard,prirep,state,id,store"})
        return [ShardCopy(index=r["index"], shard=int(r["shard"]), primary=r["prirep"] == "p", state=r["state"],
                          node_id=r.get("id") or None, size_bytes=int(r.get("store") or 0)) for r in rows]


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
            return self._do("read disk use", "GET", "/_cat/allocation", {"format": "json", "bytes": "b",
                            "h": "node,disk.percent,disk.avail"})

        def blocks() -> Any:
            return self._do("read blocks", "GET", "/_cluster/state/blocks").get("blocks") or {}

        def running() -> Any:
            return [] if lacking() else self._do("read running snapshots", "GET", "/_snapshot/_status").get(
                "snapshots") or []
        return disk, blocks, running

    @staticmethod
    def preflight(settings_in_force: dict[str, Any], shutdowns: list[dict[str, Any]], lacking: list[str] | None,
                  disk_rows: list[dict[str, Any]], blocks: dict[str, Any], running: list[dict[str, Any]]) -> Preflight:
        """The preflight's findings from the answers of `preflight_reads` and the plan's other reads."""
        disk = tuple(DiskUsage(str(r["node"]), float(r["disk.percent"]), int(r["disk.avail"])) for r in disk_rows
                     if r.get("disk.percent") not in (None, "") and r.get("disk.avail") not in (None, ""))
        return Preflight(
            disk=disk,
            disk_settings={k: str(settings_in_force[k]) for k in PREFLIGHT_SETTINGS if k in settings_in_force},
            index_blocks={index: tuple(sorted({str(b.get("description", i)) for i, b in found.items()}))
                          for index, found in (blocks.get("indices") or {}).items()},
            global_blocks=tuple(str(b.get("description", i)) for i, b in (blocks.get("global") or {}).items()),
            shutdowns=tuple(f"{r.get('node_id')} ({str(r.get('type', '?')).lower()})" for r in shutdowns),
            running_snapshots=tuple(f"{s.get('repository')}:{s.get('snapshot')} ({s.get('state')})" for s in running),
            missing_privileges=None if lacking is None else tuple(lacking),
        )


    def snapshot(self, for_gate: bool = False) -> ClusterSnapshot:
        """The cluster's state. ``for_gate``: only what the batch gate reads (health, nodes, shards),
        the rest (settings, preflight) is read once, for the plan. Independent reads are sent together:
        a snapshot costs about one request's time, and the gate takes one before every batch."""
        if for_gate:
            lacking = None
            h, shards, nodes, master = read_together(self.health, self.shards, self.nodes, self.master_id)
            plan_only: list[Any] = []
        else:
            h, shards, nodes, master, lacking, plan_only = self._plan_reads()
        persistent: dict[str, Any] = {}
        transient: dict[str, Any] = {}
        shutdowns = None
        preflight = Preflight()
        if plan_only:
            (persistent, transient, defaults), shutdowns, memory, disk_rows, blocks, running = plan_only
            preflight = self.preflight({**defaults, **persistent, **transient}, shutdowns or [], lacking,
                                       disk_rows, blocks, running)
            nodes = [replace(n, memory_bytes=memory.get(n.id)) for n in nodes]
        settling = h["status"] == "yellow" and not (h["initializing_shards"] or h["relocating_shards"])
        return ClusterSnapshot(
            cluster_name=h["cluster_name"],
            health=Health(status=h["status"], number_of_nodes=h["number_of_nodes"],
                          relocating_shards=h["relocating_shards"], initializing_shards=h["initializing_shards"],
                          unassigned_shards=h["unassigned_shards"],
                          delayed_unassigned_shards=h.get("delayed_unassigned_shards", 0)),
            nodes=tuple(nodes),
            master_id=master,
            shards=tuple(shards),
            persistent=persistent,
            transient=transient,
            has_shutdown_api=shutdowns is not None,
            preflight=preflight,
            unassigned=self.explain_unassigned(shards) if settling else (),
        )

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
            out.append(UnassignedCopy.from_explain(raw, copies=n))
            if until_blocking is not None and reason_for(out[-1], until_blocking) is None:
                break
        return tuple(out)

    def recoveries(self, active_only: bool = False) -> list[dict[str, Any]]:
        """Every shard recovery the cluster remembers (or those under way), flattened to what the run reports."""
        raw = self._do("read recoveries", "GET", "/_recovery",
                       {"active_only": flag(active_only), "detailed": "false"})
        rows = []
        for index, body in raw.items():
            for s in body.get("shards", []):
                size = (s.get("index") or {}).get("size") or {}
                rows.append({
                    "index": index, "shard": s.get("id"), "type": s.get("type"), "stage": s.get("stage"),
                    "primary": s.get("primary"),
                    "target": (s.get("target") or {}).get("name"), "source": (s.get("source") or {}).get("name"),
                    "start_ms": s.get("start_time_in_millis", 0), "time_ms": s.get("total_time_in_millis", 0),
                    "total_bytes": size.get("total_in_bytes", 0), "reused_bytes": size.get("reused_in_bytes", 0),
                    "recovered_bytes": size.get("recovered_in_bytes", 0),
                })
        return rows

    def shard_lease_stats(self) -> dict[str, Any]:
        """Per shard copy: where, its documents and size, its last commit, its view of retention leases
        (hidden indices too: data streams' backing indices are hidden)."""
        return dict(self._do("read retention leases", "GET", "/_stats/docs,store", {
            "level": "shards", "expand_wildcards": "open,hidden", "filter_path": STATS_FIELDS}))

    # --- what the restart engine asks of every product (restart/adapter.py) -------------------
    def gate_snapshot(self, restarting: Collection[str]) -> ClusterSnapshot:
        return self.snapshot(for_gate=True)

    def live_identity(self, plan: Plan, name: str) -> str | None:
        return self._identity(plan, name, by_name_if_absent=True)

    def _identity(self, plan: Plan, name: str, by_name_if_absent: bool) -> str | None:
        """Asked of the node alone where its id is known (`node_by_id`). A node not found by its id (its
        data path wiped: a new id) is looked for by name in the whole list, if ``by_name_if_absent``."""
        node_id = plan.node_ids.get(name)
        found = self.node_by_id(node_id) if node_id else None
        if found is not None:
            return found.process_identity
        return identity_in(self.nodes(), plan, name) if by_name_if_absent or not node_id else None

    def node_by_id(self, node_id: str) -> EsNode | None:
        """The node's name and process, asked of it alone: the whole list, read just after a node rejoined,
        took 0.1-0.25 s on the sandbox (every node's settings and OS), this 5-15 ms."""
        raw = self._do("read the node's process", "GET", f"/_nodes/{part(node_id)}/jvm,process",
                       {"filter_path": IDENTITY_FIELDS})
        return next((self._node(i, n) for i, n in (raw.get("nodes") or {}).items() if i == node_id), None)

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        nodes = self.nodes()
        identity = identity_in(nodes, plan, name)
        if identity is not None or timeout_s < 1:
            return identity
        # The node is away: one server-side wait for one more node than the answer that lacked it. (Not
        # health's count: read just after a stop, it may still count the node that left, and a wait for
        # one more than that would last its whole timeout after the node is back.)
        # No elected master while the node was one: health needs one, node info does not.
        with contextlib.suppress(ClusterError):
            self.health(wait_for_nodes=f">={len(nodes) + 1}", timeout_s=timeout_s)
        # Not by name if absent: the wait may have ended for another node of a zone's batch, and the whole
        # list (0.1-0.3 s just after a join) is read by the next look anyway, which finds a new id by name.
        return self._identity(plan, name, by_name_if_absent=False)

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        persistent, transient = self.cluster_settings()
        return [(transient if scope == "transient" else persistent).get(key) for scope, key in wanted]

    def health_summary(self) -> dict[str, Any]:
        h = self.health()
        out = {k: h[k] for k in ("status", "number_of_nodes", "initializing_shards", "relocating_shards",
                                 "unassigned_shards")}
        out["text"] = (f"{h['status']}, {h['number_of_nodes']} nodes, {h['initializing_shards']} initializing, "
                       f"{h['unassigned_shards']} unassigned")
        return out

    # --- writes ------------------------------------------------------------------------------
    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        if scope not in ("persistent", "transient"):
            raise ClusterError(f"cannot write a setting in scope {scope!r}")
        self._do(f"set {', '.join(values)}", "PUT", "/_cluster/settings", body={scope: values})

    def flush(self) -> None:
        self._do("flush", "POST", "/_flush", {"allow_no_indices": "true", "ignore_unavailable": "true",
                                              "wait_if_ongoing": "true"})


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
