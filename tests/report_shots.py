"""The run report in a real browser: a succeeded and a failed run rendered by headless Chromium.

`make report-shot` writes the pictures for review (build/report-shots/*.png); the browser test
(`tests/integration/test_report_browser.py`) checks the same renderings. Chromium runs in a
network namespace of its own (no network at all) and is told to fetch nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.es.product import PRODUCT as ELASTICSEARCH
from orchestrator.restart.journal import HistoryEntry, Journal, NodeRecord, RunState, UndoRecord, UndoState
from orchestrator.restart.report import html
from tests.unit.journals import journal_of, plan_of

GiB = 1024**3
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]


def node(name: str, batch: int, start: float, done: bool = True, peers: int = 0, reused: int = 0) -> NodeRecord:
    marks = {"stopping": start, "stopped": start + 4, "tuned": start + 5, "starting": start + 5.5,
             "start_issued": start + 6, "joined": start + 38, "recovering": start + 38.5, "done": start + 71}
    if not done:  # failed while recovering: no mark after it
        marks = {k: v for k, v in marks.items() if k != "done"}
    phases = {"stop": 4.0, "tune": 1.0, "start": 0.5, "join": 32.0, **({"recovery": 32.5} if done else {})}
    return NodeRecord(name, batch, phase="done" if done else "recovering", restarted=True, phases=phases,
                      started_at=marks, recovery={"bytes_from_peers": peers, "bytes_reused": reused})


def sample_journals() -> dict[str, Journal]:
    """Two runs of a 3-node cluster: one that succeeded, one that failed in batch 2 (es-3 never reached)."""
    t0 = 1_795_336_000.0
    settings = [UndoRecord(1, "cluster.routing.allocation.enable", "persistent", None, "primaries",
                           UndoState.RESTORED, 1),
                UndoRecord(2, "indices.recovery.max_bytes_per_sec", "persistent", "40mb", "200mb",
                           UndoState.RESTORED)]
    ok = journal_of(plan_of([["es-1"], ["es-2"], ["es-3"]]), state=RunState.SUCCEEDED, created=t0,
                    finished=t0 + 230, run_id="20261122-085000-ok")
    ok.nodes = {"es-1": node("es-1", 1, t0 + 2, peers=int(0.4 * GiB), reused=int(9.6 * GiB)),
                "es-2": node("es-2", 2, t0 + 78, peers=int(1.2 * GiB), reused=int(8.8 * GiB)),
                "es-3": node("es-3", 3, t0 + 154, peers=0, reused=int(10 * GiB))}
    for b in ok.batches:
        b.state = "done"
    ok.undo, ok.cluster_calls = list(settings), 412
    failed = journal_of(plan_of([["es-1"], ["es-2"], ["es-3"]]), state=RunState.FAILED, created=t0,
                        finished=t0 + 160, run_id="20261122-085000-failed",
                        message="timed out after 60 s waiting for the cluster to be green again; last seen: "
                                "health yellow, 0 initializing, 3 unassigned, 0 relocating")
    failed.nodes = {"es-1": node("es-1", 1, t0 + 2, peers=int(0.4 * GiB), reused=int(9.6 * GiB)),
                    "es-2": node("es-2", 2, t0 + 78, done=False),
                    "es-3": NodeRecord("es-3", 3)}
    failed.batches[0].state, failed.batches[1].state = "done", "running"
    failed.undo = [settings[0], UndoRecord(3, "cluster.routing.allocation.enable", "persistent", None, "primaries",
                                           UndoState.APPLIED, 2), settings[1]]
    failed.cluster_calls = 233
    # The failed run, resumed with a changed inventory, then stopped by an operator at its end: es-2 back
    # (joined), es-3 stopped near the picture's right edge.
    resumed = journal_of(plan_of([["es-1"], ["es-2"], ["es-3"]]), state=RunState.ABORTED, created=t0,
                         finished=t0 + 400, run_id="20261122-085000-resumed", message="interrupted; temporary "
                         "settings restored. `orchestrate resume` continues the remaining batches")
    back = node("es-2", 2, t0 + 78, done=False)
    resumed.nodes = {"es-1": node("es-1", 1, t0 + 2, peers=int(0.4 * GiB), reused=int(9.6 * GiB)),
                     "es-2": replace(back, phase="joined"),
                     "es-3": NodeRecord("es-3", 3, phase="stopping", started_at={"stopping": t0 + 395})}
    resumed.batches[0].state, resumed.batches[1].state = "done", "done"
    resumed.history = [HistoryEntry(t0 + 160, "failed", failed.message),
                       HistoryEntry(t0 + 300, "resumed", "resumed from failed; inventory changed: ssh.user: "
                                                         "'root' -> 'deploy'"),
                       HistoryEntry(t0 + 400, "aborted", resumed.message)]
    resumed.undo, resumed.cluster_calls = list(settings), 301
    return {"succeeded": ok, "failed": failed, "resumed": resumed}


@dataclass(frozen=True)
class Rendered:
    page: Path
    png: Path
    dom: str
    console: list[str]  # what the page said on the browser's console (errors, CSP violations)


def chromium() -> list[str]:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("chromium is not installed (apt-get install chromium; .ci/run and scripts/setup do)")
    # No network at all for the browser: a network namespace of its own when we may make one.
    return (["unshare", "-n", found] if os.geteuid() == 0 else [found]) + FLAGS


def render(page: Path, width: int = 1280, height: int = 1500) -> Rendered:
    png = page.with_suffix(".png")
    url = page.resolve().as_uri()
    shot = subprocess.run([*chromium(), f"--window-size={width},{height}", f"--screenshot={png}", url],
                          capture_output=True, text=True, timeout=120)
    if shot.returncode != 0 or not png.exists():
        raise RuntimeError(f"chromium failed ({shot.returncode}): {shot.stderr[-1500:]}")
    dom = subprocess.run([*chromium(), "--dump-dom", url], capture_output=True, text=True, timeout=120)
    # The page's own console lines (Chromium's internal chrome:// pages say things of their own).
    console = [line for line in (shot.stderr + dom.stderr).splitlines()
               if ":CONSOLE" in line and "source: file://" in line]
    return Rendered(page, png, dom.stdout, console)


def shoot(out: Path) -> dict[str, Rendered]:
    out.mkdir(parents=True, exist_ok=True)
    rendered = {}
    for name, journal in sample_journals().items():
        page = out / f"report-{name}.html"
        page.write_text(html(journal, ELASTICSEARCH.report_columns))
        rendered[name] = render(page)
    return rendered


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "build/report-shots")
    for name, r in shoot(target).items():
        print(f"{name}: {r.png} ({r.png.stat().st_size} bytes), page {r.page}, console: {r.console or 'clean'}")
