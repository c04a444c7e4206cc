"""The OpenSearch adapter: the shared one, plus weighted shard routing (search traffic per awareness zone).

Routing weights are written through `put_settings` in their own scope, so the journal's undo records
restore them exactly like any temporary setting (the value before the run, or none at all).
"""

from __future__ import annotations

from typing import Any

from orchestrator.shards.adapter import ShardClusterAdapter
from orchestrator.shards.answers import shaped
from orchestrator.shards.rest import HttpError, part

WEIGHTS_SCOPE = "routing-weights"


def weights_key(attribute: str) -> str:
    """The undo record's key for the weights of ``attribute``: the API path an operator would call."""
    return f"_cluster/routing/awareness/{attribute}/weights"


def attribute_of(key: str) -> str:
    return key.split("/")[3]


class OpenSearchAdapter(ShardClusterAdapter):
    def routing_weights(self, attribute: str) -> tuple[dict[str, str] | None, int]:
        """(weights per zone value, or None when none are set; the version a change must name)."""
        try:
            raw = self._do("read routing weights", "GET", f"/_cluster/routing/awareness/{part(attribute)}/weights")
        except HttpError as exc:
            if exc.status == 404:
                return None, -1
            raise
        with shaped("read routing weights"):
            weights = raw.get("weights") or None
            return ({str(k): str(v) for k, v in weights.items()} if weights else None), int(raw.get("_version", -1))

    def put_settings(self, scope: str, values: dict[str, Any]) -> None:
        if scope != WEIGHTS_SCOPE:
            super().put_settings(scope, values)
            return
        for key, value in values.items():
            self._put_weights(key, value)

    def _put_weights(self, key: str, value: Any) -> None:
        attribute = attribute_of(key)
        _now, version = self.routing_weights(attribute)
        if value is None:
            if version >= 0:
                self._do("remove routing weights", "DELETE", "/_cluster/routing/awareness/weights",
                         body={"_version": version})
            return
        self._do(f"set routing weights of {attribute}", "PUT", f"/_cluster/routing/awareness/{part(attribute)}/weights",
                 body={"weights": value, "_version": version})

    def live_settings(self, wanted: list[tuple[str, str]]) -> list[Any]:
        others = [(s, k) for s, k in wanted if s != WEIGHTS_SCOPE]
        found = iter(super().live_settings(others) if others else [])
        return [self.routing_weights(attribute_of(k))[0] if s == WEIGHTS_SCOPE else next(found) for s, k in wanted]
