"""`orchestrate docs [TOPIC]`: the guides, shipped in the package, shown where messages point to them."""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

import typer

from orchestrator.cli.output import say, terminal
from orchestrator.errors import ConfigError

PACKAGE = "orchestrator.shipped.docs"


def topics() -> list[str]:
    return sorted(p.name.removesuffix(".md") for p in files(PACKAGE).iterdir() if p.name.endswith(".md"))


EXAMPLES = "examples"  # not a guide: the Airflow DAGs and their settings, to copy


def examples() -> list[Traversable]:
    return sorted((p for p in files(PACKAGE).joinpath(EXAMPLES).iterdir() if p.name.endswith((".py", ".yaml"))),
                  key=lambda p: p.name)


def copy_examples(to: Path) -> None:
    """Copy the examples into ``to`` (made if need be); a file already there is never overwritten."""
    there = [p.name for p in examples() if (to / p.name).exists()]
    if there:
        raise ConfigError("--to", [f"{to / name} exists: not overwritten (give another directory)" for name in there])
    try:
        to.mkdir(parents=True, exist_ok=True)
        for p in examples():
            (to / p.name).write_bytes(p.read_bytes())
    except OSError as exc:
        raise ConfigError("--to", [f"{to}: {exc.strerror or exc}"]) from None
    say(f"copied {', '.join(p.name for p in examples())} to {to}; each says what it reads (docs/pipelines.md)")


def docs(topic: str = typer.Argument(None, help="A guide, e.g. privileges, upgrade, safety; `examples`: the "
                                                "Airflow DAGs and their settings; none: the list.",
                                     autocompletion=lambda: [*topics(), EXAMPLES]),
         to: Path = typer.Option(None, "--to", metavar="DIR", help="With `examples`: copy them into DIR.")) -> None:
    """Show a guide (the same text as docs/ in the source): getting-started, configuration,
    restart-procedure, safety, privileges, upgrade, pipelines, hooks, metrics, tuning, sandbox, ...
    `orchestrate docs examples --to DIR` copies the example DAGs (post_index_dag.py, fleet_dag.py) and
    the settings they read (pipeline.yaml, fleet.yaml)."""
    if topic is None:
        for name in [*topics(), EXAMPLES]:
            terminal.out.print(name, markup=False, highlight=False)
        return
    if topic == EXAMPLES:
        if to is not None:
            copy_examples(to)
            return
        for p in examples():
            terminal.out.print(p.name, markup=False, highlight=False)
        say("`orchestrate docs examples --to DIR` copies them")
        return
    if to is not None:
        raise ConfigError("--to", ["only `orchestrate docs examples` copies files"])
    name = topic.removesuffix(".md")
    if name not in topics():
        raise ConfigError("command line", [f"no guide named {topic!r}; the guides: {', '.join(topics())}"])
    text = files(PACKAGE).joinpath(f"{name}.md").read_text(encoding="utf-8")
    if terminal.out.is_terminal:
        from rich.markdown import Markdown  # here: imported at the top, every other command paid for it at start

        terminal.out.print(Markdown(text))
    else:
        terminal.out.print(text, markup=False, highlight=False, end="")
