"""A run's report as files: the HTML page beside the journal, or where the operator asks."""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator import products
from orchestrator.errors import ConfigError, JournalError
from orchestrator.restart import journal as journals
from orchestrator.restart.journal import Journal
from orchestrator.restart.report import html


def page(journal: Journal) -> str:
    return html(journal, products.get(journal.product).report_columns)


def write_beside_journal(journal: Journal) -> Path | None:
    """The report page next to the journal, readable only by its owner (as the journal is)."""
    if journal.path is None:
        return None
    path = journal.path.with_suffix(".html")
    write_page(journal, path, mode=0o600)
    return path


def write_page(journal: Journal, path: Path, mode: int = 0o600) -> None:
    """The run's page at ``path``, readable by its owner only, as its journal is (it names hosts and nodes)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "w") as f:
            f.write(page(journal))
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        said = getattr(exc, "strerror", None) or exc
        raise ConfigError(repr(str(path))[:300], [f"cannot write the report: {said}"]) from None


def find_run(cluster: str, run_id: str | None) -> Journal:
    journal = journals.latest(cluster, run_id)
    if journal is None:
        raise JournalError(f"no run recorded for cluster {cluster}")
    return journal
