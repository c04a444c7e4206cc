"""Routes to hosts from an OpenSSH client config: aliases, users, ports, keys, chained ProxyJump."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pytest

from orchestrator.config.model import NodeEntry, SshSection
from orchestrator.errors import ConfigError
from orchestrator.hosts.ssh_config import SshConfig, parse_jump, route

CONFIG = """
Host bastion
  HostName 192.0.2.1
  User jump
  Port 2201
  IdentityFile ~/.ssh/bastion
Host inner
  HostName 10.9.0.1
Host es-*
  User deploy
  IdentityFile /keys/es
  ProxyJump bastion,inner
  UserKnownHostsFile /kh/es
Host es-2
  HostName 10.9.0.12
  Port 2222
Host legacy
  ProxyCommand nc %h %p
"""


def section(**fields: object) -> SshSection:
    return SshSection.model_validate({"known_hosts": "/dev/null", **fields})


def config_of(text: str, tmp_path: Path, allow: bool = False) -> SshConfig:
    path = tmp_path / "ssh_config"
    path.write_text(text)
    return SshConfig(path, True, allow)


def test_a_node_behind_two_jump_hosts(tmp_path: Path) -> None:
    way = route(config_of(CONFIG, tmp_path), section(), NodeEntry(name="n2", host="es-2"))
    assert way.target.describe() == "deploy@10.9.0.12:2222" and way.target.key_files == ("/keys/es",)
    assert [j.describe() for j in way.jumps] == ["jump@192.0.2.1:2201", "root@10.9.0.1:22"]
    assert way.jumps[0].key_files == (str(Path("~/.ssh/bastion").expanduser()),)
    assert way.known_hosts == ("/kh/es",)
    assert way.describe() == "deploy@10.9.0.12:2222 via jump@192.0.2.1:2201 -> root@10.9.0.1:22"


def test_the_inventory_wins_where_it_says_so_and_the_node_wins_over_both(tmp_path: Path) -> None:
    cfg = config_of(CONFIG, tmp_path)
    way = route(cfg, section(user="ops", key_file="/inv/key"), NodeEntry(name="n1", host="es-1"))
    assert way.target.describe() == "ops@es-1:22" and way.target.key_files == ("/inv/key",)
    way = route(cfg, section(user="ops"), NodeEntry(name="n1", host="es-1", ssh_user="me", ssh_port=2022))
    assert way.target.describe() == "me@es-1:2022"
    # A host the config does not name: the inventory alone, no jump.
    way = route(cfg, section(), NodeEntry(name="x", host="10.1.1.1"))
    assert way.describe() == "root@10.1.1.1:22" and way.known_hosts == ()


def test_no_config_and_a_proxycommand_refused_unless_local_commands_are_allowed(tmp_path: Path) -> None:
    assert route(SshConfig(), section(), NodeEntry(name="n", host="h")).describe() == "root@h:22"
    with pytest.raises(ConfigError, match=r"Host legacy: ProxyCommand runs a local command .*allow_local_commands"):
        route(config_of(CONFIG, tmp_path), section(), NodeEntry(name="n", host="legacy"))
    way = route(config_of(CONFIG, tmp_path, allow=True), section(), NodeEntry(name="n", host="legacy"))
    assert way.target.proxy_command == "nc legacy 22" and way.jumps == ()
    assert way.describe() == "root@legacy:22 (ProxyCommand)"


@pytest.mark.parametrize(("spec", "parsed"), [("h", (None, "h", None)), ("u@h:2", ("u", "h", 2)),
                                              ("u@[fe80::1]:22", ("u", "fe80::1", 22)), ("h:x", (None, "h", None)),
                                              ("[fe80::1]", (None, "fe80::1", None)),
                                              ("[fe80::1]:x2", (None, "fe80::1", None)),
                                              ("[fe80::1]x22", (None, "fe80::1", None)),
                                              ("ssh://admin@jump:2222", ("admin", "jump", 2222))])
def test_jump_specs(spec: str, parsed: tuple[str | None, str, int | None]) -> None:
    assert parse_jump(spec) == parsed


def test_a_named_config_file_that_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        SshConfig.load(section(config_file=str(tmp_path / "nope")))
    assert not SshConfig.load(section(read_config=False)).enabled


def node(host: str) -> NodeEntry:
    return NodeEntry(name="n", host=host)


HOME = str(Path.home())
FOUND_BY_PROBE = """
Host api-[0-9]*
  User bracket
Host API-*
  User upper
Host api-*
  HostName %h.example.com
  User ops  # ops team
  Port 22022 # not 22
  IdentityFile ~/.ssh/%n_%p_%h_%r
  IdentityFile ${HOME}/keys/%r
  UserKnownHostsFile ~/.ssh/kh_%h
  ProxyJump ssh://admin@jump:2222
Host early
  IdentityFile /k/%h
  HostName late.example.com
Host jump
  HostName 10.0.0.9
  IdentityFile /k/jump_%r_%p
Host deep
  ProxyJump edge
Host edge
  HostName 10.0.0.1
  ProxyJump inner
Host inner
  HostName 10.0.0.2
  User in
Host none-proxy
  ProxyCommand none
  HostName 10.0.0.3
Host via-legacy
  ProxyJump legacy-jump
Host legacy-jump
  ProxyCommand nc %h %p
Match host matched-*
  User matched
"""


def test_what_a_probe_found_resolved_differently_now_resolves_as_openssh_does(tmp_path: Path) -> None:
    cfg = config_of(FOUND_BY_PROBE, tmp_path)
    way = route(cfg, section(), node("api-1"))
    # Trailing comments, tokens in IdentityFile (each hop's own user and port), ${HOME}, %h in the
    # known-hosts file, a ProxyJump URI, and Host patterns that know only * and ? ([0-9] is literal).
    assert way.target.describe() == "ops@api-1.example.com:22022"
    assert way.target.key_files == (f"{HOME}/.ssh/api-1_22022_api-1.example.com_ops", f"{HOME}/keys/ops")
    assert way.known_hosts == (f"{HOME}/.ssh/kh_api-1.example.com",)
    assert [j.describe() for j in way.jumps] == ["admin@10.0.0.9:2222"]
    assert way.jumps[0].key_files == ("/k/jump_admin_2222",)
    # A key path written before the HostName it uses.
    assert route(cfg, section(), node("early")).target.key_files == ("/k/late.example.com",)
    # A jump host's own ProxyJump is followed: deep goes through inner, then edge.
    assert [j.hostname for j in route(cfg, section(), node("deep")).jumps] == ["10.0.0.2", "10.0.0.1"]
    assert route(cfg, section(), node("none-proxy")).describe().endswith("@10.0.0.3:22")
    with pytest.raises(ConfigError, match="Host legacy-jump: ProxyCommand runs a local command"):
        route(cfg, section(), node("via-legacy"))
    allowed = route(config_of(FOUND_BY_PROBE, tmp_path, allow=True), section(), node("via-legacy"))
    assert [j.proxy_command for j in allowed.jumps] == ["nc legacy-jump 22"], "the first hop's own ProxyCommand"
    assert allowed.target.proxy_command is None, "reached through the jump host"
    assert route(cfg, section(), node("matched-1")).target.user == "matched"


def test_include_absolute_relative_and_inside_a_host_block(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "10-a.conf").write_text("Host a\n  HostName 10.1.0.1\n")
    (tmp_path / "conf.d" / "20-b.conf").write_text("Host b\n  HostName 10.1.0.2\n")
    (tmp_path / "only-c.conf").write_text("User from-include\n")
    cfg = config_of(f"Include {tmp_path}/conf.d/*.conf\nHost c\n  Include {tmp_path}/only-c.conf\n", tmp_path)
    assert [route(cfg, section(), node(h)).target.hostname for h in ("a", "b")] == ["10.1.0.1", "10.1.0.2"]
    assert route(cfg, section(), node("c")).target.user == "from-include"


def test_match_exec_is_refused_unless_allowed_and_never_run_before(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    text = f"Match exec \"touch {ran}\"\n  User viaexec\n"
    with pytest.raises(ConfigError, match="line 1: `Match exec` runs a local command"):
        route(config_of(text, tmp_path), section(), node("h"))
    assert not ran.exists()
    assert route(config_of(text, tmp_path, allow=True), section(), node("h")).target.user == "viaexec"
    assert ran.exists()


def test_a_special_file_an_unreadable_config_and_an_endless_chain_are_refused_clearly(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is not a regular file"):
        SshConfig.load(section(config_file=str(fifo)))
    shadow = "root:$y$j9T$abcdefsecrethash:19000:0:99999:7:::\n"
    with pytest.raises(ConfigError) as err:
        route(config_of(shadow, tmp_path), section(), node("h"))
    assert "line 1: the OpenSSH client refuses it" in str(err.value) and "secrethash" not in str(err.value)
    chain = "Host h\n  ProxyJump " + ",".join(f"j{i}" for i in range(100_000)) + "\n"
    with pytest.raises(ConfigError, match="longer than 16 hops"):
        route(config_of(chain, tmp_path), section(), node("h"))


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory"])
def test_a_key_that_is_a_special_file_is_refused_before_paramiko_opens_it(special: str, tmp_path: Path) -> None:
    path = tmp_path if special == "directory" else tmp_path / "fifo" if special == "fifo" else Path(special)
    if special == "fifo":
        os.mkfifo(path)
    with pytest.raises(ConfigError, match=r"(?s)ssh.key_file.*is not a regular file") as inventorys:
        route(SshConfig(), section(key_file=str(path)), node("h"))
    assert inventorys.value.source == "ssh.key_file"
    with pytest.raises(ConfigError, match=r"(?s)Host h: IdentityFile.*is not a regular file"):
        route(config_of(f"Host h\n  IdentityFile {path}\n", tmp_path), section(), node("h"))
    from orchestrator.config.model import SecretSource
    with pytest.raises(ValueError, match="not a regular file"):
        SecretSource.model_validate({"file": str(path)}).resolve()


# --- differential: the routes against what `ssh -G` says, on generated configs --------------------
DEFAULT_KEYS = [f"~/.ssh/id_{k}" for k in ("rsa", "ecdsa", "ecdsa_sk", "ed25519", "ed25519_sk", "xmss", "dsa")]
WORDS = ("alpha", "beta", "gamma", "db-1", "db-2", "web-a", "edge", "inner", "jump")


def generated_config(seed: int) -> tuple[str, list[str]]:
    """A config of the forms operators write: wildcards, negation, first value wins, Host * first or
    last, Key=Value, quotes, tabs, CRLF, comments, ProxyJump chains. Returns it and aliases to ask."""
    rng = random.Random(seed)
    blocks = []
    if rng.random() < 0.3:
        blocks.append("Host *\n  ServerAliveInterval 30\n  Port 2200\n")
    for i in range(rng.randint(3, 7)):
        pattern = rng.choice([rng.choice(WORDS), f"{rng.choice(WORDS)[:2]}*", "db-?", f"* !{rng.choice(WORDS)}",
                              f"{rng.choice(WORDS)} {rng.choice(WORDS)}"])
        lines = [f"Host {pattern}"]
        for key in rng.sample(["HostName", "User", "Port", "IdentityFile", "UserKnownHostsFile", "ProxyJump"],
                              rng.randint(1, 4)):
            value = {"HostName": rng.choice([f"10.0.{i}.{seed % 250}", "%h.example.net", "Upper-Case.Host"]),
                     "User": rng.choice(["ops", "deploy", "\"quoted\"", "admin  # a comment"]),
                     "Port": str(rng.choice([22, 2222, 22022])),
                     "IdentityFile": rng.choice(["~/.ssh/id_%r", "/keys/%h_%p", "/keys/%n", "/keys/plain"]),
                     "UserKnownHostsFile": rng.choice(["~/.ssh/kh_%h", "/kh/all /kh/more"]),
                     "ProxyJump": rng.choice(["jump", "edge,inner", "ops@jump:2201", "none"])}[key]
            sep = rng.choice([" ", "=", "\t", " = "])
            lines.append(f"{rng.choice(['  ', chr(9)])}{key}{sep}{value}")
        blocks.append("\n".join(lines) + "\n")
    if rng.random() < 0.3:
        blocks.append("Host *\n  User last-default\n")
    text = "".join(blocks)
    if rng.random() < 0.2:
        text = text.replace("\n", "\r\n")
    return text, rng.sample(WORDS, 4)


def reference(path: Path, alias: str, user: str | None = None, port: int | None = None, depth: int = 0,
              own_jumps: bool = True) -> dict:
    """What ssh -G says, followed through its jumps the way ssh's -J and -W do, written independently."""
    cmd = ["ssh", "-G", "-F", str(path), *(["-l", user] if user else []), *(["-p", str(port)] if port else []), alias]
    said: dict[str, list[str]] = {}
    for line in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines():
        k, _, v = line.partition(" ")
        said.setdefault(k, []).append(v)
    spec = said.get("proxyjump", ["none"])[0]
    jumps = reference_chain(path, spec, depth + 1) if own_jumps and spec != "none" else []
    # IdentityFile as ssh expands it when it connects (ssh -G leaves the tokens); the generated ones
    # use %h, %p, %r, %n and ~. OpenSSH's default list and known-hosts files stand for "not set".
    defaults = {"identityfile": DEFAULT_KEYS,
                "userknownhostsfile": [f"{HOME}/.ssh/known_hosts {HOME}/.ssh/known_hosts2"]}
    keys = [] if said["identityfile"] == defaults["identityfile"] else [
        k.replace("%h", said["hostname"][0]).replace("%p", said["port"][0]).replace("%r", said["user"][0])
        .replace("%n", alias).replace("~", HOME, 1) for k in said["identityfile"]]
    known = [] if said["userknownhostsfile"] == defaults["userknownhostsfile"] else \
        said["userknownhostsfile"][0].split()
    return {"hostname": said["hostname"][0], "user": said["user"][0], "port": said["port"][0], "jumps": jumps,
            "keys": keys, "known_hosts": known}


def reference_chain(path: Path, spec: str, depth: int) -> list[str]:
    """`a,b`: b reached through a (`ssh -J a b`: b's own ProxyJump is not used); `b`: through b's own."""
    if depth > 16:
        raise subprocess.CalledProcessError(255, "too deep")
    *before, last = spec.split(",")
    ju, _, rest = last.rpartition("@")
    jh, _, jp = rest.partition(":")
    sub = reference(path, jh, ju or None, int(jp) if jp else None, depth, own_jumps=not before)
    jumps = reference_chain(path, ",".join(before), depth + 1) if before else sub["jumps"]
    return [*jumps, f"{sub['user']}@{sub['hostname']}:{sub['port']}"]


@pytest.mark.parametrize("seed", range(60))
def test_generated_configs_resolve_as_ssh_G_says(seed: int, tmp_path: Path) -> None:
    text, aliases = generated_config(seed)
    path = tmp_path / "config"
    path.write_bytes(text.encode())
    cfg = SshConfig(path, True)
    for alias in aliases:
        try:
            want = reference(path, alias)
        except subprocess.CalledProcessError:  # ssh refuses it (a loop of jump hosts): so must the tool
            with pytest.raises(ConfigError, match=r"jumphost loop|longer than 16 hops"):
                route(cfg, section(), node(alias))
            continue
        try:
            way = route(cfg, section(), node(alias))
        except ConfigError as exc:  # refused clearly is allowed (a loop of jumps), a silent difference is not
            assert "ProxyJump chain longer" in str(exc) or "jumphost loop" in str(exc), exc
            continue
        got = {"hostname": way.target.hostname, "user": way.target.user, "port": str(way.target.port),
               "jumps": [j.describe() for j in way.jumps], "keys": list(way.target.key_files),
               "known_hosts": list(way.known_hosts)}
        assert got == want, (alias, text)


# --- ProxyCommand: run exactly as ssh runs it ------------------------------------------------------------
PROXIED = """
Host proxied
  HostName 10.20.30.40
  User deploy
  Port 2222
  ProxyCommand {recorder} %h %p %r %n %% "$PROXY_NOTE" 'single %h'
"""


def test_a_proxycommand_runs_exactly_as_openssh_runs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Differential: the command OpenSSH's own client runs for the host (it records its arguments and
    environment's note, then exits, failing the connection) against the one this tool would run."""
    from orchestrator.hosts.ssh_config import proxy_argv

    recorder = tmp_path / "record"
    recorder.write_text('#!/bin/sh\nprintf "%s\\n" "$0" "$@" > "$RECORD_TO"\n')
    recorder.chmod(0o755)
    path = tmp_path / "ssh_config"
    path.write_text(PROXIED.format(recorder=recorder))
    monkeypatch.setenv("PROXY_NOTE", "a note with spaces")
    by_ssh, by_us = tmp_path / "by-ssh", tmp_path / "by-us"
    subprocess.run(["ssh", "-F", str(path), "-o", "BatchMode=yes", "proxied", "true"], capture_output=True,
                   timeout=30, env={**os.environ, "RECORD_TO": str(by_ssh)})
    way = route(SshConfig(path, True, allow_local_commands=True), section(), node("proxied"))
    assert way.target.proxy_command is not None
    subprocess.run(proxy_argv(way.target.proxy_command), timeout=30, env={**os.environ, "RECORD_TO": str(by_us)})
    assert by_ssh.read_text() == by_us.read_text()
    assert by_us.read_text().splitlines()[1:] == ["10.20.30.40", "2222", "deploy", "proxied", "%",
                                                  "a note with spaces", "single 10.20.30.40"]


def test_the_inventorys_ssh_section_chooses_the_file_and_whether_local_commands_may_run(tmp_path: Path) -> None:
    def section_of(**keys: object) -> SshSection:
        return SshSection.model_validate({"known_hosts": "/dev/null", **keys})

    given = tmp_path / "ssh_config"
    given.write_text("Host *\n  User ops\n")
    for allow in (False, True):
        loaded = SshConfig.load(section_of(config_file=str(given), allow_local_commands=allow))
        assert (loaded.path, loaded.enabled, loaded.allow_local_commands) == (given, True, allow)
        own = SshConfig.load(section_of(allow_local_commands=allow))
        assert (own.path, own.enabled, own.allow_local_commands) == (None, True, allow)  # ssh -G's own files
    assert not SshConfig.load(section_of(read_config=False)).enabled
    with pytest.raises(ConfigError) as err:
        SshConfig.load(section_of(config_file=str(tmp_path / "nope")))
    assert err.value.source == "inventory" and f"ssh.config_file: cannot read {tmp_path / 'nope'}" in str(err.value)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError) as special:
        SshConfig.load(section_of(config_file=str(fifo)))
    assert special.value.source == "ssh.config_file"


def test_without_the_openssh_client_a_users_config_is_refused_and_none_is_nothing_to_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no `ssh` there
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    nothing = SshConfig.load(section())
    assert (nothing.path, nothing.enabled) == (None, False)
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "config").write_text("Host *\n  User ops\n")
    with pytest.raises(ConfigError) as err:
        SshConfig.load(section())
    assert (err.value.source, err.value.problems) == ("inventory", [
        "~/.ssh/config is read with the OpenSSH client (`ssh -G`), which is not installed: apt-get install "
        "openssh-client, or set ssh.read_config: false"])


def test_what_ssh_says_of_a_config_it_refuses_is_its_place_and_complaint_never_the_line() -> None:
    from orchestrator.hosts.ssh_config import refusal

    assert refusal("/etc/shadow line 3: Bad configuration option: root:$y$secret\n") == (
        "/etc/shadow, line 3: the OpenSSH client refuses it (Bad configuration option)")
    assert refusal("/x: line 12: keyword hostname extra arguments at end of line\n") == (
        "/x, line 12: the OpenSSH client refuses it (keyword hostname extra arguments at end of line)")
    assert refusal("") == "the OpenSSH client cannot read it: 'no reason given'"
    assert refusal("\n  \nssh: " + "é" * 300) == "the OpenSSH client cannot read it: " + ascii("ssh: " + "é" * 195)


def test_a_chain_of_jumps_is_each_host_in_order_up_to_sixteen(tmp_path: Path) -> None:
    way = route(config_of("Host t\n  ProxyJump a,b:2202,c\n", tmp_path), section(), node("t"))
    assert [j.describe() for j in way.jumps] == ["root@a:22", "root@b:2202", "root@c:22"]
    longest = "Host t\n  ProxyJump " + ",".join(f"j{i}" for i in range(16)) + "\n"
    assert len(route(config_of(longest, tmp_path), section(), node("t")).jumps) == 16
    too_long = "Host t\n  ProxyJump " + ",".join(f"j{i}" for i in range(17)) + "\n"
    with pytest.raises(ConfigError) as refused:
        route(config_of(too_long, tmp_path), section(), node("t"))
    assert refused.value.source == str(tmp_path / "ssh_config")
    assert refused.value.problems == ["ProxyJump chain longer than 16 hops: refused"]
    # Nested: a jump host reached through its own ProxyJump counts too.
    nested = "Host t\n  ProxyJump " + ",".join(f"j{i}" for i in range(9)) + "\nHost j0\n  ProxyJump " + ",".join(
        f"k{i}" for i in range(8)) + "\n"
    with pytest.raises(ConfigError, match="longer than 16 hops"):
        route(config_of(nested, tmp_path), section(), node("t"))


def test_a_refused_proxycommand_is_named_shortened_and_its_unknown_tokens_said(tmp_path: Path) -> None:
    long = "nc " + "x" * 200
    with pytest.raises(ConfigError) as refused:
        route(config_of(f"Host legacy\n  ProxyCommand {long}\n", tmp_path), section(), node("legacy"))
    assert refused.value.source == str(tmp_path / "ssh_config")
    assert refused.value.problems == [f"Host legacy: ProxyCommand runs a local command ({long[:100]!a}); refused. Set "
                                      "ssh.allow_local_commands: true in the inventory to allow it (or use ProxyJump)"]
    with pytest.raises(ConfigError) as token:
        route(config_of("Host legacy\n  ProxyCommand nc %h %C\n", tmp_path, allow=True), section(), node("legacy"))
    assert token.value.source == str(tmp_path / "ssh_config")
    assert token.value.problems == ["Host legacy: ProxyCommand uses the token %C, which ssh does not expand there "
                                    "(it takes %%, %h, %n, %p and %r)"]


def test_a_proxycommand_runs_by_the_users_shell_else_sh(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.hosts.ssh_config import proxy_argv

    monkeypatch.setenv("SHELL", "/bin/bash")
    assert proxy_argv("nc h 22") == ["/bin/bash", "-c", "exec nc h 22"]
    monkeypatch.delenv("SHELL")
    assert proxy_argv("nc h 22") == ["/bin/sh", "-c", "exec nc h 22"]


def test_a_keys_tokens_are_the_user_and_port_the_inventory_gives(tmp_path: Path) -> None:
    cfg = config_of("Host h\n  User cfguser\n  Port 2200\n  IdentityFile /keys/%r-%p\n", tmp_path)
    assert route(cfg, section(), node("h")).target.key_files == ("/keys/cfguser-2200",)
    way = route(cfg, section(user="ops", port=2022), node("h"))
    assert way.target.key_files == ("/keys/ops-2022",) and way.target.describe() == "ops@h:2022"


def test_without_a_config_a_nodes_own_user_and_port_win_over_the_inventorys() -> None:
    assert route(SshConfig(), section(user="ops", port=2200),
                 NodeEntry(name="n", host="h", ssh_user="me", ssh_port=2022)).describe() == "me@h:2022"
    assert route(SshConfig(), section(user="ops", port=2200), node("h")).describe() == "ops@h:2200"


# --- what a first look at the config reads, and what an IdentityFile's tokens become (make mutate found these
# untested: its timeouts had been counted as kills) ------------------------------------------------------------
def test_the_look_before_ssh_reads_the_config_follows_every_include_as_openssh_finds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no config named, the user's ~/.ssh/config and the system's /etc/ssh/ssh_config are looked at; each
    Include (any case, several patterns on a line, relative to ~/.ssh, absolute, a glob) is followed, a file
    reached twice read once, one that is missing, a directory or cannot be read passed over, bytes not UTF-8 read
    replaced: a `Match exec` anywhere among them is refused before OpenSSH runs it, naming its file and line."""
    from orchestrator.hosts.ssh_config import config_lines

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    user = tmp_path / "home" / ".ssh"
    (user / "conf.d").mkdir(parents=True)
    (user / "conf.d" / "a.conf").write_bytes(b"# caf\xe9\nHost a\n")
    (user / "conf.d" / "b.conf").write_text("Host b\n  Include conf.d/a.conf\n")
    (user / "conf.d" / "unreadable.conf").write_text("Host u\n")
    (tmp_path / "abs.conf").write_text("Host abs\n")
    (user / "config").write_text(f"INCLUDE missing.conf conf.d/b.conf\nInclude conf.d\nInclude {tmp_path}/abs.conf\n"
                                 "include conf.d/un*.conf conf.d/a.conf\n")
    real_read = Path.read_text

    def read_text(path: Path, *args: object, **kwargs: object) -> str:
        if path.name == "unreadable.conf":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    lines = config_lines(None)
    mine = [(str(where.relative_to(tmp_path)), number, text) for where, number, text in lines
            if where.is_relative_to(tmp_path)]
    assert mine == [
        ("home/.ssh/config", 1, "INCLUDE missing.conf conf.d/b.conf"), ("home/.ssh/config", 2, "Include conf.d"),
        ("home/.ssh/config", 3, f"Include {tmp_path}/abs.conf"),
        ("home/.ssh/config", 4, "include conf.d/un*.conf conf.d/a.conf"),
        ("home/.ssh/conf.d/b.conf", 1, "Host b"), ("home/.ssh/conf.d/b.conf", 2, "  Include conf.d/a.conf"),
        ("abs.conf", 1, "Host abs"),
        ("home/.ssh/conf.d/a.conf", 1, "# caf\ufffd"), ("home/.ssh/conf.d/a.conf", 2, "Host a")]
    system = Path("/etc/ssh/ssh_config")
    its = len(real_read(system).splitlines())
    assert [where for where, _, _ in lines if not where.is_relative_to(tmp_path)][:its] == [system] * its, \
        "the system's own file, after the user's"
    (user / "conf.d" / "a.conf").write_text("Host a\n  Match exec \"true\"\n")
    with pytest.raises(ConfigError) as refused:
        SshConfig(None, True).resolve("a")
    assert refused.value.source == str(user / "conf.d" / "a.conf")
    assert refused.value.problems == ["line 2: `Match exec` runs a local command while the config is read; refused. "
                                      "Set ssh.allow_local_commands: true in the inventory to allow it"]


def test_more_included_files_than_openssh_reads_is_refused(tmp_path: Path) -> None:
    from orchestrator.hosts.ssh_config import MAX_INCLUDED_FILES, config_lines

    (tmp_path / "d").mkdir()
    for i in range(MAX_INCLUDED_FILES - 1):
        (tmp_path / "d" / f"{i:03d}.conf").write_text(f"Host h{i}\n")
    main = tmp_path / "main.conf"
    main.write_text(f"Include {tmp_path}/d/*.conf\n")
    assert len(config_lines(main)) == 1 + MAX_INCLUDED_FILES - 1, "the config and as many files as it may include"
    (tmp_path / "d" / "one-more.conf").write_text("Host x\n")
    with pytest.raises(ConfigError) as refused:
        config_lines(main)
    assert (refused.value.source, refused.value.problems) == (str(main), [f"more than {MAX_INCLUDED_FILES} files "
                                                                          "included"])


def test_an_identity_files_tokens_expand_as_ssh_config_5_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every %-token ssh_config(5) allows in IdentityFile, and ${VAR}, from what `ssh -G` says of the host (its
    HostKeyAlias for %k, its ProxyJump for %j); an unset variable or a token ssh does not expand there is refused,
    naming the host and the keyword."""
    import hashlib
    import socket

    monkeypatch.setenv("KEYS_DIR", "/keys")
    monkeypatch.setenv("USER", "operator")
    local = "build-7.example.org"  # %L is its first part, %l all of it
    monkeypatch.setattr(socket, "gethostname", lambda: local)
    text = ("Host tk\n  HostName 10.2.3.4\n  User bob\n  Port 2022\n  HostKeyAlias kal\n  ProxyJump jh\n"
            "  IdentityFile ${KEYS_DIR}/%%-%d-%h-%i-%j-%k-%L-%l-%n-%p-%r-%u-%C\nHost jh\n  HostName 127.0.0.1\n"
            "Host nj\n  HostName 10.2.3.5\n  User bob\n  IdentityFile /k/%j-%C\n")
    [key] = route(config_of(text, tmp_path), section(), node("tk")).target.key_files
    digest = hashlib.sha1(f"{local}10.2.3.42022bobjh".encode()).hexdigest()
    assert key == (f"/keys/%-{Path.home()}-10.2.3.4-{os.getuid()}-jh-kal-build-7-{local}-tk-2022-bob-"
                   f"operator-{digest}")
    # No ProxyJump (`ssh -G` then says none): %j is empty, and so is its part of %C.
    [key] = route(config_of(text, tmp_path), section(), node("nj")).target.key_files
    assert key == f"/k/-{hashlib.sha1(f'{local}10.2.3.522bob'.encode()).hexdigest()}"
    for value, said in (("${NOT_SET_HERE}/k", "uses ${NOT_SET_HERE}, which is not set"),
                        ("/k/%T", "uses the token %T, which this reader does not expand")):
        monkeypatch.delenv("NOT_SET_HERE", raising=False)
        with pytest.raises(ConfigError) as refused:
            route(config_of(f"Host tk\n  IdentityFile {value}\n", tmp_path), section(), node("tk"))
        assert (refused.value.source, refused.value.problems) == ("ssh config", [f"Host tk: IdentityFile {said}"])


# --- how `ssh -G` is asked: a stand-in `ssh` on PATH prints what it was given ----------------------------------
ASKED = """#!/bin/sh
# As ssh -G prints settings (a keyword and its value a line): its arguments and its environment.
printf 'argv %s\\n' "$*"
env | sed 's/^/env /'
"""


def stand_in_ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str = ASKED) -> Path:
    where = tmp_path / "bin"
    where.mkdir(exist_ok=True)
    (where / "ssh").write_text(body)
    (where / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", f"{where}:/usr/bin:/bin")
    return where


def test_ssh_g_is_asked_for_the_alias_with_the_file_user_and_port_given_and_never_the_tools_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ssh -G` gets the inventory's file (`-F`, none for OpenSSH's own files, /dev/null for its defaults), the
    user and port (`-l`, `-p`), the alias after `--`; and of the tool's environment only what a ProxyCommand or
    `Match exec` needs (the base, the shell and the agent), never a password held in it."""
    stand_in_ssh(tmp_path, monkeypatch)
    monkeypatch.setenv("ORCHESTRATOR_ES_PASSWORD", "s3cret-in-env")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/agent.sock")
    config = config_of("Host db\n  User ops\n", tmp_path)
    assert SshConfig(None, True).resolve("db")["argv"] == ["-G -- db"]
    asked = config.resolve("db-X1", "deploy", 2222)
    assert asked["argv"] == [f"-G -F {config.path} -l deploy -p 2222 -- db-X1"]
    assert config.defaults()["argv"] == ["-G -F /dev/null -- orchestrator-default-probe"]
    seen = dict(line.partition("=")[::2] for line in asked["env"])
    assert seen["PATH"] == os.environ["PATH"] and seen["SSH_AUTH_SOCK"] == "/run/agent.sock"
    assert "ORCHESTRATOR_ES_PASSWORD" not in seen and not any("s3cret" in v for v in seen.values()), seen


@pytest.mark.parametrize("alias", ["-oProxyCommand=/tmp/x", "", "db 1", "db\t1", "db'1", 'db"1', "db\\1",
                                   "é" * 70 + " x"])
def test_a_name_that_is_no_host_name_or_alias_is_refused_before_ssh_is_asked(
        alias: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in_ssh(tmp_path, monkeypatch, "#!/bin/sh\ntouch \"$0.ran\"\n")
    config = config_of("Host db\n", tmp_path)
    with pytest.raises(ConfigError) as refused:
        config.resolve(alias)
    assert (refused.value.source, refused.value.problems) == (config.source, [
        f"{alias[:60]!a} is not a host name or alias"])
    assert not (tmp_path / "bin" / "ssh.ran").exists(), "ssh never asked"


def test_what_ssh_g_prints_that_is_not_utf8_is_read_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in_ssh(tmp_path, monkeypatch, "#!/bin/sh\nprintf 'hostname caf\\377\\nuser ops\\n'\n")
    assert config_of("Host db\n", tmp_path).resolve("db") == {"hostname": ["caf\ufffd"], "user": ["ops"]}


def test_ssh_g_that_refuses_is_said_for_the_file_read_and_one_that_hangs_or_is_gone_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.hosts import ssh_config

    config = config_of("Host db\n", tmp_path)

    def refused() -> tuple[str | None, list[str]]:
        with pytest.raises(ConfigError) as err:
            config.resolve("db")
        return err.value.source, err.value.problems

    stand_in_ssh(tmp_path, monkeypatch, "#!/bin/sh\necho 'x line 3: Bad configuration option: secret' >&2\nexit 255\n")
    assert refused() == (config.source, ["x, line 3: the OpenSSH client refuses it (Bad configuration option)"])
    stand_in_ssh(tmp_path, monkeypatch, "#!/bin/sh\nexec sleep 3\n")
    monkeypatch.setattr(ssh_config, "READ_TIMEOUT_S", 0.3)
    assert refused() == (config.source, ["`ssh -G` did not finish reading it within 0.3 s (an Include of a special "
                                       "file?)"])
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert refused() == (config.source, ["the OpenSSH client (`ssh`) reads the SSH config and is not installed: "
                                       "apt-get install openssh-client, or ssh.read_config: false"])


def test_ssh_g_reads_nothing_of_the_tools_own_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the tool's stdin holds (an operator's typed answer, a pipeline's input) is not the config reader's: a
    command `ssh -G` runs while it reads the config (an allowed `Match exec`) finds it empty."""
    stand_in_ssh(tmp_path, monkeypatch, "#!/bin/sh\nread -r line\nprintf 'stdin [%s]\\n' \"$line\"\n")
    config = config_of("Host db\n", tmp_path)
    read_end, write_end = os.pipe()
    os.write(write_end, b"yes, restart prod\n")
    os.close(write_end)
    own_stdin = os.dup(0)
    try:
        os.dup2(read_end, 0)
        asked = config.resolve("db")
    finally:
        os.dup2(own_stdin, 0)
        os.close(own_stdin)
        os.close(read_end)
    assert asked == {"stdin": ["[]"]}
