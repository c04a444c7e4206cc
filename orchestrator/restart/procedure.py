"""A playbook checked against its product: each named step resolved to the function that runs it.

The playbook model checks what every procedure needs (stop and start, no step twice, the
generic order); here the product adds what only it knows: its own steps and their order rules.
Done when the playbook is loaded, so a wrong step name is refused before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError
from orchestrator.restart import steps
from orchestrator.restart.adapter import AdapterT
from orchestrator.restart.install import install_version
from orchestrator.restart.product import Product, RunStepFn
from orchestrator.restart.reboot import check_tuning, reboot_host

# An upgrade installs while the service is stopped; a host is rebooted while it is stopped, and its
# tuning checked after.
ENGINE_ORDER = (("stop_service", "install_version"), ("install_version", "start_service"),
                ("stop_service", "reboot_host"), ("reboot_host", "start_service"), ("reboot_host", "check_tuning"))
ENGINE_STEPS = {"install_version": install_version, "reboot_host": reboot_host, "check_tuning": check_tuning}


@dataclass(frozen=True)
class Procedure(Generic[AdapterT]):
    """A product's steps (over its adapter type) and the generic ones, in the playbook's order."""

    playbook: Playbook
    batch: tuple[tuple[str, steps.StepFn[AdapterT]], ...]  # (step name, function), in order
    before_run: tuple[tuple[str, RunStepFn[AdapterT]], ...]


def resolve(playbook: Playbook, product: Product[Any, AdapterT]) -> Procedure[AdapterT]:
    where = f"playbook {playbook.name}"
    if playbook.product != product.name:
        raise ConfigError(where, [f"it is for {playbook.product}; the cluster is {product.name}"])
    known: dict[str, steps.StepFn[AdapterT]] = {**steps.GENERIC, **ENGINE_STEPS, **product.batch_steps}
    problems: list[str] = []
    batch: list[tuple[str, steps.StepFn[AdapterT]]] = []
    for step in playbook.steps():
        if step.command is not None:
            batch.append((step.name, steps.command_step(step.command)))
        elif step.builtin in known:
            batch.append((step.name, known[step.builtin]))
        else:
            problems.append(f"batch: unknown {product.name} step {step.builtin!r}; known: {', '.join(known)} "
                            "or {command: {name, run, where, timeout_s}}")
    names = [name for name, _ in batch]
    for first, then in (*ENGINE_ORDER, *product.order_rules):
        if first in names and then in names and names.index(first) > names.index(then):
            problems.append(f"batch: {first} must come before {then}")
    before_run: list[tuple[str, RunStepFn[AdapterT]]] = []
    for name in playbook.before_run:
        if name in product.run_steps:
            before_run.append((name, product.run_steps[name]))
        else:
            problems.append(f"before_run: unknown {product.name} step {name!r}; known: "
                            f"{', '.join(product.run_steps) or 'none'}")
    if problems:
        raise ConfigError(where, problems)
    return Procedure(playbook, tuple(batch), tuple(before_run))


# What a run without host tuning leaves out: the tuning, and the check after a reboot that it held.
TUNING_STEPS = ("tune_host", "check_tuning")


def without_tuning(playbook: Playbook) -> Playbook:
    """The procedure of `restart --no-tune`: the playbook without its tuning steps (the journal records it so,
    and `resume` runs it so)."""
    kept = [entry for entry in playbook.batch if not (isinstance(entry, str) and entry in TUNING_STEPS)]
    return playbook.model_copy(update={"batch": kept})


def require_install(procedure: Procedure[Any]) -> None:
    """An upgrade's procedure must install something: without install_version it would only restart."""
    if "install_version" not in [name for name, _ in procedure.batch]:
        raise ConfigError(f"playbook {procedure.playbook.name}", [
            "an upgrade's playbook needs the step install_version (between stop_service and start_service)"])
