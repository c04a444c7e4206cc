"""Entry point: the typer app, and the one place where errors become messages and exit codes."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer

from orchestrator import __version__
from orchestrator.cli import (
    docs_cmd,
    fleet_cmd,
    forcemerge_cmd,
    inventory_cmd,
    output,
    pending_cmd,
    restart_cmd,
    sandbox_cmd,
    tune_cmd,
    upgrade_cmd,
)
from orchestrator.cli.output import say, terminal
from orchestrator.cli.render import EVENT_SCHEMA
from orchestrator.errors import Aborted, OrchestratorError, StoppedAfter

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 failure (tune: drift found; pending: a node needs a restart); 2 bad "
    "configuration or usage; 3 sandbox problem; 4 a cluster or host call failed; 5 preflight failed (nothing "
    "was changed); 6 unsafe to go on, or a wait timed out (the journal keeps what to undo; `resume` "
    "continues); 7 another run holds the lock; 8 journal problem; 9 pending: a node could not be read; "
    "10 partial success; 11 stopped after the batches asked (--stop-after; `resume` goes on); 12 stopped at "
    "the end of the maintenance window (--until, maintenance.windows; `resume` goes on); 70 internal "
    "error (a bug; the traceback is in a file it names); 130 aborted by the operator (settings restored)."
)

def flags_take_no_value() -> None:
    """typer's help shows `<bool>` beside a flag (`--yes <bool>`), as if it took a value, which a flag never
    does: no placeholder for flags; every other option keeps its own."""
    from typer.core import TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or shown.__name__ == "flag_without_placeholder":
        return  # a typer without it shows none, or this ran already

    def flag_without_placeholder(self: TyperOption, ctx: object) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    setattr(TyperOption, "display_type_rich", flag_without_placeholder)  # noqa: B010 (typed as the method it replaces)


flags_take_no_value()
app = typer.Typer(
    help="Safe rolling restarts and host tuning for Elasticsearch, OpenSearch and Riak clusters.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
    # --install-completion / --show-completion for bash, zsh, fish and PowerShell.
    add_completion=True,
)


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"orchestrator {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(version: bool = typer.Option(False, "--version", "-V", callback=show_version, is_eager=True,
                                      help="Print the version and exit."),
         verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show every command run on a host and "
                                                                    "every cluster request, as they happen (what "
                                                                    "a run's audit log records)."),
         quiet: bool = typer.Option(False, "--quiet", "-q", help="Show only problems (warnings, errors) and the "
                                                                "result.")) -> None:
    """Safe rolling restarts and host tuning for Elasticsearch, OpenSearch and Riak clusters."""
    if verbose and quiet:
        raise typer.BadParameter("give --verbose or --quiet, not both")
    output.set_verbosity(verbose=verbose, quiet=quiet)
app.add_typer(sandbox_cmd.app, name="sandbox")
app.add_typer(inventory_cmd.app, name="inventory")
app.add_typer(fleet_cmd.app, name="fleet")
restart_cmd.register(app)
upgrade_cmd.register(app)
app.command()(pending_cmd.pending)
app.command()(tune_cmd.tune)
app.command()(tune_cmd.sudoers)
app.command()(forcemerge_cmd.forcemerge)
app.command()(docs_cmd.docs)


@app.command()
def version() -> None:
    """Print the orchestrator's version."""
    typer.echo(__version__)


def run() -> None:
    try:
        run_command()
    except SystemExit as exc:
        if not terminal.held_until_exit:
            raise
        # Its output written, the process ends without freeing what the command held (the OS takes it
        # back at once); nothing else is left to do: every thread is done, every file closed.
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_command() -> None:
    as_json = output.json_requested(sys.argv[1:])
    try:
        # Without standalone mode, click returns the code of typer.Exit instead of raising it.
        code = app(standalone_mode=False, prog_name="orchestrate")
        sys.exit(code if isinstance(code, int) else 0)
    except OrchestratorError as exc:
        kind = "stopped" if isinstance(exc, StoppedAfter) else "aborted" if isinstance(exc, Aborted) else "error"
        say(f"{kind}: {exc}")
        end(as_json, exc.exit_code, kind, exc)
    except KeyboardInterrupt:
        say("interrupted")
        end(as_json, 130, "aborted", "interrupted")
    except typer.Abort:
        say("aborted")
        end(as_json, 130, "aborted", "aborted")
    except typer.Exit as exc:
        end(as_json, exc.exit_code, "error", None)
    except Exception as exc:
        # Usage errors come from click, or from the copy of it that newer typer versions carry
        # (typer._click); recognise them by what they are, not by a module that may be absent.
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code") and type(exc).__module__.startswith(("click", "typer")):
            show()
            usage = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            end(as_json, 2, "error", f"usage: {usage}")
        if os.environ.get("ORCHESTRATOR_DEBUG"):
            raise
        # A bug of ours: a short message for the operator, the whole traceback in a file for the report.
        where = crash_report(exc)
        message = (f"internal error: {type(exc).__name__}: {str(exc)[:300]}. This is a bug in orchestrator; a run "
                   f"in progress is marked failed in its journal (`orchestrate status`, then `resume`). Details: "
                   f"{where}")
        say(message)
        end(as_json, 70, "error", message)


def end(as_json: bool, code: int, result: str, error: BaseException | str | None) -> NoReturn:
    """Exit with ``code``; under `--json`, after the one summary every exit ends with (unless the command
    wrote its own): the result, the exit code, the error and the command that would help."""
    if as_json and not (terminal.summary_sent or terminal.result_sent) and code != 0:
        failure = error if isinstance(error, BaseException) else None if error is None else Exception(error)
        output.emit_summary({"schema": EVENT_SCHEMA, "event": "summary", "result": result,
                             **output.exit_fields(failure, code)})
    sys.exit(code)


def crash_report(exc: BaseException) -> str:
    import tempfile
    import traceback

    try:
        fd, path = tempfile.mkstemp(prefix="orchestrator-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write("".join(traceback.format_exception(exc)))
        return path
    except OSError:
        return "(could not be written; run again with ORCHESTRATOR_DEBUG=1)"
