"""`python -m orchestrator.testing.fake_es --nodes N`: a fake Elasticsearch in a process of its own."""

from __future__ import annotations

import argparse
import json
import os
import sys

from orchestrator.testing.fake_es.model import FakeCluster
from orchestrator.testing.fake_es.server import FakeEsServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.testing.fake_es", description=__doc__)
    parser.add_argument("--nodes", type=int, default=30, help="nodes in the cluster (from 10: 3 dedicated masters)")
    parser.add_argument("--copies-per-node", type=int, default=200, help="shard copies per data node")
    parser.add_argument("--zones", type=int, default=1, help="awareness zones (node attribute zone)")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--scattered", action="store_true",
                        help="each shard's copies on data nodes drawn at random (default: the data nodes in turn)")
    parser.add_argument("--seed", type=int, default=7, help="what the indices' widths and sizes are drawn from")
    parser.add_argument("--search-qps", type=float, default=0.0,
                        help="searches a second each node serves, counted in its stats (default: none)")
    parser.add_argument("--restart-s", type=float, nargs=2, default=None, metavar=("LEAST", "MOST"),
                        help="real seconds a started node takes to be back, drawn per start (default: at once)")
    args = parser.parse_args()
    cluster = FakeCluster.generate(args.nodes, args.copies_per_node, args.zones, seed=args.seed,
                                   scattered=args.scattered)
    cluster.search_qps = args.search_qps
    server = FakeEsServer(cluster, args.port)
    server.restart_s = tuple(args.restart_s) if args.restart_s else None
    print(json.dumps({"url": server.url, "pid": os.getpid(), "nodes": len(cluster.nodes),
                      "indices": len(cluster.indices), "copies": cluster.total_copies}), flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
