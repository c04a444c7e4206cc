"""The inventory loader: every problem listed, each with its place in the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.config.inventory import load_inventory
from orchestrator.config.loader import load_model
from orchestrator.config.model import Inventory
from orchestrator.errors import ConfigError

GOOD = """\
cluster:
  name: prod
  endpoints: ["https://es1:9200"]
  username: admin
  password: {env: ES_PASSWORD}
ssh:
  known_hosts: /etc/ssh/ssh_known_hosts
nodes:
  - {name: n1, host: 10.0.0.1, zone: a}
  - {name: n2, host: 10.0.0.2, zone: b}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    return path


def test_good_inventory_loads_with_defaults(tmp_path: Path) -> None:
    inv = load_model(write(tmp_path, GOOD), Inventory)
    assert inv.cluster.endpoints == ["https://es1:9200"]
    assert inv.recovery.node_concurrent_recoveries == "auto"
    assert inv.recovery.max_bytes_per_sec == "auto"
    assert inv.nodes[1].zone == "b"


def test_recovery_limits_are_auto_or_given(tmp_path: Path) -> None:
    given = load_model(write(tmp_path, GOOD + "recovery: {node_concurrent_recoveries: 15, max_bytes_per_sec: 1GB}\n"),
                       Inventory)
    assert (given.recovery.node_concurrent_recoveries, given.recovery.max_bytes_per_sec) == (15, "1gb")
    for bad, said in (("node_concurrent_recoveries: many", "node_concurrent_recoveries"),
                      ("node_concurrent_recoveries: 0", "node_concurrent_recoveries"),
                      ("max_bytes_per_sec: fast", "'fast' is not a byte size such as 100mb (or auto)")):
        with pytest.raises(ConfigError) as err:
            load_model(write(tmp_path, GOOD + f"recovery: {{{bad}}}\n"), Inventory)
        assert said in str(err.value)


def test_every_problem_is_listed_with_its_line(tmp_path: Path) -> None:
    bad = GOOD.replace("name: n2, host: 10.0.0.2", "name: n2, hots: 10.0.0.2").replace(
        "endpoints: [\"https://es1:9200\"]", "endpoints: [\"es1:9200\"]")
    with pytest.raises(ConfigError) as err:
        load_model(write(tmp_path, bad), Inventory)
    problems = err.value.problems
    assert any(p.startswith("cluster.endpoints (line 3)") and "not an http(s)" in p for p in problems), problems
    assert any(p.startswith("nodes[1].host (line 10)") and "required" in p.lower() for p in problems), problems
    assert any(p.startswith("nodes[1].hots (line 10)") and "unknown key" in p for p in problems), problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cluster: [1, 2]\n", "cluster"),
        ("- just\n- a list\n", "YAML mapping"),
        ("cluster: {name: x\n", "not valid YAML"),
        (GOOD.replace("password: {env: ES_PASSWORD}", "password: hunter2"), "cluster.password"),
        (GOOD.replace("zone: a", "zone: a, ssh_port: 70000"), "nodes[0].ssh_port"),
        (GOOD.replace("name: n2", "name: n1"), "repeated: n1"),
        (GOOD.replace(", zone: b", ""), "every node or to none"),
        (GOOD.replace("ssh:\n  known_hosts: /etc/ssh/ssh_known_hosts\n", "ssh: {known_hosts: null}\n"),
         "unknown host keys are refused"),
        (GOOD.replace("name: n1,", "name: 'n1; rm -rf /',"), "nodes[0].name"),
    ],
)
def test_bad_inventories_name_their_place(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_model(write(tmp_path, text), Inventory)
    assert expected in str(err.value)


def test_inline_secret_is_refused_without_echoing_it(tmp_path: Path) -> None:
    text = GOOD.replace("password: {env: ES_PASSWORD}", "password: s3cr3t-canary")
    with pytest.raises(ConfigError) as err:
        load_model(write(tmp_path, text), Inventory)
    assert "s3cr3t-canary" not in str(err.value)


def test_unknown_cluster_name_lists_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ORCHESTRATOR_CONFIGS", raising=False)
    with pytest.raises(ConfigError) as err:
        load_inventory("nosuchcluster", None)
    assert "unknown cluster 'nosuchcluster'" in str(err.value)
    assert str(tmp_path / "configs" / "nosuchcluster.yaml") in str(err.value)
    assert "sandbox up" not in str(err.value), "only the sandbox is made by `sandbox up`"
    assert "`orchestrate inventory discover --endpoint URL --name nosuchcluster" in str(err.value)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "prod-logs.yaml").write_text(GOOD)
    with pytest.raises(ConfigError, match="the clusters there are: prod-logs"):
        load_inventory("prod-log", None)  # mistyped
    with pytest.raises(ConfigError, match="`orchestrate sandbox up` starts the sandbox cluster"):
        load_inventory("sandbox", None)


def test_cluster_name_found_in_configs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "prod.yaml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    inv, path = load_inventory("prod", None)
    assert inv.cluster.name == "prod"
    assert path == tmp_path / "configs" / "prod.yaml"
