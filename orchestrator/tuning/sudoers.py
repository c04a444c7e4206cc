"""The exact sudo rules a cluster's hosts need for `ssh.sudo_rules: commands` (`orchestrate sudoers`):
every root action the tool could take on each host, read from the hosts themselves (the THP
directory, the data disks), whatever drifts today."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from orchestrator.config.model import DEFAULT_REBOOT, Inventory, NodeEntry
from orchestrator.errors import OrchestratorError
from orchestrator.hosts.actions import Rule, systemctl
from orchestrator.hosts.transport import Transport
from orchestrator.tuning.apply import profile_of
from orchestrator.tuning.host import Host
from orchestrator.tuning.knobs import knobs_for


def service_rules(inv: Inventory) -> list[Rule]:
    """The service's stop and start, and the reboot of `restart --reboot` when it is systemd's."""
    rules: list[Rule] = []
    if inv.service.manager == "systemd":
        rules += [r for verb in ("stop", "start") for r in systemctl(verb, inv.service.unit).rules()]
    if inv.service.reboot == DEFAULT_REBOOT:
        rules += systemctl("reboot").rules()
    return rules


def tuning_rules(inv: Inventory, transport: Transport, node: NodeEntry) -> list[Rule]:
    profile = profile_of(inv)
    if profile is None:
        return []
    knobs = knobs_for(profile, list(node.data_paths))
    fixes = Host(transport, node).gather(lambda reads: [f for k in knobs for f in k.possible_fixes(reads)],
                                         first=[p for k in knobs for p in k.probes()])
    return [rule for fix in fixes if not isinstance(fix, str) for rule in fix.rules()]


def cluster_rules(inv: Inventory, transport: Transport, nodes: list[NodeEntry]) -> tuple[list[Rule], list[str]]:
    """(every rule any of ``nodes`` needs, sorted; the nodes whose host could not be read, with why)."""

    def one(node: NodeEntry) -> tuple[list[Rule], str | None]:
        try:
            return tuning_rules(inv, transport, node), None
        except OrchestratorError as exc:
            return [], f"{node.name}: {exc}"

    with ThreadPoolExecutor(max_workers=min(len(nodes), 16) or 1) as pool:
        found = list(pool.map(one, nodes))
    rules = set(service_rules(inv)) | {r for node_rules, _ in found for r in node_rules}
    return sorted(rules), [problem for _, problem in found if problem]
