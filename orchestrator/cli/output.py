"""Printing for the CLI: human lines to stderr, machine output (JSON) to stdout."""

from __future__ import annotations

import json
import re
import sys
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


class Terminal:
    """What this process writes to (its two consoles, made when first used: a TAB of shell completion writes
    through neither, and does not pay for rich) and what the command has written so far, which `main` reads
    as the process ends."""

    def __init__(self) -> None:
        self.quiet = False  # -q: a run's view shows only problems and the result
        self.summary_sent = False  # this command already wrote its `--json` summary (main adds none on its exit)
        self.result_sent = False  # ... or the JSON document that is its result (plan, status, tune: none added)
        # What a command keeps alive until the process ends, which then ends without freeing it (cli/main.py:
        # run): a plan's snapshot of a large cluster, which would be freed object by object (bench_plan).
        self.held_until_exit: list[object] = []

    @cached_property
    def err(self) -> Console:
        """Human lines: progress, problems, tables of a run. Off a terminal rich assumes 80 columns; tables
        read better in logs when they do not wrap."""
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True, width=None if sys.stderr.isatty() else 160)

    @cached_property
    def out(self) -> Console:
        """The command's result: a plan, a status, a table asked for."""
        from rich.console import Console

        return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)


terminal = Terminal()


def set_verbosity(verbose: bool, quiet: bool) -> None:
    """-v: host commands and cluster requests on stderr as they happen; -q: only problems."""
    import logging

    terminal.quiet = quiet
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s audit   %(message)s", "%H:%M:%S"))
        from orchestrator import products

        for name in ("orchestrator", *products.client_loggers()):
            logging.getLogger(name).addHandler(handler)
            logging.getLogger(name).setLevel(logging.INFO)


MAX_SAID = 8000  # characters of one message: an error a cluster or host sent back can be any size
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """Text as it may reach a terminal: control characters (escape sequences a cluster's error could
    carry: a retitled window, a cleared screen) shown as \\xNN, and at most MAX_SAID characters."""
    shown = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if len(shown) > MAX_SAID:
        shown = shown[:MAX_SAID] + f" ... ({len(shown) - MAX_SAID} more characters)"
    return shown


def say(message: str) -> None:
    terminal.err.print(terminal_safe(message), markup=False)


HINT = re.compile(r"`(orchestrate [^`]{1,200})`")


def emit_summary(obj: dict[str, Any]) -> None:
    """The last line of `--json`: a summary (every exit writes exactly one)."""
    emit_json(obj)
    terminal.summary_sent = True


def exit_fields(error: BaseException | None, exit_code: int = 0) -> dict[str, Any]:
    """What a pipeline acts on: the exit code, and on a failure the error and the command that helps
    (the first `orchestrate ...` the message names)."""
    if error is None:
        return {"exit_code": exit_code}
    message = str(error)
    hint = HINT.search(message)
    return {"exit_code": getattr(error, "exit_code", exit_code), "error": message[:MAX_SAID],
            "hint": hint.group(1) if hint else None}


def json_requested(argv: list[str]) -> bool:
    """Whether the command line asks for `--json` (before a `--`): main's errors then end in JSON too."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in words


def emit_json(obj: Any, result: bool = True) -> None:
    """One JSON line on stdout; ``result``: it is (part of) the command's result, not a progress event."""
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()
    terminal.result_sent = terminal.result_sent or result


def confirm(yes: bool, question: str, refusal: str) -> None:
    """Ask before a change (unless --yes); never silently off a terminal: there, no --yes refuses."""
    import typer

    from orchestrator.errors import PreflightFailed

    if yes:
        return
    if not sys.stdin.isatty():
        raise PreflightFailed([f"not on a terminal and no --yes: refusing to {refusal} without confirmation"])
    if not typer.confirm(question):
        say("nothing done")
        raise typer.Exit(1)
