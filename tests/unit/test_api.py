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


def test_a_run_from_the_api_writes_its_report_as_the_cli_does_failed_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import products
    from orchestrator.errors import HostError
    from orchestrator.restart.journal import RunFailed
    from orchestrator.testing.fake import PRODUCT, FakeCluster
    from tests.unit.test_engine import ORIGINAL, inventory, new_journal, run, state_dir

    real_get = products.get
    monkeypatch.setattr(products, "get", lambda name: PRODUCT if name == "fake" else real_get(name))
    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        run(inv, cluster, journal)
        result = api._run(lambda: journal)
        page = Path(result.summary["report"])
        assert page.is_file() and page == journal.path.with_suffix(".html")  # type: ignore[union-attr]
        assert "succeeded" in page.read_text()

        cluster.nodes["a"].start_fails = True
        failing = new_journal(inv, cluster)
        with pytest.raises(HostError) as err:
            run(inv, cluster, failing)

        def fails() -> object:
            raise RunFailed(err.value, failing)

        with pytest.raises(HostError):
            api._run(fails)  # type: ignore[arg-type]
        assert "failed" in failing.path.with_suffix(".html").read_text()  # type: ignore[union-attr]
