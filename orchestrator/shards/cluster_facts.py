"""What a shard cluster is asked once, besides its state: the facts `inventory discover` writes an
inventory from, each node's log file (for the first estimate), an upgrade's facts (plugins, the newest
snapshot, critical deprecations) and the privileges the connecting user lacks."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from orchestrator.config.discovered import Facts
from orchestrator.errors import ClusterError, ClusterUnreachable
from orchestrator.shards import privileges
from orchestrator.shards.answers import HasPrivileges, Named, Nodes, Plugins, not_its_shape, parsed
from orchestrator.shards.discover import facts_from_answers
from orchestrator.shards.requests import ShardRequests, no_handler
from orchestrator.shards.rest import HttpError
from orchestrator.shards.versions import UpgradeFacts


def listed_snapshots(answer: Any) -> list[dict[str, Any]]:
    listed = answer.get("snapshots") if isinstance(answer, dict) else None
    return [s for s in listed if isinstance(s, dict)] if isinstance(listed, list) else []


class ClusterFacts(ShardRequests):

    def discovery_facts(self) -> Facts:
        """What `inventory discover` writes an inventory from: nodes with their settings and HTTP address,
        and the awareness attributes in force (three requests)."""
        what = "read the cluster's name"
        name = parsed(Named, self._do(what, "GET", "/_cluster/health"), what).cluster_name
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

    def running_nodes(self) -> Nodes:
        """Each node's version, process, start time, JVM arguments and settings (flat), for
        `orchestrate pending` (one request)."""
        what = "read the nodes' versions, processes and settings"
        wanted = ("name", "host", "ip", "version", "process.id", "jvm.start_time_in_millis", "jvm.input_arguments",
                  "settings")
        return parsed(Nodes, self._do(what, "GET", "/_nodes/settings,jvm,process", {
            "flat_settings": "true", "filter_path": ",".join(f"nodes.*.{key}" for key in wanted)}), what)

    def upgrade_facts(self) -> UpgradeFacts:
        """What an upgrade's plan checks besides the restart's: plugins, the newest successful snapshot,
        critical deprecations (three requests, once per plan)."""
        what = "list plugins"
        raw = parsed(Plugins, self._do(what, "GET", "/_nodes/plugins"), what)
        plugins = {n.name: tuple(sorted(p.name for p in n.plugins)) for n in raw.nodes.values()}
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
            if no_handler(exc):  # without the deprecation module (and on OpenSearch)
                return None
            raise
        items: list[str] = []
        if not isinstance(raw, dict):
            raise not_its_shape("read deprecations", "not an object")
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
        return privileges.missing(parsed(HasPrivileges, answer, "check the user's privileges").model_dump())
