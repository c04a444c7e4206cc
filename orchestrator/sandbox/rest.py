"""The sandbox's own requests to its cluster, through the product's client (Elasticsearch or OpenSearch)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.shards.connection import Connection
from orchestrator.shards.rest import Rest


def rest_for(product: str, endpoints: Sequence[str], timeout_s: float = 10) -> Rest:
    conn = Connection(endpoints=tuple(endpoints), request_timeout_s=timeout_s)
    if product == "opensearch":
        from orchestrator.opensearch.connect import OpenSearchRest

        return OpenSearchRest(conn)
    from orchestrator.es.connect import ElasticsearchRest

    return ElasticsearchRest(conn)
