"""Playbooks: the restart procedure as data. The ordered steps of a batch, with their parameters.

Built-in steps are named; an operator adds a `command` step (e.g. drain the node from a load
balancer) anywhere in the batch. Order rules are checked at load time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from orchestrator.config.loader import load_model
from orchestrator.config.model import Model
from orchestrator.errors import ConfigError
from orchestrator.paths import search

GENERIC_STEPS = ("stop_service", "tune_host", "start_service", "wait_for_join")
PRODUCT_STEPS = {
    "elasticsearch": ("restrict_allocation", "flush", "restore_allocation", "wait_for_recovery"),
    "riak": ("note_handoffs_due", "wait_for_service", "wait_for_handoffs"),
}
RUN_STEPS = {"elasticsearch": ("raise_recovery_limits",), "riak": ("raise_handoff_limit",)}
# (first, then): a step that must come before another when both are listed.
ORDER_RULES = (
    ("stop_service", "start_service"), ("start_service", "wait_for_join"),
    ("restrict_allocation", "restore_allocation"), ("restrict_allocation", "stop_service"),
    ("stop_service", "tune_host"), ("tune_host", "start_service"),
    ("start_service", "wait_for_service"), ("wait_for_join", "wait_for_service"),
    ("wait_for_service", "wait_for_handoffs"), ("start_service", "wait_for_handoffs"),
    ("stop_service", "note_handoffs_due"), ("note_handoffs_due", "start_service"),
)


class CommandStep(Model):
    """An operator's command, run on the node's host (or here, with `where: local`)."""

    name: str = Field(pattern=r"^[a-z0-9_-]{1,40}$")
    run: str = Field(min_length=1, max_length=4000)
    where: Literal["host", "local"] = "host"
    timeout_s: float = Field(120, gt=0, le=7200)
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
    product: Literal["elasticsearch", "riak"] = "elasticsearch"
    description: str = ""
    before_run: list[str] = Field(default_factory=list)
    batch: list[str | dict[str, CommandStep]] = Field(min_length=1)

    @model_validator(mode="after")
    def known_and_ordered(self) -> Playbook:
        run_steps, builtin = RUN_STEPS[self.product], GENERIC_STEPS + PRODUCT_STEPS[self.product]
        for step in self.before_run:
            if step not in run_steps:
                raise ValueError(f"before_run: unknown {self.product} step {step!r}; known: {', '.join(run_steps)}")
        names = []
        for entry in self.batch:
            if isinstance(entry, str):
                if entry not in builtin:
                    raise ValueError(f"batch: unknown {self.product} step {entry!r}; known: {', '.join(builtin)} "
                                     "or {command: {name, run, where, timeout_s}}")
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
