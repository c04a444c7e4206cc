"""orchestrator: safe rolling restarts and host tuning for Elasticsearch, OpenSearch and Riak clusters."""

__version__ = "0.1.0"
