"""Riak's own section of the inventory (`riak:`): how to reach a node's tools, each node's Riak name, and
the handoff settings of a run. The shared inventory knows none of it (config/model.py: ProductSettings)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from orchestrator.config.model import Inventory, NodeEntry, ProductSettings, settings_of

RiakName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+@[A-Za-z0-9_.:-]+$")]


class RiakSettings(ProductSettings):
    riak_command: str = Field("riak", min_length=1, max_length=300)
    admin_command: str = Field("riak-admin", min_length=1, max_length=300)
    pid_command: str = Field("riak getpid", min_length=1, max_length=300)  # Riak 3.x: `riak pid`
    service: str = Field("riak_kv", pattern=r"^[a-z_]+$")
    transfer_limit: int | None = Field(8, ge=1, le=64)  # raised for the run, restored after; null: left alone
    handoff_stall_s: float = Field(60, ge=1, le=3600)  # a transfer without progress this long is stalled
    # Inventory node name -> its Riak node name (`nodename` in riak.conf), where it is not riak@HOST.
    node_names: dict[str, RiakName] = Field(default_factory=dict, max_length=100_000)

    def riak_name(self, node: NodeEntry) -> str:
        """The node's Riak name: given in `node_names`, or riak@HOST."""
        return self.node_names.get(node.name) or f"riak@{node.host}"


def riak_settings(inv: Inventory) -> RiakSettings:
    return settings_of(inv, RiakSettings)
