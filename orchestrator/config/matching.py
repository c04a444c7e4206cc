"""One way to say which cluster node an inventory entry is, for the plan and for `pending` alike: by the
node's own name, else the one node at the entry's host (an address or a host name the node gives). Two
readers that matched differently once called a node given by host name planned in one command and "not
listed" in the other."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def matched(name: str, host: str, nodes: Sequence[tuple[str, Iterable[str]]]) -> tuple[int | None, int]:
    """(the position in ``nodes``, each a node's name and addresses, of the node an entry named ``name`` on
    ``host`` is, or None; how many nodes its host matched): by name, else the node at ``host`` when exactly
    one is there (several: None, and their count)."""
    by_name = next((i for i, (node_name, _) in enumerate(nodes) if node_name == name), None)
    if by_name is not None:
        return by_name, 1
    at_host = [i for i, (_, addresses) in enumerate(nodes) if host in addresses]
    return (at_host[0] if len(at_host) == 1 else None), len(at_host)
