"""The knobs, one module each: a pure evaluation over what the host said (tuning/reads.py) that
returns each knob's state and the commands that would fix it.

Adding a knob means adding one module and a line in ``knobs_for``; nothing else changes.
"""

from __future__ import annotations

from orchestrator.tuning.knobs.base import Knob, KnobState
from orchestrator.tuning.knobs.erlang import ErlangSchedulersKnob
from orchestrator.tuning.knobs.io_scheduler import IoSchedulerKnob
from orchestrator.tuning.knobs.numad import NumadKnob
from orchestrator.tuning.knobs.sysctl import SysctlKnob
from orchestrator.tuning.knobs.thp import ThpKnob
from orchestrator.tuning.profile import Profile

__all__ = ["Knob", "KnobState", "knobs_for"]


def knobs_for(profile: Profile, data_paths: list[str]) -> list[Knob]:
    k = profile.knobs
    knobs: list[Knob] = []
    if k.thp:
        knobs.append(ThpKnob(k.thp.enabled, k.thp.defrag))
    if k.numad and k.numad.state == "disabled":
        knobs.append(NumadKnob())
    if k.io_scheduler:
        knobs.append(IoSchedulerKnob(k.io_scheduler.choice, data_paths))
    if k.sysctl:
        knobs.append(SysctlKnob(dict(k.sysctl)))
    if k.erlang_schedulers:
        knobs.append(ErlangSchedulersKnob(k.erlang_schedulers.riak_conf))
    return knobs
