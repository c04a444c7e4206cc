"""A fleet's rolling restart from Python or `orchestrate fleet` (issue 60): the canary cluster alone, then each
wave, at most ``concurrency`` clusters of a wave at once, each cluster's run through the API as `restart --yes`
does it (its own lock, journal, preflight). The first failure ends the fleet's run: no cluster of a later wave
is begun, and none more of its wave; those already under way finish.

Each cluster's run carries the fleet run's id in its journal (``origin``), so that `resume` finds them again:
a cluster whose run succeeded is left alone, one whose run stopped or failed is resumed, one never begun is
begun. The fleet run's id is kept in the state directory, one file per fleet file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchestrator import api
from orchestrator.config.fleet import Fleet
from orchestrator.errors import JournalError, OrchestratorError
from orchestrator.paths import state_root, write_atomically
from orchestrator.restart.events import Event


@dataclass(frozen=True)
class ClusterOutcome:
    cluster: str
    result: str  # succeeded, failed, already succeeded, not begun
    run_id: str | None = None
    message: str = ""
    exit_code: int = 0


@dataclass(frozen=True)
class FleetResult:
    fleet_id: str
    clusters: tuple[ClusterOutcome, ...]

    @property
    def succeeded(self) -> bool:
        return all(c.result in ("succeeded", "already succeeded") for c in self.clusters)

    @property
    def exit_code(self) -> int:
        """0 when every cluster succeeded; else the first failure's code (1 when it has none)."""
        return next((c.exit_code or 1 for c in self.clusters if c.result == "failed"), 0 if self.succeeded else 1)

    def to_json(self) -> dict[str, Any]:
        return {"fleet_id": self.fleet_id, "result": "succeeded" if self.succeeded else "failed",
                "clusters": [asdict(c) for c in self.clusters]}


FleetEvent = Callable[[str, Event], None]


def fleet_state(fleet_file: Path) -> Path:
    return state_root() / "fleets" / f"{fleet_file.resolve().stem}.json"


def new_fleet_id(fleet_file: Path) -> str:
    fleet_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    write_atomically(fleet_state(fleet_file), json.dumps({"fleet_id": fleet_id, "file": str(fleet_file.resolve())}))
    return fleet_id


def last_fleet_id(fleet_file: Path) -> str:
    try:
        return str(json.loads(fleet_state(fleet_file).read_text())["fleet_id"])
    except (OSError, ValueError, KeyError) as exc:
        raise JournalError(f"no fleet run of {fleet_file} to resume: `orchestrate fleet restart` begins one") from exc


def restart_fleet(fleet: Fleet, fleet_id: str, *, on_event: FleetEvent | None = None, by: str = "node",
                  cancel: api.Cancel | None = None) -> FleetResult:
    """The fleet's clusters restarted stage after stage (a stage: the canary, or a wave); the fleet run
    ``fleet_id`` resumed where its clusters' journals say it stands."""
    cancel = cancel or api.Cancel()
    outcomes: dict[str, ClusterOutcome] = {}
    for stage in fleet.stages():
        if any(o.result == "failed" for o in outcomes.values()) or cancel.requested:
            break
        with ThreadPoolExecutor(max_workers=min(fleet.concurrency, len(stage)), thread_name_prefix="fleet") as pool:
            for outcome in pool.map(lambda name: one_cluster(name, fleet_id, by, on_event, cancel, outcomes), stage):
                outcomes[outcome.cluster] = outcome
    return FleetResult(fleet_id, tuple(outcomes.get(n) or ClusterOutcome(n, "not begun")
                                       for n in fleet.clusters()))


def one_cluster(name: str, fleet_id: str, by: str, on_event: FleetEvent | None, cancel: api.Cancel,
                so_far: dict[str, ClusterOutcome]) -> ClusterOutcome:
    if any(o.result == "failed" for o in so_far.values()) or cancel.requested:
        return ClusterOutcome(name, "not begun")  # a cluster of its wave failed first: no more begun

    def said(event: Event) -> None:
        if on_event is not None:
            on_event(name, event)

    origin = f"fleet:{fleet_id}/{name}"
    try:
        found = api.run_of(name, origin=origin)
        if found is not None and found[1] == "succeeded":
            return ClusterOutcome(name, "already succeeded", found[0])
        result = (api.resume(name, run_id=found[0], on_event=said, cancel=cancel) if found is not None else
                  api.restart(name, by=by, on_event=said, cancel=cancel, origin=origin))
        return ClusterOutcome(name, "succeeded", result.run_id)
    except OrchestratorError as exc:
        failed = ClusterOutcome(name, "failed", None, str(exc), exc.exit_code)
        so_far[name] = failed  # seen by the clusters of its wave not yet begun
        return failed
