"""The restart plan of an Elasticsearch cluster: a pure function of the inventory and a snapshot.

Order (node mode): data-only nodes first, then master-eligible nodes, the elected master last.
Zone mode: one awareness zone per batch, the elected master's zone last. Each batch says what
becomes unavailable, and the plan lists the settings it changes and restores, the host tuning,
an estimated duration, and every reason it would be unsafe.
"""

from __future__ import annotations

from typing import Any

from orchestrator.config.matching import matched as matched_node
from orchestrator.config.model import Inventory
from orchestrator.restart.plan import EST_START_TO_JOIN_S, EST_STOP_S, Batch, Mode, Plan, SettingChange, Upgrade
from orchestrator.shards.limits import RATE, Limit, chosen_limits
from orchestrator.shards.preflight import preflight_findings
from orchestrator.shards.safety import (
    cluster_problems,
    master_notes,
    quorum_problems,
    unavailability,
    yellow_settlement,
)
from orchestrator.shards.snapshot import ClusterSnapshot, EsNode
from orchestrator.shards.upgrade_order import upgrade_order
from orchestrator.shards.versions import (
    ELASTICSEARCH_PATHS,
    UpgradePaths,
    facts_findings,
    parse_version,
    path_problems,
)
from orchestrator.units import parse_size

ALLOCATION_ENABLE = "cluster.routing.allocation.enable"
EST_EXPECTED_REUSE = 0.9  # after a flush, most replica files are reused, not copied


def match_nodes(inv: Inventory, snap: ClusterSnapshot) -> tuple[dict[str, str], list[str]]:
    """Inventory name -> ES node id, by node name, else by host/IP. Lists what cannot be matched."""
    mapping: dict[str, str] = {}
    problems: list[str] = []
    for entry in inv.nodes:
        node = snap.node_by_name(entry.name)
        if node is None:  # rare: names usually match
            found, at_host = matched_node(entry.name, entry.host, [(n.name, (n.ip, n.host)) for n in snap.nodes])
            node = snap.nodes[found] if found is not None else None
            if at_host > 1:
                problems.append(f"node {entry.name}: host {entry.host} matches {at_host} Elasticsearch "
                                "nodes; give the node its Elasticsearch node.name")
                continue
        if node is None:
            problems.append(f"node {entry.name} ({entry.host}) is not in the cluster: is it running and joined? "
                            "(matched by node.name, then by host or IP)")
            continue
        mapping[entry.name] = node.id
    matched = set(mapping.values())
    unknown = [n.name for n in snap.nodes if n.id not in matched]
    if unknown and not problems:
        problems.append(f"the cluster has node(s) not in the inventory: {', '.join(unknown)}. Add them, or "
                        "they would never be restarted and could hold the only copy of a shard.")
    return mapping, problems


def connection_warnings(inv: Inventory) -> list[str]:
    """Said loudly in the plan (and so kept in the journal): how the cluster is reached, when unsafe."""
    c = inv.cluster
    out = []
    if not c.verify_certs:
        out.append("WARNING: TLS certificates are NOT verified (cluster.verify_certs: false): anyone in the "
                   "middle can read the credentials and change the answers")
    for label, source in (("cluster.password", c.password), ("cluster.api_key", c.api_key),
                          ("ssh.sudo_password", inv.ssh.sudo_password)):
        out += source.warnings(label) if source is not None else []
    plain = [e for e in c.endpoints if e.startswith("http://")]
    if plain and (c.password is not None or c.api_key is not None):
        out.append(f"WARNING: credentials are sent in clear text over plain http ({', '.join(plain[:3])})")
    return out


def restart_order(names: list[str], nodes: dict[str, EsNode], master_id: str | None) -> list[str]:
    """Data-only nodes, then master-eligible ones, the elected master last; by name within a group."""

    def rank(name: str) -> tuple[int, str]:
        n = nodes[name]
        if n.id == master_id:
            return (2, name)
        return (1 if n.is_master_eligible else 0, name)

    return sorted(names, key=rank)


def zone_order(zones: dict[str, list[str]], nodes: dict[str, EsNode], master_id: str | None) -> list[str]:
    def rank(zone: str) -> tuple[int, str]:
        has_master = any(nodes[n].id == master_id for n in zones[zone])
        return (1 if has_master else 0, zone)

    return sorted(zones, key=rank)


def split_for_master_quorum(label: str, members: list[str], nodes: dict[str, EsNode],
                            master_count: int) -> tuple[list[tuple[str, list[str]]], str | None]:
    """A zone's batches: the zone itself, or, when it holds half or more of the master-eligible
    nodes, several batches each holding fewer than that (the elected master stays last). Returns
    the batches and the reason for a split, if any."""
    most = (master_count - 1) // 2  # the most master-eligible nodes one batch may take down
    masters = [m for m in members if nodes[m].is_master_eligible]
    if master_count < 3 or len(masters) <= most:
        return [(label, members)], None
    others = [m for m in members if not nodes[m].is_master_eligible]
    chunks = [masters[i:i + most] for i in range(0, len(masters), most)]
    groups = [others + chunks[0], *chunks[1:]]
    reason = (f"zone {label} holds {len(masters)} of the {master_count} master-eligible nodes: restarting them "
              f"together would lose the master quorum, so it is restarted in {len(groups)} batches of at most "
              f"{most} master-eligible node(s) each")
    return [(f"{label} ({i}/{len(groups)})", g) for i, g in enumerate(groups, start=1)], reason


def estimate_batch_s(copy_bytes: int, max_bytes_per_sec: int) -> float:
    recovery = copy_bytes * (1 - EST_EXPECTED_REUSE) / max(max_bytes_per_sec, 1)
    return EST_STOP_S + EST_START_TO_JOIN_S + max(recovery, 2.0)


def setting_changes(limits: list[Limit], snap: ClusterSnapshot) -> tuple[list[SettingChange], list[str]]:
    """The settings a run changes, and a note for each limit it leaves because the cluster's own
    (or, unset, Elasticsearch's default) is already as high: a run raises recovery limits, it never
    lowers one an operator set higher."""
    scope, before = snap.effective_setting(ALLOCATION_ENABLE)
    changes = [SettingChange(key=ALLOCATION_ENABLE, scope="transient" if scope == "transient" else "persistent",
                             before=before, during="primaries", when="per batch",
                             why="a stopped node's replicas are not rebuilt elsewhere while it restarts")]
    notes = []
    for lim in limits:
        scope, before = snap.effective_setting(lim.key)
        if at_least(before, lim.value):
            notes.append(f"{lim.key} stays {before} (in force, {scope}): already at least the run's {lim.value}")
        elif before is None and lim.default is not None and at_least(lim.default, lim.value):
            notes.append(f"{lim.key} stays unset: Elasticsearch's default {lim.default} is what the run would set")
        else:
            changes.append(SettingChange(key=lim.key, scope="transient" if scope == "transient" else "persistent",
                                         before=before, during=lim.value, when="for the run", why=lim.why))
    return changes, notes


def at_least(value: Any, limit: str) -> bool:
    """Whether a limit in force (a count or a byte size; None when unset) is already ``limit`` or more."""
    if value is None:
        return False
    try:
        return parse_size(str(value)) >= parse_size(limit)
    except ValueError:
        return False  # not a plain number or size (a value Elasticsearch would refuse): the run sets its own


def upgrade_part(inv: Inventory, snap: ClusterSnapshot, es_nodes: dict[str, EsNode], names: list[str],
                 upgrade_to: str, snapshot_check: bool,
                 paths: UpgradePaths) -> tuple[Upgrade, list[str], list[str], list[str]]:
    """An upgrade's part of the plan: (what it installs, the nodes still to upgrade, problems, notes)."""
    target = parse_version(upgrade_to)
    if target is None:
        return Upgrade(to=upgrade_to), names, [f"{upgrade_to!r} is not a version such as 9.5.3"], []
    versions = {name: es_nodes[name].version for name in names}
    problems = path_problems(versions, target, paths)
    notes: list[str] = []
    if snap.upgrade is None:
        problems.append("the upgrade's preflight facts were not read (a snapshot saved by `plan` without "
                        "--upgrade-to?)")
    else:
        found, said = facts_findings(snap.upgrade, inv.upgrade.snapshot_max_age_h, snapshot_check,
                                     frozenset(inv.upgrade.allowed_plugins))
        problems += found
        notes += said
    done = [n for n in names if parse_version(versions[n]) == target]
    todo = [n for n in names if n not in done]
    if done:
        notes.append(f"already on {target}, left out: {', '.join(done[:20])}"
                     + (f" and {len(done) - 20} more" if len(done) > 20 else ""))
    if not todo and not problems:
        problems.append(f"every node already runs {target}: nothing to upgrade")
    olds = sorted({versions[n] for n in todo})
    notes.insert(0, f"upgrade {', '.join(olds)} -> {target}: data tiers first (frozen, cold, warm, hot), then "
                    "nodes without data, then master-eligible nodes, the elected master last")
    plugins = snap.upgrade.plugins if snap.upgrade else {}
    upgrade = Upgrade(to=str(target), versions=versions,
                      plugins={n: plugins.get(es_nodes[n].name, ()) for n in todo})
    return upgrade, todo, problems, notes


def build_plan(inv: Inventory, snap: ClusterSnapshot, mode: Mode, tuning: tuple[str, ...] = (),
               allow_yellow: bool = False, only: list[str] | None = None,
               allow_unavailable: tuple[str, ...] = (), upgrade_to: str = "", snapshot_check: bool = True,
               paths: UpgradePaths = ELASTICSEARCH_PATHS) -> Plan:
    mapping, problems = match_nodes(inv, snap)
    problems += cluster_problems(snap, allow_yellow or inv.allow_yellow, mapping.values())
    settlement = yellow_settlement(snap, mapping.values())
    settled = [f"the cluster is yellow, settled: {settlement.accepted_text()}"] \
        if settlement and settlement.settled else []
    found, warnings = preflight_findings(snap.preflight, {**snap.persistent, **snap.transient})
    problems += found
    nodes = {name: snap.node_by_id(node_id) for name, node_id in mapping.items()}
    es_nodes = {k: v for k, v in nodes.items() if v is not None}
    names = [n.name for n in inv.nodes if n.name in es_nodes and (only is None or n.name in only)]
    limits = chosen_limits(inv.recovery, snap.nodes, snap.copies_by_node)
    rate = parse_size(next(lim.value for lim in limits if lim.key == RATE))
    upgrade: Upgrade | None = None
    order, upgrade_notes = restart_order, list[str]()
    if upgrade_to:
        upgrade, names, found, upgrade_notes = upgrade_part(inv, snap, es_nodes, names, upgrade_to,
                                                                      snapshot_check, paths)
        problems += found
        order = upgrade_order

    groups: list[tuple[str, list[str]]]
    splits: list[str] = []
    if mode is Mode.ZONE:
        zones: dict[str, list[str]] = {}
        for name in names:
            zone = inv.node(name).zone or es_nodes[name].zone
            if zone is None:
                problems.append(f"zone mode: node {name} has no zone (inventory `zone`, or the node attribute "
                                f"`{inv.cluster.awareness_attribute}`: cluster.awareness_attribute)")
                continue
            zones.setdefault(zone, []).append(name)
        groups = []
        for zone in zone_order(zones, es_nodes, snap.master_id):
            parts, why = split_for_master_quorum(zone, order(zones[zone], es_nodes, snap.master_id),
                                                 es_nodes, len(snap.master_eligible))
            groups += parts
            splits += [why] if why else []
    else:
        groups = [(n, [n]) for n in order(names, es_nodes, snap.master_id)]

    batches = []
    accepted: list[str] = []
    for number, (label, members) in enumerate(groups, start=1):
        ids = {es_nodes[m].id for m in members}
        lonely, acknowledged = unavailability(snap, sorted(ids), label, allow_unavailable)
        accepted += acknowledged
        loads = [snap.load_by_node.get(node_id, (0, 0)) for node_id in ids]
        copies, size = sum(n for n, _ in loads), sum(b for _, b in loads)
        batches.append(Batch(number=number, label=label, nodes=tuple(members),
                             estimate_s=round(estimate_batch_s(size, rate), 1),
                             problems=tuple(lonely + quorum_problems(snap, sorted(ids), label)),
                             figures={"shard_copies": copies, "bytes": size}))
    notes = [*upgrade_notes, *connection_warnings(inv), *master_notes(snap), *settled, *warnings, *splits, *accepted]
    if snap.has_shutdown_api:
        notes.append("the cluster has the node shutdown API; this version restricts allocation with "
                     "`primaries`, which works on every cluster")
    settings, kept = setting_changes(limits, snap)
    notes += kept
    return Plan(cluster=inv.cluster.name, product=inv.cluster.product, mode=mode, batches=tuple(batches),
                settings=tuple(settings), tuning=tuning,
                estimate_s=round(sum(b.estimate_s for b in batches), 1), problems=tuple(problems),
                node_ids=mapping, notes=tuple(notes), accepted_unassigned=snap.health.unassigned_shards,
                upgrade=upgrade)
