"""The Python API's contract without a cluster: bad input is a documented error before any call."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import api
from orchestrator.errors import ConfigError


def test_a_missing_inventory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        api.plan(config=tmp_path / "nowhere.yaml")
    assert err.value.exit_code == 2 and "nowhere.yaml" in str(err.value)


def test_a_bad_mode_is_a_config_error_naming_the_choices(tmp_path: Path) -> None:
    inv = tmp_path / "c.yaml"
    inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {known_hosts: /dev/null}\n"
                   "nodes: [{name: a, host: 127.0.0.1}]\n")
    with pytest.raises(ConfigError, match="'rack': give one of node, zone"):
        api.restart(config=inv, by="rack")


def test_a_cancel_token_is_the_engine_s_abort_flag() -> None:
    token = api.Cancel()
    assert not token.requested
    token.cancel("enough")
    assert token.requested and token.reason == "enough"


def test_an_upgrade_to_no_version_or_of_a_product_without_upgrades_is_refused_before_any_call(
        tmp_path: Path) -> None:
    inv = tmp_path / "c.yaml"
    inv.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {known_hosts: /dev/null}\n"
                   "nodes: [{name: a, host: 127.0.0.1}]\n")
    with pytest.raises(ConfigError, match=r"is not a version such as 9\.5\.3"):
        api.upgrade(config=inv, to="latest")
    riak = tmp_path / "r.yaml"
    riak.write_text("cluster: {name: r, product: riak}\nssh: {known_hosts: /dev/null}\n"
                    "nodes: [{name: a, host: 127.0.0.1}]\n")
    with pytest.raises(ConfigError, match="not available for riak clusters yet"):
        api.upgrade(config=riak, to="3.2.0")
