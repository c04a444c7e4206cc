"""The shard model Elasticsearch and OpenSearch share: snapshot, pure plan and gate, steps, and an
adapter over their common REST API (each product brings its own client, see shards/rest.py)."""
