"""A cluster's REST API (shards/rest.py `Rest`) for unit tests of the shared adapter."""

from __future__ import annotations

from typing import Any


class RecordingRest:
    """Records every path asked; `answer` says what the cluster answers (or raises its error)."""

    label = "Elasticsearch"
    endpoints = ("https://x:9200",)

    def __init__(self) -> None:
        self.asked = list[str]()

    def request(self, what: str, method: str, path: str, params: Any = None, body: Any = None) -> Any:
        self.asked.append(path)
        return self.answer(what, method, path, params, body)

    def answer(self, what: str, method: str, path: str, params: Any, body: Any) -> Any:
        raise NotImplementedError
