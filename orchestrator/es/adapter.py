"""The Elasticsearch adapter: the only code that talks to a cluster. Every call is translated."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

import elasticsearch

from orchestrator.errors import ClusterError, ClusterUnreachable
from orchestrator.es import privileges
from orchestrator.es.connect import Connection, make_client, translated
from orchestrator.es.discover import Facts
from orchestrator.es.leases import STATS_FIELDS
from orchestrator.es.preflight import PREFLIGHT_SETTINGS, DiskUsage, Preflight
from orchestrator.es.settled import MAX_EXPLAINED, UnassignedCopy, reason_for
from orchestrator.es.snapshot import ClusterSnapshot, EsNode, Health, ShardCopy
from orchestrator.es.versions import UpgradeFacts
from orchestrator.restart.plan import Plan


class ElasticsearchAdapter:
    product = "elasticsearch"

    def __init__(self, conn: Connection, client: elasticsearch.Elasticsearch | None = None) -> None:
        self.conn = conn
        self.es = client or make_client(conn)
        self.calls = 0  # requests made, for the run's figures

    def _do(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        with translated(what, self.conn.endpoints):
            result = fn(*args, **kwargs)
        return result.body if hasattr(result, "body") else result

    # --- reads -------------------------------------------------------------------------------
    def health(self, wait_for_status: str | None = None, timeout_s: float | None = None,
               wait_for_nodes: str | None = None, until_still: bool = False) -> dict[str, Any]:
        """Cluster health; with ``wait_for_status`` or ``wait_for_nodes`` a server-side wait, and with
        ``until_still`` that wait also lasts until no shard is initializing or relocating."""
        kwargs: dict[str, Any] = {}
        if wait_for_status:
            kwargs["wait_for_status"] = wait_for_status
        if wait_for_nodes:
            kwargs["wait_for_nodes"] = wait_for_nodes
        if timeout_s is not None:
            kwargs["timeout"] = f"{max(int(timeout_s), 1)}s"
        if wait_for_status or wait_for_nodes:
            # A server-side wait answers 408 with a body when it times out: not an error for us.
            kwargs["wait_for_no_initializing_shards"] = until_still
            if until_still:
                kwargs["wait_for_no_relocating_shards"] = True
            with translated("cluster health", self.conn.endpoints):
                self.calls += 1
                try:
                    return dict(self.es.cluster.health(**kwargs).body)
                except elasticsearch.ApiError as exc:
                    if exc.meta.status == 408 and isinstance(exc.body, dict):
                        return dict(exc.body)
                    raise
        return dict(self._do("cluster health", self.es.cluster.health, **kwargs))

    def nodes(self) -> list[EsNode]:
        raw = self._do("list nodes", self.es.nodes.info, metric="jvm,process,settings")
        nodes = []
        for node_id, n in raw["nodes"].items():
            nodes.append(EsNode(
                id=node_id, name=n["name"], host=n.get("host", ""), ip=n.get("ip", ""),
                roles=tuple(n.get("roles", ())), zone=(n.get("attributes") or {}).get(self.conn.awareness_attribute),
                version=n.get("version", ""),
                process_id=(n.get("process") or {}).get("id") or (n.get("jvm") or {}).get("pid"),
                start_time_ms=(n.get("jvm") or {}).get("start_time_in_millis"),
            ))
        return sorted(nodes, key=lambda n: n.name)

    def master_id(self) -> str | None:
        state = self._do("find elected master", self.es.cluster.state, metric="master_node")
        master = state.get("master_node")
        return str(master) if master else None

    def shards(self) -> list[ShardCopy]:
        rows = self._do("list shards", self.es.cat.shards, format="json", bytes="b",
                        h="index,shard,prirep,state,id,store")
        return [ShardCopy(index=r["index"], shard=int(r["shard"]), primary=r["prirep"] == "p", state=r["state"],
                          node_id=r.get("id") or None, size_bytes=int(r.get("store") or 0)) for r in rows]

    def cluster_settings(self, include_defaults: bool = False) -> tuple[dict[str, Any], ...]:
        """(persistent, transient), and the defaults in force (node settings included) when asked."""
        raw = self._do("read cluster settings", self.es.cluster.get_settings, flat_settings=True,
                       include_defaults=include_defaults)
        found = dict(raw.get("persistent", {})), dict(raw.get("transient", {}))
        return (*found, dict(raw.get("defaults", {}))) if include_defaults else found

    def shutdown_records(self) -> list[dict[str, Any]] | None:
        """Node shutdown records, or None without the shutdown API. Without its plugin, GET
        /_nodes/shutdown is node info for a node named 'shutdown' (a dict of nodes); the shutdown
        API answers a list of records."""
        self.calls += 1
        try:
            resp = self.es.perform_request("GET", "/_nodes/shutdown", headers={"accept": "application/json"})
        except (elasticsearch.ApiError, elasticsearch.TransportError):
            return None
        body = resp.body if hasattr(resp, "body") else resp
        records = body.get("nodes") if isinstance(body, dict) else None
        return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else None

    def preflight(self, settings_in_force: dict[str, Any], shutdowns: list[dict[str, Any]]) -> Preflight:
        """What the plan checks before a run besides nodes and shards (four requests, never per batch)."""
        rows = self._do("read disk use", self.es.cat.allocation, format="json", bytes="b",
                        h="node,disk.percent,disk.avail")
        disk = tuple(DiskUsage(str(r["node"]), float(r["disk.percent"]), int(r["disk.avail"])) for r in rows
                     if r.get("disk.percent") not in (None, "") and r.get("disk.avail") not in (None, ""))
        blocks = self._do("read blocks", self.es.cluster.state, metric="blocks").get("blocks") or {}
        running = self._do("read running snapshots", self.es.snapshot.status).get("snapshots") or []
        lacking = self.missing_privileges()
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

    def discovery_facts(self) -> Facts:
        """What `inventory discover` writes an inventory from: nodes with their settings and HTTP address,
        and the awareness attributes in force (three requests)."""
        name = str(self.health().get("cluster_name", ""))
        info = self._do("list nodes", self.es.nodes.info, metric="settings,http")
        persistent, transient, defaults = self.cluster_settings(include_defaults=True)
        return Facts.from_answers(name, info, {**defaults, **persistent, **transient})

    def upgrade_facts(self) -> UpgradeFacts:
        """What an upgrade's plan checks besides the restart's: plugins, the newest successful snapshot,
        critical deprecations (three requests, once per plan)."""
        raw = self._do("list plugins", self.es.nodes.info, metric="plugins")
        plugins = {str(n["name"]): tuple(sorted(str(p["name"]) for p in n.get("plugins") or ()))
                   for n in raw["nodes"].values()}
        newest, end_ms, error = None, None, None
        try:
            # Newest first; a failed or partial snapshot is no way back, so the first successful one counts.
            found = self._do("list snapshots", self.es.snapshot.get, repository="*", snapshot="*",
                             sort="start_time", order="desc", size=50, ignore_unavailable=True)
            good = next((s for s in found.get("snapshots") or () if s.get("state") == "SUCCESS"), None)
            if good is not None:
                newest, end_ms = f"{good.get('repository', '?')}:{good.get('snapshot')}", good.get("end_time_in_millis")
        except ClusterUnreachable:
            raise
        except ClusterError as exc:
            error = str(exc)[:300]
        return UpgradeFacts(read_at_ms=int(time.time() * 1000), plugins=plugins, newest_snapshot=newest,
                            newest_snapshot_end_ms=None if end_ms is None else int(end_ms), snapshot_error=error,
                            deprecations=self.critical_deprecations())

    def critical_deprecations(self) -> tuple[str, ...] | None:
        """The deprecation API's critical items, one line each; None where the cluster has no such API."""
        self.calls += 1
        with translated("read deprecations", self.conn.endpoints):
            try:
                raw = self.es.migration.deprecations().body
            except elasticsearch.ApiError as exc:
                # Without the deprecation module: "no handler found" (400/404), or 405 where another
                # handler owns the path for other methods.
                if exc.meta.status == 405 or (exc.meta.status in (400, 404) and "no handler found" in str(exc)):
                    return None
                raise
        items: list[str] = []
        for section, found in raw.items():
            groups = found.items() if isinstance(found, dict) else [("", found)]
            for where, entries in groups:
                for e in entries if isinstance(entries, list) else ():
                    if isinstance(e, dict) and e.get("level") == "critical":
                        items.append(f"{section}{' ' + where if where else ''}: {e.get('message', '?')}")
        return tuple(items)

    def missing_privileges(self) -> list[str] | None:
        """The privileges the run needs that the connecting user lacks; None where the cluster has no
        security API (security off, or not installed)."""
        self.calls += 1
        with translated("check the user's privileges", self.conn.endpoints):
            try:
                answer = self.es.security.has_privileges(**privileges.request_body()).body
            except elasticsearch.ApiError as exc:
                said = str(exc)
                if exc.meta.status in (400, 404, 500) and ("no handler found" in said or ("ecurity" in said
                                                             and "not enabled" in said) or "explicitly" in said):
                    return None
                raise
        return privileges.missing(answer)

    def snapshot(self, for_gate: bool = False) -> ClusterSnapshot:
        """The cluster's state. ``for_gate``: only what the batch gate reads (health, nodes, shards),
        the rest (settings, preflight) is read once, for the plan."""
        h = self.health()
        persistent: dict[str, Any] = {}
        transient: dict[str, Any] = {}
        shutdowns = None
        preflight = Preflight()
        if not for_gate:
            persistent, transient, defaults = self.cluster_settings(include_defaults=True)
            shutdowns = self.shutdown_records()
            preflight = self.preflight({**defaults, **persistent, **transient}, shutdowns or [])
        shards = tuple(self.shards())
        settling = h["status"] == "yellow" and not (h["initializing_shards"] or h["relocating_shards"])
        return ClusterSnapshot(
            cluster_name=h["cluster_name"],
            health=Health(status=h["status"], number_of_nodes=h["number_of_nodes"],
                          relocating_shards=h["relocating_shards"], initializing_shards=h["initializing_shards"],
                          unassigned_shards=h["unassigned_shards"],
                          delayed_unassigned_shards=h.get("delayed_unassigned_shards", 0)),
            nodes=tuple(self.nodes()),
            master_id=self.master_id(),
            shards=shards,
            persistent=persistent,
            transient=transient,
            has_shutdown_api=shutdowns is not None,
            preflight=preflight,
            unassigned=self.explain_unassigned(shards) if settling else (),
        )

    def explain_unassigned(self, shards: Iterable[ShardCopy],
                           until_blocking: Collection[str] | None = None) -> tuple[UnassignedCopy, ...]:
        """The allocation explain API's answer for each unassigned shard copy (one call per shard and
        role, at most MAX_EXPLAINED): what a settled yellow is judged on. With ``until_blocking`` (the
        planned node ids), the look stops at the first copy that blocks: one is enough to wait."""
        counts = Counter((c.index, c.shard, c.primary) for c in shards if c.state == "UNASSIGNED")
        out = []
        for (index, shard, primary), n in sorted(counts.items())[:MAX_EXPLAINED]:
            try:
                raw = self._do("explain an unassigned shard", self.es.cluster.allocation_explain,
                               index=index, shard=shard, primary=primary)
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
        raw = self._do("read recoveries", self.es.indices.recovery, active_only=active_only, detailed=False)
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
        return dict(self._do("read retention leases", self.es.indices.stats, metric="docs,store", level="shards",
                             expand_wildcards="open,hidden", filter_path=STATS_FIELDS))

    # --- what the restart engine asks of every product (restart/adapter.py) -------------------
    def gate_snapshot(self, restarting: Collection[str]) -> ClusterSnapshot:
        return self.snapshot(for_gate=True)

    def live_identity(self, plan: Plan, name: str) -> str | None:
        node_id = plan.node_ids.get(name)
        for n in self.nodes():
            if n.id == node_id or n.name == name:
                return n.process_identity
        return None

    def await_identity(self, plan: Plan, name: str, timeout_s: float) -> str | None:
        identity = self.live_identity(plan, name)
        if identity is not None or timeout_s < 1:
            return identity
        # The node is away: one server-side wait for one more node than now, then look again.
        try:
            present = int(self.health()["number_of_nodes"])
            self.health(wait_for_nodes=f">={present + 1}", timeout_s=timeout_s)
        except ClusterError:
            pass  # no elected master while the node was one (health needs it; node info does not)
        return self.live_identity(plan, name)

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
    def put_setting(self, scope: str, key: str, value: Any) -> None:
        if scope not in ("persistent", "transient"):
            raise ClusterError(f"cannot write a setting in scope {scope!r}")
        self._do(f"set {key}", self.es.cluster.put_settings, **{scope: {key: value}})

    def flush(self) -> None:
        self._do("flush", self.es.indices.flush, allow_no_indices=True, ignore_unavailable=True,
                 wait_if_ongoing=True)

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        """Create the lock document; False when it already exists (someone else holds it)."""
        self.calls += 1
        with translated("take the run lock", self.conn.endpoints):
            if not self.es.indices.exists(index=index).body:
                try:
                    # Hidden: not in index patterns, wildcard searches or `_cat/indices/*`.
                    self.es.indices.create(index=index, settings={
                        "number_of_shards": 1, "auto_expand_replicas": "0-all", "index.hidden": True})
                except elasticsearch.BadRequestError as exc:
                    if "resource_already_exists" not in str(exc):
                        raise
            try:
                self.es.create(index=index, id=doc_id, document=body, refresh="true")
            except elasticsearch.ConflictError:
                return False
        return True

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        self.calls += 1
        with translated("read the run lock", self.conn.endpoints):
            try:
                return dict(self.es.get(index=index, id=doc_id).body["_source"])
            except elasticsearch.NotFoundError:
                return None

    def delete_lock(self, index: str, doc_id: str) -> None:
        self.calls += 1
        with translated("release the run lock", self.conn.endpoints), contextlib.suppress(
                elasticsearch.NotFoundError):
            self.es.delete(index=index, id=doc_id, refresh="true")

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        self.calls += 1
        with translated("renew the run lock", self.conn.endpoints):
            try:
                found = self.es.get(index=index, id=doc_id).body
                if found["_source"].get("run_id") != run_id:
                    return False
                # Written only if nobody changed the lock since it was read (a takeover, say).
                self.es.index(index=index, id=doc_id, document={**found["_source"], **update},
                              if_seq_no=found["_seq_no"], if_primary_term=found["_primary_term"], refresh="true")
            except (elasticsearch.NotFoundError, elasticsearch.ConflictError):
                return False
        return True

    # --- force-merge (orchestrator.forcemerge) --------------------------------------------------
    def indices(self, pattern: str) -> dict[str, Any]:
        """Open indices matching ``pattern``, with their settings."""
        return dict(self._do(f"resolve {pattern}", self.es.indices.get, index=pattern, expand_wildcards="open",
                             ignore_unavailable=True, allow_no_indices=True, features="settings"))

    def segments(self, indices: list[str]) -> list[dict[str, Any]]:
        return list(self._do("count segments", self.es.cat.segments, index=",".join(indices), format="json",
                             h="index,shard,prirep,ip,segment"))

    def aliases(self, indices: list[str]) -> dict[str, Any]:
        return dict(self._do("read aliases", self.es.indices.get_alias, index=",".join(indices),
                             ignore_unavailable=True))

    def data_streams(self) -> list[dict[str, Any]]:
        """Every data stream; none where the cluster has no data streams module (the sandbox)."""
        try:
            return list(self._do("read data streams", self.es.indices.get_data_stream, name="*")
                        .get("data_streams", []))
        except ClusterError:
            return []

    def indexing_stats(self, indices: list[str]) -> dict[str, Any]:
        return dict(self._do("read indexing stats", self.es.indices.stats, index=",".join(indices),
                             metric="indexing,docs").get("indices", {}))

    def start_forcemerge(self, index: str, max_segments: int) -> str:
        """Start a force-merge as a task and return its id: no request stays open for the merge's length."""
        body = self._do(f"start force-merge of {index}", self.es.perform_request, "POST",
                        f"/{index}/_forcemerge?max_num_segments={max_segments}&wait_for_completion=false",
                        headers={"accept": "application/json"})
        return str(body["task"])

    def task(self, task_id: str) -> dict[str, Any] | None:
        """The task's status; None when it is no longer known (it completed and was forgotten)."""
        self.calls += 1
        with translated(f"follow task {task_id}", self.conn.endpoints):
            try:
                return dict(self.es.perform_request("GET", f"/_tasks/{task_id}",
                                                    headers={"accept": "application/json"}).body)
            except elasticsearch.NotFoundError:
                return None
