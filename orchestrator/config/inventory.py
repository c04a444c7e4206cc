"""Finding and loading a cluster's inventory by name (`--cluster`) or path (`--config`).

`--cluster NAME` looks for NAME.yaml in, in order: $ORCHESTRATOR_CONFIGS, ./configs (a project
directory kept beside the inventories, as with Ansible), and the user's configuration directory
(`clusters/`, see orchestrator.paths). No name is special.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.config.loader import load_model
from orchestrator.config.model import NAME_RE, Inventory
from orchestrator.errors import ConfigError
from orchestrator.paths import config_home, inventory_dirs, known_clusters


def inventory_path(cluster: str | None, config: Path | None) -> Path:
    if config is not None:
        return config
    if not cluster:
        raise ConfigError("command line", ["give --cluster NAME (configs/NAME.yaml) or --config PATH"])
    if "/" in cluster or cluster.startswith("."):
        raise ConfigError("command line", [f"--cluster takes a name, not a path: {cluster[:80]!r} (use --config)"])
    if not re.fullmatch(NAME_RE, cluster):
        raise ConfigError("command line", [f"--cluster {cluster[:80]!r}{'...' if len(cluster) > 80 else ''} is not a "
                                           "cluster name (letters, digits, . _ -, at most 63)"])
    candidates = [d / f"{cluster}.yaml" for d in inventory_dirs()]
    for path in candidates:
        if path.is_file():
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise ConfigError("command line", [f"unknown cluster {cluster!r}; looked for {looked}. {how_to_get(cluster)}"])


def how_to_get(cluster: str) -> str:
    """What to do about an unknown cluster name: the sandbox is made by a command; any other is written from
    the cluster itself, or is a name mistyped among those there are."""
    if cluster == "sandbox":
        return "`orchestrate sandbox up` starts the sandbox cluster and writes its inventory"
    known = known_clusters()
    return (f"`orchestrate inventory discover --endpoint URL --name {cluster} -o "
            f"{config_home() / 'clusters' / cluster}.yaml` writes it from the running cluster"
            + (f"; the clusters there are: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}" if known
               else ""))


CREDENTIALS = {"username", "password", "api_key"}


def load_inventory(cluster: str | None, config: Path | None,
                   cluster_keys: Mapping[str, Any] | None = None) -> tuple[Inventory, Path]:
    """The inventory, checked; ``cluster_keys``: `cluster:` keys given from elsewhere (a scheduler's
    connection: endpoints, username, secrets named by environment variable), over the file's."""
    path = inventory_path(cluster, config)

    def with_cluster_keys(data: dict[str, Any]) -> dict[str, Any]:
        section = dict(data["cluster"]) if isinstance(data.get("cluster"), dict) else {}
        if CREDENTIALS & set(cluster_keys or {}):  # the given credentials replace the file's, not mix with them
            section = {k: v for k, v in section.items() if k not in CREDENTIALS}
        return {**data, "cluster": {**section, **(cluster_keys or {})}}

    inv = load_model(path, Inventory, with_cluster_keys if cluster_keys else None)
    inv.set_source(path)
    return inv, path
