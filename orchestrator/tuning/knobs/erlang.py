"""Riak's Erlang schedulers, from the CPU count, in riak.conf."""

from __future__ import annotations

from orchestrator.tuning.knobs.base import Fix, Knob, KnobState, unreadable, write_file_command
from orchestrator.tuning.reads import Reads, read_command


def erlang_schedulers(cpus: int) -> int:
    """One scheduler fewer for every six logical CPUs (seed 003): 24 -> 20, 16 -> 14, 12 -> 10."""
    return max(cpus - cpus // 6, 1)


class ErlangSchedulersKnob(Knob):
    def __init__(self, riak_conf: str) -> None:
        self.riak_conf = riak_conf

    def probes(self) -> list[str]:
        return ["nproc", read_command(self.riak_conf)]

    def possible_fixes(self, reads: Reads) -> list[Fix]:
        return [write_file_command(self.riak_conf, "")]

    def evaluate(self, reads: Reads) -> list[KnobState]:
        cpus_out = reads.run("nproc")
        if not cpus_out.ok or not cpus_out.stdout.strip().isdigit():
            return [unreadable("erlang.schedulers", "?", f"cannot count CPUs: {cpus_out.stderr.strip()}")]
        want = str(erlang_schedulers(int(cpus_out.stdout.strip())))
        text, error = reads.read(self.riak_conf)
        if text is None:
            return [unreadable("erlang.schedulers", f"{want}:{want}", error or "unreadable")]
        values = {}
        for line in text.splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = (p.strip() for p in line.split("=", 1))
                if k in ("erlang.schedulers.total", "erlang.schedulers.online"):
                    values[k] = v
        total = values.get("erlang.schedulers.total", "default")
        current = f"{total}:{values.get('erlang.schedulers.online', 'default')}"
        ok = current == f"{want}:{want}"
        fix: list[Fix] = []
        if not ok:
            kept = [ln for ln in text.splitlines()
                    if not ln.strip().startswith(("erlang.schedulers.total", "erlang.schedulers.online"))]
            kept += [f"erlang.schedulers.total = {want}", f"erlang.schedulers.online = {want}"]
            fix.append(write_file_command(self.riak_conf, "\n".join(kept) + "\n"))
        # riak.conf is read at start: the configured value is what the next (re)start runs with.
        return [KnobState("erlang.schedulers", current, current, f"{want}:{want}", ok, ok,
                          note="takes effect when Riak restarts", fix=tuple(fix))]
