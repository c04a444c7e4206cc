"""`orchestrate docs [TOPIC]`: the guides, shipped in the package, shown where messages point to them."""

from __future__ import annotations

from importlib.resources import files

import typer

from orchestrator.cli.output import out_console
from orchestrator.errors import ConfigError

PACKAGE = "orchestrator.shipped.docs"


def topics() -> list[str]:
    return sorted(p.name.removesuffix(".md") for p in files(PACKAGE).iterdir() if p.name.endswith(".md"))


def docs(topic: str = typer.Argument(None, help="A guide, e.g. privileges, upgrade, safety; none: the list.",
                                     autocompletion=lambda: topics())) -> None:
    """Show a guide (the same text as docs/ in the source): getting-started, configuration,
    restart-procedure, safety, privileges, upgrade, pipelines, hooks, metrics, tuning, sandbox, ..."""
    if topic is None:
        for name in topics():
            out_console.print(name, markup=False, highlight=False)
        return
    name = topic.removesuffix(".md")
    if name not in topics():
        raise ConfigError("command line", [f"no guide named {topic!r}; the guides: {', '.join(topics())}"])
    text = files(PACKAGE).joinpath(f"{name}.md").read_text(encoding="utf-8")
    if out_console.is_terminal:
        from rich.markdown import Markdown  # here: its import cost every other command 60 ms at start

        out_console.print(Markdown(text))
    else:
        out_console.print(text, markup=False, highlight=False, end="")
