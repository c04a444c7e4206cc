"""Finding and loading a cluster's inventory by name (`--cluster`) or path (`--config`)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.loader import config_dirs, load_model
from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError
from orchestrator.sandbox.layout import SandboxPaths


def inventory_path(cluster: str | None, config: Path | None) -> Path:
    if config is not None:
        return config
    if not cluster:
        raise ConfigError("command line", ["give --cluster NAME (configs/NAME.yaml) or --config PATH"])
    if "/" in cluster or cluster.startswith("."):
        raise ConfigError("command line", [f"--cluster takes a name, not a path: {cluster!r} (use --config)"])
    candidates = [d / f"{cluster}.yaml" for d in config_dirs()]
    if cluster == "sandbox":
        candidates.insert(0, SandboxPaths.default().inventory)
    for path in candidates:
        if path.is_file():
            return path
    hint = " (start it with `orchestrate sandbox up`)" if cluster == "sandbox" else ""
    looked = ", ".join(str(p) for p in candidates)
    raise ConfigError("command line", [f"unknown cluster {cluster!r}{hint}; looked for {looked}"])


def load_inventory(cluster: str | None, config: Path | None) -> tuple[Inventory, Path]:
    path = inventory_path(cluster, config)
    return load_model(path, Inventory), path
