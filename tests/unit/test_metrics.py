"""Prometheus metrics of a run: a textfile and a Pushgateway push, from the journal, over the fake cluster."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from orchestrator.config.model import MetricsSection
from orchestrator.restart.events import Event
from orchestrator.runs.metrics import metrics_sink
from orchestrator.testing.fake import FakeCluster
from tests.helpers import Receiver
from tests.unit.test_engine import ORIGINAL, engine, inventory, new_journal, state_dir


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, read by Prometheus's own parser; the cluster label checked and left out of the key."""
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.get("cluster") == "fake", s
            found[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "cluster")))] = s.value
    return found


def test_a_run_writes_its_figures_to_a_textfile_and_pushes_them(tmp_path: Path) -> None:
    with state_dir(), Receiver() as gateway:
        inv, cluster = inventory(["a", "b", "c"]), FakeCluster.of(["a", "b", "c"], settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)
        cfg = MetricsSection(textfile=tmp_path / "orchestrator.prom", pushgateway=gateway.url, job="rolling")
        eng.ctx.emit = metrics_sink(journal, cfg, events.append)
        eng.run()
        found = samples((tmp_path / "orchestrator.prom").read_text())
        pushes = [c for c in gateway.calls if c["method"] == "PUT"]
    assert not any(dict(labels).get("run_id") for name, labels in found if name != "orchestrator_run_info"), \
        "the run id is no label of a series (a new series every run)"
    assert found[("orchestrator_run_info", (("mode", "node"), ("product", "fake"), ("run_id", journal.run_id)))] == 1
    assert found[("orchestrator_cluster_calls", ())] == journal.cluster_calls > 0, "the run's calls, counted"
    assert found[("orchestrator_run_finished_timestamp_seconds", ())] == journal.finished
    assert found[("orchestrator_last_success_timestamp_seconds", ())] == journal.finished
    assert 0 <= found[("orchestrator_run_duration_seconds", ())] < 60
    assert found[("orchestrator_run_state", (("state", "succeeded"),))] == 1
    assert found[("orchestrator_run_state", (("state", "running"),))] == 0
    assert found[("orchestrator_batches", (("state", "done"),))] == 3
    assert all(found[("orchestrator_node_restarted", (("node", n),))] == 1 for n in "abc")
    assert any(name == "orchestrator_node_phase_seconds" for name, _ in found)
    # One push per batch and one at the end, grouped by cluster.
    assert len(pushes) == 4 and all(c["path"] == "/metrics/job/rolling/cluster/fake" for c in pushes)
    assert "orchestrator_batches" in pushes[-1]["body"]
    assert not [e for e in events if e.kind == "warning"]


def test_a_pushgateway_that_fails_is_one_warning_never_a_failed_run(tmp_path: Path) -> None:
    with state_dir(), Receiver() as gateway:
        inv, cluster = inventory(["a", "b"]), FakeCluster.of(["a", "b"], settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        eng = engine(inv, cluster, journal, events)
        eng.ctx.emit = metrics_sink(journal, MetricsSection(pushgateway=gateway.url + "/fail"), events.append)
        eng.run()
    assert journal.state.value == "succeeded"
    warnings = [e.message for e in events if e.kind == "warning"]
    assert len(warnings) == 1 and warnings[0].startswith("metrics not published")


def test_without_a_metrics_section_nothing_is_added() -> None:
    sink = print
    assert metrics_sink(None, MetricsSection(), sink) is sink  # type: ignore[arg-type]


def test_the_textfile_is_never_written_through_a_link_planted_at_a_predictable_name(tmp_path: Path) -> None:
    import os
    import threading

    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    textfile = tmp_path / "orchestrator.prom"
    # Where prometheus_client's own writer puts its temporary file: PATH.PID.THREAD.
    os.symlink(victim, f"{textfile}.{os.getpid()}.{threading.current_thread().ident}")
    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        eng.ctx.emit = metrics_sink(journal, MetricsSection(textfile=textfile), lambda e: None)
        eng.run()
    assert victim.read_text() == "keep me\n"
    assert "orchestrator_batches" in textfile.read_text() and not textfile.is_symlink()


def test_a_failed_run_keeps_the_last_success_of_an_earlier_run(tmp_path: Path) -> None:
    import pytest

    from orchestrator.errors import HostError

    with state_dir():
        inv, cluster = inventory(["a"]), FakeCluster.of(["a"], settings=dict(ORIGINAL))
        earlier = new_journal(inv, cluster)
        engine(inv, cluster, earlier, []).run()
        cluster.nodes["a"].start_fails = True
        failing = new_journal(inv, cluster)
        eng = engine(inv, cluster, failing, [])
        eng.ctx.emit = metrics_sink(failing, MetricsSection(textfile=tmp_path / "m.prom"), lambda e: None)
        with pytest.raises(HostError):
            eng.run()
        found = samples((tmp_path / "m.prom").read_text())
    assert found[("orchestrator_run_state", (("state", "failed"),))] == 1
    assert found[("orchestrator_last_success_timestamp_seconds", ())] == earlier.finished


def test_the_command_line_sets_the_metrics_outputs_and_a_resume_does_not_call_it_a_changed_inventory(
        tmp_path: Path) -> None:
    import pytest

    from orchestrator.errors import ConfigError
    from orchestrator.runs.restart import inventory_changes
    from orchestrator.runs.target import Target, with_metrics

    inv = inventory(["a"])
    target = Target(inv=inv, inventory_path=tmp_path, product=None, procedure=None, cluster=None)  # type: ignore[arg-type]
    given = with_metrics(target, tmp_path / "x.prom", "http://gw:9091")
    assert given.inv.metrics.textfile == tmp_path / "x.prom" and given.inv.metrics.pushgateway == "http://gw:9091"
    assert inventory_changes(inv.model_dump(mode="json"), given.inv.model_dump(mode="json")) == []
    with pytest.raises(ConfigError):
        with_metrics(target, None, "not a url")
