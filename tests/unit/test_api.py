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


def test_a_run_with_no_tune_leaves_the_tuning_step_out_and_its_resume_too(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`restart --no-tune` (tune=False): the journal records the playbook without tune_host and the option,
    so a resume leaves the hosts alone as the start did."""
    import yaml

    from orchestrator.errors import StoppedAfter
    from orchestrator.restart import journal as journals
    from orchestrator.testing.fake import FLEET, LIMIT, FakeCluster

    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp_path / "state"))
    (tmp_path / "tuned.yaml").write_text(yaml.safe_dump({
        "name": "tuned", "product": "fake", "before_run": ["raise_limit"],
        "batch": ["hold_setting", "stop_service", "tune_host", "start_service", "wait_for_join", "release_setting"]}))
    inventory = tmp_path / "c.yaml"
    inventory.write_text(yaml.safe_dump({
        "cluster": {"name": "c", "product": "fake"}, "ssh": {"transport": "local"},
        "playbook": str(tmp_path / "tuned.yaml"), "tuning": {"profile": "none"},
        "nodes": [{"name": n, "host": f"c-{n}"} for n in ("n1", "n2")],
        "timeouts": {"join_s": 30, "recovery_s": 60, "poll_interval_s": 0.05}}))
    try:
        for tune in (True, False):
            FLEET["c"] = FakeCluster.of(["n1", "n2"], settings={("cluster", LIMIT): "normal"})
            said: list[str] = []
            with pytest.raises(StoppedAfter):
                api.restart(config=inventory, tune=tune, stop_after=1, on_event=said_to(said),
                            origin=f"test:{tune}")
            run_id, _ = api.run_of(config=inventory, origin=f"test:{tune}") or ("", "")
            journal = journals.latest("c", run_id)
            assert journal is not None
            assert ("tune_host" in journal.spec.playbook["batch"]) is tune
            assert journal.spec.options.tune is tune
            assert api.summary(config=inventory, run_id=run_id)["options"]["tune"] is tune
            assert any("no tuning profile" in m for m in said) is tune, said
            resumed: list[str] = []
            assert api.resume(config=inventory, run_id=run_id,
                              on_event=said_to(resumed)).result == "succeeded"
            assert any("no tuning profile" in m for m in resumed) is tune, "the resume does as the start did"
    finally:
        FLEET.clear()


def said_to(messages: list[str]) -> api.EventCallback:
    return lambda event: messages.append(event.message)


def test_the_fake_cluster_as_docs_pipelines_md_shows_it_restarts_through_the_api(tmp_path: Path) -> None:
    """The two blocks of pipelines.md's "The fake clusters, for tests of your own", run as written: the
    Python registers the cluster, the YAML is its inventory; each node restarts once, the setting is back."""
    import re
    from typing import cast

    from orchestrator.testing.fake import FLEET, FakeCluster
    from tests.unit.test_engine import state_dir

    section = (Path(__file__).resolve().parents[2] / "docs" / "pipelines.md").read_text().split(
        "### The fake clusters, for tests of your own", 1)[1]
    python, inventory = (re.search(rf"```{kind}\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
                         for kind in ("python", "yaml"))
    (tmp_path / "canary.yaml").write_text(inventory)
    scope: dict[str, object] = {}
    previous = FLEET.get("canary")  # another test's, put back after
    exec(python, scope)  # the documentation's own example
    cluster = cast(FakeCluster, scope["cluster"])
    assert cluster.nodes["n2"].rejoins is False
    cluster.nodes["n2"].rejoins = True  # the example's failure, taken back
    try:
        with state_dir():
            result = api.restart(config=tmp_path / "canary.yaml")
    finally:
        FLEET.pop("canary", None)
        if previous is not None:
            FLEET["canary"] = previous
    assert result.result == "succeeded"
    assert {n: node.starts for n, node in cluster.nodes.items()} == {"n1": 1, "n2": 1, "n3": 1}
    assert cluster.settings == {("cluster", "fake.limit"): "normal"}
