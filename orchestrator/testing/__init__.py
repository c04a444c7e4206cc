"""Fakes beside the real things, for tests of what is built on the engine (as an HTTP library ships a
mock transport beside the real one): a fake cluster and its hosts, and a fake product plug-in.

They run the real engine, journal, steps and undo records in memory, in milliseconds, and can be
told to fail: a node that never rejoins, a command that fails, a crash after any operation.
"""


def enable() -> None:
    """Let inventories select the fakes (`product: fake`, `product: fake-elasticsearch`) in this process: a
    test's own call, never a configuration's (orchestrator.products.FOR_TESTS)."""
    from orchestrator import products

    products.enable_test_products()
