"""numad: stopped and disabled (it pauses a JVM for minutes moving its memory)."""

from __future__ import annotations

from orchestrator.hosts.actions import PKILL, RootCommand, systemctl
from orchestrator.tuning.knobs.base import Fix, Knob, KnobState
from orchestrator.tuning.reads import Reads

# numad may not be installed, or already stopped: each step's failure is expected.
NUMAD_OFF: tuple[Fix, ...] = (systemctl("stop", "numad", may_fail=True), systemctl("disable", "numad", may_fail=True),
                              RootCommand((PKILL, "-x", "numad"), may_fail=True))


class NumadKnob(Knob):
    def probes(self) -> list[str]:
        return ["pgrep -x numad", "systemctl is-enabled numad"]

    def evaluate(self, reads: Reads) -> list[KnobState]:
        running = reads.run("pgrep -x numad").ok
        enabled_out = reads.run("systemctl is-enabled numad")
        enabled = enabled_out.stdout.strip() or "not installed"
        live = "running" if running else "stopped"
        persisted = "enabled" if enabled == "enabled" else ("disabled" if enabled == "disabled" else "not installed")
        fix = NUMAD_OFF if running or persisted == "enabled" else ()
        return [KnobState("numad", live, persisted, "stopped, disabled", not running, persisted != "enabled",
                          fix=fix)]

    def possible_fixes(self, reads: Reads) -> list[Fix]:
        return list(NUMAD_OFF)
