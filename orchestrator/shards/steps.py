"""The shard model's steps of a batch, for Elasticsearch and OpenSearch alike: allocation, flush,
retention leases, and waiting for shard recovery (an upgrade's plugins and version check too).

Settings are changed through ``set_temporarily`` (undo record first), in the scope that is in
effect for the key (a transient value wins over a persistent one).
"""

from __future__ import annotations

import contextlib
import re
import shlex
from typing import Any

from orchestrator.errors import ClusterError, HostError, OrchestratorError, WaitTimeout
from orchestrator.restart.context import RunContext
from orchestrator.restart.deferral import deferrable_wait, waited_before_s
from orchestrator.restart.events import Event
from orchestrator.restart.install import target_version
from orchestrator.restart.journal import BatchRecord
from orchestrator.restart.phases import Phase, reached
from orchestrator.restart.steps import StepFn, for_each_node, per_node, restore_settings, set_all_temporarily
from orchestrator.retry import Seen, wait_until
from orchestrator.shards.adapter import INDEX_SCOPE, ShardClusterAdapter, index_setting_key
from orchestrator.shards.leases import LeaseAtRisk, bytes_at_risk, kept_in_its_own_view, leases_at_risk
from orchestrator.shards.plan import ALLOCATION_ENABLE
from orchestrator.shards.plugins import require_installable
from orchestrator.shards.safety import unassigned_beyond_accepted
from orchestrator.shards.settled import blocking_text, settle
from orchestrator.shards.window import DELAYED_TIMEOUT, copy_key, own_copies_waiting, shard_of, window_delay_s
from orchestrator.units import human_bytes, parse_size


def change_settings(ctx: RunContext[ShardClusterAdapter], values: dict[str, Any], batch: int | None) -> None:
    """Set each key temporarily in the scope in force for it, the settings read once."""
    if not values:
        return  # nothing to raise (every limit already as high): not even a read
    persistent, transient = ctx.cluster.cluster_settings()
    changes = []
    for key, value in values.items():
        scope = "transient" if key in transient else "persistent"
        changes.append((key, scope, (transient if scope == "transient" else persistent).get(key), value))
    set_all_temporarily(ctx, changes, batch)


def raise_recovery_limits(ctx: RunContext[ShardClusterAdapter]) -> None:
    change_settings(ctx, {c.key: c.during for c in ctx.journal.plan.settings if c.when == "for the run"}, None)


def restrict_allocation(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    change_settings(ctx, {ALLOCATION_ENABLE: "primaries"}, batch.number)


def restore_allocation(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    restore_settings(ctx, {ALLOCATION_ENABLE})


def batch_node_ids(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> list[str]:
    node_ids = ctx.journal.plan.node_ids
    return [node_ids[n] for n in batch.nodes if n in node_ids]


def flush(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    """Flush the indices the batch's nodes hold (every copy of them, wherever it is): the copies that
    restart, and the ones they recover from. The rest of the cluster is none of the batch's business."""
    try:
        ctx.cluster.flush_indices(ctx.cluster.indices_on(batch_node_ids(ctx, batch)))
    except OrchestratorError as exc:
        # A failed flush costs recovery time (files copied instead of reused), never data.
        ctx.emit(Event("warning", f"flush failed, going on: {exc}", batch=batch.number))


def wait_for_retention_leases(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    """Before the batch stops: wait until the copies that stay hold current retention leases for the
    batch's copies, so those recover from their own files (see shards/leases.py). Elasticsearch renews
    leases every 30 s; the wait is bounded by ``timeouts.lease_wait_s`` and skipped when the copies
    at risk are smaller than ``recovery.lease_wait_min_bytes`` (copying them is quicker). Never fails
    the run: a lease not renewed in time costs copying, not data, and is reported per shard."""
    stopping = set(batch_node_ids(ctx, batch))
    indices: list[str] = []

    def at_risk() -> list[LeaseAtRisk]:  # the stats of the indices the stopping nodes hold, no others
        return leases_at_risk(ctx.cluster.lease_stats_of(indices), stopping)

    try:
        # The copies on the stopping nodes say whether they are sure to be kept; only the indices of those
        # that are not are read whole (every copy's view), then and while waiting.
        indices = sorted({index for node_id, views in ctx.cluster.lease_views(stopping).items()
                          for (index, _), copy in views.items() if not kept_in_its_own_view(copy, node_id)})
        risks = at_risk() if indices else []
    except ClusterError as exc:
        ctx.emit(Event("warning", f"retention leases could not be read, going on: {exc}", batch=batch.number))
        return
    if not risks:
        return
    names = {node_id: name for name, node_id in ctx.journal.plan.node_ids.items()}
    size = human_bytes(bytes_at_risk(risks))
    if bytes_at_risk(risks) < parse_size(ctx.inv.recovery.lease_wait_min_bytes):
        ctx.emit(Event("step", f"batch {batch.number}: not waiting for retention leases: {len(risks)} shard copies "
                               f"({size}) may be copied in full, less than recovery.lease_wait_min_bytes",
                       batch=batch.number, data={"leases_behind": len(risks), "bytes_at_risk": bytes_at_risk(risks)}))
        return
    ctx.emit(Event("wait", f"batch {batch.number}: waiting for Elasticsearch to renew the retention leases of "
                           f"{len(risks)} shard copies ({size}) so they recover from their own files (it renews "
                           "every 30 s)", batch=batch.number))

    def renewed(seen: Seen[bool]) -> bool | None:
        nonlocal risks
        risks = at_risk()
        seen.text = f"{len(risks)} shard copies behind" + (f", e.g. {risks[0].text(names)}" if risks else "")
        return True if not risks else None

    started = ctx.clock.monotonic()
    with contextlib.suppress(WaitTimeout, ClusterError):  # reported below with what was last seen
        wait_until(renewed, what="retention leases to be renewed", timeout_s=ctx.inv.timeouts.lease_wait_s,
                   interval_s=max(ctx.inv.timeouts.poll_interval_s, 2.0), clock=ctx.clock,
                   should_stop=lambda: ctx.abort.requested)
    waited = ctx.clock.monotonic() - started
    if not risks:
        ctx.emit(Event("step", f"batch {batch.number}: retention leases renewed after {waited:.1f} s; every copy "
                               "can recover from its own files", batch=batch.number, data={"lease_wait_s": waited}))
        return
    shown = "; ".join(r.text(names) for r in risks[:10]) + (f"; and {len(risks) - 10} more" if len(risks) > 10 else "")
    ctx.emit(Event("warning", f"batch {batch.number}: {len(risks)} shard copies ({human_bytes(bytes_at_risk(risks))}) "
                              "will likely be copied in full: their retention leases were not renewed within "
                              f"{waited:.0f} s: {shown}", batch=batch.number,
                   data={"leases_behind": [r.text(names) for r in risks], "bytes_at_risk": bytes_at_risk(risks)}))


def recovering(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord, what: str) -> tuple[float, float]:
    """The batch's joined nodes said recovering; (when the wait starts, and the seconds it waited before it was
    deferred: a run back from a deferral counts the recovery from when its wait first began)."""
    for name in batch.nodes:
        if ctx.record(name).phase == Phase.JOINED:
            ctx.set_phase(name, Phase.RECOVERING, f"{name}: waiting for {what} to recover")
    return ctx.clock.monotonic(), waited_before_s(ctx.deferral, "recovery", batch.number)


def wait_for_recovery(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    started, earlier_s = recovering(ctx, batch, "its shards")
    limit = ctx.inv.timeouts.recovery_s

    allow_yellow = ctx.options.allow_yellow
    expected = len(ctx.journal.plan.node_ids)
    # A run that started green waits server-side for green itself, answered the moment the last copy
    # starts; one that accepted a yellow waits until nothing moves, then judges the yellow.
    until = "yellow" if allow_yellow or ctx.journal.plan.accepted_unassigned else "green"
    last_blocking = ""
    last_progress: dict[str, dict[str, int]] = {}
    # Past the plan's estimate for the batch, the live view also names the slowest shard, once.
    expected_s = max(next((b.estimate_s for b in ctx.journal.plan.batches if b.number == batch.number), 0), 60)
    slow_said: set[str] = set()

    def show_progress() -> None:
        """The live view: per node of the batch, what its recoveries have copied of what they must."""
        try:
            ids = batch_node_ids(ctx, batch)
            rows = ctx.cluster.recoveries_of(ctx.cluster.indices_on(ids), batch.nodes, active_only=True)
        except OrchestratorError:
            return  # the progress shown is a courtesy: a failed read must not fail the wait
        late = ctx.clock.monotonic() - started > expected_s
        for name in batch.nodes:
            progress = recovery_progress(rows, name)
            if progress and progress != last_progress.get(name):
                last_progress[name] = progress
                ctx.emit(Event("wait", f"{name}: recovering {progress_text(progress)}", node=name,
                               batch=batch.number, data={"progress": progress}))
            if late and name not in slow_said and (slowest := slowest_recovery(rows, name)):
                slow_said.add(name)
                ctx.emit(Event("wait", f"{name}: recovery slower than the plan's {expected_s:.0f} s; slowest: "
                                       f"{slowest}", node=name, batch=batch.number))

    def absent_names() -> str:
        try:
            return ", ".join(ctx.cluster.absent(ctx.journal.plan)) or "none named"
        except OrchestratorError:
            return "which unknown"

    def settled(seen: Seen[bool]) -> bool | None:
        nonlocal last_blocking
        remaining = limit - (ctx.clock.monotonic() - started)
        # A server-side wait (one request per up to 10 s, not one per poll): until green, or until
        # nothing moves and the cluster is at least yellow. Then green is done, and a yellow is judged.
        h = ctx.cluster.health(wait_for_status=until, until_still=True, timeout_s=max(min(remaining, 10), 1))
        missing = f", only {h['number_of_nodes']} of {expected} nodes in the cluster ({absent_names()} not in it)" \
            if h["number_of_nodes"] < expected else ""
        seen.text = (f"health {h['status']}{missing}, {h['initializing_shards']} initializing, "
                     f"{h['unassigned_shards']} unassigned, {h['relocating_shards']} relocating")
        if h["initializing_shards"] or h["relocating_shards"]:
            show_progress()
            return None
        if missing or h["status"] not in ("green", "yellow"):
            return None
        if h["status"] == "green":
            return True
        if allow_yellow:
            return None if unassigned_beyond_accepted(h["unassigned_shards"], ctx.journal.plan) else True
        planned = set(ctx.journal.plan.node_ids.values())
        settlement = settle(h["unassigned_shards"], ctx.cluster.explain_unassigned(ctx.cluster.unassigned_copies(),
                                                                                 planned),
                            ctx.journal.plan.node_ids.values())
        if settlement.settled:
            ctx.emit(Event("step", f"batch {batch.number}: yellow, settled: {settlement.accepted_text()}",
                           batch=batch.number, data={"settled_yellow": settlement.accepted}))
            return True
        seen.text += f"; blocking: {blocking_text(settlement)}"
        if seen.text != last_blocking:  # the live view says what it waits for, once per change
            last_blocking = seen.text
            ctx.emit(Event("wait", f"batch {batch.number}: waiting for {seen.text}", batch=batch.number))
        return None

    what = "the cluster to be green again" if not allow_yellow else "the cluster to be back to its accepted yellow"
    deferrable_wait(ctx.deferral, "recovery", batch.number, tuple(batch.nodes), settled, what=what, timeout_s=limit,
                    interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock,
                    should_stop=lambda: ctx.abort.requested,
                    hint="Shards are still recovering or cannot be allocated (see `_cluster/allocation/explain`)",
                         resume="waits again")
    record_recovered(ctx, batch, ctx.clock.monotonic() - started + earlier_s)


def record_recovered(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord, elapsed: float) -> None:
    """The batch's nodes done: how long they recovered, and what was copied from peers and reused."""
    stats = recovery_stats(ctx, batch)
    for name in batch.nodes:
        figures = dict(stats[name])
        copied = figures.pop("copies_from_peers")
        if copied:
            ctx.emit(Event("step", f"{name}: {len(copied)} shard copies were copied from peers instead of recovering "
                                   f"from their own files: " + ", ".join(copied[:10]), node=name,
                           data={"copies_from_peers": copied}))
        with ctx.phase_change(name, Phase.DONE, f"{name}: done; recovery {elapsed:.1f} s, "
                                                f"{figures['bytes_from_peers']} bytes copied from peers"):
            ctx.timed(name, "recovery", elapsed)
            ctx.journal.recovered(name, figures)


# --- a window's run: several nodes away at once (issue 57, restart/window_run.py) ------------------------
TIME_VALUE = re.compile(r"(\d{1,12})(d|h|m|s|ms|micros|nanos)")
TIME_UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "micros": 1e-6, "nanos": 1e-9}


def seconds_of(value: Any) -> float | None:
    """An Elasticsearch time value ("5m", "90s", "0") in seconds; None when it is not one."""
    text = str(value).strip()
    if text in ("0", "-1"):
        return float(text)
    found = TIME_VALUE.fullmatch(text)
    return int(found[1]) * TIME_UNIT_S[found[2]] if found else None


def waits_s(value: Any) -> float:
    """How long an index with this own delayed_timeout (None: none of its own, the default minute) waits."""
    waits = seconds_of(value) if value is not None else 60.0
    return waits if waits is not None else 0.0




def delay_allocation(ctx: RunContext[ShardClusterAdapter]) -> None:
    """A window's run keeps allocation enabled, so that a node back recovers its own copies while others are still
    away; so that the copies of the nodes away are not copied in full elsewhere meanwhile, each index waits for a
    node that left at least as long as a node may take to come back (`index.unassigned.node_left.delayed_timeout`,
    each index's own value journaled and restored exactly; an index that waits longer already is left alone)."""
    delay = window_delay_s(ctx.inv.timeouts, bool(ctx.options.reboot or ctx.options.reboot_nodes))
    changes = [(index_setting_key(index, DELAYED_TIMEOUT), INDEX_SCOPE, value, f"{delay}s")
               for index, value in sorted(ctx.cluster.index_settings_of(DELAYED_TIMEOUT).items())
               if waits_s(value) < delay]
    set_all_temporarily(ctx, changes, None)


REMEMBER_WAIT_S = 30.0  # how long a node's own stats may fail to answer (a busy node) before its stop is given up


def remember_copies(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    """Just before a window's node stops: the copies it holds, journaled, so that it leaves the window only once
    they have recovered (`wait_for_own_recovery`), after a resume too. A node whose stats do not answer for a
    moment (an incomplete answer) is asked again: nothing is stopped meanwhile."""
    node_ids = batch_node_ids(ctx, batch)
    held = wait_until(lambda seen: ctx.cluster.copies_held(node_ids), what=f"what {', '.join(batch.nodes)} hold",
                      timeout_s=REMEMBER_WAIT_S, interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock)
    ids = {node_id: name for name, node_id in ctx.journal.plan.node_ids.items()}
    for name in batch.nodes:
        if not reached(ctx.record(name).phase, Phase.STOPPING):
            ctx.journal.held_before_stop(name, [copy_key(c.index, c.shard) for c in held
                                                if ids.get(c.node_id or "") == name])


def wait_for_own_recovery(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    """A window's node leaves the window once the copies it held before its stop have recovered: each STARTED on it
    again (or placed elsewhere by the cluster, every copy of its shard started). Other nodes of the window may still
    be away: the cluster's health says nothing of this node. Each look reads what the elected master assigns the
    node (a copy there that is not started yet is still recovering), and the routing table only of the indices of
    the copies it does not assign the node at all (placed elsewhere, or not yet given back)."""
    started, earlier_s = recovering(ctx, batch, "its own copies")
    node_ids = ctx.journal.plan.node_ids
    held = {name: ctx.record(name).held for name in batch.nodes}
    said = ""

    def recovered(seen: Seen[bool]) -> bool | None:
        nonlocal said
        on_them = ctx.cluster.assigned_to([node_ids[n] for n in batch.nodes if n in node_ids])
        assigned = {(c.node_id, c.index, c.shard) for c in on_them}
        not_on_it = {shard_of(key)[0] for name in batch.nodes for key in held[name]
                     if (node_ids.get(name), *shard_of(key)) not in assigned}
        copies = [*on_them, *(ctx.cluster.shards_of(sorted(not_on_it)) if not_on_it else [])]
        waiting = [f"{name}: {', '.join(w[:5])}" + (f" and {len(w) - 5} more" if len(w) > 5 else "")
                   for name in batch.nodes if (w := own_copies_waiting(copies, node_ids.get(name, ""), held[name]))]
        seen.text = "; ".join(waiting) or "every copy recovered"
        if waiting and seen.text != said:
            said = seen.text
            ctx.emit(Event("wait", f"batch {batch.number}: waiting for its own copies to recover ({said})",
                           batch=batch.number))
        return None if waiting else True

    deferrable_wait(ctx.deferral, "recovery", batch.number, tuple(batch.nodes), recovered,
                    what=f"the copies of {', '.join(batch.nodes)} to recover", timeout_s=ctx.inv.timeouts.recovery_s,
                    interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock,
                    should_stop=lambda: ctx.abort.requested,
                    hint="Shards are still recovering or cannot be allocated (see `_cluster/allocation/explain`)",
                         resume="waits again")
    record_recovered(ctx, batch, ctx.clock.monotonic() - started + earlier_s)


def under_way(rows: list[dict[str, Any]], node: str) -> list[dict[str, Any]]:
    """The recoveries onto ``node`` that are not done."""
    return [r for r in rows if r["target"] == node and r["stage"] != "DONE"]


def recovery_progress(rows: list[dict[str, Any]], node: str) -> dict[str, int] | None:
    """Recoveries under way onto ``node``: shards, bytes copied of bytes to copy (files not reused), percent."""
    mine = under_way(rows, node)
    if not mine:
        return None
    to_copy = sum(max(r["total_bytes"] - r["reused_bytes"], 0) for r in mine)
    copied = sum(r["recovered_bytes"] for r in mine)
    return {"shards": len(mine), "bytes_copied": copied, "bytes_to_copy": to_copy,
            "bytes_reused": sum(r["reused_bytes"] for r in mine),
            "percent": 100 if to_copy == 0 else min(100, round(100 * copied / to_copy))}


def slowest_recovery(rows: list[dict[str, Any]], node: str) -> str | None:
    """The recovery onto ``node`` furthest from done: which shard, from where, how, at which stage."""
    mine = under_way(rows, node)
    if not mine:
        return None

    def left(r: dict[str, Any]) -> int:
        return max(int(r["total_bytes"]) - int(r["reused_bytes"]) - int(r["recovered_bytes"]), 0)

    r = max(mine, key=left)
    how = "copying files from" if r["type"] == "PEER" and left(r) else f"{str(r['type']).lower()} recovery, from"
    return (f"[{r['index']}][{r['shard']}] {how} {r['source'] or 'its own disk'}, stage {r['stage']}, "
            f"{human_bytes(left(r))} left of {human_bytes(r['total_bytes'])}")


def progress_text(p: dict[str, int]) -> str:
    return (f"{p['shards']} shard(s), {human_bytes(p['bytes_copied'])} of {human_bytes(p['bytes_to_copy'])} "
            f"copied ({p['percent']}%), {human_bytes(p['bytes_reused'])} reused")


def recovery_stats(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> dict[str, dict[str, Any]]:
    """Bytes copied from peers vs reused locally, for the shard copies recovered onto each node: the copies
    the batch's nodes hold, and the recoveries of their indices (no others)."""
    sizes_by_node = ctx.cluster.held_by(batch_node_ids(ctx, batch))
    rows = ctx.cluster.recoveries_of({index for held in sizes_by_node.values() for index, _ in held}, batch.nodes)
    out: dict[str, dict[str, Any]] = {}
    for name in batch.nodes:
        node_id = ctx.journal.plan.node_ids.get(name, "")
        since_ms = int(ctx.record(name).started_at.get("start_issued", 0) * 1000) - 5000
        out[name] = recovery_figures(rows, name, since_ms, sizes_by_node.get(node_id, {}))
    return out


def recovery_figures(rows: list[dict[str, Any]], node: str, since_ms: int,
                     sizes: dict[tuple[str, int], int]) -> dict[str, Any]:
    """One node's recoveries since ``since_ms``: bytes from peers, bytes reused, and which copies were
    copied from a peer (largest first), for the operator to see which shards lost their leases.

    A recovery that copied files reports them (recovered vs reused). An operation-based recovery
    (retention leases, Elasticsearch 7.4+) copies no file and reports 0 bytes: the node kept its
    whole copy, so its size on the node (``sizes``) counts as reused.
    """
    peers = reused = shards = 0
    copies: list[tuple[int, str]] = []
    for r in rows:
        if r["target"] != node or r["start_ms"] < since_ms:
            continue
        shards += 1
        if r["total_bytes"] == 0:
            reused += sizes.get((r["index"], r["shard"]), 0)
        elif r["type"] == "PEER":
            peers += r["recovered_bytes"]
            reused += r["reused_bytes"]
            if r["recovered_bytes"]:
                copies.append((r["recovered_bytes"], f"[{r['index']}][{r['shard']}] "
                                                     f"{human_bytes(r['recovered_bytes'])} from {r['source']}"))
        else:
            reused += r["reused_bytes"] + r["recovered_bytes"]
    return {"bytes_from_peers": peers, "bytes_reused": reused, "shards": shards,
            "copies_from_peers": [text for _, text in sorted(copies, reverse=True)]}


# --- upgrade ---------------------------------------------------------------------------------------
@per_node
def upgrade_plugins(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    """Each plugin the node had when planned, installed again for the new version (Elasticsearch refuses
    to start with a plugin built for another version). Removing first makes it idempotent."""
    version = target_version(ctx)
    upgrade = ctx.journal.plan.upgrade
    cli = shlex.quote(ctx.inv.upgrade.plugin_cli)
    allowed = frozenset(ctx.inv.upgrade.allowed_plugins)

    def reinstall(name: str) -> None:
        plugins = upgrade.plugins.get(name, ()) if upgrade else ()
        rec = ctx.record(name)
        if not plugins or "plugins_upgraded" in rec.started_at:
            return
        node = ctx.node(name)
        for plugin in plugins:
            require_installable(plugin, allowed)
            p = shlex.quote(plugin)
            command = f"{cli} remove {p} >/dev/null 2>&1; {cli} install --batch {p}"
            result = ctx.transport.run(node, command, ctx.inv.ssh.command_timeout_s)
            if not result.ok:
                raise HostError(f"{name}: plugin {plugin} could not be installed for {version} (exit {result.rc}): "
                                f"{(result.stderr or result.stdout).strip()[-300:]}")
        ctx.journal.mark(name, "plugins_upgraded")
        ctx.emit(Event("step", f"{name}: plugins installed for {version}: {', '.join(plugins)}", node=name))

    for_each_node(ctx, batch, reinstall)


def check_version(ctx: RunContext[ShardClusterAdapter], batch: BatchRecord) -> None:
    """The node that rejoined runs the target version: a package that did not install, or a link that
    points elsewhere, is caught here, before the next node goes down. Node info can lag the join by a
    moment, so an unknown version is read again (within the join timeout); a wrong one fails at once."""
    version = target_version(ctx)
    wrong: dict[str, str] = {}

    def versions_seen(seen: Seen[bool]) -> bool | None:
        running = {n.id: n.version for n in ctx.cluster.nodes_by_id(batch_node_ids(ctx, batch))}
        found = {name: running.get(ctx.journal.plan.node_ids.get(name, ""), "") for name in batch.nodes}
        wrong.update({n: v for n, v in found.items() if v and v != version})
        if wrong:
            return True
        unknown = [n for n, v in found.items() if not v]
        seen.text = f"no version reported yet for {', '.join(unknown)}"
        return None if unknown else True

    wait_until(versions_seen, what=f"the version of {', '.join(batch.nodes)}", timeout_s=ctx.inv.timeouts.join_s,
               interval_s=ctx.inv.timeouts.poll_interval_s, clock=ctx.clock)
    for name, found in wrong.items():
        raise OrchestratorError(f"{name} rejoined running {found}, not {version}: check the install on its host",
                                resume="checks again")
    for name in batch.nodes:
        ctx.emit(Event("step", f"{name}: runs {version}", node=name, data={"version": version}))


RUN_STEPS = {"raise_recovery_limits": raise_recovery_limits, "delay_allocation": delay_allocation}
STEPS: dict[str, StepFn[ShardClusterAdapter]] = {
    "restrict_allocation": restrict_allocation,
    "flush": flush,
    "wait_for_retention_leases": wait_for_retention_leases,
    "restore_allocation": restore_allocation,
    "wait_for_recovery": wait_for_recovery,
    "upgrade_plugins": upgrade_plugins,
    "check_version": check_version,
    "remember_copies": remember_copies,
    "wait_for_own_recovery": wait_for_own_recovery,
}
