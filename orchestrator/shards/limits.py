"""The recovery limits a run raises, chosen from the nodes as Elasticsearch reports them (their
processors, the recovery bandwidth they declare, their own settings and Elasticsearch's defaults) and
from what their hosts say they carry (hosts/capacity.py), never from a figure for every cluster.

Pure. Each limit comes with the reason the plan shows. A limit given as a number in the inventory
is used as given; `auto` is chosen here. What a restart waits on is the returning node's copies:
most recover from their own files plus the operations they missed, so a recovery is mostly round
trips and little work, and many can run at once; the bytes that are copied are bounded by
`max_bytes_per_sec` however many recoveries share it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.config.model import AUTO, RecoveryLimits
from orchestrator.shards.snapshot import EsNode
from orchestrator.units import human_bytes, parse_size

CONCURRENT = "cluster.routing.allocation.node_concurrent_recoveries"
PRIMARIES = "cluster.routing.allocation.node_initial_primaries_recoveries"
RATE = "indices.recovery.max_bytes_per_sec"
CHUNKS = "indices.recovery.max_concurrent_file_chunks"
BANDWIDTHS = ("node.bandwidth.recovery.network", "node.bandwidth.recovery.disk.read",
              "node.bandwidth.recovery.disk.write")

MIB, GIB = 2**20, 2**30
ES_DEFAULT_RATE = 40 * MIB
ES_DEFAULT_PRIMARIES = 4
ES_BANDWIDTH_SHARE = 0.4  # Elasticsearch's own share of a declared bandwidth (node.bandwidth.recovery.factor.*)
# A restart's recoveries are what the cluster waits on: they take most of a declared bandwidth, and a
# fifth is left to the searches and writes that go on.
RUN_BANDWIDTH_SHARE = 0.8
# Without a declared bandwidth, what the hosts say they carry (hosts/capacity.py: the fastest link up, the
# kind of disk under the data paths), of which the run takes this much:
MEASURED_SHARE = 0.9
# Neither declared nor read on the hosts: 2.5 x Elasticsearch's 40mb (seed 002's operators' choice), which
# any disk and network a data node runs on today carries.
UNDECLARED_RATE = 100 * MIB
# A returning node's copies recover together, bounded by the smallest data node's processors: more at once
# recover sooner, up to about 16 a processor (bench_recovery; docs/benchmarks.md).
RECOVERIES_PER_PROCESSOR = 16
MOST_CONCURRENT = 64
# Elasticsearch's default rate of a dedicated cold or frozen node, by the host's memory.
COLD_FROZEN_RATES = ((4 * GIB, 40 * MIB), (8 * GIB, 60 * MIB), (16 * GIB, 90 * MIB), (32 * GIB, 125 * MIB))
COLD_FROZEN_RATE_ABOVE = 250 * MIB


@dataclass(frozen=True)
class Limit:
    key: str
    value: str
    why: str
    default: str | None = None  # Elasticsearch's own value when nothing sets it (None: it depends on the node)


def chosen_limits(cfg: RecoveryLimits, nodes: Sequence[EsNode], copies: Mapping[str, int]) -> list[Limit]:
    """The four limits a run raises, for a cluster of ``nodes`` (its data nodes decide) holding
    ``copies`` shard copies by node id."""
    data = [n for n in nodes if n.is_data] or list(nodes)
    chunks = Limit(CHUNKS, str(cfg.max_concurrent_file_chunks), "file chunks in flight per copying recovery "
                   "(Elasticsearch's 2, at most 8): recovery.max_concurrent_file_chunks", default="2")
    return [concurrent_limit(cfg.node_concurrent_recoveries, data, copies),
            primaries_limit(cfg.node_initial_primaries_recoveries, data), rate_limit(cfg.max_bytes_per_sec, data),
            chunks]


def smallest(nodes: Sequence[EsNode]) -> EsNode | None:
    known = [n for n in nodes if n.processors]
    return min(known, key=lambda n: (n.processors, n.name)) if known else None


def concurrent_limit(given: int | str, data: Sequence[EsNode], copies: Mapping[str, int]) -> Limit:
    if given != AUTO:
        return Limit(CONCURRENT, str(given), "as the inventory says (recovery.node_concurrent_recoveries)", "2")
    busiest = max(data, key=lambda n: copies.get(n.id, 0), default=None)  # the first such by name
    most = copies.get(busiest.id, 0) if busiest is not None else 0
    node = smallest(data)
    if node is None or node.processors is None:
        cap, capped = MOST_CONCURRENT // 2, "the nodes' processors are unknown"
    else:
        cap = min(RECOVERIES_PER_PROCESSOR * node.processors, MOST_CONCURRENT)
        capped = f"{RECOVERIES_PER_PROCESSOR} per processor of the smallest data node ({node.name}: {node.processors})"
    value = max(2, min(most, cap))
    held = f"the most copies one data node holds ({busiest.name}: {most})" if busiest is not None else "its copies"
    return Limit(CONCURRENT, str(value),
                 f"all of {held}, at most {cap} ({capped}): a returning copy recovers from its own files and "
                 "mostly waits on round trips, so recovering them together is what makes a node's turn short", "2")


def primaries_limit(given: int | str, data: Sequence[EsNode]) -> Limit:
    if given != AUTO:
        return Limit(PRIMARIES, str(given), "as the inventory says (recovery.node_initial_primaries_recoveries)",
                     str(ES_DEFAULT_PRIMARIES))
    node = smallest(data)
    processors = node.processors if node is not None and node.processors else 0
    value = max(ES_DEFAULT_PRIMARIES, min(processors, MOST_CONCURRENT))
    where = f" ({node.name}: {processors})" if node is not None else ""
    return Limit(PRIMARIES, str(value),
                 f"one per processor of the smallest data node{where}, never below Elasticsearch's "
                 f"{ES_DEFAULT_PRIMARIES}: a primary recovers from the node's own disk, no network",
                 str(ES_DEFAULT_PRIMARIES))


def declared_bandwidth(node: EsNode) -> int | None:
    """The smallest recovery bandwidth the node declares (network, disk read, disk write), if any."""
    own = dict(node.recovery_settings)
    found = []
    for key in BANDWIDTHS:
        try:
            found.append(parse_size(own[key]))
        except (KeyError, ValueError):
            continue
    return min(found) if found else None


def own_rate(node: EsNode) -> tuple[int, str]:
    """The rate the node recovers at when the cluster sets none, and why (Elasticsearch's rules)."""
    own = dict(node.recovery_settings)
    if RATE in own:
        try:
            return parse_size(own[RATE]), f"its elasticsearch.yml says {own[RATE]}"
        except ValueError:
            pass
    bandwidth = declared_bandwidth(node)
    if bandwidth is not None:
        share = f"{ES_BANDWIDTH_SHARE:.0%} of the {human_bytes(bandwidth)}/s it declares"
        return int(bandwidth * ES_BANDWIDTH_SHARE), share
    if node.is_data and node.data_roles <= {"data_cold", "data_frozen"} and node.memory_bytes:
        rate = next((r for top, r in COLD_FROZEN_RATES if node.memory_bytes <= top), COLD_FROZEN_RATE_ABOVE)
        return rate, f"a dedicated cold or frozen node with {node.memory_bytes / GIB:.0f} GiB"
    return ES_DEFAULT_RATE, "Elasticsearch's default"


def rate_limit(given: str, data: Sequence[EsNode]) -> Limit:
    if given != AUTO:
        return Limit(RATE, given, "as the inventory says (recovery.max_bytes_per_sec)")
    declared = [(b, n) for n in data if (b := declared_bandwidth(n)) is not None]
    if data and len(declared) == len(data):
        bandwidth, node = min(declared, key=lambda d: (d[0], d[1].name))
        return Limit(RATE, size_text(int(bandwidth * RUN_BANDWIDTH_SHARE)),
                     f"{RUN_BANDWIDTH_SHARE:.0%} of the smallest recovery bandwidth the data nodes declare "
                     f"({node.name}: {human_bytes(bandwidth)}/s, node.bandwidth.recovery.*); Elasticsearch alone "
                     f"takes {ES_BANDWIDTH_SHARE:.0%}, a restart waits on its recoveries")
    measured = [(n.host_bytes_s, n) for n in data if n.host_bytes_s]
    if measured:
        bandwidth, node = min(measured, key=lambda m: (m[0], m[1].name))
        read = (f"; {len(measured)} of {len(data)} data nodes' hosts read, the others taken as alike"
                if len(measured) < len(data) else "")
        chosen, why = int(bandwidth * MEASURED_SHARE), (
            f"{MEASURED_SHARE:.0%} of the least that a data node's host carries, as read on it ({node.name}'s, "
            f"{human_bytes(bandwidth)}/s: {node.host_said}){read}; the rest is left to searches and writes")
    else:
        chosen, why = UNDECLARED_RATE, (
            "the data nodes declare no recovery bandwidth (node.bandwidth.recovery.* in elasticsearch.yml) and "
            "their hosts were not read, so nothing says what their disks and network carry: 2.5 x "
            "Elasticsearch's 40mb")
    # A rate set for the cluster applies to every node: it must not lower any node's own.
    own = [(*own_rate(n), n) for n in data]
    top = max(own, key=lambda o: (o[0], o[2].name), default=None)
    if top is not None and top[0] > chosen:
        return Limit(RATE, size_text(top[0]), f"{top[2].name}'s own rate ({top[1]}): a rate set for the cluster "
                     "applies to every node and must not lower it")
    return Limit(RATE, size_text(chosen), why)


def size_text(n: int) -> str:
    """A rate as Elasticsearch reads it, in whole megabytes (`100mb`), down to the megabyte."""
    return f"{max(n // MIB, 1)}mb"
