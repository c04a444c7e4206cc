"""The built-in sandbox: real Elasticsearch nodes from Maven Central jars, in test hosts."""
