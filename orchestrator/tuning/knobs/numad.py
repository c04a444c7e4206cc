"""numad: stopped and disabled (it pauses a JVM for minutes moving its memory)."""

from __future__ import annotations

from orchestrator.tuning.knobs.base import Knob, KnobState
from orchestrator.tuning.reads import Reads


class NumadKnob(Knob):
    def probes(self) -> list[str]:
        return ["pgrep -x numad", "systemctl is-enabled numad"]

    def evaluate(self, reads: Reads) -> list[KnobState]:
        running = reads.run("pgrep -x numad").ok
        enabled_out = reads.run("systemctl is-enabled numad")
        enabled = enabled_out.stdout.strip() or "not installed"
        live = "running" if running else "stopped"
        persisted = "enabled" if enabled == "enabled" else ("disabled" if enabled == "disabled" else "not installed")
        fix = []
        if running or persisted == "enabled":
            fix = ["systemctl stop numad || true", "systemctl disable numad || true",
                   "pkill -x numad || true"]
        return [KnobState("numad", live, persisted, "stopped, disabled", not running, persisted != "enabled",
                          fix=tuple(fix))]
