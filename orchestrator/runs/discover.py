"""`inventory discover`: connect with the given settings, read the cluster, resolve the hosts through
the operator's SSH config or Ansible inventory, and return a checked inventory (YAML text)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from orchestrator import products
from orchestrator.config.discovered import DiscoveredNode, SshHost, SshView, ansible_view, inventory_document
from orchestrator.config.loader import problems_of, read_bytes_of, refuse_special_file
from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ConfigError
from orchestrator.hosts.ssh_config import Resolved, SshConfig, identity_files
from orchestrator.retry import within

MAX_INPUT_BYTES = 20_000_000  # an Ansible listing of thousands of hosts
# The client's timeout bounds each read, not a request: an answer trickling in a byte at a time would hold
# discovery for ever. Its few requests together get this many times the timeout.
DEADLINE_TIMEOUTS = 2
T = TypeVar("T")


def discover(endpoint: str, cluster: dict[str, Any], ssh_config: Path | None = None,
             ansible: Path | None = None, name: str | None = None,
             all_endpoints: bool = False) -> tuple[str, list[str]]:
    """(inventory YAML, notes). ``cluster``: connection settings as an inventory's `cluster:` takes them
    (credentials as {env: ...} or {file: ...}); checked first, so a bad one fails before any call."""
    try:
        section = ClusterSection.model_validate({"name": name or "discovered", "endpoints": [endpoint], **cluster})
    except ValidationError as exc:
        raise ConfigError("discover", problems_of(exc, None)) from None
    if section.ca_file is not None:
        refuse_special_file(section.ca_file, "--ca-file")
    deadline = section.request_timeout_s * DEADLINE_TIMEOUTS
    facts, product = within(deadline, lambda: products.discover(section),
                            f"{endpoint} did not answer discovery's requests within {deadline:.0f} s in all")
    view = SshView()
    if ssh_config is not None:
        refuse_special_file(ssh_config, "--ssh-config")
        view = ssh_config_view(SshConfig(ssh_config, True), facts.nodes)
    elif ansible is not None:
        try:
            listing = json.loads(read_bytes_of(ansible, MAX_INPUT_BYTES))
        except RecursionError:
            raise ConfigError(str(ansible), ["nested deeper than any `ansible-inventory --list` output"]) from None
        except ValueError as exc:
            raise ConfigError(str(ansible), [f"not the JSON `ansible-inventory -i INVENTORY --list` prints: {exc}"]) \
                from None
        view = ansible_view(listing if isinstance(listing, dict) else {}, facts.nodes, str(ansible))
    for reach in view.hosts.values():  # written into the inventory, opened by later runs
        for path, label in ((reach.identity_file, "IdentityFile"), (reach.known_hosts, "UserKnownHostsFile")):
            if path:
                refuse_special_file(Path(path), f"{view.source}: {label}")
    doc, notes = inventory_document(facts, endpoint, cluster, view, name, product, all_endpoints)
    try:
        Inventory.model_validate(doc)  # what is written loads: checked by the inventory's own model
    except ValidationError as exc:
        raise ConfigError("discovered inventory", problems_of(exc, None)[:10]) from None
    header = (f"# Discovered from {endpoint} by `orchestrate inventory discover` on "
              f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}.\n# Review it (SSH user, keys, tuning profile) before a "
              "run; `orchestrate plan --config THIS_FILE` checks it against the cluster.\n")
    return header + yaml.safe_dump(doc, sort_keys=False), notes


# What makes a Host block's settings differ from OpenSSH's defaults for discovery's purpose.
REACH_KEYWORDS = ("hostname", "user", "port", "identityfile", "userknownhostsfile", "proxyjump")


def ssh_config_view(config: SshConfig, nodes: tuple[DiscoveredNode, ...]) -> SshView:
    """Hosts from an OpenSSH client config, resolved by the OpenSSH client itself (`ssh -G`): the node's
    name, or else its address, when the config says of it anything OpenSSH's defaults do not (HostName,
    User, Port, IdentityFile, UserKnownHostsFile, ProxyJump). The host written is that alias, and the
    inventory names the config: each run resolves it again as ssh does, jump hosts included."""
    defaults = config.defaults()
    found = {}
    for n in nodes:
        for alias in dict.fromkeys(a for a in (n.name, n.ip) if a):
            resolved = config.resolve(alias)
            if named(resolved, defaults, alias):
                found[n.name] = reach_of(resolved, defaults, alias)
                break
    return SshView(found, config.source, str(config.path.absolute()) if config.path else None)


def named(resolved: Resolved, defaults: Resolved, alias: str) -> bool:
    if resolved.get("hostname", [alias.lower()])[0] != alias.lower():
        return True
    return any(resolved.get(k) != defaults.get(k) for k in REACH_KEYWORDS if k != "hostname")


def reach_of(resolved: Resolved, defaults: Resolved, alias: str) -> SshHost:
    def own(keyword: str) -> str | None:
        value = resolved.get(keyword)
        return value[0] if value and value != defaults.get(keyword) else None

    port = own("port")
    keys = identity_files(resolved, defaults, alias)
    known = own("userknownhostsfile")
    # The user always: what ssh would log in as, even where that is OpenSSH's default (the local user).
    return SshHost(host=alias, user=resolved.get("user", [None])[0], port=int(port) if port else None,
                   identity_file=keys[0] if keys else None, known_hosts=known.split()[0] if known else None)
