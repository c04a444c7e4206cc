"""Pure parts of host tuning and force-merge: parsing kernel files, targets, decisions, playbooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.loader import load_model
from orchestrator.config.model import NodeEntry
from orchestrator.config.playbook import Playbook, load_playbook
from orchestrator.errors import ConfigError
from orchestrator.forcemerge.decide import IndexFacts, Verdict, decide
from orchestrator.tuning.knobs.base import choices, selected, write_file_command
from orchestrator.tuning.knobs.erlang import erlang_schedulers
from orchestrator.tuning.knobs.sysctl import sysctl_wanted


@pytest.mark.parametrize(("content", "value"), [
    ("always [madvise] never\n", "madvise"), ("[always] madvise never", "always"), ("never\n", "never"),
    ("none [mq-deadline] kyber bfq \n", "mq-deadline"), ("[none] mq-deadline", "none")])
def test_selected_value_of_kernel_choice_files(content: str, value: str) -> None:
    assert selected(content) == value


def test_choices_lists_what_the_device_offers() -> None:
    assert choices("none [mq-deadline] kyber bfq ") == ["none", "mq-deadline", "kyber", "bfq"]


@pytest.mark.parametrize(("cpus", "schedulers"), [(24, 20), (16, 14), (12, 10), (6, 5), (1, 1)])
def test_erlang_schedulers_one_fewer_per_six_cpus(cpus: int, schedulers: int) -> None:
    assert erlang_schedulers(cpus) == schedulers


@pytest.mark.parametrize(("spec", "live", "expected"), [
    ("0", "1", ("0", False)), ("0", "0", ("0", True)), (">=262144", "65530", ("262144", False)),
    (">=262144", "300000", ("300000", True)), (">=262144", None, ("262144", False))])
def test_sysctl_targets(spec: str, live: str | None, expected: tuple[str, bool]) -> None:
    assert sysctl_wanted(spec, live) == expected


def test_written_files_go_on_standard_input_never_in_the_command(tmp_path: Path) -> None:
    from orchestrator.config.model import NodeEntry
    from orchestrator.hosts.transport import LocalTransport
    from orchestrator.tuning.apply import run_in_order

    secret = "distributed_cookie = s3cr3t-'$(id)'\n\u00e9\n"
    first, second = write_file_command(str(tmp_path / "riak.conf"), secret, "0640"), \
        write_file_command(str(tmp_path / "sub" / "b.conf"), "b\n")
    assert "s3cr3t" not in first.shell() and "s3cr3t" not in str(first)
    (tmp_path / "riak.conf.orchestrator-tmp").symlink_to(tmp_path / "victim")  # the old predictable name
    run_in_order(LocalTransport(), NodeEntry(name="here", host="localhost"),
                 [first, f"cat {tmp_path / 'riak.conf'} > {tmp_path / 'copy'}", second])
    assert (tmp_path / "riak.conf").read_text() == secret and (tmp_path / "copy").read_text() == secret
    assert (tmp_path / "sub" / "b.conf").read_text() == "b\n"
    assert oct((tmp_path / "riak.conf").stat().st_mode & 0o777) == "0o640"
    assert not (tmp_path / "victim").exists() and not list(tmp_path.glob(".orchestrator.*"))


def test_a_file_is_never_written_into_a_directory_another_user_owns(tmp_path: Path) -> None:
    import os

    from orchestrator.config.model import NodeEntry
    from orchestrator.errors import HostError
    from orchestrator.hosts.transport import LocalTransport
    from orchestrator.tuning.apply import run_in_order

    if os.geteuid() != 0:
        pytest.skip("needs root to give the directory to another user")  # CI and the sandbox run as root
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(HostError, match="belongs to uid 65534"):
        run_in_order(LocalTransport(), NodeEntry(name="here", host="localhost"),
                     [write_file_command(str(theirs / "riak.conf"), "x\n")])
    assert list(theirs.iterdir()) == []


@pytest.mark.parametrize(("facts", "include_write", "verdict"), [
    (IndexFacts("a", 40, 10), False, Verdict.MERGE),
    (IndexFacts("a", 5, 10), False, Verdict.SKIP),
    (IndexFacts("a", 40, 10, write_index_of="alias logs"), False, Verdict.REFUSE),
    (IndexFacts("a", 40, 10, write_index_of="alias logs"), True, Verdict.MERGE),
    (IndexFacts("a", 40, 10, recent_writes=3), False, Verdict.REFUSE),
    (IndexFacts("a", 3, 10, recent_writes=3), True, Verdict.SKIP),
])
def test_forcemerge_decisions(facts: IndexFacts, include_write: bool, verdict: Verdict) -> None:
    d = decide(facts, 5, include_write)
    assert d.verdict is verdict and d.reason


def test_shipped_playbook_loads() -> None:
    assert [s.name for s in load_playbook("elasticsearch-rolling").steps()][3] == "stop_service"


@pytest.mark.parametrize(("batch", "message"), [
    ("[start_service, stop_service]", "stop_service must come before start_service"),
    ("[stop_service]", "needs start_service"),
    ("[stop_service, reboot_everything, start_service]", "unknown elasticsearch step 'reboot_everything'"),
    ("[stop_service, stop_service, start_service]", "listed twice"),
    ("[stop_service, {command: {name: x}}, start_service]", "run"),
])
def test_bad_playbooks_are_refused(tmp_path: Path, batch: str, message: str) -> None:
    from orchestrator.es.product import PRODUCT
    from orchestrator.restart.procedure import resolve

    (tmp_path / "p.yaml").write_text(f"name: p\nbatch: {batch}\n")
    with pytest.raises(ConfigError) as err:
        resolve(load_model(tmp_path / "p.yaml", Playbook), PRODUCT)  # the product knows its own step names
    assert message in str(err.value)


# --- batched host commands ---------------------------------------------------------------------------
BATCH_CASES = ["cat /proc/sys/vm/swappiness", "printf 'no newline'", "echo err >&2; exit 3", "cat /nonexistent",
               "printf '\\n\\n'", "printf '%s\\n' '@@orchestrator-lookalike@@'"]


def test_prefetched_results_are_exactly_those_of_single_commands() -> None:
    from orchestrator.config.model import NodeEntry
    from orchestrator.hosts.transport import LocalTransport
    from orchestrator.tuning.host import Host

    node = NodeEntry(name="here", host="localhost")
    host = Host(LocalTransport(), node)
    host.prefetch(BATCH_CASES)
    assert set(host.cache) == set(BATCH_CASES)
    for cmd in BATCH_CASES:
        assert host.cache[cmd] == LocalTransport().run(node, cmd), cmd


def test_fix_commands_run_in_order_and_stop_at_the_first_failure(tmp_path: Path) -> None:
    from orchestrator.config.model import NodeEntry
    from orchestrator.errors import HostError
    from orchestrator.hosts.transport import LocalTransport
    from orchestrator.tuning.apply import run_in_order

    node = NodeEntry(name="here", host="localhost")
    first, never = tmp_path / "first", tmp_path / "never"
    run_in_order(LocalTransport(), node, [f"echo 1 > {first}", f"cat {first} > {first}.copy"])
    assert (tmp_path / "first.copy").read_text() == "1\n"
    with pytest.raises(HostError) as err:
        run_in_order(LocalTransport(), node, [f"echo 2 > {first}", "echo 'Invalid argument' >&2; exit 22",
                                              f"touch {never}"])
    assert "tuning command failed: echo 'Invalid argument' >&2; exit 22" in str(err.value)
    assert "Invalid argument" in str(err.value).splitlines()[-1]
    assert first.read_text() == "2\n" and not never.exists()


def test_a_host_like_the_previous_one_is_inspected_in_one_round_trip(tmp_path: Path) -> None:
    """Read-only: the knobs of this machine are read, never written (inspect, not apply)."""
    from orchestrator.hosts.transport import CommandResult, LocalTransport
    from orchestrator.tuning.apply import inspect_node
    from orchestrator.tuning.profile import load_profile

    class Counting(LocalTransport):
        round_trips = 0

        def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
                stdin: bytes | None = None) -> CommandResult:
            Counting.round_trips += 1
            return super().run(node, command, timeout_s, stdin)

    profile, transport = load_profile("elasticsearch"), Counting(30)
    first = NodeEntry(name="es-1", host="localhost", data_paths=[str(tmp_path)])
    alone = inspect_node(profile, transport, first)
    assert alone.error is None and Counting.round_trips >= 2, "a listing, then what it names"
    Counting.round_trips = 0
    second = NodeEntry(name="es-2", host="localhost", data_paths=[str(tmp_path)])
    learned = inspect_node(profile, transport, second, likely_reads=alone.reads)
    assert Counting.round_trips == 1
    assert learned.to_json()["knobs"] == alone.to_json()["knobs"]


class ReadAheadHosts:
    """Stands in for inspect_node and apply_node: counts each host's reads and fixes, with drift as set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from orchestrator.tuning import apply

        self.drifting: set[str] = set()
        self.inspected: list[str] = []
        self.applied: list[str] = []
        self.fail_reads = False
        monkeypatch.setattr(apply, "inspect_node", self.inspect)
        monkeypatch.setattr(apply, "apply_node", self.apply)

    def state(self, node: NodeEntry, drift: bool) -> object:
        from orchestrator.tuning.apply import NodeReport
        from orchestrator.tuning.knobs.base import KnobState

        knob = KnobState("thp.enabled", "always" if drift else "never", "never", "never", not drift, True)
        return NodeReport(node.name, node.host, [knob], reads=[f"cat {node.name}"])

    def inspect(self, profile: object, transport: object, node: NodeEntry, likely: object = ()) -> object:
        self.inspected.append(node.name)
        if self.fail_reads:
            raise OSError("the connection dropped")
        return self.state(node, node.name in self.drifting)

    def apply(self, profile: object, transport: object, node: NodeEntry, likely: object = ()) -> object:
        self.applied.append(node.name)
        report = self.state(node, drift=False)
        report.changes = [{"knob": "thp.enabled"}] if node.name in self.drifting else []  # type: ignore[attr-defined]
        return report


def rolling_tuner(now: list[float]) -> object:
    from orchestrator.tuning.apply import RollingTuner
    from orchestrator.tuning.profile import load_profile

    return RollingTuner(load_profile("elasticsearch"), transport=None, clock=lambda: now[0])  # type: ignore[arg-type]


def test_a_host_read_ahead_without_drift_costs_no_round_trip_while_its_node_is_down(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hosts, now = ReadAheadHosts(monkeypatch), [100.0]
    tuner: Any = rolling_tuner(now)
    a, b = NodeEntry(name="a", host="h-a"), NodeEntry(name="b", host="h-b")
    tuner.look_ahead([a, b])
    tuner.look_ahead([a])  # already being read: not read twice
    now[0] += 12.0
    tuned = tuner(a, read_ahead_ok=True)
    assert tuned.changes == [] and tuned.read_ahead_s == 12.0
    assert hosts.applied == [] and hosts.inspected.count("a") == 1
    # A read is used once: the next turn of the same host reads it again.
    assert tuner(a, read_ahead_ok=True).read_ahead_s is None and hosts.applied == ["a"]
    # A step that must see the host as it is now (after a reboot) does not trust the read ahead.
    assert tuner(b).read_ahead_s is None and hosts.applied == ["a", "b"]
    assert sorted(hosts.inspected) == ["a", "b"], "each host read ahead once"
    tuner.close()


@pytest.mark.parametrize("why", ["drift", "too old", "read failed"])
def test_a_host_is_read_again_and_fixed_when_the_read_ahead_cannot_be_trusted(
        monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    from orchestrator.tuning.apply import READ_AHEAD_MAX_AGE_S

    hosts, now = ReadAheadHosts(monkeypatch), [100.0]
    tuner: Any = rolling_tuner(now)
    a = NodeEntry(name="a", host="h-a")
    hosts.drifting = {"a"} if why == "drift" else set()
    hosts.fail_reads = why == "read failed"
    tuner.look_ahead([a])
    now[0] += READ_AHEAD_MAX_AGE_S + 1 if why == "too old" else 5
    hosts.fail_reads = False
    tuned = tuner(a, read_ahead_ok=True)
    assert hosts.applied == ["a"] and tuned.read_ahead_s is None
    assert tuned.changes == ([{"knob": "thp.enabled"}] if why == "drift" else [])
    tuner.close()


def test_the_force_merge_a_journal_carries_is_read_back_typed_and_a_tampered_one_refused() -> None:
    from orchestrator.errors import JournalError
    from orchestrator.forcemerge.prelude import NAME, MergeRequest, prelude_of

    request = MergeRequest("logs-*", 5, 2, False)
    assert MergeRequest.from_json(prelude_of(request)[NAME]) == request
    for tampered in ({**request.to_json(), "max_segments": "5"}, {"indices": "logs-*"}, {**request.to_json(), "x": 1}):
        with pytest.raises(JournalError):
            MergeRequest.from_json(tampered)


def test_with_tuning_mode_check_a_restart_reports_drift_and_changes_nothing_on_the_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 60: hosts that configuration management owns. `tuning.mode: check`: each host is read when its turn
    comes, its drift said, and nothing written (no fix, no persisted file); the plan says so; `apply` is the
    default and fixes as before."""
    from orchestrator.config.model import Inventory
    from orchestrator.tuning.apply import RollingTuner, profile_summary
    from orchestrator.tuning.profile import load_profile

    hosts = ReadAheadHosts(monkeypatch)
    hosts.drifting = {"a"}
    checking = RollingTuner(load_profile("elasticsearch"), transport=None, check_only=True)  # type: ignore[arg-type]
    a, b = NodeEntry(name="a", host="h-a"), NodeEntry(name="b", host="h-b")
    drifted, steady = checking(a, read_ahead_ok=True), checking(b)
    assert hosts.applied == [] and hosts.inspected == ["a", "b"]
    assert drifted.changes == [] and drifted.drift == ["thp.enabled is always, wanted never"]
    assert steady.drift == []
    checking.close()

    def inventory(mode: str | None) -> Inventory:
        tuning = {"profile": "elasticsearch", **({"mode": mode} if mode else {})}
        return Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://x:9200"]},
                                         "ssh": {"known_hosts": "/dev/null"}, "nodes": [{"name": "a", "host": "h"}],
                                         "tuning": tuning})

    assert "CHECKED on each host" in profile_summary(inventory("check"))[0]
    assert "PERSISTENT" in profile_summary(inventory(None))[0], "apply stays the default"
    with pytest.raises(ValueError):
        inventory("sometimes")
