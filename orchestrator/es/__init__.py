"""Elasticsearch: the adapter (I/O) and the snapshot of cluster state decisions are made from."""
