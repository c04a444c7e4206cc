"""Exact sudo rules (`ssh.sudo_rules: commands`): every root action runs as `sudo -n` calls whose
arguments are exactly the rules `orchestrate sudoers` prints, checked by running the rendered
commands with a real /bin/sh against a stand-in sudo that records each call, and the printed file
checked by Debian's `visudo`. Real sudo on real hosts: tests/integration/test_deploy_user.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.config.model import Inventory, NodeEntry, SshSection
from orchestrator.errors import HostError
from orchestrator.hosts.actions import FileWrite, KnobWrite, RootCommand, RootScript, sudoers, sudoers_word, systemctl
from orchestrator.hosts.service import ServiceControl
from orchestrator.hosts.transport import CommandResult, LocalTransport
from orchestrator.tuning.apply import run_in_order
from orchestrator.tuning.sudoers import service_rules
from tests.helpers import assert_no_traceback, orchestrate

RECORDING_SUDO = """#!/bin/sh
[ "$1" = -n ] || { echo "sudo: expected -n" >&2; exit 1; }
shift
printf '%s\\n' "$*" >> "$SUDO_LOG"
exec "$@"
"""


class ExactSudoTransport(LocalTransport):
    """Runs commands here with the recording sudo first on PATH, as a host whose rules are exact."""

    def __init__(self, bin_dir: Path, log: Path) -> None:
        super().__init__(60, env={"PATH": f"{bin_dir}:/usr/bin:/bin", "SUDO_LOG": str(log)})

    def exact_sudo(self, node: NodeEntry) -> bool:
        return True


@pytest.fixture
def exact(tmp_path: Path) -> tuple[ExactSudoTransport, Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sudo").write_text(RECORDING_SUDO)
    (bin_dir / "sudo").chmod(0o755)
    return ExactSudoTransport(bin_dir, tmp_path / "sudo.log"), tmp_path / "sudo.log"


def test_each_sudo_call_of_the_fixes_is_exactly_one_of_their_rules(tmp_path: Path,
                                                                  exact: tuple[ExactSudoTransport, Path]) -> None:
    transport, log = exact
    knob = tmp_path / "knob"
    knob.write_text("[always] madvise never\n")
    target = tmp_path / "etc" / "sysctl.d" / "99-orchestrator.conf"  # its directory does not exist yet
    fixes = [KnobWrite(str(knob), "never"), FileWrite(str(target), "vm.swappiness = 1\n"),
             FileWrite(str(tmp_path / "unit.service"), "[Unit]\n", "0600"),
             RootCommand(("/usr/bin/true", "numad"), may_fail=True)]
    run_in_order(transport, NodeEntry(name="here", host="localhost"), fixes)
    assert knob.read_text() == "never\n"
    assert target.read_text() == "vm.swappiness = 1\n" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert oct((tmp_path / "unit.service").stat().st_mode & 0o777) == "0o600"
    assert not list(target.parent.glob(".orchestrator-*")), "the temporary file was renamed into place"
    calls = log.read_text().splitlines()
    allowed = {" ".join(rule) for fix in fixes for rule in fix.rules()}
    assert calls and set(calls) <= allowed, set(calls) - allowed
    assert f"/usr/bin/tee {knob}" in calls and "never" not in " ".join(calls), "values go on standard input"


def test_a_file_is_written_only_into_a_directory_root_owns(tmp_path: Path,
                                                           exact: tuple[ExactSudoTransport, Path]) -> None:
    transport, log = exact
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    shutil.chown(theirs, user=65534)
    with pytest.raises(HostError, match=r"refusing to write into .*theirs: it belongs to uid 65534"):
        run_in_order(transport, NodeEntry(name="here", host="localhost"), [FileWrite(str(theirs / "f"), "x\n")])
    assert not log.exists(), "no sudo call before the directory was checked"


def test_a_fix_that_needs_a_root_shell_is_refused_with_what_to_run(exact: tuple[ExactSudoTransport, Path]) -> None:
    transport, log = exact
    with pytest.raises(HostError, match="run `tuned-adm profile orchestrator-x` on the host yourself"):
        by_hand = "tuned-adm profile orchestrator-x"
        run_in_order(transport, NodeEntry(name="here", host="localhost"), [RootScript(by_hand + " || true", by_hand)])
    with pytest.raises(HostError, match="cannot run under exact sudo rules"):
        run_in_order(transport, NodeEntry(name="here", host="localhost"), ["echo 1 > /proc/sys/vm/swappiness"])
    assert not log.exists()


class Recorder(LocalTransport):
    def __init__(self, exact: bool) -> None:
        super().__init__()
        self.exact, self.commands = exact, list[str]()

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        self.commands.append(command)
        return CommandResult(0, "", "")

    def exact_sudo(self, node: NodeEntry) -> bool:
        return self.exact


def test_service_stop_and_start_are_the_rules_calls_and_status_needs_no_root() -> None:
    inv = Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://127.0.0.1:9"]},
                                    "ssh": {"known_hosts": "/dev/null", "user": "deploy", "sudo": True,
                                            "sudo_rules": "commands"},
                                    "nodes": [{"name": "n1", "host": "10.0.0.1"}]})
    node = inv.nodes[0]
    stop_result = " && systemctl show -p Result --value elasticsearch"  # read in the stop's round trip
    for exact, expected in ((True, "sudo -n /usr/bin/systemctl stop elasticsearch" + stop_result),
                            (False, "systemctl stop elasticsearch" + stop_result)):
        recorder = Recorder(exact)
        control = ServiceControl(recorder, inv.service, 30)
        control.stop(node)
        control.is_active(node)
        assert recorder.commands == [expected, "systemctl is-active elasticsearch"]
    assert sorted(" ".join(r) for r in service_rules(inv)) == [
        "/usr/bin/systemctl reboot", "/usr/bin/systemctl start elasticsearch", "/usr/bin/systemctl stop elasticsearch"]


def test_the_printed_rules_are_a_file_visudo_accepts_and_escape_what_sudoers_reads_specially(
        tmp_path: Path) -> None:
    sysfs = "/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda/queue/scheduler"
    rules = [*KnobWrite(sysfs, "none").rules(), *FileWrite("/etc/udev/rules.d/60-x.rules", "").rules(),
             *systemctl("stop", "elasticsearch").rules(), ("/usr/bin/tee", "/weird/a*b,c=d")]
    text = sudoers("deploy", rules, "a header\n\nover lines")
    assert "\\:" in text and sudoers_word("/weird/a*b,c=d") == "/weird/a\\*b\\,c\\=d"
    (tmp_path / "orchestrator").write_text(text)
    check = subprocess.run(["visudo", "-cf", str(tmp_path / "orchestrator")], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_exact_rules_take_no_password() -> None:
    base = {"known_hosts": "/dev/null", "user": "deploy"}
    with pytest.raises(ValueError, match="`sudo_rules: commands` needs `sudo: true`"):
        SshSection.model_validate({**base, "sudo_rules": "commands"})
    with pytest.raises(ValueError, match="cannot hand each a password"):
        SshSection.model_validate({**base, "sudo": True, "sudo_rules": "commands", "sudo_password": {"env": "P"}})


def test_a_product_that_needs_a_root_shell_on_the_hosts_is_refused_exact_rules_at_preflight() -> None:
    from orchestrator import products
    from orchestrator.runs.restart import sudo_rules_problems

    def inv(product: str, rules: str) -> Inventory:
        return Inventory.model_validate({"cluster": {"name": "c", "product": product, "endpoints": ["http://127.0.0.1:9"]},
                                         "ssh": {"known_hosts": "/dev/null", "user": "deploy", "sudo": True,
                                                 "sudo_rules": rules},
                                         "nodes": [{"name": "n1", "host": "10.0.0.1"}]})

    refused = sudo_rules_problems(inv("riak", "commands"), products.get("riak"))
    assert refused and "not available for riak yet" in refused[0] and "use `shell`" in refused[0]
    assert sudo_rules_problems(inv("riak", "shell"), products.get("riak")) == []
    assert sudo_rules_problems(inv("elasticsearch", "commands"), products.get("elasticsearch")) == []


@pytest.mark.parametrize("user", ["deploy\nALL ALL=(ALL) NOPASSWD: ALL", "deploy ALL", "deploy,root", "Deploy", ""])
def test_sudoers_refuses_a_user_that_is_no_user_name_before_reading_anything(user: str, tmp_path: Path) -> None:
    inventory = tmp_path / "c.yaml"
    inventory.write_text('cluster: {name: c, endpoints: ["http://127.0.0.1:9"]}\nssh: {known_hosts: /dev/null}\n'
                         "nodes: [{name: n1, host: 127.0.0.1}]\n")
    proc = orchestrate("sudoers", "--config", str(inventory), "--user", user, timeout=60)
    assert proc.returncode == 2 and "is not a user name" in proc.stderr, proc.stderr
    assert "NOPASSWD" not in proc.stdout and proc.stdout == ""
    assert_no_traceback(proc)
