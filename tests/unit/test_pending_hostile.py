"""`pending` reads what a cluster says of its nodes and what their hosts print; both may lie (issue 56). No
value of theirs runs as code on a host (H1), adds a fact of its own to a host's answer (M2), or crashes the
read with a number Python's own readers take or refuse wrongly (M7); a host's settings file is read within
the configuration loader's bounds (M4). The host command is run for real here, by sh, as a host runs it."""

from __future__ import annotations

import base64
import string
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.pending.host import HostAsk, host_command, parse_host
from orchestrator.pending.verdict import CONFIGURATION, RunningNode, judge, settings_differ
from orchestrator.reading import lines, plain_path, whole_number
from orchestrator.shards.answers import Nodes
from orchestrator.shards.running import running_nodes

HOSTILE_PATHS = ("/x/$(id>{m})", "/x/`id>{m}`", "/x;id>{m}", "/x|id>{m}", "/x&&id>{m}", "/x\n id>{m}",
                 "/x/*/../$(id>{m})", "/x'$(id>{m})'", "/x\"$(id>{m})\"", "/x/${{IFS}}id>{m}")


def hostile_answer(path: str) -> Nodes:
    """A `_nodes` answer whose node says ``path`` of itself everywhere a path is read from it."""
    return Nodes.model_validate({"nodes": {"id1": {
        "name": "es-1", "ip": "127.0.0.1", "version": "9.5.3", "process": {"id": 1},
        "jvm": {"input_arguments": [f"-Des.path.home={path}", f"-Des.path.conf={path}",
                                    f"-Djava.io.tmpdir={path}"]},
        "settings": {"path.home": path, "xpack.security.http.ssl.key": path,
                     "xpack.security.transport.ssl.certificate_authorities": [path, "certs/ca.crt"]}}}})


def run_on_this_host(ask: HostAsk) -> str:
    # Bytes decoded as the transports decode them (text=True would turn a `\r` into a newline itself).
    done = subprocess.run(["sh", "-c", host_command(ask)], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode(errors="replace")


def test_a_path_a_node_says_of_itself_never_runs_on_its_host(tmp_path: Path) -> None:
    """H1: `-Des.path.home=/x/$(id>FILE)` (and every other shell form) read from the cluster, the host command
    run by sh: FILE is never written; such a path is not asked for at all."""
    for i, form in enumerate(HOSTILE_PATHS):
        marker = tmp_path / f"ran-{i}"
        path = form.format(m=marker)
        [running] = running_nodes(hostile_answer(path), "elasticsearch")
        assert running.version_jars is None, path
        assert all("id>" not in f for f in running.files), path
        ask = HostAsk(pid=None, unit="", package="orchestrator-test-no-such-package", files=running.files,
                      settings_file=running.settings_file, version_jars=running.version_jars)
        run_on_this_host(ask)
        assert not marker.exists(), f"{path!r} ran on the host"


def test_a_question_naming_a_path_that_is_not_plain_is_refused_whoever_built_it(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for bad in (dict(files=(f"/x/$(id>{marker})",)), dict(settings_file="/x/`id`"),
                dict(version_jars=("/x/$(id)", "elasticsearch")), dict(version_jars=("/usr/lib", "x;id"))):
        fields: dict[str, object] = dict(pid=None, unit="", package="p", files=(), settings_file=None,
                                         version_jars=None)
        fields.update(bad)
        try:
            HostAsk(**fields)  # type: ignore[arg-type]
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_a_plain_home_is_still_read_and_its_jar_found(tmp_path: Path) -> None:
    home = tmp_path / "es home is plain"  # a space is not plain: not asked
    [running] = running_nodes(hostile_answer(str(home)), "elasticsearch")
    assert running.version_jars is None
    home = tmp_path / "home"
    (home / "lib").mkdir(parents=True)
    (home / "lib" / "elasticsearch-9.5.2.jar").write_bytes(b"")
    [running] = running_nodes(hostile_answer(str(home)), "elasticsearch")
    assert running.version_jars == (f"{home}/lib", "elasticsearch")
    ask = HostAsk(pid=None, unit="", package="orchestrator-test-no-such-package", files=(),
                  settings_file=None, version_jars=running.version_jars)
    assert parse_host(run_on_this_host(ask)).home_versions == ("9.5.2",)


def test_a_file_name_with_a_newline_adds_no_fact_to_the_hosts_answer(tmp_path: Path) -> None:
    """M2: a file in a directory the node names (its jvm.options.d, say), named to print a fact of its own."""
    conf = tmp_path / "conf"
    (conf / "jvm.options.d").mkdir(parents=True)
    (conf / "jvm.options.d" / "x\nreboot-required by-a-file-name").write_text("")
    (conf / "jvm.options.d" / "y\rkernel-installed 99.0").write_text("")
    ask = HostAsk(pid=None, unit="", package="orchestrator-test-no-such-package",
                  files=(f"{conf}/jvm.options.d/",), settings_file=None, version_jars=None)
    ev = parse_host(run_on_this_host(ask))
    assert ev.reboot_required is None or "by-a-file-name" not in ev.reboot_required
    assert "99.0" not in ev.kernels_installed
    assert len(ev.files) == 2


def test_a_setting_whose_path_holds_a_carriage_return_gives_no_reboot() -> None:
    """M2, the probe's own case: a TLS key setting `/etc/passwd/x\\rreboot-required by-the-cluster`."""
    answer = Nodes.model_validate({"nodes": {"id1": {"name": "es-1", "settings": {
        "xpack.security.http.ssl.key": "/etc/passwd/x\rreboot-required by-the-cluster"}}}})
    [running] = running_nodes(answer, "elasticsearch")
    assert not any("\r" in f for f in running.files)
    ask = HostAsk(pid=None, unit="", package="p", files=running.files, settings_file=None, version_jars=None)
    assert parse_host(run_on_this_host(ask)).reboot_required is None
    # Said by a host as it is, the line is one line: no separator but a newline makes another.
    out = "unreadable /etc/passwd/x\rreboot-required by-the-cluster\nkernel-running 6.1\n"
    assert parse_host(out).reboot_required is None


SEPARATORS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["boot", "pid", "comm", "started", "file", "unreadable", "package",
                                           "homejar", "homeversion", "kernel-running", "kernel-installed",
                                           "maps", "replaced", "settings", "needrestart"]),
                          st.text(alphabet=string.printable + SEPARATORS + "²³٣𝟗", max_size=60)), max_size=30))
def test_any_host_output_is_read_without_a_crash_and_only_newlines_part_facts(said: list[tuple[str, str]]) -> None:
    """M2, M7: whatever a host prints, parse_host reads it, never raises, and a value holding a separator other
    than a newline never becomes a reboot, a kernel or a pid of its own."""
    out = "".join(f"{key} {value.replace(chr(10), ' ')}\n" for key, value in said)
    ev = parse_host(out)
    keys = {key for key, _ in said}
    if "reboot-required" not in keys:
        assert ev.reboot_required is None
    if "pid" not in keys:
        assert ev.pid is None
    assert ev.pid is None or ev.pid > 0


def test_numbers_from_a_host_are_ascii_digits_of_a_bounded_length() -> None:
    """M7: text that `isdigit` accepts but `int` does not (`²`), and numbers past Python's 4,300 digits."""
    for text in ("²", "٣", "𝟗", "1" * 5000, "-1", " 1", "1.0", "", "0x10"):
        assert whole_number(text) is None, text
    assert whole_number("42") == 42 and whole_number(7) == 7 and whole_number(True) is None
    ev = parse_host(f"pid ²\nstarted 1 ² 100\nfile {'9' * 5000} /etc/x\nstarted {'1' * 5000} 1 100\npid 77\n")
    assert ev.pid == 77 and ev.started_s is None and ev.files == {}


def test_plain_paths() -> None:
    for ok in ("/usr/share/elasticsearch", "/etc/es/", "/opt/es-9.5.3+build_1/lib"):
        assert plain_path(ok) == ok.rstrip("/")
    for bad in ("relative", "/a b", "/a\nb", "/a\x00b", "/a/../b", "/a/./b", "/$x", "/a*", "/a?", "/[a]", "/~x",
                "/" + "a" * 5000, None, 3):
        assert plain_path(bad) is None, bad
    assert lines("a\rb\x85c\u2028d\ne\n") == ["a\rb\x85c\u2028d", "e"]


def test_a_settings_file_with_an_alias_bomb_or_deep_nesting_is_not_compared() -> None:
    """M4: a 623-byte alias bomb and 50,000-deep nesting, in the file a node's path.conf points at: not
    compared, said so, at once and in little memory."""
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    deep = "a: " + "[" * 50_000 + "]" * 50_000 + "\n"
    for text in (bomb, deep):
        differ = settings_differ(text, {})
        assert len(differ) == 1 and differ[0].startswith("the file was not compared"), differ
    running = RunningNode(name="es-1", addresses=("h",), version="9.5.3", pid=1, started_s=1.0, package="elasticsearch",
                          files=("/etc/es/elasticsearch.yml",), settings_file="/etc/es/elasticsearch.yml")
    out = ("boot b\npid 1\ncomm java\nstarted 0 100 100\nmaps readable\npackage 9.5.3\n"
           f"file 100 /etc/es/elasticsearch.yml\nsettings {base64.b64encode(bomb.encode()).decode()}\n")
    verdict = judge("es-1", "", running, parse_host(out))
    assert [r.kind for r in verdict.reasons] == [CONFIGURATION]
    assert "not compared" in verdict.reasons[0].evidence


NODE_KEYS = st.sampled_from(["-Des.path.home", "-Des.path.conf", "-Djava.io.tmpdir", "-Dopensearch.path.home"])
SHELLISH = st.text(alphabet="/$`;|&()<>'\"\\ *?[]{}~!#\n\r\t.abc-_=", min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(args=st.lists(st.tuples(NODE_KEYS, SHELLISH), max_size=4),
       paths=st.dictionaries(st.sampled_from(["path.home", "xpack.security.http.ssl.key",
                                              "xpack.security.transport.ssl.certificate_authorities",
                                              "plugins.security.ssl.http.pemcert_filepath"]),
                             SHELLISH | st.lists(SHELLISH, max_size=3), max_size=4))
def test_no_nodes_answer_runs_anything_on_the_host(args: list[tuple[str, str]], paths: dict[str, object]) -> None:
    """Any `_nodes` answer's paths (JVM arguments and settings of shell characters), through `pending`'s reading
    of the node and the host command run by sh here: nothing runs but the command's own reads (a marker named in
    the hostile text is never written), and the command always ends cleanly."""
    import tempfile

    with tempfile.TemporaryDirectory() as where:
        marker = Path(where) / "ran"
        hostile = {key: value.replace("X", str(marker)) if isinstance(value, str) else value
                   for key, value in paths.items()}
        answer = Nodes.model_validate({"nodes": {"id1": {
            "name": "es-1", "jvm": {"input_arguments": [f"{k}={v}$(touch {marker})" for k, v in args]},
            "settings": {**hostile, "path.logs": f"/x/`touch {marker}`"}}}})
        [running] = running_nodes(answer, "elasticsearch")
        ask = HostAsk(pid=None, unit="", package="orchestrator-test-no-such-package", files=running.files,
                      settings_file=running.settings_file, version_jars=running.version_jars)
        run_on_this_host(ask)
        assert not marker.exists()
