"""Knobs decide without a host: each evaluation is a pure function of what the host said."""

from __future__ import annotations

from orchestrator.hosts.transport import CommandResult
from orchestrator.tuning.knobs.base import FileWrite, Knob, KnobState
from orchestrator.tuning.knobs.sysctl import SYSCTL_FILES, SysctlKnob
from orchestrator.tuning.knobs.thp import THP_FIND, THP_UNIT, TUNED_RUNNING, ThpKnob
from orchestrator.tuning.reads import Reads

THP = "/sys/kernel/mm/transparent_hugepage"


def said(files: dict[str, str], commands: dict[str, CommandResult]) -> dict[str, CommandResult]:
    """Every read a knob may ask for, answered from a description of a host (no host involved)."""

    def answer(command: str) -> CommandResult:
        if command in commands:
            return commands[command]
        if command.startswith("cat "):
            path = command[4:].strip("'")
            if path in files:
                return CommandResult(0, files[path], "")
            return CommandResult(1, "", f"cat: {path}: No such file or directory")
        raise AssertionError(f"the knob asked for a command this host does not describe: {command}")

    class Answers(dict[str, CommandResult]):
        def __missing__(self, command: str) -> CommandResult:
            return answer(command)

    return Answers()


def evaluate(knob: Knob, host: dict[str, CommandResult]) -> list[KnobState]:
    """Evaluate over everything the knob asks for; the evaluation itself only looks things up."""
    results: dict[str, CommandResult] = {}
    for _ in range(8):
        reads = Reads(results)
        states = knob.evaluate(reads)
        if not reads.missing:
            return states
        results.update({c: host[c] for c in reads.missing})
    raise AssertionError("the knob kept asking for more")


def test_thp_sees_through_a_tuned_profile_include_chain() -> None:
    host = said(
        files={f"{THP}/enabled": "[always] madvise never\n", f"{THP}/defrag": "always defer [madvise] never\n",
               "/etc/tuned/active_profile": "db-custom\n",
               "/etc/tuned/db-custom/tuned.conf": "[main]\ninclude=throughput-performance\n",
               "/usr/lib/tuned/throughput-performance/tuned.conf": "[vm]\ntransparent_hugepages=always\n"},
        commands={THP_FIND: CommandResult(0, THP + "\n", ""), TUNED_RUNNING: CommandResult(0, "active\n", ""),
                  f"systemctl is-enabled {THP_UNIT}": CommandResult(1, "disabled\n", "")})
    enabled, defrag = evaluate(ThpKnob("never", "never"), host)
    assert (enabled.live, defrag.live, enabled.drift) == ("always", "madvise", True)
    assert "tuned profile 'db-custom' sets transparent_hugepages=always" in (enabled.note or "")
    writes = {f.path: f.text for f in enabled.fix if isinstance(f, FileWrite)}
    assert "include=db-custom" in writes["/etc/tuned/orchestrator-db-custom/tuned.conf"]
    assert f"systemctl enable {THP_UNIT}" in [str(f) for f in enabled.fix]


def test_sysctl_persisted_value_is_what_a_boot_applies() -> None:
    host = said(
        files={"/proc/sys/vm/swappiness": "60\n", "/usr/lib/sysctl.d/50-db.conf": "vm.swappiness = 30\n",
               "/etc/sysctl.d/50-db.conf": "vm.swappiness = 10\n", "/etc/sysctl.conf": "# nothing\n"},
        commands={SYSCTL_FILES: CommandResult(0, "/usr/lib/sysctl.d/50-db.conf\n/etc/sysctl.d/50-db.conf\n", "")})
    (state,) = evaluate(SysctlKnob({"vm.swappiness": "1"}), host)
    assert (state.live, state.persisted, state.live_ok, state.persisted_ok) == ("60", "10", False, False)
    assert state.note == "set in /etc/sysctl.d/50-db.conf", "/etc wins over /usr/lib for the same file name"
    assert any(isinstance(f, FileWrite) and f.path.endswith("99-orchestrator.conf") and "vm.swappiness = 1" in f.text
               for f in state.fix)


def test_the_printed_sudo_rules_cover_every_fix_of_a_host_where_everything_drifts() -> None:
    """`orchestrate sudoers` prints each knob's possible fixes: they must include whatever fix the knob
    gives when everything drifts, or a run under those exact rules would be refused by sudo."""
    from orchestrator.tuning.knobs.io_scheduler import UDEV_RULE, IoSchedulerKnob
    from orchestrator.tuning.knobs.numad import NumadKnob

    data, disk = "/var/lib/elasticsearch", "/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda"
    host = said(
        files={f"{THP}/enabled": "[always] madvise never\n", f"{THP}/defrag": "[always] defer madvise never\n",
               "/proc/sys/vm/zone_reclaim_mode": "1\n", "/proc/sys/vm/max_map_count": "65530\n",
               f"{disk}/queue/scheduler": "none [mq-deadline] kyber bfq \n", "/etc/sysctl.conf": ""},
        commands={THP_FIND: CommandResult(0, THP + "\n", ""),
                  f"systemctl is-enabled {THP_UNIT}": CommandResult(1, "", ""),
                  TUNED_RUNNING: CommandResult(1, "", ""), SYSCTL_FILES: CommandResult(0, "", ""),
                  "pgrep -x numad": CommandResult(0, "812\n", ""),
                  "systemctl is-enabled numad": CommandResult(0, "enabled\n", ""),
                  IoSchedulerKnob.device_script(data): CommandResult(0, disk + "\n", ""),
                  f"cat {UDEV_RULE}": CommandResult(1, "", "No such file or directory")})
    knobs: list[Knob] = [ThpKnob("never", "never"), NumadKnob(), IoSchedulerKnob("none", [data]),
                         SysctlKnob({"vm.zone_reclaim_mode": "0", "vm.max_map_count": ">=262144"})]
    for knob in knobs:
        fixes = [f for state in evaluate(knob, host) for f in state.fix]
        results: dict[str, CommandResult] = {}
        for _ in range(8):
            reads = Reads(results)
            possible = knob.possible_fixes(reads)
            if not reads.missing:
                break
            results.update({c: host[c] for c in reads.missing})
        needed = {rule for f in fixes if not isinstance(f, str) for rule in f.rules()}
        printed = {rule for f in possible if not isinstance(f, str) for rule in f.rules()}
        assert fixes and needed and needed <= printed, (type(knob).__name__, needed - printed)
