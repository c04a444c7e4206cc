"""Routes to hosts from an OpenSSH client config: aliases, users, ports, keys, chained ProxyJump."""

from __future__ import annotations

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


def test_a_node_behind_two_jump_hosts() -> None:
    way = route(SshConfig(CONFIG, "cfg"), section(), NodeEntry(name="n2", host="es-2"))
    assert way.target.describe() == "deploy@10.9.0.12:2222" and way.target.key_files == ("/keys/es",)
    assert [j.describe() for j in way.jumps] == ["jump@192.0.2.1:2201", "root@10.9.0.1:22"]
    assert way.jumps[0].key_files == (str(Path("~/.ssh/bastion").expanduser()),)
    assert way.known_hosts == ("/kh/es",)
    assert way.describe() == "deploy@10.9.0.12:2222 via jump@192.0.2.1:2201 -> root@10.9.0.1:22"


def test_the_inventory_wins_where_it_says_so_and_the_node_wins_over_both() -> None:
    cfg = SshConfig(CONFIG, "cfg")
    way = route(cfg, section(user="ops", key_file="/inv/key"), NodeEntry(name="n1", host="es-1"))
    assert way.target.describe() == "ops@es-1:22" and way.target.key_files == ("/inv/key",)
    way = route(cfg, section(user="ops"), NodeEntry(name="n1", host="es-1", ssh_user="me", ssh_port=2022))
    assert way.target.describe() == "me@es-1:2022"
    # A host the config does not name: the inventory alone, no jump.
    way = route(cfg, section(), NodeEntry(name="x", host="10.1.1.1"))
    assert way.describe() == "root@10.1.1.1:22" and way.known_hosts == ()


def test_no_config_and_unsupported_proxycommand() -> None:
    assert route(SshConfig(), section(), NodeEntry(name="n", host="h")).describe() == "root@h:22"
    with pytest.raises(ConfigError, match="ProxyCommand is not supported; use ProxyJump"):
        route(SshConfig(CONFIG, "cfg"), section(), NodeEntry(name="n", host="legacy"))


@pytest.mark.parametrize(("spec", "parsed"), [("h", (None, "h", None)), ("u@h:2", ("u", "h", 2)),
                                              ("u@[fe80::1]:22", ("u", "fe80::1", 22)), ("h:x", (None, "h", None))])
def test_jump_specs(spec: str, parsed: tuple[str | None, str, int | None]) -> None:
    assert parse_jump(spec) == parsed


def test_a_named_config_file_that_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        SshConfig.load(section(config_file=str(tmp_path / "nope")))
    assert SshConfig.load(section(read_config=False)).text == ""
