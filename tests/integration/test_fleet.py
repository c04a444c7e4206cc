"""A fleet (issue 60) whose canary is the real sandbox cluster, which carries the proof, and whose waves are
fake clusters: the canary restarts for real, each node once (by its own log) and every setting back; then a wave
with a failing cluster stops the waves after it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared, settings, starts_logged


def test_a_fleet_restarts_the_real_canary_then_stops_at_the_wave_with_a_failed_cluster(
        sandboxes: SandboxManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import testing
    from orchestrator.config.fleet import load_fleet
    from orchestrator.fleet import new_fleet_id, restart_fleet
    from orchestrator.testing.fake import FLEET, LIMIT
    from tests.unit.test_airflow_fleet import add_cluster

    info, es = prepared(sandboxes, Shape())
    testing.enable()  # the waves' fake clusters: this test's own, never a production inventory's
    configs = tmp_path / "configs"
    configs.mkdir()
    monkeypatch.setenv("ORCHESTRATOR_CONFIGS", str(configs))  # the fakes' inventories; the sandbox's is its own
    try:
        fakes = {name: add_cluster(configs, name, fails=name == "fake-bad")
                 for name in ("fake-ok", "fake-bad", "fake-later")}
        fleet_file = tmp_path / "fleet.yaml"
        fleet_file.write_text(yaml.safe_dump({"canary": "sandbox", "waves": [["fake-ok", "fake-bad"], ["fake-later"]],
                                              "concurrency": 2}))
        before_settings, before_starts = settings(es), starts_logged(info)
        result = restart_fleet(load_fleet(fleet_file), new_fleet_id(fleet_file))
        outcomes = {c.cluster: c.result for c in result.clusters}
        assert outcomes == {"sandbox": "succeeded", "fake-ok": "succeeded", "fake-bad": "failed",
                            "fake-later": "not begun"}, result
        assert result.exit_code != 0
        starts = {n: c - before_starts[n] for n, c in starts_logged(info).items()}
        assert starts == {"es-1": 1, "es-2": 1, "es-3": 1}, starts
        assert settings(es) == before_settings, "every setting of the real canary back"
        assert all(n.starts == 1 for n in fakes["fake-ok"].nodes.values())
        assert all(n.starts == 0 for n in fakes["fake-later"].nodes.values()), "no later wave begun"
        assert fakes["fake-ok"].settings[("cluster", LIMIT)] == "normal"
    finally:
        FLEET.clear()
