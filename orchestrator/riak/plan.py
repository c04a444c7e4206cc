"""The restart plan of a Riak cluster: a pure function of the inventory and a Riak snapshot.

One node per batch, in inventory order with the claimant last (the claimant coordinates ring
changes; restarting it last moves that role at most once). The plan lists the handoff limit
it raises for the run, the host tuning, an estimate, and every reason it would be unsafe.
"""

from __future__ import annotations

from orchestrator.config.model import Inventory
from orchestrator.restart.plan import EST_START_TO_JOIN_S, EST_STOP_S, Batch, Mode, Plan, SettingChange
from orchestrator.riak.settings import RiakSettings, riak_settings
from orchestrator.riak.status import RiakSnapshot, cluster_problems

TRANSFER_LIMIT = "transfer_limit"
# Hinted handoff after a restart moves only what was written while the node was down: seconds
# on a quiet cluster, minutes under heavy writes. The first batch's measurement replaces this.
EST_HANDOFF_S = 15.0


def match_members(inv: Inventory, settings: RiakSettings, snap: RiakSnapshot) -> tuple[dict[str, str], list[str]]:
    """Inventory name -> Riak node name; lists nodes that are not members, and members not listed."""
    mapping, problems = {}, []
    named = {n.name for n in inv.nodes}
    problems += [f"riak.node_names names {name}, which is not a node of the inventory"
                 for name in settings.node_names if name not in named]
    for entry in inv.nodes:
        riak_name = settings.riak_name(entry)
        if snap.member(riak_name) is None:
            problems.append(f"node {entry.name} ({riak_name}) is not a member of the cluster "
                            "(`riak-admin member-status`); set its nodename from riak.conf in riak.node_names")
        else:
            mapping[entry.name] = riak_name
    listed = set(mapping.values())
    unknown = [m.node for m in snap.members if m.node not in listed]
    if unknown:
        problems.append(f"the cluster has member(s) not in the inventory: {', '.join(unknown)}. Add them, or they "
                        "would never be restarted.")
    return mapping, problems


def build_riak_plan(inv: Inventory, snap: RiakSnapshot, mode: Mode, tuning: tuple[str, ...] = ()) -> Plan:
    settings = riak_settings(inv)
    mapping, problems = match_members(inv, settings, snap)
    problems += cluster_problems(snap)
    if mode is Mode.ZONE:
        problems.append("zone mode is for Elasticsearch awareness zones: Riak places replicas by ring position, "
                        "so restarting several nodes at once can take every replica of a partition offline. "
                        "Use --by node.")
    offline = [node for node, limit in snap.limits.items() if limit is None]
    if offline:
        problems.append(f"the transfer limit of {', '.join(offline)} cannot be read (offline)")
    claimant = snap.ring.claimant
    names = sorted(mapping, key=lambda n: (mapping[n] == claimant, [e.name for e in inv.nodes].index(n)))
    batches = []
    for number, name in enumerate(names, start=1):
        member = snap.member(mapping[name])
        batches.append(Batch(number=number, label=name, nodes=(name,),
                             estimate_s=EST_STOP_S + EST_START_TO_JOIN_S + EST_HANDOFF_S,
                             figures={"ring_pct": member.ring_pct} if member else {}))
    limit = settings.transfer_limit
    changes = [] if limit is None else [SettingChange(key=TRANSFER_LIMIT, scope=m.node, before=snap.limits.get(m.node),
                                                      during=limit, when="for the run") for m in snap.members]
    notes = [f"claimant {claimant} is restarted last" if claimant in mapping.values() else "",
             "each node's transfer limit is set again after it restarts (a restart resets it to riak.conf's "
             "transfer_limit)" if changes else ""]
    return Plan(cluster=inv.cluster.name, product="riak", mode=mode, batches=tuple(batches),
                settings=tuple(changes), tuning=tuning,
                estimate_s=round(sum(b.estimate_s for b in batches), 1), problems=tuple(problems), node_ids=mapping,
                notes=tuple(n for n in notes if n))
