"""A run's report as files: the HTML page beside the journal, or where the operator asks."""

from __future__ import annotations

from pathlib import Path

from orchestrator import products
from orchestrator.errors import JournalError
from orchestrator.paths import write_file_for_the_operator
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
    """The run's page at ``path``, readable by its owner only, as its journal is (it names hosts and nodes):
    written atomically, replacing only a regular file (paths.write_file_for_the_operator)."""
    write_file_for_the_operator(path, page(journal), mode)


def find_run(cluster: str, run_id: str | None) -> Journal:
    journal = journals.latest(cluster, run_id)
    if journal is None:
        raise JournalError(f"no run recorded for cluster {cluster}")
    return journal
