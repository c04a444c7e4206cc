"""Planning: the product's pure plan over a snapshot of the live cluster, or of a saved one."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator import products
from orchestrator.config.inventory import load_inventory
from orchestrator.config.maintenance import calendar_end, when
from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError
from orchestrator.hosts.transport import Transport
from orchestrator.paths import write_file_for_the_operator
from orchestrator.restart.budget import Budget, room_of, window_asked
from orchestrator.restart.durations import with_measured_restarts
from orchestrator.restart.journal import RunOptions
from orchestrator.restart.latency_control import LatencyBudget
from orchestrator.restart.plan import Batch, GateRule, Mode, Plan
from orchestrator.restart.procedure import TUNING_STEPS
from orchestrator.restart.product import Product
from orchestrator.restart.search_watch import BASELINE_INTERVALS
from orchestrator.runs.host_reads import HostReads
from orchestrator.runs.target import Target, load_procedure, with_window
from orchestrator.tuning.apply import profile_summary

# An index or node name, or a shell-style pattern of them (`logs-*`, `es-?`).
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.*?+\-]{1,255}")


def patterns(values: list[str] | None, option: str = "--allow-unavailable") -> tuple[str, ...]:
    """Name patterns given to ``option``, checked: names, or shell-style patterns of them, the option
    repeated or its values comma-separated (`--nodes es-1,es-2` as `--nodes es-1 --nodes es-2`)."""
    values = [v for value in values or () for v in value.split(",")]
    bad = [p for p in values if not NAME_PATTERN.fullmatch(p)]  # an empty part (`a,,b`, `,`) included
    if bad:
        raise ConfigError(option, [f"{p[:80]!r} is not a name or pattern (letters, digits, _ . + - and the "
                                   "wildcards * ?)" for p in bad[:5]])
    return tuple(dict.fromkeys(values or ()))



def options_for(target_allow_yellow: bool, allow_yellow: bool, allow_unavailable: list[str] | None = None,
                control: RunOptions | None = None) -> RunOptions:
    """The run's options: flags given on the command line, or set in the inventory. ``control``: the
    operator's control options (subset, canary, pause), already checked."""
    return replace(control or RunOptions(), allow_yellow=allow_yellow or target_allow_yellow,
                   allow_unavailable=patterns(allow_unavailable))


def upgrade_options(options: RunOptions, to: str, snapshot_check: bool) -> RunOptions:
    """An upgrade's options: the target version, checked to be one (x.y.z)."""
    if not re.fullmatch(r"\d{1,4}\.\d{1,4}\.\d{1,4}", to):
        raise ConfigError("--to", [f"{to[:40]!r} is not a version such as 9.5.3 (major.minor.patch)"])
    return replace(options, upgrade_to=to, snapshot_check=snapshot_check)


def control_options(nodes: list[str] | None, exclude: list[str] | None, canary: bool,
                    pause_between_s: float) -> RunOptions:
    if not 0 <= pause_between_s <= 24 * 3600:
        raise ConfigError("--pause-between", [f"{pause_between_s} s: give 0 to 86400 seconds"])
    return RunOptions(nodes=patterns(nodes, "--nodes"), exclude=patterns(exclude, "--exclude"), canary=canary,
                      pause_between_s=pause_between_s)


def budget_option(given: str | None) -> str:
    """`--max-unavailable`, checked (restart/budget.py: Budget), as the run records it ("" when not given)."""
    if given is None:
        return ""
    Budget.parse(given)
    return given.strip()


def windowed(target: Target, given: str | None, by: Mode, pause_between_s: float = 0.0) -> tuple[Target, str]:
    """The target and the budget of a run: `--max-unavailable`, else the inventory's `max_unavailable`. Above one
    node, the product's procedure for a window (refused where the product proves none safe), in node mode."""
    budget = budget_option(given) or target.inv.max_unavailable
    if not window_asked(budget):
        return target, budget
    if by is Mode.ZONE:
        raise ConfigError("--max-unavailable", [f"{budget}: a window admits nodes one by one on their own proof; "
                                                "use it with --by node (the default), or leave the budget out"])
    if pause_between_s:
        raise ConfigError("--pause-between", ["a window admits a node as soon as one leaves it: a pause between "
                                              "batches means nothing there; leave one of them out"])
    return with_window(target), budget


def select_nodes(plan: Plan, options: RunOptions) -> Plan:
    """The plan for the nodes chosen by --nodes and --exclude: the same batches and order, each keeping
    only its chosen nodes; batches left empty are dropped. The journal keeps it, so `resume` does too."""
    if not options.nodes and not options.exclude:
        return plan

    batches: list[Batch] = []
    for b in plan.batches:
        kept = tuple(n for n in b.nodes if options.chooses(n))
        if kept:
            batches.append(replace(b, number=len(batches) + 1, nodes=kept))
    everyone = [n for b in plan.batches for n in b.nodes]
    if not batches:
        raise ConfigError("--nodes/--exclude", [f"no node is left to restart of {', '.join(everyone[:10])}"])
    left_out = [n for n in everyone if not options.chooses(n)]
    note = (f"restarting {len(everyone) - len(left_out)} of {len(everyone)} nodes; left out (--nodes/--exclude): "
            + ", ".join(left_out[:20]) + (f" and {len(left_out) - 20} more" if len(left_out) > 20 else ""))
    return replace(plan, batches=tuple(batches), estimate_s=round(sum(b.estimate_s for b in batches), 1),
                   notes=(*plan.notes, note))


def make_plan(target: Target, mode: Mode, options: RunOptions, save_snapshot: Path | None = None,
              held: list[object] | None = None, host_transport: Callable[[], Transport] | None = None) -> Plan:
    """Plan from the live cluster (reads only); optionally keep the snapshot it was made from. ``held``:
    where the caller keeps the snapshot alive (see `plan_from_file`). ``host_transport``: the run's
    transport, for the hosts' reads (else one of their own)."""
    with HostReads(target, host_transport) as hosts:
        capacity = hosts.begin()  # the hosts answer while the cluster does
        snapshot = target.cluster.snapshot()
        if held is not None:
            held.append(snapshot)
        if options.upgrade_to:
            snapshot = target.product.with_upgrade_facts(target.cluster, snapshot)
        snapshot = target.product.with_host_capacity(target.inv, snapshot, capacity.result())
        if save_snapshot is not None:
            save(target, snapshot, save_snapshot)
        with gc_paused():
            tuning = profile_summary(target.inv, options.tune)
            plan = target.product.plan(target.inv, snapshot, mode, options, tuning)
        plan = with_measured_restarts(plan, hosts.last_restarts(plan))
    plan = with_window_notes(target.product, snapshot, finished(plan, target.inv, options), target.inv, options)
    return with_search_notes(with_schedule_notes(plan, target.inv, options), target.inv, target.product)


def with_window_notes(product: Product[Any, Any], snapshot: Any, plan: Plan, inv: Inventory,
                      options: RunOptions) -> Plan:
    """A window's notes, said of the plan as the run takes it: the nodes chosen (`--nodes`), the estimates
    measured from the nodes' own logs."""
    if not window_asked(options.max_unavailable):
        return plan
    return replace(plan, notes=(*plan.notes, *product.window_notes(snapshot, plan, inv, options)))


def with_schedule_notes(plan: Plan, inv: Inventory, options: RunOptions, now: datetime | None = None) -> Plan:
    """The plan says its maintenance windows: open or when they open, what the run does outside them, and when it
    should end in calendar time at the plan's estimates (config/maintenance.py)."""
    schedule = inv.maintenance.schedule()
    if not schedule.limited or not plan.batches:
        return plan
    now = now or datetime.now(UTC)
    closes = schedule.closes_at(now)
    first = plan.batches[0].estimate_s
    opens = None if schedule.fits(now, first) else schedule.next_opening(now, first)
    state = (f"open now, until {closes.isoformat(timespec='minutes')}" if closes is not None and opens is None
             else f"the first batch begins {when(opens, now)}" if opens is not None else "no window ahead fits a batch")
    outside = ("the run holds, its lock kept, and goes on" if inv.maintenance.outside == "wait"
               else "the run stops (exit 12) and `orchestrate resume` goes on")
    at_once = room_of(options.max_unavailable, len([n for b in plan.batches for n in b.nodes]))
    end = calendar_end(schedule, now, [b.estimate_s for b in plan.batches], at_once)
    ends = (f"at the plan's estimates it ends about {when(end, now)}" if end is not None
            else "a batch fits no window ahead: the run would stop there")
    return replace(plan, notes=(*plan.notes, f"maintenance windows: {schedule.describe()}; {state}. A batch begins "
                                f"only if it should end before its window closes; outside them {outside}; {ends}"))


def with_search_notes(plan: Plan, inv: Inventory, product: Product[Any, Any]) -> Plan:
    """With a search latency budget, the plan says what it measures against and the controller's range: the
    baseline it will take, the budget, and the recovery rates between which the run moves them
    (restart/latency_control.py)."""
    search, key = inv.search, product.recovery_rate_key
    budget = LatencyBudget.parse(search.latency_budget)
    if budget is None or key is None:
        return plan
    raised = next((str(c.during) for c in plan.settings if c.key == key), None)
    probe = search.probe
    held = (f"the probe's time (a search of {probe.index} the tool times end to end, every "
            f"{probe.interval_s or search.interval_s:g} s)" if probe is not None else "the slowest node's query time")
    limit = (f"{budget.ms:g} ms of {held}" if budget.ms is not None
             else f"{budget.factor:g}x the baseline of {held} (its slowest before the first stop)")
    if raised is None:
        moves = f"the run raises no {key} here, so the budget has nothing to move: it is only watched"
    else:
        moves = (f"over it for {search.sustain_s:g} s, {key} ({raised} for the run) is halved, never below "
                 f"{search.recovery_floor}; within it as long, raised again by eighths up to {raised}")
    wait = BASELINE_INTERVALS * search.interval_s
    return replace(plan, notes=(*plan.notes, f"search latency budget: {limit}, read every {search.interval_s:g} s; "
                                f"the first stop waits {wait:g} s for the baseline ({BASELINE_INTERVALS} intervals); "
                                f"{moves}. Each move is undone with the run's settings"))


def finished(plan: Plan, inv: Inventory, options: RunOptions) -> Plan:
    """A product's plan as a run takes it, live or from a saved state: the nodes chosen, what hosts share, the
    SSH config's local commands said, the engine's gate."""
    return with_gate(with_local_commands(with_shared_hosts(select_nodes(plan, options), inv, options), inv), inv)


def with_local_commands(plan: Plan, inv: Inventory) -> Plan:
    """The plan says that the SSH config's commands run on this machine, where the inventory allows them."""
    if not inv.ssh.allow_local_commands:
        return plan
    return replace(plan, notes=(*plan.notes, "ssh.allow_local_commands: the SSH config's ProxyCommand and Match "
                                "exec run on this machine, as this user, with a base environment and the SSH "
                                "agent's socket (never the tool's secrets)"))


def with_shared_hosts(plan: Plan, inv: Inventory, options: RunOptions) -> Plan:
    """The plan with what its hosts share: a note for each host that runs several inventory nodes, and a
    problem for each reboot that would take down a node outside its batch (another batch's, or one this run
    leaves alone), whose copies no check of that batch looked at. Pure."""
    by_host: dict[str, list[str]] = {}
    for entry in inv.nodes:
        by_host.setdefault(entry.host, []).append(entry.name)
    shared = {host: names for host, names in by_host.items() if len(names) > 1}
    if not shared:
        return plan
    batch_of = {name: b.number for b in plan.batches for name in b.nodes}
    notes = [f"host {host} runs {', '.join(names)}: a reboot of it takes each of them down"
             for host, names in sorted(shared.items())]
    problems = []
    for host, names in sorted(shared.items()):
        rebooted = [n for n in names if n in batch_of and options.reboots(n)]
        for name in rebooted:
            outside = [o for o in names if o != name and batch_of.get(o) != batch_of[name]]
            if outside:
                problems.append(f"{name}: rebooting host {host} also takes down {', '.join(outside)}, which "
                                f"{'is' if len(outside) == 1 else 'are'} not in its batch, so no check of that "
                                "batch covers them: put the nodes of one host in one zone and restart `--by zone`, "
                                "or include them all in the run, or restart without a reboot")
                break
    return replace(plan, notes=(*plan.notes, *notes), problems=(*plan.problems, *problems))


def save(target: Target, snapshot: object, path: Path) -> None:
    """`plan --save-snapshot`: the state the plan was made from, with what its hosts carry."""
    write_file_for_the_operator(path, json.dumps(target.product.dump_snapshot(snapshot)), mode=0o644)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Planning builds millions of small objects that all live until the plan is made: the cyclic
    collector, run every 700 allocations, finds nothing to free and cost half the time of reading
    a 1,000,000-copy state (1.9 s of 2.7 s). Reference counting still frees what is dropped."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # What planning built is left out of later collections: the first one after enabling went
            # through all of it (a large share of planning a 5,000-node state: bench_plan) and could free none of it.
            gc.freeze()
            gc.enable()


def with_gate(plan: Plan, inv: Inventory) -> Plan:
    """The plan with the engine's gate before each batch, as the inventory sets it (for every product)."""
    return replace(plan, gate=GateRule(inv.timeouts.stable_samples, inv.timeouts.gate_give_up_s))


def plan_from_file(cluster: str | None, config: Path | None, snapshot: Path, mode: Mode,
                   options: RunOptions, held: list[object] | None = None) -> tuple[Plan, list[str]]:
    """Plan from a saved cluster state: the same decisions, no cluster needed. ``held``: where the
    caller keeps the snapshot alive, so that a command about to end is not made to free it (1,000,000
    shard copies took 0.7 s to free one by one, and as long again at the interpreter's exit)."""
    inv, _path = load_inventory(cluster, config)
    product = products.get(inv.cluster.product)
    procedure = load_procedure(inv, product, upgrade=bool(options.upgrade_to))
    options = replace(options, allow_yellow=options.allow_yellow or inv.allow_yellow)
    with gc_paused():
        snap = product.load_snapshot(snapshot)
        if held is not None:
            held.append(snap)
        tuning = profile_summary(inv, options.tune)
        plan = with_window_notes(product, snap, finished(product.plan(inv, snap, mode, options, tuning), inv, options),
                                 inv, options)
        plan = with_search_notes(with_schedule_notes(plan, inv, options), inv, product)
    return plan, [name for name, _ in procedure.batch if options.tune or name not in TUNING_STEPS]
