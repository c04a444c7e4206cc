"""A load generator for the sandbox: acknowledged writes, searches through every node, health samples.

Bounded in time and in count. Two ways to reach the nodes (``through``):
- "each" (the default): the nodes in turn, each through its own client without retries, so a restarting
  node shows as errors instead of being hidden by retries;
- "pool": one client over every node, as an application's is: a node that does not answer is left out for a
  while and the request is sent again to another (elasticsearch-py's node pool), so what the load measures
  is what a searcher sees of the nodes that serve.
Statistics are kept per window (e.g. "before" and "during" a restart) so an operator sees what the restart
cost.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from orchestrator.sandbox.data import create_index
from orchestrator.sandbox.rest import INSECURE, SandboxAccess, rest_for

MAX_DURATION_S = 3600
MAX_DOCS = 1_000_000
THROUGH = ("each", "pool")


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(int(p / 100 * len(ordered)), len(ordered) - 1)] * 1000, 1)


@dataclass
class WindowStats:
    index_ok: int = 0
    index_errors: int = 0
    search_ok: int = 0
    search_errors: int = 0
    index_latency: list[float] = field(default_factory=list)
    search_latency: list[float] = field(default_factory=list)
    search_at: list[float] = field(default_factory=list)  # when each search in search_latency ended (epoch s)

    def summary(self) -> dict[str, Any]:
        return {"index_ok": self.index_ok, "index_errors": self.index_errors, "search_ok": self.search_ok,
                "search_errors": self.search_errors,
                **{f"index_p{p}_ms": percentile(self.index_latency, p) for p in (50, 95, 99)},
                **{f"search_p{p}_ms": percentile(self.search_latency, p) for p in (50, 95, 99)}}


class LoadGenerator:
    def __init__(self, endpoints: list[str], index: str = "load-test", duration_s: float = 60,
                 max_docs: int = 100_000, pause_s: float = 0.005, product: str = "elasticsearch",
                 access: SandboxAccess = INSECURE, through: str = "each") -> None:
        if through not in THROUGH:
            raise ValueError(f"through: one of {', '.join(THROUGH)}, not {through!r}")
        # "each": one client per node, without retries (a restarting node shows as errors); "pool": one over all.
        self.clients = [rest_for(product, [url], access=access) for url in endpoints] if through == "each" \
            else [rest_for(product, endpoints, access=access)]
        self.index = index
        self.duration_s = min(duration_s, MAX_DURATION_S)
        self.max_docs = min(max_docs, MAX_DOCS)
        self.pause_s = pause_s
        self.acked: set[str] = set()
        self.windows: dict[str, WindowStats] = {"before": WindowStats()}
        self.window = "before"
        self.health_samples: list[tuple[float, str]] = []
        self.node_counts: list[int] = []  # the nodes in the cluster at each health sample
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def mark(self, window: str) -> None:
        with self.lock:
            self.windows.setdefault(window, WindowStats())
            self.window = window

    def _stats(self) -> WindowStats:
        return self.windows[self.window]

    def start(self) -> None:
        first = self.clients[0]
        create_index(first, self.index)
        first.request("wait for green", "GET", f"/_cluster/health/{self.index}",
                      {"wait_for_status": "green", "timeout": "60s"})
        self.deadline = time.monotonic() + self.duration_s
        for target in (self._write, self._search, self._sample_health):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)

    def start_then_mark(self, window: str, warm_up_s: float = 5) -> None:
        """Start, let the traffic settle, then count what follows under ``window`` (e.g. "during")."""
        self.start()
        time.sleep(warm_up_s)
        self.mark(window)

    def _running(self) -> bool:
        return not self.stop_event.is_set() and time.monotonic() < self.deadline

    def _write(self) -> None:
        nodes = itertools.cycle(self.clients)
        for n in range(self.max_docs):
            if not self._running():
                return
            doc_id = f"doc-{n}"
            started = time.monotonic()
            try:
                next(nodes).request("index", "PUT", f"/{self.index}/_doc/{doc_id}", body={"n": n, "at": time.time()})
            except Exception:
                with self.lock:
                    self._stats().index_errors += 1
            else:
                with self.lock:
                    self.acked.add(doc_id)
                    self._stats().index_ok += 1
                    self._stats().index_latency.append(time.monotonic() - started)
            time.sleep(self.pause_s)

    def _search(self) -> None:
        nodes = itertools.cycle(self.clients)
        while self._running():
            started = time.monotonic()
            try:
                next(nodes).request("search", "POST", f"/{self.index}/_search",
                                    body={"query": {"range": {"n": {"gte": 0}}}, "size": 10})
            except Exception:
                with self.lock:
                    self._stats().search_errors += 1
            else:
                with self.lock:
                    self._stats().search_ok += 1
                    self._stats().search_latency.append(time.monotonic() - started)
                    self._stats().search_at.append(time.time())
            time.sleep(self.pause_s * 4)

    def _sample_health(self) -> None:
        while self._running():
            status, nodes = "unreachable", None
            for client in self.clients:
                try:
                    health = client.request("health", "GET", "/_cluster/health", {"timeout": "1s"})
                    status, nodes = str(health["status"]), int(health["number_of_nodes"])
                    break
                except Exception:
                    continue
            with self.lock:
                self.health_samples.append((time.time(), status))
                if nodes is not None:
                    self.node_counts.append(nodes)
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop the traffic; the clients stay open for `missing_acknowledged`, until `close`."""
        self.stop_event.set()
        for t in self.threads:
            t.join(30)

    def close(self) -> None:
        """Stop, and close every client's connections: left to the garbage collector, an open socket is a
        ResourceWarning at some later moment, in whatever runs then."""
        self.stop()
        for client in self.clients:
            client.close()

    def missing_acknowledged(self) -> list[str]:
        """Acknowledged documents that cannot be found: must be empty."""
        client = self.clients[0]
        client.request("refresh", "POST", f"/{self.index}/_refresh")
        missing: list[str] = []
        ids = sorted(self.acked)
        for i in range(0, len(ids), 1000):
            chunk = ids[i:i + 1000]
            found = client.request("read back", "POST", f"/{self.index}/_mget", body={"ids": chunk})["docs"]
            missing += [d["_id"] for d in found if not d.get("found")]
        return missing

    def report(self) -> dict[str, Any]:
        statuses = [s for _, s in self.health_samples]
        return {"acknowledged": len(self.acked), "windows": {k: v.summary() for k, v in self.windows.items()},
                "health_samples": len(statuses), "red_samples": statuses.count("red"),
                "unreachable_samples": statuses.count("unreachable"),
                "fewest_nodes": min(self.node_counts, default=None)}
