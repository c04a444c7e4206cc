"""Prometheus metrics of a run, with the official client library: a textfile for node_exporter's
textfile collector and/or a push to a Pushgateway (inventory `metrics:`, docs/metrics.md).

The figures are read from the journal (the one record of the run), at each batch's end and at the
run's end, so what Prometheus shows is what `status` and the report show. Writing them never fails
a run: a problem is one warning event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from orchestrator.config.model import MetricsSection
from orchestrator.paths import write_file_for_the_operator
from orchestrator.restart.events import Event, EventSink
from orchestrator.restart.journal import Journal, RunState, last_success

STATES = tuple(s.value for s in RunState)


def registry_of(journal: Journal, last_success_at: float | None = None) -> Any:
    """A registry holding the run's figures (pure: the journal in, metrics out). Series are labelled by
    cluster (and node), never by run: a label of the run id would make new series at every run; the run
    id is the value of `orchestrator_run_info`. ``last_success_at``: when the cluster's newest succeeded
    run ended (this one included)."""
    from prometheus_client import CollectorRegistry, Gauge

    registry = CollectorRegistry()
    cluster = {"cluster": journal.cluster}

    def gauge(name: str, what: str, labels: tuple[str, ...] = ()) -> Any:
        return Gauge(name, what, ["cluster", *labels], registry=registry)

    gauge("orchestrator_run_info", "the cluster's latest run: 1, with its id, mode and product as labels",
          ("run_id", "mode", "product")).labels(**cluster, run_id=journal.run_id, mode=journal.mode,
                                                 product=journal.product).set(1)
    state = gauge("orchestrator_run_state", "1 for the latest run's current state", ("state",))
    for s in STATES:
        state.labels(**cluster, state=s).set(1 if journal.state.value == s else 0)
    gauge("orchestrator_run_started_timestamp_seconds", "when the latest run started").labels(**cluster).set(
        journal.created)
    end = journal.finished if journal.state is not RunState.RUNNING and journal.finished else None
    if end is not None:
        gauge("orchestrator_run_finished_timestamp_seconds", "when the latest run ended (absent while it "
              "runs)").labels(**cluster).set(end)
    gauge("orchestrator_run_duration_seconds", "how long the latest run took, or has taken so far").labels(
        **cluster).set(round((end or time.time()) - journal.created, 3))
    if last_success_at is not None:
        gauge("orchestrator_last_success_timestamp_seconds", "when the cluster's newest succeeded run ended: "
              "alert when it is too old").labels(**cluster).set(last_success_at)
    batches = gauge("orchestrator_batches", "batches of the latest run, by state", ("state",))
    for s in ("pending", "running", "done"):
        batches.labels(**cluster, state=s).set(sum(1 for b in journal.batches if b.state == s))
    phase = gauge("orchestrator_node_phase_seconds", "time a node spent in each phase of its restart",
                  ("node", "phase"))
    recovered = gauge("orchestrator_node_recovery_bytes", "bytes a node's shards recovered, copied from peers or "
                      "reused from its own disk", ("node", "source"))
    restarted = gauge("orchestrator_node_restarted", "1 once the node runs as a new process", ("node",))
    for name, record in journal.nodes.items():
        restarted.labels(**cluster, node=name).set(1 if record.restarted else 0)
        for key, seconds in record.phases.items():
            phase.labels(**cluster, node=name, phase=key).set(seconds)
        for source, key in (("peers", "bytes_from_peers"), ("reused", "bytes_reused")):
            if key in record.recovery:
                recovered.labels(**cluster, node=name, source=source).set(record.recovery[key])
    gauge("orchestrator_cluster_calls", "requests the latest run made to the cluster").labels(**cluster).set(
        journal.cluster_calls)
    searches = gauge("orchestrator_search_query_milliseconds", "mean time of a search query on the nodes: before "
                     "the run's first stop (baseline), over the last interval (latest), and on the slowest node "
                     "then (slowest_node); the median search probe timed by the tool, before the first stop "
                     "(probe_baseline) and over the last interval (probe)", ("which",))
    for which, field, sample in (("baseline", "mean_ms", journal.search.get("baseline")),
                                 ("latest", "mean_ms", journal.search.get("latest")),
                                 ("slowest_node", "worst_ms", journal.search.get("latest")),
                                 ("probe_baseline", "probe_ms", journal.search.get("baseline")),
                                 ("probe", "probe_ms", journal.search.get("latest"))):
        if sample and sample.get(field) is not None:
            searches.labels(**cluster, which=which).set(sample[field])
    return registry


def publish(journal: Journal, cfg: MetricsSection) -> None:
    from prometheus_client import generate_latest, push_to_gateway

    succeeded = journal.finished if journal.state is RunState.SUCCEEDED else last_success(journal.cluster)
    registry = registry_of(journal, succeeded)
    if cfg.textfile is not None:
        # Written to a new file of an unpredictable name beside it (O_EXCL: never through a planted link),
        # then renamed: never read half-written. The client's own writer uses a predictable name.
        write_file_for_the_operator(cfg.textfile, generate_latest(registry).decode(), mode=0o644)
    if cfg.pushgateway is not None:
        push_to_gateway(cfg.pushgateway, job=cfg.job, registry=registry, timeout=10,
                        grouping_key={"cluster": journal.cluster}, handler=closing_handler)


def closing_handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                    data: bytes) -> Callable[[], None]:
    """The client's default push, but an error answer's connection is closed at once (the default
    leaves it to the garbage collector)."""
    import urllib.error
    import urllib.request

    def push() -> None:
        request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
        try:
            with urllib.request.urlopen(request, timeout=timeout):
                pass
        except urllib.error.HTTPError as exc:
            exc.close()
            raise OSError(f"the Pushgateway answered {exc.code} {exc.reason}") from None

    return push


def metrics_sink(journal: Journal, cfg: MetricsSection, emit: EventSink) -> EventSink:
    """``emit``, plus the metrics published after each batch and at the run's end."""
    if cfg.textfile is None and cfg.pushgateway is None:
        return emit
    warned = False

    def sink(event: Event) -> None:
        nonlocal warned
        emit(event)
        if not ((event.kind == "batch" and event.data.get("state") == "done") or event.ends_run):
            return
        try:
            publish(journal, cfg)
        except Exception as exc:  # metrics are a view: they must never stop a run
            if not warned:
                warned = True
                emit(Event("warning", f"metrics not published: {type(exc).__name__}: {exc}"))

    return sink

