"""A fourth product, outside the orchestrator's package: what docs/architecture.md says a new product is.

Its cluster is a directory (`toy: {state_dir: ...}` in the inventory, its own section): each node is a
process whose id is in `NODE.pid`; the cluster's settings and its run lock are files there. The
orchestrator finds it through the entry point this directory's `toy_product-0.1.dist-info` declares.
"""
