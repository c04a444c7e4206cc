"""The adapter to an Elasticsearch or OpenSearch cluster: the only code that talks to one, through its
product's `Rest` (shards/rest.py). Every answer is read here into the snapshot's types."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from orchestrator.config.discovered import Facts
from orchestrator.errors import ClusterError, ClusterUnreachable, PreflightFailed
from orchestrator.restart.plan import Plan
from orchestrator.shards import privileges
from orchestrator.shards.discover import facts_from_answers
from orchestrator.shards.leases import STATS_FIELDS
from orchestrator.shards.preflight import PREFLIGHT_SETTINGS, DiskUsage, Preflight
from orchestrator.shards.rest import HttpError, Rest, flag, part
from orchestrator.shards.settled import MAX_EXPLAINED, UnassignedCopy, reason_for
from orchestrator.shards.snapshot import ClusterSnapshot, EsNode, Health, ShardCopy
from orchestrator.shards.versions import UpgradeFacts

# OpenSearch calls the master role cluster_manager; the shared decisions read "master".
ROLE_ALIASES = {"cluster_manager": "master"}
RECOVERY_SETTINGS = ("indices.recovery.", "node.bandwidth.recovery.")  # a node's own, read for the plan


def listed_snapshots(answer: Any) -> list[dict[str, Any]]:
    listed = answer.get("snapshots") if isinstance(answer, dict) else None
    return [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []


def _no_handler(exc: HttpError) -> bool:
    """The cluster has no such API (a module or plugin it lacks): "no handler found" (400/404), or 405
    where another handler owns the path for other methods."""
    return exc.status == 405 or (exc.status in (400, 404) and "no handler found" in str(exc))


def credentials_unverifiable(what: str) -> str:
    """Why credentials accepted earlier are refused now: without an elected master (two of three
    master-eligible nodes away, say) the security index cannot be read, so users of the native realm
    and API keys are refused (HTTP 401) until a master is elected again. Waits treat this as the
    cluster being briefly unreachable, not as wrong credentials."""
    return (f"{what}: the cluster refused (HTTP 401) the credentials it accepted earlier in this run; most "
            "likely it has no elected master, so it cannot read its security index (or the credentials were "
            "revoked or expired meanwhile)")


class ShardClusterAdapter:
    """One cluster of the shard model (Elasticsearch, OpenSearch), whichever client its `Rest` uses."""

    def __init__(self, rest: Rest, awareness_attribute: str = "zone") -> None:
        self.rest = rest
        self.awareness_attribute = awareness_attribute  # the node attribute read as a node's zone
        self.calls = 0  # requests made, for the run's figures
        self._counting = threading.Lock()
        self._credentials_accepted = False

    @property
    def label(self) -> str:
        return self.rest.label

    def _do(self, what: str, method: str, path: str, params: dict[str, Any] | None = None,
            body: Any = None) -> Any:
        with self._counting:  # requests are made from several threads (snapshots, zone batches, the lock)
            self.calls += 1
        try:
            answer = self.rest.request(what, method, path, params, body)
        except HttpError as exc:
            if exc.status == 401 and self._credentials_accepted:
                raise ClusterUnreachable(credentials_unverifiable(what)) from exc
            raise
        self._credentials_accepted = True
        return answer

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
            kwargs = {k: flag(v) if isinstance(v, bool) else v for k, v in kwargs.items()}
            try:
                return dict(self._do("cluster health", "GET", "/_cluster/health", kwargs))
            except HttpError as exc:
                if exc.status == 408 and isinstance(exc.body, dict):
                    return dict(exc.body)
                raise
        return dict(self._do("cluster health", "GET", "/_cluster/health", kwargs))

    def nodes(self) -> list[EsNode]:
        raw = self._do("list nodes", "GET", "/_nodes/jvm,process,settings,os", {"flat_settings": "true"})
        nodes = []
        for node_id, n in raw["nodes"].items():
            own = (n.get("settings") or {}).items()
            nodes.append(EsNode(
                id=node_id, name=n["name"], host=n.get("host", ""), ip=n.get("ip", ""),
                roles=tuple(ROLE_ALIASES.get(r, r) for r in n.get("roles", ())),
                zone=(n.get("attributes") or {}).get(self.awareness_attribute),
                version=n.get("version", ""),
                process_id=(n.get("process") or {}).get("id") or (n.get("jvm") or {}).get("pid"),
                start_time_ms=(n.get("jvm") or {}).get("start_time_in_millis"),
                processors=(n.get("os") or {}).get("allocated_processors"),
                recovery_settings=tuple(sorted((k, str(v)) for k, v in own if k.startswith(RECOVERY_SETTINGS))),
            ))
        return sorted(nodes, key=lambda n: n.name)

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

    def cluster_settings(self, include_defaults: bool = False) -> tuple[dict[str, Any], ...]:
        """(persistent, transient), and the defaults in force (node settings included) when asked."""
        raw = self._do("read cluster settings", "GET", "/_cluster/settings",
                       {"flat_settings": "true", "include_defaults": flag(include_defaults)})
        found = dict(raw.get("persistent", {})), dict(raw.get("transient", {}))
        return (*found, dict(raw.get("defaults", {}))) if include_defaults else found

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

    def preflight_reads(self, lacking: list[str] | None) -> tuple[Callable[[], Any], ...]:
        """What the plan checks before a run besides nodes and shards, as reads to send with the plan's
        others (never per batch): disk use, blocks, and running snapshots. Snapshot status needs `manage`:
        a user refused for missing privileges (``lacking``) is not asked for it."""
        def disk() -> Any:
            return self._do("read disk use", "GET", "/_cat/allocation", {"format": "json", "bytes": "b",
                            "h": "node,disk.percent,disk.avail"})

        def blocks() -> Any:
            return self._do("read blocks", "GET", "/_cluster/state/blocks").get("blocks") or {}

        def running() -> Any:
            return [] if lacking else self._do("read running snapshots", "GET", "/_snapshot/_status").get(
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

    def discovery_facts(self) -> Facts:
        """What `inventory discover` writes an inventory from: nodes with their settings and HTTP address,
        and the awareness attributes in force (three requests)."""
        name = str(self.health().get("cluster_name", ""))
        info = self._do("list nodes", "GET", "/_nodes/settings,http")
        persistent, transient, defaults = self.cluster_settings(include_defaults=True)
        return facts_from_answers(name, info, {**defaults, **persistent, **transient})

    def node_log_files(self) -> dict[str, str]:
        """node id -> its main log file (`path.logs`/`cluster.name`.log, as both products name it)."""
        raw = self._do("read the nodes' log paths", "GET", "/_nodes/settings",
                       {"filter_path": "nodes.*.settings.path.logs,nodes.*.settings.cluster.name"})
        out = {}
        for node_id, n in ((raw or {}).get("nodes") or {}).items():
            settings = n.get("settings") if isinstance(n, dict) else None
            path = settings.get("path", {}).get("logs") if isinstance(settings, dict) else None
            cluster = settings.get("cluster", {}).get("name") if isinstance(settings, dict) else None
            if isinstance(path, str) and isinstance(cluster, str) and path.startswith("/"):
                out[str(node_id)] = f"{path.rstrip('/')}/{cluster}.log"
        return out

    def upgrade_facts(self) -> UpgradeFacts:
        """What an upgrade's plan checks besides the restart's: plugins, the newest successful snapshot,
        critical deprecations (three requests, once per plan)."""
        raw = self._do("list plugins", "GET", "/_nodes/plugins")
        plugins = {str(n["name"]): tuple(sorted(str(p["name"]) for p in n.get("plugins") or ()))
                   for n in raw["nodes"].values()}
        newest, end_ms, error = None, None, None
        try:
            # A failed or partial snapshot is no way back: the newest successful one counts.
            good = max((s for s in self.snapshots() if s.get("state") == "SUCCESS"),
                       key=lambda s: s.get("end_time_in_millis") or 0, default=None)
            if good is not None:
                newest, end_ms = f"{good.get('repository', '?')}:{good.get('snapshot')}", good.get("end_time_in_millis")
        except ClusterUnreachable:
            raise
        except ClusterError as exc:
            error = str(exc)[:300]
        return UpgradeFacts(read_at_ms=int(time.time() * 1000), plugins=plugins, newest_snapshot=newest,
                            newest_snapshot_end_ms=None if end_ms is None else int(end_ms), snapshot_error=error,
                            deprecations=self.critical_deprecations())

    def snapshots(self) -> list[dict[str, Any]]:
        """The newest snapshots of every repository: Elasticsearch sorts and bounds the list itself;
        OpenSearch takes neither, nor a wildcard repository, so each of its repositories is listed."""
        try:
            return listed_snapshots(self._do("list snapshots", "GET", "/_snapshot/*/*", {
                "sort": "start_time", "order": "desc", "size": 50, "ignore_unavailable": "true"}))
        except HttpError as exc:
            if exc.status != 400 or "unrecognized parameter" not in str(exc):
                raise
        repositories = self._do("list snapshot repositories", "GET", "/_snapshot")
        found: list[dict[str, Any]] = []
        for repository in list(repositories)[:100] if isinstance(repositories, dict) else ():
            answer = self._do("list snapshots", "GET", f"/_snapshot/{quote(str(repository), safe='')}/_all")
            found += [{"repository": repository, **s} for s in listed_snapshots(answer)]
        return found

    def critical_deprecations(self) -> tuple[str, ...] | None:
        """The deprecation API's critical items, one line each; None where the cluster has no such API."""
        try:
            raw = self._do("read deprecations", "GET", "/_migration/deprecations")
        except HttpError as exc:
            if _no_handler(exc):  # without the deprecation module (and on OpenSearch)
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
        try:
            answer = self._do("check the user's privileges", "POST", "/_security/user/_has_privileges",
                              body=privileges.request_body())
        except HttpError as exc:
            said = str(exc)
            if exc.status in (400, 404, 500) and ("no handler found" in said or ("ecurity" in said
                                                    and "not enabled" in said) or "explicitly" in said):
                return None
            raise
        return privileges.missing(answer)

    def snapshot(self, for_gate: bool = False) -> ClusterSnapshot:
        """The cluster's state. ``for_gate``: only what the batch gate reads (health, nodes, shards),
        the rest (settings, preflight) is read once, for the plan. Independent reads are sent together:
        a snapshot costs about one request's time, and the gate takes one before every batch."""
        # Privileges first: a user who cannot read the cluster's state hears which privileges it
        # lacks, not the first request's 403.
        lacking = None if for_gate else self.missing_privileges()
        if lacking and "cluster:monitor" in lacking:
            raise PreflightFailed([privileges.refusal(lacking)])
        h, shards, nodes, master, *plan_only = read_together(
            self.health, self.shards, self.nodes, self.master_id,
            *(() if for_gate else (lambda: self.cluster_settings(include_defaults=True), self.shutdown_records,
                                   self.memory_by_node, *self.preflight_reads(lacking))))
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
        return identity_in(self.nodes(), plan, name)

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
    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        if scope not in ("persistent", "transient"):
            raise ClusterError(f"cannot write a setting in scope {scope!r}")
        self._do(f"set {', '.join(values)}", "PUT", "/_cluster/settings", body={scope: values})

    def flush(self) -> None:
        self._do("flush", "POST", "/_flush", {"allow_no_indices": "true", "ignore_unavailable": "true",
                                              "wait_if_ongoing": "true"})

    def create_lock(self, index: str, doc_id: str, body: dict[str, Any]) -> bool:
        """Create the lock document; False when it already exists (someone else holds it)."""
        try:
            # Hidden: not in index patterns, wildcard searches or `_cat/indices/*`.
            self._do("take the run lock", "PUT", f"/{part(index)}", body={"settings": {
                "number_of_shards": 1, "auto_expand_replicas": "0-all", "index.hidden": True}})
        except HttpError as exc:
            if "resource_already_exists" not in str(exc.body):
                raise
        # No refresh: the lock is only ever read by id, and a read by id is real-time.
        try:
            self._do("take the run lock", "PUT", f"/{part(index)}/_create/{part(doc_id)}", None, body)
        except HttpError as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def read_lock(self, index: str, doc_id: str) -> dict[str, Any] | None:
        try:
            return dict(self._do("read the run lock", "GET", f"/{part(index)}/_doc/{part(doc_id)}")["_source"])
        except HttpError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_lock(self, index: str, doc_id: str) -> None:
        try:
            self._do("release the run lock", "DELETE", f"/{part(index)}/_doc/{part(doc_id)}")
        except HttpError as exc:
            if exc.status != 404:
                raise

    def renew_lock(self, index: str, doc_id: str, run_id: str, update: dict[str, Any]) -> bool:
        path = f"/{part(index)}/_doc/{part(doc_id)}"
        try:
            found = self._do("renew the run lock", "GET", path)
            if found["_source"].get("run_id") != run_id:
                return False
            # Written only if nobody changed the lock since it was read (a takeover, say).
            self._do("renew the run lock", "PUT", path, {
                "if_seq_no": found["_seq_no"], "if_primary_term": found["_primary_term"]},
                {**found["_source"], **update})
        except HttpError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True

    # --- force-merge (orchestrator.forcemerge) --------------------------------------------------
    def indices(self, pattern: str) -> dict[str, Any]:
        """Open indices matching ``pattern``, with their settings."""
        return dict(self._do(f"resolve {pattern}", "GET", f"/{part(*pattern.split(','))}/_settings", {
            "expand_wildcards": "open", "ignore_unavailable": "true", "allow_no_indices": "true"}))

    def segments(self, indices: list[str]) -> list[dict[str, Any]]:
        return list(self._do("count segments", "GET", f"/_cat/segments/{part(*indices)}",
                             {"format": "json", "h": "index,shard,prirep,ip,segment"}))

    def refresh(self, indices: list[str]) -> None:
        self._do("refresh", "POST", f"/{part(*indices)}/_refresh", {"ignore_unavailable": "true"})

    def aliases(self, indices: list[str]) -> dict[str, Any]:
        return dict(self._do("read aliases", "GET", f"/{part(*indices)}/_alias", {"ignore_unavailable": "true"}))

    def data_streams(self) -> list[dict[str, Any]]:
        """Every data stream; none where the cluster has no data streams module (the sandbox)."""
        try:
            return list(self._do("read data streams", "GET", "/_data_stream/*").get("data_streams", []))
        except ClusterError:
            return []

    def indexing_stats(self, indices: list[str]) -> dict[str, Any]:
        return dict(self._do("read indexing stats", "GET", f"/{part(*indices)}/_stats/indexing,docs")
                    .get("indices", {}))

    def start_forcemerge(self, index: str, max_segments: int) -> str:
        """Start a force-merge as a task and return its id: no request stays open for the merge's length."""
        body = self._do(f"start force-merge of {index}", "POST", f"/{part(index)}/_forcemerge",
                        {"max_num_segments": max_segments, "wait_for_completion": "false"})
        return str(body["task"])

    def task(self, task_id: str) -> dict[str, Any] | None:
        """The task's status; None when it is no longer known (it completed and was forgotten)."""
        try:
            return dict(self._do(f"follow task {task_id}", "GET", f"/_tasks/{part(task_id)}"))
        except HttpError as exc:
            if exc.status == 404:
                return None
            raise


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
