"""A fake Elasticsearch: an HTTP server on 127.0.0.1 that answers the REST calls the tool makes, from a
generated cluster of any size, whose state moves as its nodes are stopped and started (through a fake
host transport, `hosts.py`) and as allocation lets copies come back.

For benchmarks and unit tests at scales this machine cannot hold as real nodes (3,000 nodes, 600,000
shard copies), and for users' tests of a pipeline (bulk load, force-merge, restart) as `product:
fake-elasticsearch`: never for an integration test, which runs against real nodes (the sandbox).

- `model.py`: the cluster (nodes, indices, copies) and how it moves (stop, start, allocation rounds);
- `routes.py` and `cluster_api.py`, `nodes_api.py`, `index_api.py`: the REST answers, as Elasticsearch 9
  shapes them, `filter_path` included (`filter_path.py`);
- `server.py`: the HTTP server, counting requests and bytes per endpoint; `python -m
  orchestrator.testing.fake_es --nodes 300` runs one in a process of its own;
- `hosts.py`: a host transport whose `systemctl stop/start/is-active` stop and start the fake's nodes;
- `merge_api.py`: bulk loads, segments, force-merge tasks; `product.py`: the `fake-elasticsearch` plug-in.
"""
