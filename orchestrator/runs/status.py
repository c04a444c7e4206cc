"""What `status` and a run's summary say: health, the last run, what is still pending."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from orchestrator.errors import JournalError
from orchestrator.restart import journal as journals
from orchestrator.restart.journal import Journal, RunState
from orchestrator.restart.lock import pause_request, read_holder
from orchestrator.runs.take_over import ahead_of, copied_run
from orchestrator.runs.target import Target


def status(target: Target) -> dict[str, Any]:
    health = target.cluster.health_summary()
    last: Journal | None = None
    last_error: str | None = None
    try:
        last = journals.latest(target.name)
    except JournalError as exc:
        last_error = str(exc)
    holder = read_holder(target.cluster)
    copy, copy_error = None, None
    try:
        copy = copied_run(target)
    except JournalError as exc:
        copy_error = str(exc)
    where = str(last.path) if last is not None else ""
    if copy is not None and (last is None or ahead_of(copy, last)):
        # A run of another machine (or this machine's, further on there): the cluster's copy is the newest word.
        try:
            last = Journal.from_raw(copy.raw, f"the cluster's copy of run {copy.run_id}")
            saved = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(copy.saved)) if copy.saved else "?"
            where = f"the cluster's copy, saved by {copy.host} at {saved} (change {copy.seq})"
        except JournalError as exc:
            copy_error = str(exc)
    out: dict[str, Any] = {
        "cluster": target.name,
        "product": target.product.name,
        "health": health,
        "lock": holder.as_json() if holder is not None else None,
        "pause": pause_request(target.cluster),
        "run": None,
        "temporary_settings": [],
    }
    if last_error:
        out["journal_error"] = last_error
    if copy_error:
        out["copy_error"] = copy_error
    if last is not None:
        state, message = last.state.value, last.said()
        killed = holder is not None and holder.run_id == last.run_id and holder.gone_here()
        if last.state is RunState.RUNNING and killed and holder is not None:
            # The journal says running because a killed process journals nothing: its lock says it is gone.
            state = "interrupted"
            message = (f"its process (pid {holder.pid}) is gone from this machine; "
                       f"`orchestrate resume --cluster {target.name}` continues it")
        elif last.path is None and not last.state.finished and (holder is None or (
                holder.run_id == last.run_id and holder.may_be_taken_over())):
            # Seen from another machine: a run not alive there is this machine's to continue, if its operator will.
            state = "interrupted" if last.state is RunState.RUNNING else state
            message = (f"{message + '; ' if message else ''}not alive on {copy.host if copy else '?'}: "
                       f"`orchestrate resume --cluster {target.name} --take-over` continues it here")
        out["run"] = {"run_id": last.run_id, "state": state, "message": message, "paused": last.paused,
                      "journal": where, "created": last.created, "finished": last.finished,
                      "batches": [{"number": b.number, "label": b.label, "state": b.state, "steps_done": b.steps_done}
                                  for b in last.batches],
                      "nodes": {n: {"phase": r.phase, "restarted": r.restarted} for n, r in last.nodes.items()},
                      "search": said_of_searches(last.search)}
        pending = last.pending_undo()
        live = target.cluster.live_settings([(u.scope, u.key) for u in pending])
        out["temporary_settings"] = [{"key": u.key, "scope": u.scope, "live": value, "restore_to": u.before}
                                     for u, value in zip(pending, live, strict=True)]
    return out


def summary(journal: Journal) -> dict[str, Any]:
    """The last line of `--json`: what a pipeline needs to act on the run."""
    end = journal.finished or time.time()
    return {
        "result": journal.state.value if journal.state is not RunState.RUNNING else "failed",
        "cluster": journal.cluster,
        "product": journal.product,
        "run_id": journal.run_id,
        "mode": journal.mode,
        "options": asdict(journal.spec.options),
        "message": journal.said(),
        "journal": str(journal.path),
        "batches": [{"number": b.number, "label": b.label, "nodes": b.nodes, "state": b.state,
                     "duration_s": round((b.finished or end) - b.started, 1) if b.started else None}
                    for b in journal.batches],
        "nodes": [{"name": r.name, "restarted": r.restarted, "phases": r.phases, "recovery": r.recovery,
                   **({"not_persisted": knobs} if (knobs := [c.knob for c in r.host_changes
                                                             if c.not_persisted]) else {})}
                  for r in journal.nodes.values()],
        "duration_s": round(end - journal.created, 1),
        "cluster_calls": journal.cluster_calls,
        **({"forcemerge": journal.prelude_reports.get("forcemerge")} if "forcemerge" in journal.spec.prelude else {}),
        **({"waiting": journal.waiting} if journal.waiting else {}),
        **({"search": said_of_searches(journal.search)} if journal.search else {}),  # the baseline, the last figures
        # The temporary settings the run has not restored yet: what a stopped, failed or deferred run leaves.
        "in_force": [{"scope": u.scope, "key": u.key, "restore_to": u.before} for u in journal.pending_undo()],
    }


def said_of_searches(search: dict[str, Any]) -> dict[str, Any] | None:
    """What `status` and a summary say of searches: the baseline, the last figures and a closed window; the
    series is the report's, drawn there."""
    return {k: v for k, v in search.items() if k != "series"} or None
