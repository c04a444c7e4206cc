"""A journal on disk: a base file and a log of changes beside it, so that a save writes what changed.

`RUN.json` holds the whole journal as of its change number `seq`. `RUN.changes` holds one JSON line per
save since: its `seq`, the run's own fields, and each node, batch and undo record the save changed (with
new history). A run saves dozens of times per batch, and a large cluster's journal written whole at each
save cost CPU and disk writes that grew with the cluster (docs/benchmarks.md, `bench_journal`). A save
appends its line and syncs it;
every `COMPACT_AFTER` lines, and when the run stops, ends or defers, the base is written again
(temporary file, rename) and the log emptied.

A line a crash left half-written was never acknowledged: it has no end of line and is dropped when read,
and cut off before the next process appends its own.
A line that the base already holds (a crash between the base's rename and the log's emptying) is skipped
by its number. Both files are this user's own, read never through a link (`read_bytes_of(private=True)`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from orchestrator.config.loader import read_bytes_of, strict_json
from orchestrator.errors import ConfigError, JournalError
from orchestrator.paths import write_atomically

COMPACT_AFTER = 500  # lines in the log before the base is written again
MAX_JOURNAL_BYTES = 256_000_000


def changes_path(path: Path) -> Path:
    return path.with_suffix(".changes")


def write_base(path: Path, text: str) -> None:
    """The whole journal, atomically; then the log emptied (its lines are in the base now)."""
    write_atomically(path, text, mode=0o600)
    try:
        fd = os.open(changes_path(path), os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    os.close(fd)


def append(path: Path, line: str) -> None:
    """One save's line, appended and synced before the transition it records goes on."""
    fd = os.open(changes_path(path), os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        drop_torn_tail(fd)
        os.write(fd, line.encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)


def drop_torn_tail(fd: int) -> None:
    """Cut off a line a crash left half-written (the log does not end with an end of line) before the next
    is appended: joined to it, the two would read as one damaged line, and the journal could not be read."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    end = size
    while end > 0:  # back to the last end of line, a block at a time (a line can be long)
        start = max(0, end - 65536)
        cut = os.pread(fd, end - start, start).rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return
        end = start
    os.ftruncate(fd, 0)


def _read(path: Path) -> bytes:
    try:
        return read_bytes_of(path, limit=MAX_JOURNAL_BYTES, private=True)
    except ConfigError as exc:
        raise JournalError(f"cannot read journal {path}: {'; '.join(exc.problems)}") from None


def read(path: Path) -> tuple[Any, int]:
    """The journal's raw fields: the base with every complete line of its log applied in order; and how many
    lines the log holds."""
    try:
        raw = strict_json(_read(path))
        lines = [strict_json(line) for line in _read(changes_path(path)).split(b"\n")[:-1]] \
            if changes_path(path).exists() else []
    except (ValueError, RecursionError) as exc:
        raise JournalError(f"cannot read journal {path}: not JSON written by this tool ({str(exc)[:200]})") from None
    if not isinstance(raw, dict):
        return raw, 0  # refused by its reader, with its format
    return with_lines(raw, lines, f"journal {path}"), len(lines)


def with_lines(raw: dict[str, Any], lines: list[Any], what: str) -> dict[str, Any]:
    """A journal's base (``raw``) with its log's ``lines`` applied in order, those it holds already skipped;
    JournalError for a line that is not a change, a gap, or a change that does not apply. ``what``: the
    journal's name in a message (a file, or the cluster's copy)."""
    # As the journal reads its base (journal.py: load): a change number that is not one is 0, so that the log's
    # lines, numbered on from it, are applied, not refused or skipped as already in the base.
    seq = raw.get("seq", 0)
    seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else 0
    for line in lines:
        if not isinstance(line, dict) or not isinstance(line.get("seq"), int):
            raise JournalError(f"{what}: its log of changes is damaged (a line that is not a change)")
        if line["seq"] <= seq:
            continue  # already in the base
        if line["seq"] != seq + 1:
            raise JournalError(f"{what}: its log of changes misses change {seq + 1} (found {line['seq']})")
        try:
            applied(raw, line)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise JournalError(f"{what}: change {line['seq']} of its log cannot be applied "
                               f"({str(exc)[:200]})") from None
        seq = raw["seq"] = line["seq"]
    return raw


def applied(raw: dict[str, Any], line: dict[str, Any]) -> None:
    """``raw`` (a journal's fields) with one line of its log applied."""
    raw.update(line.get("run") or {})
    if "spec" in line:
        raw["spec"] = line["spec"]
    if "prelude_reports" in line:
        raw["prelude_reports"] = line["prelude_reports"]
    raw["history"] = [*raw.get("history", []), *line.get("history", [])]
    raw["nodes"].update(line.get("nodes") or {})
    position = {b["number"]: i for i, b in enumerate(raw["batches"])}
    for number, batch in (line.get("batches") or {}).items():
        raw["batches"][position[int(number)]] = batch
    for undo_id, record in sorted((line.get("undo") or {}).items(), key=lambda kv: int(kv[0])):
        if int(undo_id) == len(raw["undo"]) + 1:
            raw["undo"].append(record)
        else:
            raw["undo"][int(undo_id) - 1] = record
