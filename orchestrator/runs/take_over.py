"""`resume --take-over`: a run started on another machine, picked up from the cluster's copy of its journal
(restart/journal_copy.py) and continued here by `resume`.

Taken only when the run is not alive: its lock is stale (silent for its stale time), failed, deferred, or
gone (the run stopped and released it). Never two at once: the lock is then taken by `resume` as by any
resume of the run, in one atomic step, and the run that might wake up stops at its next safe point when its
renewals fail long before the lock goes stale. The copy's progress and undo records are carried whole; its
procedure never is: the playbook recorded must be the one this machine resolves for the run's options, so
that nothing written into the cluster runs as a command here.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

from orchestrator.errors import JournalError, OrchestratorError, PreflightFailed, RunLocked
from orchestrator.paths import private_dir
from orchestrator.restart import journal as journals
from orchestrator.restart import journal_file
from orchestrator.restart.budget import window_asked
from orchestrator.restart.journal import Journal, RunOptions
from orchestrator.restart.journal_copy import CopiedRun, read_copy
from orchestrator.restart.lock import read_holder
from orchestrator.restart.procedure import resolve, without_tuning
from orchestrator.restart.reboot import with_reboot
from orchestrator.runs.target import Target, load_procedure, with_reboots, with_window


def copied_run(target: Target) -> CopiedRun | None:
    """The run the cluster holds a copy of, checked (JournalError otherwise); None without a copy."""
    return read_copy(target.cluster, target.cluster.cluster_identity())


def cluster_copy(target: Target) -> CopiedRun | None:
    """The cluster's copy for a decision that goes on without it when it cannot be had: refused (said by
    `status`), or the cluster not answering (this machine's journal decides)."""
    try:
        return copied_run(target)
    except OrchestratorError:
        return None


def ahead_of(copy: CopiedRun | None, journal: Journal) -> bool:
    """Whether the copy holds ``journal``'s run further on than this machine's journal (it went on from another
    machine), or a run that began after it."""
    return copy is not None and (copy.began_after(journal)
                                 or (copy.run_id == journal.run_id and copy.seq > journal.changes_saved))


def over_elsewhere(copy: CopiedRun | None, journal: Journal) -> str | None:
    """Why ``journal``'s run, unfinished on this machine, is over all the same (None: not known to be): finished
    or given up from another machine, or followed there by a newer run (which only such an end allows)."""
    if copy is None or not ahead_of(copy, journal):
        return None
    if copy.run_id == journal.run_id:
        if copy.raw.get("state") in FINISHED:
            return f"run {journal.run_id} was finished on another machine ({copy.host}: {copy.raw['state']})"
        return None  # went on elsewhere, unfinished: resumed from the copy
    return (f"run {copy.run_id} ({copy.host}) has run on this cluster since run {journal.run_id}, which only its "
            "end, here or on another machine, allows; this machine's journal of it is out of date")


FINISHED = ("succeeded", "abandoned")


def unfinished_elsewhere(copy: CopiedRun | None, latest_here: Journal | None, cluster: str) -> CopiedRun | None:
    """The run the cluster's copy holds when it is unfinished and is not this machine's: started (or taken over)
    on another machine, stopped there or gone with it. A new run must not begin over it unseen."""
    if copy is None or copy.raw.get("state") in FINISHED:
        return None
    if latest_here is not None and (latest_here.run_id == copy.run_id or not copy.began_after(latest_here)):
        return None  # this machine's own run, or one older than this machine's latest
    return None if _local(cluster, copy.run_id) is not None else copy


def take_over(target: Target, run_id: str | None = None) -> tuple[str, str]:
    """Bring the cluster's copy of its run into this machine's state directory, for `resume` to go on with it.
    Returns the run id and what was done, said to the operator."""
    copy = copied_run(target)
    if copy is None:
        raise JournalError(f"cluster {target.name} holds no copy of a run to take over: a run copies its journal "
                           "there while it holds the lock. `orchestrate status` shows what the cluster holds")
    what = f"the cluster's copy of run {copy.run_id}"
    if run_id and copy.run_id != run_id:
        raise JournalError(f"{what} is of another run than --run {run_id}")
    if not journals.RUN_ID.fullmatch(copy.run_id):
        raise JournalError(f"{what} is damaged: its run id is not one")
    holder = read_holder(target.cluster)
    if holder is not None and holder.run_id != copy.run_id:
        raise JournalError(f"{what} is not of the run that holds the cluster's lock ({holder.run_id}): left by "
                           "another run, or planted; it is not taken over")
    if holder is not None and not holder.may_be_taken_over():
        raise RunLocked(f"run {copy.run_id} is alive: {holder.describe()}. It can be taken over once it stops on "
                        f"its machine (Ctrl-C, `orchestrate pause`), or once its lock is stale "
                        f"({holder.stale_after_s:.0f} s without renewal: its machine is gone)")
    journal = Journal.from_raw(copy.raw, what)
    if journal.state.finished:
        raise JournalError(f"run {copy.run_id} is {journal.state.value}; nothing to take over")
    if journal.cluster != target.name:
        raise JournalError(f"{what} is of the run of inventory {journal.cluster!r}: take it over with that "
                           f"inventory (--cluster {journal.cluster}), not {target.name!r}")
    if journal.spec.playbook != expected_playbook(target, journal.spec.options):
        raise PreflightFailed([f"{what} records a procedure (playbook) other than the one this machine resolves for "
                               "its options: the playbook here differs from the run's machine's, or the copy was "
                               "changed. A take-over runs this machine's commands only; use the same playbook"])
    local = _local(target.name, copy.run_id)
    if local is not None and local.changes_saved >= copy.seq:
        return copy.run_id, f"this machine's journal of run {copy.run_id} is as new as the cluster's copy: resumed"
    path = private_dir(journals.runs_dir(target.name)) / f"{copy.run_id}.json"
    journal_file.write_base(path, json.dumps(copy.raw))
    saved = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(copy.saved)) if copy.saved else "an unknown time"
    return copy.run_id, (f"taking over run {copy.run_id} from {copy.host}: its journal as the cluster's copy held "
                         f"it, saved {saved} (change {copy.seq}), is now {path}")


def _local(cluster: str, run_id: str) -> Journal | None:
    try:
        return journals.latest(cluster, run_id)
    except JournalError:
        return None  # none here (or unreadable): the copy is written over it


def expected_playbook(target: Target, options: RunOptions) -> object:
    """The playbook this machine resolves for a run of ``options``, as a journal records it (runs/restart.py:
    new_journal): the inventory's (or its upgrade's), with a reboot, without tuning, with the pending hosts'
    reboots, for a window, as the command that started the run chose."""
    product = target.product
    procedure = load_procedure(target.inv, product, upgrade=bool(options.upgrade_to))
    if options.reboot:
        procedure = resolve(with_reboot(procedure.playbook), product)
    if not options.tune:
        procedure = resolve(without_tuning(procedure.playbook), product)
    chosen = replace(target, procedure=procedure)
    if options.reboot_nodes:
        chosen = with_reboots(chosen)
    if window_asked(options.max_unavailable):
        chosen = with_window(chosen)
    return chosen.playbook.model_dump(mode="json")
