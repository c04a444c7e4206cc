"""What searchers see, watched through a run (issue 59): the figures from two readings of the nodes' counters, the
baseline closed at the run's first stop, the watch's thread over the fake cluster, and where the figures go
(the journal, `status`, the metrics)."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable

from orchestrator.errors import ClusterUnreachable
from orchestrator.restart.events import Event
from orchestrator.restart.journal import Journal
from orchestrator.restart.phases import Phase
from orchestrator.restart.search_figures import SearchCounters, SearchSample, baseline_of, sample_between
from orchestrator.restart.search_watch import BASELINE_INTERVALS, SearchWatch
from orchestrator.testing.fake import FakeCluster
from tests.unit.test_engine import ORIGINAL, engine, inventory, new_journal, state_dir


def counters(queries: int, ms: int, queue: int = 0, rejected: int = 0) -> SearchCounters:
    return SearchCounters(queries, ms, queue, rejected)


def test_the_figures_of_an_interval_count_the_nodes_that_served_it_throughout() -> None:
    before = {"a": counters(100, 1000, rejected=2), "b": counters(50, 500), "c": counters(900, 9000),
              "gone": counters(10, 10)}
    after = {"a": counters(120, 1100, queue=3, rejected=5), "b": counters(60, 800, queue=1),
             "c": counters(4, 40),  # restarted meanwhile: counts from zero again, left out
             "new": counters(7, 70)}  # not in the first reading: left out
    sample = sample_between(before, after, at=1000.0, seconds=10)
    assert (sample.nodes, sample.queries) == (2, 30)
    assert sample.mean_ms == round(400 / 30, 3), "every query of the nodes counted, over all their queries"
    assert (sample.worst_node, sample.worst_ms) == ("b", 30.0), "b: 300 ms over 10 queries; a: 100 over 20"
    assert (sample.queue, sample.rejected) == (4, 3), "queued now on every node; rejected in the interval"
    assert sample.text() == "3.0 queries/s, 13.3 ms each, slowest b 30.0 ms, 4 queued, 3 rejected"


def test_a_node_with_a_few_queries_is_not_called_the_slowest_and_no_query_is_no_figure() -> None:
    sample = sample_between({"a": counters(0, 0), "b": counters(0, 0)}, {"a": counters(4, 4000), "b": counters(5, 50)},
                            at=0.0, seconds=5)
    assert sample.worst_node == "b" and sample.mean_ms == round(4050 / 9, 3)
    idle = sample_between({"a": counters(5, 5)}, {"a": counters(5, 5)}, at=0.0, seconds=10)
    assert idle.mean_ms is None and idle.worst_node is None and idle.text() == "no search in the last 10 s"


def test_the_baseline_weighs_its_samples_by_their_queries_and_is_none_without_a_query() -> None:
    def sample(queries: int, mean: float | None, baseline: bool = True) -> SearchSample:
        return SearchSample(at=0.0, seconds=10, nodes=3, queries=queries, mean_ms=mean, worst_ms=mean, worst_node="a",
                            queue=0, rejected=1, baseline=baseline)

    found = baseline_of([sample(10, 2.0), sample(30, 4.0), sample(0, None), sample(1000, 50.0, baseline=False)])
    assert found is not None and found.mean_ms == 3.5 and found.queries == 40 and found.seconds == 30
    assert found.rejected == 3 and found.baseline, "the idle interval's time and rejections count too"
    assert baseline_of([sample(0, None)]) is None and baseline_of([sample(9, 1.0, baseline=False)]) is None
    assert SearchSample.from_json(found.to_json()) == found


def until(condition: Callable[[], bool], what: str, within_s: float = 10) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {within_s} s: {what}"
        time.sleep(0.01)


def searches(events: list[Event]) -> list[SearchSample]:
    return [SearchSample.from_json(e.data) for e in list(events) if e.kind == "search"]


def first_stop_then_away(journal: Journal, cluster: FakeCluster, events: list[Event]) -> None:
    """Two samples with every node up, the run's first stop (the baseline's interval closes at it), the baseline's
    last sample, then node a away."""
    until(lambda: len(searches(events)) >= 2, "two samples before any stop")
    journal.set_phase("a", Phase.STOPPING)
    seen = len(searches(events))
    until(lambda: len(searches(events)) > seen, "the baseline's last sample")
    cluster.nodes["a"].up = False


def test_the_watch_measures_a_baseline_until_the_first_stop_then_the_searches_as_nodes_are_away() -> None:
    names = ["a", "b", "c", "d"]
    with state_dir():
        inv = inventory(names)
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), search_ms=2.0)
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        ctx = engine(inv, cluster, journal, events).ctx
        with SearchWatch(ctx, 0.05):
            first_stop_then_away(journal, cluster, events)
            until(lambda: any(s.nodes == 3 for s in searches(events)), "a sample with a away")
        samples = searches(events)
        baseline = [s for s in samples if s.baseline]
        after = [s for s in samples if not s.baseline]
        assert len(baseline) >= 3 and samples[:len(baseline)] == baseline, "the baseline first, then no more of it"
        assert all(s.mean_ms == 2.0 and s.nodes == 4 for s in baseline), baseline
        assert after and after[-1].mean_ms == 4.0 and after[-1].nodes == 3, "one node away: the others twice as slow"
        assert journal.search["baseline"]["mean_ms"] == 2.0 and journal.search["baseline"]["queries"] > 0
        assert journal.search["latest"] == after[-1].to_json()
        assert not [e for e in events if e.kind == "warning"]


def test_a_read_that_fails_is_said_once_and_makes_no_figure_and_a_product_without_figures_is_not_watched() -> None:
    names = ["a", "b"]
    with state_dir():
        inv = inventory(names)
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), search_ms=1.0)
        events: list[Event] = []
        ctx = engine(inv, cluster, new_journal(inv, cluster), events).ctx
        real, failing = cluster.search_counters, threading.Event()

        def flaky() -> dict[str, SearchCounters] | None:
            if failing.is_set():
                raise ClusterUnreachable("no node answered")
            return real()

        cluster.search_counters = flaky  # type: ignore[method-assign]
        with SearchWatch(ctx, 0.05):
            until(lambda: len(searches(events)) >= 1, "a first sample")
            failing.set()
            until(lambda: cluster.calls >= 0 and sum(e.kind == "warning" for e in events) == 1, "the failure said")
            time.sleep(0.3)  # several failed reads
            count = len(searches(events))
            failing.clear()
            until(lambda: len(searches(events)) > count, "samples again")
        assert sum(e.kind == "warning" for e in events) == 1, "said once"
        assert all(s.nodes == 2 and s.queries > 0 for s in searches(events)), "no empty figure from a failed read"

        silent = FakeCluster.of(names, settings=dict(ORIGINAL))  # search_ms None: no figures
        quiet: list[Event] = []
        with SearchWatch(engine(inv, silent, new_journal(inv, silent), quiet).ctx, 0.05) as watch:
            time.sleep(0.2)
        assert watch.thread is None and quiet == []


def test_a_run_carries_the_watch_and_status_and_the_metrics_say_what_it_saw() -> None:
    from orchestrator.cli.restart_cmd import search_lines
    from orchestrator.config.model import SearchSection
    from orchestrator.restart import journal as journals
    from orchestrator.runs.metrics import registry_of

    names = ["a", "b", "c"]
    with state_dir():
        inv = inventory(names).model_copy(update={"search": SearchSection(interval_s=0.05)})
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), search_ms=3.0, start_takes_s=0.3)
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        engine(inv, cluster, journal, events).run()
        assert searches(events), "the run watched the searches"
        assert not [e for e in events if "before the first stop" in e.message], "no budget: no wait for a baseline"
        assert journal.path is not None
        read_back: Journal = journals.load_run("fake", journal.path)
        # The fake adds its queries at each read: the baseline's last read may come just after the first stop, with
        # a node away (twice the time); the watch's own test holds the figures exactly.
        baseline = read_back.search["baseline"]["mean_ms"]
        assert read_back.search == journal.search and baseline in (3.0, 6.0), read_back.search
        lines = search_lines(read_back.search)
        assert lines[0].startswith("searches before the first stop: ") and f"{baseline:.1f} ms each" in lines[0], lines
        metrics = {(m.name, s.labels.get("which")): s.value
                   for m in registry_of(read_back).collect() for s in m.samples}
        assert metrics[("orchestrator_search_query_milliseconds", "baseline")] == baseline
        assert ("orchestrator_search_query_milliseconds", "latest") in metrics
        assert search_lines({}) == [] and "not measured" in search_lines({"baseline": None, "latest": None})[0]


def test_the_shard_adapter_reads_every_serving_node_s_counters_in_one_light_request() -> None:
    from orchestrator.es.connect import ElasticsearchRest
    from orchestrator.shards.adapter import ShardClusterAdapter
    from orchestrator.shards.connection import Connection
    from orchestrator.testing.fake_es.model import FakeCluster as FakeEs
    from orchestrator.testing.fake_es.server import FakeEsServer

    cluster = FakeEs.generate(4, copies_per_node=2)
    cluster.stop("es-2")  # away: not among the nodes that serve
    with FakeEsServer(cluster) as server:
        adapter = ShardClusterAdapter(ElasticsearchRest(Connection((server.url,))))
        before = adapter.calls
        found = adapter.search_counters()
        assert adapter.calls - before == 1, "one request"
    assert found == {n: SearchCounters(0, 0, 0, 0) for n in ("es-1", "es-3", "es-4")}, found


def test_an_answer_whose_search_figures_are_not_counts_is_the_cluster_s_error_not_a_figure() -> None:
    """Read field by field (no model per node): a figure a node lacks is 0, and one that is not a whole number of
    at least 0 (text, a fraction, true, below 0), a node without a name or an answer of another shape is the
    cluster's error, which the watch says once and reads again (never a figure made of it)."""
    import pytest

    from orchestrator.errors import ClusterError
    from orchestrator.shards.answers import search_counters_of

    node = {"name": "a", "indices": {"search": {"query_total": 7, "query_time_in_millis": 30}},
            "thread_pool": {"search": {"queue": 2, "rejected": 1}}}
    assert search_counters_of({"nodes": {"id1": node}}, "read") == {"a": SearchCounters(7, 30, 2, 1)}
    assert search_counters_of({"nodes": {"id1": {"name": "b"}}}, "read") == {"b": SearchCounters(0, 0, 0, 0)}
    assert search_counters_of({}, "read") == {}
    # Each figure in turn, the others sound: one bad figure among good ones is enough to refuse the answer.
    def with_figure(part: str, key: str, value: object) -> dict[str, object]:
        changed = copy.deepcopy(node)
        changed[part]["search"][key] = value
        return {"nodes": {"x": changed}}

    bad = [with_figure(part, key, value) for part, key in (("indices", "query_total"),
                                                           ("indices", "query_time_in_millis"),
                                                           ("thread_pool", "queue"), ("thread_pool", "rejected"))
           for value in ("7", 7.5, True, -1, None)]
    bad += [{"nodes": {"x": {"indices": {}}}}, {"nodes": {"x": {**node, "name": 3}}}, {"nodes": [node]}, [], "x",
            {"nodes": {"x": {**node, "thread_pool": {"search": []}}}}]
    for answer in bad:
        with pytest.raises(ClusterError, match="read the figures: the cluster's answer is not"):
            search_counters_of(answer, "read the figures")


def test_a_latency_budget_halves_the_recovery_rate_when_searches_suffer_and_the_run_puts_it_back() -> None:
    """The controller's decisions over a series: over the budget for sustain_s, halved (never below the floor,
    said once there); within it as long, raised by an eighth of the ceiling; no query, no decision."""
    from orchestrator.restart.latency_control import LatencyBudget, Throttle, next_step

    mb = 1024**2

    def at(t: float, worst: float | None) -> SearchSample:
        return SearchSample(at=t, seconds=10, nodes=3, queries=100 if worst else 0, mean_ms=worst, worst_ms=worst,
                            worst_node="a" if worst else None, queue=0, rejected=0)

    throttle, rates, said = Throttle(400 * mb), [], []
    series = [12, 30, 30, 30, 30, None, 30, 30, 30, 30, 30, 8, 8, 8, 8, 8, 8]  # the slowest node's ms, each 10 s
    for i, worst in enumerate(series):
        step = next_step(throttle, at(10.0 * (i + 1), worst), limit_ms=20, floor=100 * mb, ceiling=400 * mb,
                         sustain_s=20)
        throttle = step.throttle
        rates.append(throttle.rate // mb)
        said += [step.said] if step.said else []
    # Over from t=10 (the second interval's start): 20 s over at t=30, halved; again 20 s later, to the floor; at
    # the floor, said once; no query at t=60 ends the stretch; within from t=110: raised at t=130, 150 and 170.
    assert rates == [400, 400, 200, 200, 100, 100, 100, 100, 100, 100, 100, 100, 150, 150, 200, 200, 250], rates
    assert sum("halved" in s for s in said) == 2 and sum("cannot be met" in s for s in said) == 1, said
    assert sum("raised" in s for s in said) == 3, said
    assert LatencyBudget.parse("2x").limit_ms(at(0, 15)) == 30 and LatencyBudget.parse("50ms").limit_ms(None) == 50
    assert LatencyBudget.parse("2x").limit_ms(None) is None and LatencyBudget.parse("") is None


def test_a_run_under_a_latency_budget_moves_the_recovery_rate_and_restores_it_exactly(tmp_path: object,
                                                                                     monkeypatch: object) -> None:
    """Through the real adapter against the fake Elasticsearch, whose searches slow with the recovery rate in
    force: the run halves the rate it raised while the slowest node is over budget, and the run's end puts back
    the cluster's own value (none)."""
    from pathlib import Path

    import pytest

    from orchestrator.restart.journal import RunOptions, RunState
    from orchestrator.restart.plan import Mode
    from orchestrator.runs import plans
    from orchestrator.runs import restart as runs
    from orchestrator.runs.target import open_target
    from orchestrator.shards.limits import RATE
    from orchestrator.testing.fake_es.hosts import AnsweringHosts, FakeHostTransport, fake_inventory
    from orchestrator.testing.fake_es.model import FakeCluster as FakeEs
    from orchestrator.testing.fake_es.server import FakeEsServer

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    tmp = Path(str(tmp_path))
    monkeypatch.setenv("ORCHESTRATOR_STATE", str(tmp / "state"))
    cluster = FakeEs.generate(4, copies_per_node=6)
    cluster.search_qps, cluster.search_base_ms, cluster.search_ms_per_mb = 500.0, 2.0, 0.2
    events: list[Event] = []
    with FakeEsServer(cluster) as server:
        # Intervals of 20 ms: a batch on the fake takes some 30-40 ms and an interval begun before the first stop
        # is the baseline's, so the run must span several after it (at 0.1 s, a quick machine ends the run first).
        config = fake_inventory(tmp / "c.yaml", server.url,
                                [(n, cluster.by_name[n].ip) for n in sorted(cluster.by_name)],
                                timeouts={"poll_interval_s": 0.2, "recovery_s": 60},
                                search={"interval_s": 0.02, "latency_budget": "10ms", "sustain_s": 0})
        target = open_target(None, config)
        transport = FakeHostTransport(server.url)
        plan = plans.make_plan(target, Mode.NODE, RunOptions(), host_transport=lambda: transport)
        ceiling = next(c.during for c in plan.settings if c.key == RATE)
        journal = runs.start(target, plan, RunOptions(), events.append, early=AnsweringHosts(transport))  # type: ignore[arg-type]
    assert journal.state is RunState.SUCCEEDED, journal.message
    first_stop = next(i for i, e in enumerate(events) if e.kind == "phase" and "stopping the service" in e.message)
    baseline = [e for e in events[:first_stop] if e.kind == "search" and e.message.startswith("baseline:")]
    assert len(baseline) >= BASELINE_INTERVALS, "the first stop waited for a baseline to hold the budget to"
    moved = [e for e in events if e.kind == "step" and "recovery rate halved" in e.message]
    assert moved, [e.message for e in events if e.kind in ("step", "warning", "search")][:20]
    written = [e.data["value"] for e in events if e.kind == "undo" and e.data.get("key") == RATE and "value" in e.data]
    assert written[0] == ceiling and any(w != ceiling for w in written[1:-1]), written
    assert RATE not in cluster.settings["persistent"] and RATE not in cluster.settings["transient"], \
        "the cluster's own value (none) put back"


def test_the_plan_says_the_budget_its_baseline_and_the_rates_the_run_moves_between(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from orchestrator import products
    from orchestrator.config.model import Inventory
    from orchestrator.restart.plan import Mode, Plan, SettingChange
    from orchestrator.runs.plans import with_search_notes
    from orchestrator.shards.limits import RATE

    es = products.get("elasticsearch")
    plan = Plan(cluster="c", product="elasticsearch", mode=Mode.NODE, batches=(), tuning=(), estimate_s=0,
                problems=(), settings=(SettingChange(RATE, "persistent", None, "200mb", "for the run"),))
    inv = Inventory.model_validate({"cluster": {"name": "c"}, "nodes": [{"name": "a", "host": "h"}],
                                    "search": {"latency_budget": "2x", "sustain_s": 30, "recovery_floor": "40mb"}})
    said = with_search_notes(plan, inv, es).notes[-1]
    assert said.startswith("search latency budget: 2x the baseline of the slowest node's query time"), said
    assert "read every 10 s; the first stop waits 30 s for the baseline" in said, said
    assert f"over it for 30 s, {RATE} (200mb for the run) is halved, never below 40mb" \
        in said and "raised again by eighths up to 200mb" in said, said
    fixed = inv.model_copy(update={"search": inv.search.model_copy(update={"latency_budget": "50ms"})})
    assert with_search_notes(plan, fixed, es).notes[-1].startswith("search latency budget: 50 ms of the slowest")
    probed = Inventory.model_validate({**inv.model_dump(), "search": {"latency_budget": "2x", "probe": {
        "index": "logs-*", "interval_s": 5}}})
    assert with_search_notes(plan, probed, es).notes[-1].startswith(
        "search latency budget: 2x the baseline of the probe's time (a search of logs-* the tool times end to end, "
        "every 5 s)"), "with a probe, the plan says the budget holds its time"
    unraised = with_search_notes(Plan(**{**plan.__dict__, "settings": ()}), inv, es).notes[-1]
    assert "has nothing to move: it is only watched" in unraised
    none = inv.model_copy(update={"search": inv.search.model_copy(update={"latency_budget": ""})})
    assert with_search_notes(plan, none, es) is plan, "no budget: nothing said"

    # The command line's budget is checked as the inventory's, before the cluster is asked.
    from tests.unit.test_cli_properties import run as orchestrate

    path = tmp_path / "c.yaml"
    path.write_text("cluster: {name: c, endpoints: ['http://127.0.0.1:9']}\nssh: {transport: local}\n"
                    "nodes: [{name: a, host: h}]\n")
    for command in ("plan", "restart", "resume"):
        proc = orchestrate(command, "--config", str(path), "--search-latency-budget", "fast",
                           *(["--yes"] * (command != "plan")))
        assert proc.returncode == 2 and "--search-latency-budget" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_breach_is_sustained_only_after_sustain_s_over_the_budget_and_ends_at_the_first_interval_within() -> None:
    from orchestrator.config.model import SearchSection
    from orchestrator.restart.latency_control import LatencyBudget
    from orchestrator.restart.search_watch import RecoveryThrottle
    from tests.unit.test_engine import context_of

    names = ["a", "b"]
    with state_dir():
        inv = inventory(names)
        throttle = RecoveryThrottle(context_of(inv, FakeCluster.of(names, settings=dict(ORIGINAL))), "fake.limit",
                                    LatencyBudget(ms=50), SearchSection(latency_budget="50ms", sustain_s=20))

        def interval(at: float, worst: float | None) -> None:
            throttle.track(SearchSample(at, 10, 2, 100, worst, worst, "a" if worst else None, 0, 0), 50.0)

        interval(110, 40)
        assert throttle.breach() is None
        interval(120, 80)  # over since the interval began, at 110
        assert throttle.breach() is None, "over for 10 s: not yet sustained"
        interval(130, 90)
        assert throttle.breach() == "searches over budget for 20 s (slowest query time 90.0 ms against 50.0 ms)"
        interval(140, 70)
        assert throttle.breach() == "searches over budget for 30 s (slowest query time 70.0 ms against 50.0 ms)"
        interval(150, None)  # no search in the interval: as it was
        assert throttle.breach() is not None
        interval(160, 49)
        assert throttle.breach() is None, "within the budget: the breach ends at once"


def test_a_resumed_run_s_controller_starts_from_the_rate_in_force_never_raising_it_under_a_breach() -> None:
    """After a kill and `resume`, the rate in force is the one the killed run moved (50mb), while the undo record
    holds the run's own (200mb): over budget, the resumed controller halves 50mb, not 200mb (which would have
    raised it to 100mb)."""
    from orchestrator.config.model import SearchSection
    from orchestrator.restart.journal import UndoState
    from orchestrator.restart.latency_control import LatencyBudget
    from orchestrator.restart.search_watch import RecoveryThrottle
    from tests.unit.test_engine import context_of

    key = ("cluster", "fake.limit")
    with state_dir():
        cluster = FakeCluster.of(["a"], settings=dict(ORIGINAL))
        ctx = context_of(inventory(["a"]), cluster)
        record = ctx.journal.record_undo("fake.limit", "cluster", "20mb", "200mb", None)
        ctx.journal.undo_states([record], UndoState.APPLIED)
        cluster.settings[key] = "50mb"  # as the killed run left it
        throttle = RecoveryThrottle(ctx, "fake.limit", LatencyBudget(ms=10),
                                    SearchSection(latency_budget="10ms", sustain_s=0, recovery_floor="5mb"))
        throttle.after(SearchSample(100.0, 10, 1, 100, 90.0, 90.0, "a", 0, 0), None)
        assert cluster.settings[key] == "25mb", cluster.settings[key]
        cluster.settings[key] = "not a rate"  # unreadable: from the run's own rate, as before
        fresh = RecoveryThrottle(ctx, "fake.limit", LatencyBudget(ms=10),
                                 SearchSection(latency_budget="10ms", sustain_s=0, recovery_floor="5mb"))
        fresh.after(SearchSample(100.0, 10, 1, 100, 90.0, 90.0, "a", 0, 0), None)
        assert cluster.settings[key] == "100mb", cluster.settings[key]


def test_a_probe_is_timed_end_to_end_by_the_watch_and_the_budget_then_holds_its_time_not_the_nodes() -> None:
    """The inventory's probe: the watch sends it and times it itself; the first probe warms up and is not counted;
    each interval keeps its median probe, the baseline the median before the first stop, and a budget holds the
    probe's time, not the nodes' counters."""
    from orchestrator.restart.latency_control import LatencyBudget, Throttle, next_step
    from orchestrator.restart.search_figures import held_ms

    names = ["a", "b", "c"]
    with state_dir():
        inv = type(inventory(names)).model_validate({**inventory(names).model_dump(),
                                                     "search": {"interval_s": 0.1, "probe": {"index": "logs-*"}}})
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), search_ms=1.0)
        cluster.probe_ms = 20.0
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        ctx = engine(inv, cluster, journal, events).ctx
        with SearchWatch(ctx, 0.1):
            first_stop_then_away(journal, cluster, events)  # one node away: the fake's probe takes twice as long
            until(lambda: any(s.probe_ms and s.probe_ms >= 40 for s in searches(events) if not s.baseline),
                  "a probe with a away")
        samples = searches(events)
        baseline = journal.search["baseline"]
        assert cluster.probes >= 3 and all(s.probe_ms is not None for s in samples[1:]), samples
        assert 20 <= baseline["probe_ms"] < 40, "the probe timed by the tool: at least the time the search took"
        assert "probe" in samples[-1].text()
        # The first probe of a watch warms up (a cold search is no baseline); the interval's median is kept.
        cold = SearchWatch(ctx, 0.1)
        cluster.probe_ms = 30.0
        cold.time_probe()
        assert cold.probe_times == [], "the first probe is sent, not counted"
        cluster.probe_ms = 5.0
        cold.time_probe()
        assert len(cold.probe_times) == 1 and 5 <= cold.probe_times[0] < 25
    budget = LatencyBudget.parse("1.5x")
    assert budget is not None
    base = SearchSample.from_json(baseline)
    assert budget.limit_ms(base, by_probe=True) == 1.5 * baseline["probe_ms"]
    slow_probe = SearchSample(at=100.0, seconds=10, nodes=3, queries=100, mean_ms=1.0, worst_ms=1.0, worst_node="b",
                              queue=0, rejected=0, probe_ms=3 * baseline["probe_ms"])
    assert held_ms(slow_probe, by_probe=True) == slow_probe.probe_ms and held_ms(slow_probe, by_probe=False) == 1.0
    limit = budget.limit_ms(base, by_probe=True)
    assert limit is not None
    halved = next_step(Throttle(400), slow_probe, limit, floor=100, ceiling=400, sustain_s=0, by_probe=True)
    kept = next_step(Throttle(400), slow_probe, limit, floor=100, ceiling=400, sustain_s=0, by_probe=False)
    assert halved.rate == 200 and "probe" in halved.said, "the probe over its budget: halved"
    assert kept.rate is None, "the nodes' own figures within it: without a probe, nothing moves"


def test_a_probe_that_fails_is_said_once_and_not_counted_as_a_time() -> None:
    names = ["a", "b"]
    with state_dir():
        inv = type(inventory(names)).model_validate({**inventory(names).model_dump(),
                                                     "search": {"interval_s": 0.05, "probe": {"index": "gone"}}})
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL), search_ms=1.0)
        cluster.probe_ms = 1.0

        def refused(index: str, query: object) -> bool:
            raise ClusterUnreachable(f"no such index [{index}]")

        cluster.search_once = refused  # type: ignore[method-assign]
        journal = new_journal(inv, cluster)
        events: list[Event] = []
        ctx = engine(inv, cluster, journal, events).ctx
        with SearchWatch(ctx, 0.05):
            until(lambda: len(searches(events)) >= 3, "three samples")
        warnings = [e.message for e in events if e.kind == "warning"]
        assert len(warnings) == 1 and "probe on gone failed" in warnings[0], warnings
        assert all(s.probe_ms is None for s in searches(events)), "a failed probe is no time"
    import pytest

    for search in ({"interval_s": 0, "probe": {"index": "logs"}}, {"probe": {"index": "a b"}}, {"probe": {}}):
        with pytest.raises(ValueError, match="probe"):  # refused as the inventory is read, before any run
            type(inv).model_validate({**inv.model_dump(), "search": search})


def test_an_engine_closes_its_window_on_its_budget_s_breach_and_holds_the_rate_only_with_a_budget_and_a_rate() -> None:
    """What a window asks its engine (`search_breach`): the sustained breach of the budget its watch holds the rate
    by; none before the watch, without a budget, or where the product has no recovery rate to move (then there is
    no hand on the rate either)."""
    from orchestrator.config.model import Inventory
    from orchestrator.restart.engine import Engine

    names = ["a", "b"]
    plain = inventory(names)
    budgeted = Inventory.model_validate({**plain.model_dump(), "search": {"latency_budget": "50ms", "sustain_s": 20}})
    with state_dir():
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL))

        def watched(inv: Inventory, rate_key: str | None) -> Engine:
            eng = engine(inv, cluster, new_journal(inv, cluster), [])
            eng.product = copy.copy(eng.product)  # the fake product is shared by the suite's engines
            eng.product.recovery_rate_key = rate_key  # type: ignore[misc]
            assert eng.search_breach() is None, "before its watch: no breach"
            eng.watch()
            return eng

        for inv, key in ((plain, "fake.limit"), (budgeted, None), (plain, None)):
            eng = watched(inv, key)
            assert eng.throttle is None and eng.search_breach() is None, (inv is budgeted, key)
        eng = watched(budgeted, "fake.limit")
        assert eng.throttle is not None
        for at, worst in ((110, 80), (120, 90), (130, 90)):  # over from 100 (the first interval's start)
            eng.throttle.track(SearchSample(at, 10, 2, 100, worst, worst, "a", 0, 0), 50.0)
        assert eng.search_breach() == "searches over budget for 30 s (slowest query time 90.0 ms against 50.0 ms)"
