"""Every answer the shard adapter reads, checked for its shape before anything reads it: typed data, or a
`ClusterError` that names the request. A broken proxy or load balancer in front of the cluster answers
`{"nodes": []}` or a health that is a string as readily as an attacker does; read raw, such an answer
crashed the plan or a run half-way (an internal error, with allocation left restricted), where it must be
the cluster's error on the run's ordinary path (journal, `resume`).

Small answers are pydantic models (extra fields kept: callers read what they need of them). The large
lists a plan reads once (`_cat/shards` of a million copies) are checked column by column, in C, as
saved snapshots are (shards/snapshot.py), so that planning stays fast. JSON nested past what any answer
holds is refused where it is parsed (the clients raise RecursionError: see `ShardRequests._do`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import repeat
from operator import itemgetter
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,  # pydantic checks TypedDicts only of this module before 3.12
    TypeVar,
)

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from orchestrator.config.discovered import first_problems
from orchestrator.errors import ClusterError
from orchestrator.reading import MAX_DIGITS
from orchestrator.restart.search_figures import SearchCounters
from orchestrator.shards.snapshot import ShardCopy


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


# A shard's number as answers key their shards: ASCII digits of a bounded length (`²` passes `str.isdigit`,
# and fails `int`; ten thousand digits pass both and cost a quadratic conversion), checked where parsed.
ShardNumber = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,9}$")]


M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def parsed(model: type[M], raw: Any, what: str) -> M:
    """``raw`` as ``model``, or the cluster's error naming ``what`` was asked (never the answer itself: it
    can be of any size, and hold anything)."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise not_its_shape(what, "; ".join(first_problems(exc, 3))) from None


def parsed_as(shape: TypeAdapter[T], raw: Any, what: str) -> T:
    """``raw`` checked against ``shape`` (typed dictionaries), as `parsed` does for a model."""
    try:
        return shape.validate_python(raw)
    except ValidationError as exc:
        raise not_its_shape(what, "; ".join(first_problems(exc, 3))) from None


@contextmanager
def shaped(what: str) -> Iterator[None]:
    """For an answer read field by field where a model would cost more than it checks (force-merge's): a field
    missing or of another type is the cluster's error naming ``what``, not a crash."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise not_its_shape(what, f"{type(exc).__name__} reading it") from None


def not_its_shape(what: str, why: str) -> ClusterError:
    # ``why`` may quote the answer's own keys (a field's place): any text, a line break or a terminal's escape too.
    why = "".join(c if c.isprintable() else "?" for c in why[:400])
    return ClusterError(f"{what}: the cluster's answer is not what Elasticsearch or OpenSearch send ({why}); "
                        "is a proxy or load balancer between the tool and the cluster answering in its place?")


# --- health, settings, state -------------------------------------------------------------------------
class Named(Answer):
    cluster_name: str = ""


class Health(Answer):
    cluster_name: str
    status: Literal["green", "yellow", "red"]
    number_of_nodes: int = Field(ge=0)
    relocating_shards: int = Field(ge=0)
    initializing_shards: int = Field(ge=0)
    unassigned_shards: int = Field(ge=0)
    delayed_unassigned_shards: int = Field(0, ge=0)


class IndexStatus(Answer):
    status: Literal["green", "yellow", "red"]


class HealthByIndex(Answer):
    indices: dict[str, IndexStatus] = {}


class Settings(Answer):
    persistent: dict[str, Any] = {}
    transient: dict[str, Any] = {}
    defaults: dict[str, Any] = {}


class State(Answer):
    master_node: str | None = None


class Block(Answer):
    description: str = ""


class Blocks(Answer):
    indices: dict[str, dict[str, Block]] = {}
    global_: dict[str, Block] = Field({}, alias="global")


class BlocksState(Answer):
    blocks: Blocks = Field(default_factory=Blocks)


class RunningSnapshot(Answer):
    repository: str = "?"
    snapshot: str = "?"
    state: str = "?"


class RunningSnapshots(Answer):
    snapshots: list[RunningSnapshot] = []


# --- nodes -----------------------------------------------------------------------------------------
class Process(Answer):
    id: int | None = None


class Jvm(Answer):
    pid: int | None = None
    start_time_in_millis: int | None = None
    input_arguments: list[str] = []


class Os(Answer):
    allocated_processors: int | None = None


class Node(Answer):
    """A node of node info, as far as the tool reads it."""

    name: str = ""
    host: str = ""
    ip: str = ""
    roles: list[str] = []
    attributes: dict[str, str] = {}
    version: str = ""
    process: Process = Field(default_factory=Process)
    jvm: Jvm = Field(default_factory=Jvm)
    os: Os = Field(default_factory=Os)
    settings: dict[str, Any] = {}


class Nodes(Answer):
    nodes: dict[str, Node] = {}


class Memory(Answer):
    total_in_bytes: int | None = None


class NodeOs(Answer):
    mem: Memory = Field(default_factory=Memory)


class NodeStatsOs(Answer):
    os: NodeOs = Field(default_factory=NodeOs)


class NodesMemory(Answer):
    nodes: dict[str, NodeStatsOs] = {}


def search_counters_of(raw: Any, what: str) -> dict[str, SearchCounters]:
    """Every node's search counters (`_nodes/stats/indices,thread_pool/search` filtered to its four figures), by
    node name, read each interval of the search watch: field by field, each figure a count (a whole number, not
    below 0), 0 where a node lacks it. Not a model per node: at 3,000 nodes that was most of an interval's CPU
    (`bench_search_watch`)."""
    out = {}
    with shaped(what):
        for node in raw.get("nodes", {}).values():
            search = node.get("indices", {}).get("search", {})
            pool = node.get("thread_pool", {}).get("search", {})
            queries, took = search.get("query_total", 0), search.get("query_time_in_millis", 0)
            queue, rejected = pool.get("queue", 0), pool.get("rejected", 0)
            name = node["name"]
            # `type is int`: neither a fraction nor a bool (an int to isinstance)
            if type(name) is not str or type(queries) is not int or type(took) is not int or type(queue) is not int \
                    or type(rejected) is not int or min(queries, took, queue, rejected) < 0:
                raise ValueError  # a node's name or a search figure: shaped() says which answer
            out[name] = SearchCounters(queries, took, queue, rejected)
    return out


# What a batch's nodes hold, read three times a batch (node stats at level=shards, a copy per shard of theirs):
# checked as typed dictionaries, in one pass in pydantic's core, not a model per copy (a third of a batch's CPU
# on a large cluster: docs/benchmarks.md, `bench_scale`). A field a copy lacks is absent: readers use `.get`.
class HeldRouting(TypedDict, total=False):
    node: str | None
    primary: bool
    state: str


class HeldLease(TypedDict):
    id: str
    retaining_seq_no: int


class HeldLeases(TypedDict, total=False):
    leases: list[HeldLease]


class HeldUserData(TypedDict, total=False):
    local_checkpoint: Annotated[str, StringConstraints(pattern=r"^-?[0-9]{1,19}$")] | None


class HeldCommit(TypedDict, total=False):
    user_data: HeldUserData


class HeldDocs(TypedDict, total=False):
    count: int


class HeldStore(TypedDict, total=False):
    size_in_bytes: int


class HeldCopy(TypedDict, total=False):
    routing: HeldRouting
    docs: HeldDocs
    store: HeldStore
    commit: HeldCommit
    retention_leases: HeldLeases


class HeldIndices(TypedDict, total=False):
    # index -> [{shard number: the copy's fields}], as node stats list a node's copies at level=shards
    shards: dict[str, list[dict[ShardNumber, HeldCopy]]]


class HeldNode(TypedDict, total=False):
    name: str
    indices: HeldIndices


class NodesHeader(TypedDict, total=False):
    failed: Annotated[int, Field(ge=0)]


# `_nodes` is a key no class body can name as a field of its own
class NodesHolding(TypedDict, total=False):
    _nodes: NodesHeader
    nodes: dict[str, HeldNode]


NODES_HOLDING = TypeAdapter(NodesHolding)


# --- shards ----------------------------------------------------------------------------------------
# The routing table of a batch's indices, read by each last look (every copy of the shards it holds): typed
# dictionaries checked in one pass of pydantic's core, as the held copies are, not a model per copy.
class RoutedCopy(TypedDict):
    state: str
    primary: bool
    node: NotRequired[str | None]


class RoutedIndex(TypedDict, total=False):
    shards: dict[ShardNumber, list[RoutedCopy]]


class RoutingIndices(TypedDict, total=False):
    indices: dict[str, RoutedIndex]


class Routing(TypedDict, total=False):
    routing_table: RoutingIndices


ROUTING_TABLE = TypeAdapter(Routing)


class AssignedCopy(Answer):  # a copy as `routing_nodes` lists it under its node
    index: str
    shard: Annotated[int, Field(ge=0, le=10**9)]
    state: str
    primary: bool


class AssignedNodes(Answer):
    nodes: dict[str, list[AssignedCopy]] = {}


class RoutingNodes(Answer):
    routing_nodes: AssignedNodes = Field(default_factory=AssignedNodes)


class IndexReplicas(Answer):
    number_of_replicas: str | None = None


class IndexSettingsBody(Answer):
    index: IndexReplicas = Field(default_factory=IndexReplicas)


class IndexSettings(Answer):
    settings: IndexSettingsBody = Field(default_factory=IndexSettingsBody)


class IndicesSettings(RootModel[dict[str, IndexSettings]]):
    pass


class CopyRouting(Answer):  # a copy's routing in shard-level stats
    node: str | None = None
    primary: bool = False
    state: str = ""


class Lease(Answer):
    id: str
    retaining_seq_no: int


class Leases(Answer):
    leases: list[Lease] = []


class UserData(Answer):
    local_checkpoint: str | None = Field(None, pattern=r"^-?[0-9]{1,19}$")


class Commit(Answer):
    user_data: UserData = Field(default_factory=UserData)


class Docs(Answer):
    count: int = 0


class Store(Answer):
    size_in_bytes: int = 0


class CopyStats(Answer):
    routing: CopyRouting = Field(default_factory=CopyRouting)
    docs: Docs = Field(default_factory=Docs)
    store: Store = Field(default_factory=Store)
    commit: Commit = Field(default_factory=Commit)
    retention_leases: Leases = Field(default_factory=Leases)


class IndexStats(Answer):
    shards: dict[ShardNumber, list[CopyStats]] = {}


class ShardStats(Answer):
    indices: dict[str, IndexStats] = {}


# --- one document (the run lock, the pause request) ------------------------------------------------------
class Document(Answer):
    source: dict[str, Any] = Field(alias="_source")
    seq_no: int = Field(0, alias="_seq_no")
    primary_term: int = Field(0, alias="_primary_term")


class HasPrivileges(Answer):
    has_all_requested: bool = False
    cluster: dict[str, bool] = {}
    index: dict[str, dict[str, bool]] = {}


# --- an upgrade's reads ------------------------------------------------------------------------------
class Plugin(Answer):
    name: str


class NodePlugins(Answer):
    name: str
    plugins: list[Plugin] = []


class Plugins(Answer):
    nodes: dict[str, NodePlugins] = {}


# --- `_cat` lists ----------------------------------------------------------------------------------------
def cat_column(rows: Any, name: str, what: str, kinds: tuple[type, ...] = (str,)) -> list[Any]:
    """One column of a `_cat` answer (JSON), each value of one of ``kinds``: checked in C (a million rows)."""
    if not isinstance(rows, list):
        raise not_its_shape(what, "not a list of rows")
    try:
        values = list(map(itemgetter(name), rows))
    except (KeyError, TypeError, IndexError):
        raise not_its_shape(what, f"a row without a {name} column") from None
    if not set(map(type, values)) <= set(kinds):
        raise not_its_shape(what, f"its {name} column holds something other than "
                                  f"{' or '.join('null' if k is NONE else 'text' for k in kinds)}")
    return values


NONE = type(None)


def disk_rows(rows: Any, what: str) -> list[tuple[str, float, int]]:
    """`_cat/allocation` rows: (node, percent used, bytes available), nodes that report no disk left out."""
    nodes = cat_column(rows, "node", what, (str, NONE))
    percent, avail = (cat_column(rows, c, what, (str, NONE)) for c in ("disk.percent", "disk.avail"))
    out = []
    for node, used, left in zip(nodes, percent, avail, strict=True):
        if node and used and left:
            try:
                out.append((node, float(used), int(left)))
            except ValueError:
                raise not_its_shape(what, "a disk figure that is not a number") from None
    return out


def ascii_digits(text: str) -> bool:
    """ASCII digits, at most 19 (what `int` reads at once, and a 64-bit size holds): in C, for a million rows."""
    return text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS


def copies_from_cat(rows: Any, what: str) -> list[ShardCopy]:
    """`_cat/shards` rows (index, shard, prirep, state, id, store) as shard copies, column by column."""
    index, shard, prirep, state = (cat_column(rows, c, what) for c in ("index", "shard", "prirep", "state"))
    node, store = (cat_column(rows, c, what, (str, NONE)) for c in ("id", "store"))
    sizes = list(filter(None, store))
    if not all(map(ascii_digits, shard)) or not set(prirep) <= {"p", "r"} or not all(map(ascii_digits, sizes)):
        raise not_its_shape(what, "a shard that is not a number, a role that is not p or r, or a size that is not "
                                  "a number of bytes")
    return list(map(tuple.__new__, repeat(ShardCopy), zip(
        index, map(int, shard), map("p".__eq__, prirep), state, [n or None for n in node],
        [int(s) if s else 0 for s in store], strict=True)))
