"""Playbooks: the restart procedure as data. The ordered steps of a batch, with their parameters.

Built-in steps are named; an operator adds a `command` step (e.g. drain the node from a load
balancer) anywhere in the batch. Order rules are checked at load time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_serializer, model_validator

from orchestrator.config.hooks import Hooks
from orchestrator.config.loader import load_model
from orchestrator.config.model_base import Model
from orchestrator.errors import ConfigError
from orchestrator.paths import search

# (first, then): generic steps that must come in this order when both are listed. A product adds
# rules for its own steps (restart/procedure.py).
ORDER_RULES = (
    ("stop_service", "start_service"), ("start_service", "wait_for_join"),
    ("stop_service", "tune_host"), ("tune_host", "start_service"),
)
BUILTIN_NAME = r"^[a-z][a-z0-9_]{0,60}$"


class CommandStep(Model):
    """An operator's command, run on the node's host (or here, with `where: local`)."""

    name: str = Field(pattern=r"^[a-z0-9_-]{1,40}$")
    run: str = Field(min_length=1, max_length=4000)
    where: Literal["host", "local"] = "host"
    timeout_s: float = Field(120, ge=1, le=7200)
    # `where: local` runs with a small environment (PATH, HOME, locale), never this process's secrets;
    # list here the variables of this process that the command needs.
    env: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]] = Field(default_factory=list,
                                                                                       max_length=50)
    ignore_failure: bool = False


class Step(Model):
    """One entry of a batch: a built-in step by name, or a command."""

    builtin: str | None = None
    command: CommandStep | None = None

    @property
    def name(self) -> str:
        return self.builtin or (self.command.name if self.command else "?")


class Playbook(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    product: str = Field("elasticsearch", pattern=r"^[a-z][a-z0-9_-]{0,40}$")
    description: str = ""
    before_run: list[str] = Field(default_factory=list)
    batch: list[str | dict[str, CommandStep]] = Field(min_length=1)
    hooks: Hooks = Field(default_factory=Hooks)  # the operator's commands and calls at points of a run

    @field_serializer("batch")
    def _batch(self, batch: list[str | dict[str, CommandStep]]) -> list[Any]:
        # Said explicitly: pydantic 2.14 warns on serializing this union's dict branch (to stderr).
        return [e if isinstance(e, str) else {k: v.model_dump() for k, v in e.items()} for e in batch]

    @model_validator(mode="after")
    def well_formed(self) -> Playbook:
        """What every procedure needs; the product checks its own step names when the playbook is used."""
        names: list[str] = []
        for name in self.before_run + [e for e in self.batch if isinstance(e, str)]:
            if not re.fullmatch(BUILTIN_NAME, name):
                raise ValueError(f"{name!r} is not a step name (lower-case letters, digits, _)")
        for entry in self.batch:
            if isinstance(entry, str):
                names.append(entry)
            else:
                if list(entry) != ["command"]:
                    raise ValueError(f"batch: a step is a name or {{command: ...}}, not {list(entry)}")
                names.append(entry["command"].name)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"batch: step(s) listed twice: {', '.join(repeated)}")
        for first, then in ORDER_RULES:
            if first in names and then in names and names.index(first) > names.index(then):
                raise ValueError(f"batch: {first} must come before {then}")
        for needed in ("stop_service", "start_service"):
            if needed not in names:
                raise ValueError(f"batch: a restart needs {needed}")
        return self

    def steps(self) -> list[Step]:
        return [Step(builtin=e) if isinstance(e, str) else Step(command=e["command"]) for e in self.batch]


def load_playbook(name_or_path: str, inventory_dir: Path | None = None) -> Playbook:
    """The playbook an inventory names, found in the documented order (orchestrator.paths.search)."""
    found, looked = search("playbooks", name_or_path, inventory_dir)
    if found is None:
        raise ConfigError("inventory", [f"playbook: {name_or_path!r} not found; looked for {', '.join(looked)}"])
    return load_model(found, Playbook)
