"""`inventory discover`: connect with the given settings, read the cluster, resolve the hosts through
the operator's SSH config or Ansible inventory, and return a checked inventory (YAML text)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from orchestrator.config.loader import problems_of, read_bytes_of
from orchestrator.config.model import ClusterSection, Inventory
from orchestrator.errors import ConfigError
from orchestrator.es.connect import ElasticsearchRest
from orchestrator.opensearch.adapter import OpenSearchAdapter
from orchestrator.opensearch.connect import OpenSearchRest
from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.connection import connection_of
from orchestrator.shards.discover import Facts, SshView, ansible_view, inventory_document, ssh_config_view
from orchestrator.shards.rest import WrongProduct

MAX_INPUT_BYTES = 20_000_000  # an SSH config or an Ansible listing of thousands of hosts


def cluster_facts(section: ClusterSection) -> tuple[Facts, str]:
    """What the cluster says of itself, and which product it is: asked as Elasticsearch first, then,
    if the server says it is another product, as OpenSearch."""
    conn = connection_of(section)
    try:
        return ShardClusterAdapter(ElasticsearchRest(conn), section.awareness_attribute).discovery_facts(), \
            "elasticsearch"
    except WrongProduct:
        return OpenSearchAdapter(OpenSearchRest(conn), section.awareness_attribute).discovery_facts(), "opensearch"


def discover(endpoint: str, cluster: dict[str, Any], ssh_config: Path | None = None,
             ansible: Path | None = None, name: str | None = None,
             all_endpoints: bool = False) -> tuple[str, list[str]]:
    """(inventory YAML, notes). ``cluster``: connection settings as an inventory's `cluster:` takes them
    (credentials as {env: ...} or {file: ...}); checked first, so a bad one fails before any call."""
    try:
        section = ClusterSection.model_validate({"name": name or "discovered", "endpoints": [endpoint], **cluster})
    except ValidationError as exc:
        raise ConfigError("discover", problems_of(exc, None)) from None
    facts, product = cluster_facts(section)
    view = SshView()
    if ssh_config is not None:
        view = ssh_config_view(read_bytes_of(ssh_config, MAX_INPUT_BYTES).decode(errors="replace"), facts.nodes,
                               str(ssh_config))
    elif ansible is not None:
        try:
            listing = json.loads(read_bytes_of(ansible, MAX_INPUT_BYTES))
        except ValueError as exc:
            raise ConfigError(str(ansible), [f"not the JSON `ansible-inventory -i INVENTORY --list` prints: {exc}"]) \
                from None
        view = ansible_view(listing if isinstance(listing, dict) else {}, facts.nodes, str(ansible))
    doc, notes = inventory_document(facts, endpoint, cluster, view, name, product, all_endpoints)
    try:
        Inventory.model_validate(doc)  # what is written loads: checked by the inventory's own model
    except ValidationError as exc:
        raise ConfigError("discovered inventory", problems_of(exc, None)[:10]) from None
    header = (f"# Discovered from {endpoint} by `orchestrate inventory discover` on "
              f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}.\n# Review it (SSH user, keys, tuning profile) before a "
              "run; `orchestrate plan --config THIS_FILE` checks it against the cluster.\n")
    return header + yaml.safe_dump(doc, sort_keys=False), notes
