"""The trigger a deferred rolling restart waits in: it watches the run's wait from the triggerer.

Each poll is one look of `runs.watch.Watcher` (in a thread: the look reads the journal and asks the
cluster over the product's own client), which also keeps the run's lock alive. It fires when the wait
is over, when its time is up (the task then fails the run as a held wait would), or when the run is
no longer deferred (resumed by hand, say).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from orchestrator.errors import OrchestratorError


class RunWaitTrigger(BaseTrigger):
    def __init__(self, *, cluster: str | None, inventory: str | None, conn_id: str | None, run_id: str,
                 poll_interval_s: float | None = None, stop_at: int = 0) -> None:
        super().__init__()
        self.cluster, self.inventory, self.conn_id = cluster, inventory, conn_id
        self.run_id, self.poll_interval_s = run_id, poll_interval_s
        self.stop_at = stop_at  # handed back with the event: where the task's `stop_after` stops the run

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"cluster": self.cluster, "inventory": self.inventory, "conn_id": self.conn_id,
                 "run_id": self.run_id, "poll_interval_s": self.poll_interval_s, "stop_at": self.stop_at})

    def watcher(self) -> Any:
        from orchestrator import api
        from orchestrator.airflow_provider.hooks import read_connection

        keys, named = read_connection(self.conn_id)
        return api.watcher(self.cluster, config=self.inventory or named, cluster_keys=keys or None,
                           run_id=self.run_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        said = ""
        try:
            watcher = await asyncio.to_thread(self.watcher)
            interval_s = self.poll_interval_s or watcher.interval_s
            while True:
                look = await asyncio.to_thread(watcher.look)
                if look.hand_back:
                    yield TriggerEvent({"run_id": self.run_id, "verdict": look.verdict, "text": look.text,
                                        "stop_at": self.stop_at})
                    return
                if look.text != said:  # the triggerer's log says what the run waits for, once per change
                    said = look.text
                    self.log.info("run %s waits: %s", self.run_id, said)
                await asyncio.sleep(interval_s)
        except OrchestratorError as exc:  # the task resumes the run, which says what is wrong in its own words
            yield TriggerEvent({"run_id": self.run_id, "verdict": "error", "text": str(exc), "stop_at": self.stop_at})
