"""OpenSearch as a product plug-in: the shared shard model (shards/) over opensearch-py, and weighted
shard routing to move search traffic away from a zone while it restarts."""
