"""What a host says about its node (pending/host.py): the command run for real by sh on this machine, with a
`systemctl` and a `dpkg-query` of the test's own first on PATH (the unit's main process and files, the installed
package), against a process of the test that maps and holds open code deleted since; and each line of an answer
read as the fact it is, whatever else the host says."""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.pending.host import HostAsk, HostEvidence, host_command, parse_host


@pytest.fixture
def code_deleted_under_a_process(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    """A process whose program (a copy of `sleep` named as a JVM's) and a library it holds open (fd 3, from the
    shell that became it) were deleted since it started, as an upgrade in place leaves them: the program is
    only mapped, the library only held open."""
    java, lib = tmp_path / "jdk" / "bin" / "java", tmp_path / "lib" / "libnative.so"
    java.parent.mkdir(parents=True)
    lib.parent.mkdir()
    shutil.copy2(shutil.which("sleep") or "/bin/sleep", java)
    lib.write_bytes(b"\x7fELF" + b"\0" * 4092)
    process = subprocess.Popen(["sh", "-c", f"exec 3< {lib}; exec {java} 60"])
    try:
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{process.pid}/exe") != str(java):
            assert time.monotonic() < deadline, "the shell never became the program"
            time.sleep(0.02)
        java.unlink()
        lib.unlink()
        yield process.pid, lib, java
    finally:
        process.kill()
        process.wait()


def own_tools(bin_dir: Path, pid: int, unit_dir: Path) -> dict[str, str]:
    """A `systemctl` that knows one unit (its main process ``pid``, its unit file, two drop-ins and an
    environment file, said as systemd says them), a `dpkg-query` that knows one installed package, and a
    `needrestart` that lists that unit."""
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {bin_dir}/systemctl.calls\n'
        'case "$*" in\n'
        f'  "show -p MainPID --value test-search.service") echo {pid} ;;\n'
        '  "show -p FragmentPath -p DropInPaths -p EnvironmentFiles test-search.service")\n'
        f'    echo "FragmentPath={unit_dir}/test-search.service"\n'
        f'    echo "DropInPaths={unit_dir}/override.conf {unit_dir}/heap.conf"\n'
        f'    echo "EnvironmentFiles={unit_dir}/search.env (ignore_errors=yes)" ;;\n'
        "  *) exit 1 ;;\n"
        "esac\n")
    (bin_dir / "dpkg-query").write_text(
        '#!/bin/sh\n[ "$3" = test-search-package ] || exit 1\nprintf "install ok installed|9.5.4"\n')
    (bin_dir / "needrestart").write_text(
        '#!/bin/sh\n[ "$*" = "-b -r l" ] || exit 1\n'
        'printf "NEEDRESTART-VER: 3.6\\nNEEDRESTART-SVC: test-search.service\\n"\n')
    for tool in ("systemctl", "dpkg-query", "needrestart"):
        (bin_dir / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def asked(ask: HostAsk, env: dict[str, str] | None = None) -> HostEvidence:
    done = subprocess.run(["sh", "-c", host_command(ask)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return parse_host(done.stdout)


def test_the_unit_s_main_process_its_files_and_the_installed_package_are_read_and_deleted_code_is_found(
        code_deleted_under_a_process: tuple[int, Path, Path], tmp_path: Path) -> None:
    pid, held, mapped = code_deleted_under_a_process
    units = tmp_path / "units"
    units.mkdir()
    unit_files = [units / name for name in ("test-search.service", "override.conf", "heap.conf", "search.env")]
    for path in unit_files:
        path.write_text("[Service]\n")
    env = own_tools(tmp_path / "bin", pid, units)
    ev = asked(HostAsk(pid=None, unit="test-search.service", package="test-search-package", files=(),
                       settings_file=None, version_jars=None), env)
    assert ev.pid == pid, "no pid given: the unit's main process, as systemd says it"
    assert ev.package == "9.5.4"
    assert ev.needrestart == {"NEEDRESTART-VER": ["3.6"], "NEEDRESTART-SVC": ["test-search.service"]}
    assert set(ev.files) == {str(p) for p in unit_files}, "the unit, its drop-ins and its environment file"
    assert ev.maps_readable is True
    assert ev.replaced == [str(mapped), str(held)], "the program mapped, then the library held open: each once"


def test_without_a_pid_or_a_unit_no_process_is_read(tmp_path: Path) -> None:
    ev = asked(HostAsk(pid=None, unit="", package="test-search-package", files=(), settings_file=None,
                       version_jars=None), own_tools(tmp_path / "bin", os.getpid(), tmp_path))
    assert ev.pid is None and ev.maps_readable is None and ev.command is None
    assert not (tmp_path / "bin" / "systemctl.calls").exists(), "no unit: systemd is not asked"
    assert ev.package == "9.5.4" and ev.boot_id, "the rest is read all the same"


def test_each_line_of_a_host_s_answer_is_the_fact_it_says() -> None:
    ev = parse_host("boot 6f1c0b2e\n"
                    "pid 19\n"
                    "started 1700000000 250 100\n"
                    "homejar /usr/share/elasticsearch/lib/elasticsearch-9.5.2.jar\n"
                    "homejar /usr/share/elasticsearch/lib/elasticsearch-9.5.3.jar\n"
                    "homeversion 9.5.4-RC1+build1\n"
                    "unreadable /etc/elasticsearch/jvm.options.d/secret.options\n"
                    "unreadable /etc/elasticsearch/certs/node.key\n"
                    "reboot-required   linux-image-6.1.0-20-amd64   openssl \n"
                    "kernel-installed 6.1.0-18-amd64\n"
                    "kernel-installed 6.1.0-20-amd64\n"
                    "needrestart NEEDRESTART-SVC: search:blue.service\n")
    assert ev.boot_id == "6f1c0b2e"
    assert ev.pid == 19
    assert parse_host("pid 4194304\n").pid == 4194304 and parse_host("pid 12345678901\n").pid is None, "10 digits"
    assert ev.started_s == 1_700_000_002.5
    assert ev.home_versions == ("9.5.2", "9.5.3", "9.5.4-RC1+build1"), "every version the home holds, in order"
    assert ev.unreadable == ["/etc/elasticsearch/jvm.options.d/secret.options", "/etc/elasticsearch/certs/node.key"]
    assert ev.reboot_required == "linux-image-6.1.0-20-amd64 openssl"
    assert ev.kernels_installed == ("6.1.0-18-amd64", "6.1.0-20-amd64")
    assert ev.needrestart == {"NEEDRESTART-SVC": ["search:blue.service"]}, "split at the first colon only"


def test_a_line_that_is_not_as_the_command_says_it_is_no_fact() -> None:
    ev = parse_host("boot \nstarted 1700000000  250 100\nunreadable\nhomeversion ;rm -rf /\nkernel-installed \n")
    assert ev.boot_id is None and ev.started_s is None and ev.unreadable == []
    assert ev.home_versions == () and ev.kernels_installed == ()


def test_the_settings_file_is_read_as_sent_or_called_unreadable() -> None:
    sent = base64.b64encode("cluster.name: prod\nnode.attr.rack: r\xe9\n".encode() + b"path.data: /x\xff\n").decode()
    ev = parse_host(f"settings {sent}\n")
    assert ev.settings_text == "cluster.name: prod\nnode.attr.rack: r\xe9\npath.data: /x\ufffd\n"
    assert not ev.settings_unreadable, "a byte that is not UTF-8 is replaced, the rest compared"
    assert parse_host("settings unreadable\n").settings_unreadable
    assert parse_host(f"settings {sent[:-4]}!{sent[-4:]}\n").settings_unreadable, "not base64 as sent: unreadable"
    assert parse_host(f"settings {sent}\n").settings_unreadable is False


def test_a_question_naming_a_path_that_is_not_plain_says_which() -> None:
    with pytest.raises(ValueError, match=r"not a plain absolute path: 'etc/x\.yml'"):
        HostAsk(pid=1, unit="", package="p", files=("/etc/ok.yml", "etc/x.yml"), settings_file=None,
                version_jars=None)


def test_the_process_start_is_read_from_proc_as_the_host_counts_it() -> None:
    """The start time by the host's own clock (boot time plus the process's ticks), for this very process."""
    ev = asked(HostAsk(pid=os.getpid(), unit="", package="no-such-package-here", files=(), settings_file=None,
                       version_jars=None))
    started = time.time() - time.monotonic()  # about when this machine booted
    assert ev.pid == os.getpid() and ev.started_s is not None and started - 5 < ev.started_s <= time.time() + 1


def test_a_host_waiting_for_a_reboot_its_kernels_and_a_release_s_version_file_are_read(tmp_path: Path) -> None:
    """Run in a mount namespace of the test's own (unshare), where /run and /boot are directories of the test
    bound over this machine's: its own are never touched."""
    run, boot, release = tmp_path / "run", tmp_path / "boot", tmp_path / "releases"
    for d in (run, boot, release):
        d.mkdir()
    (run / "reboot-required").write_text("*** System restart required ***\n")
    (run / "reboot-required.pkgs").write_text("linux-image-6.1.0-20-amd64\nopenssl\n")
    for kernel in ("6.1.0-18-amd64", "6.1.0-20-amd64"):
        (boot / f"vmlinuz-{kernel}").write_bytes(b"")
    (release / "start_erl.data").write_text("9.3.1 3.2.0\n")  # a release's: its runtime, then its own version
    ask = HostAsk(pid=None, unit="", package="no-such-package-here", files=(), settings_file=None,
                  version_jars=None, version_file=str(release / "start_erl.data"))
    inside = f"mount --bind {run} /run && mount --bind {boot} /boot && exec sh -c {shlex.quote(host_command(ask))}"
    done = subprocess.run(["unshare", "--mount", "--map-root-user", "sh", "-c", inside], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ev = parse_host(done.stdout)
    assert ev.reboot_required == "linux-image-6.1.0-20-amd64 openssl"
    assert ev.kernels_installed == ("6.1.0-18-amd64", "6.1.0-20-amd64")
    assert ev.home_versions == ("3.2.0",)
    assert not Path("/run/reboot-required").exists() or Path("/run/reboot-required").read_text() != \
        (run / "reboot-required").read_text(), "this machine's /run is its own"


def test_a_question_naming_a_jar_that_is_not_a_name_says_which() -> None:
    with pytest.raises(ValueError, match="not a jar's name: 'lib; rm'"):
        HostAsk(pid=1, unit="", package="p", files=(), settings_file=None, version_jars=("/usr/lib", "lib; rm"))

