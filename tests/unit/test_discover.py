"""Discovery is pure over the cluster's answers and the operator's SSH view."""

from __future__ import annotations

from typing import Any

from orchestrator.config.model import Inventory
from orchestrator.shards.discover import Facts, SshView, ansible_view, inventory_document, ssh_config_view


def answers(attribute: str = "rack_id") -> dict[str, Any]:
    def node(i: int, roles: list[str], data: Any) -> dict[str, Any]:
        return {"name": f"es-{i}", "ip": f"10.0.0.{i}", "host": f"10.0.0.{i}", "roles": roles,
                "attributes": {attribute: f"r{i % 2}", "ml.machine_memory": "1"},
                "settings": {"path": {"data": data, "home": "/usr/share/elasticsearch"}},
                "http": {"publish_address": f"10.0.0.{i}:9200"}}

    return {"nodes": {"a": node(1, ["master", "data"], "/var/lib/es"),
                      "b": node(2, ["data_hot", "data_content"], ["/data/1", "/data/2"]),
                      "c": node(3, ["master"], "/var/lib/es")}}


SSH_CONFIG = """
Host bastion
  HostName 192.0.2.1
Host es-*
  User deploy
  IdentityFile /home/op/.ssh/es
  UserKnownHostsFile /home/op/.ssh/known_hosts_es
Host es-2
  HostName es-2.internal
  Port 2222
"""


def test_an_inventory_from_the_answers_uses_the_awareness_attribute_in_use_and_the_ssh_config() -> None:
    facts = Facts.from_answers("prod", answers(), {"cluster.routing.allocation.awareness.attributes": "rack_id"})
    view = ssh_config_view(SSH_CONFIG, facts.nodes, "ssh_config")
    doc, notes = inventory_document(facts, "https://es-1:9200", {"username": "orchestrator",
                                                                 "password": {"env": "ES_PASSWORD"}}, view,
                                    all_endpoints=True)
    inv = Inventory.model_validate(doc)
    assert inv.cluster.name == "prod" and inv.cluster.awareness_attribute == "rack_id"
    assert inv.cluster.endpoints == ["https://10.0.0.1:9200", "https://10.0.0.2:9200", "https://10.0.0.3:9200"]
    assert inv.cluster.password is not None and inv.cluster.password.env == "ES_PASSWORD"
    assert [(n.name, n.host, n.zone, n.data_paths, n.ssh_port) for n in inv.nodes] == [
        ("es-1", "es-1", "r1", ["/var/lib/es"], None), ("es-2", "es-2.internal", "r0", ["/data/1", "/data/2"], 2222),
        ("es-3", "es-3", "r1", ["/var/lib/es"], None)]
    assert inv.ssh.user == "deploy" and str(inv.ssh.key_file) == "/home/op/.ssh/es"
    assert str(inv.ssh.known_hosts) == "/home/op/.ssh/known_hosts_es"
    assert notes == []


def test_without_awareness_no_zone_and_ansible_hosts_map_by_name_or_address() -> None:
    facts = Facts.from_answers("c", answers(), {})
    listing = {"_meta": {"hostvars": {"es-1": {"ansible_host": "192.0.2.11", "ansible_user": "admin"},
                                      "db7": {"ansible_host": "10.0.0.2", "ansible_port": 2200}}}}
    doc, notes = inventory_document(facts, "http://x:9200", {}, ansible_view(listing, facts.nodes, "ansible.json"),
                                    all_endpoints=True)
    inv = Inventory.model_validate(doc)
    assert [(n.name, n.host, n.zone, n.ssh_user, n.ssh_port) for n in inv.nodes] == [
        ("es-1", "192.0.2.11", None, "admin", None), ("es-2", "10.0.0.2", None, None, 2200),
        ("es-3", "10.0.0.3", None, None, None)]
    assert notes == ["ansible.json does not name es-3: their host is the address the cluster publishes"]


def test_several_awareness_attributes_use_the_first_and_say_so() -> None:
    facts = Facts.from_answers("c", answers(), {"cluster.routing.allocation.awareness.attributes": "rack_id,zone"})
    doc, notes = inventory_document(facts, "http://x:9200", {}, SshView())
    assert doc["cluster"]["awareness_attribute"] == "rack_id"
    assert "awareness uses rack_id, zone" in notes[0]


def test_the_adapter_reads_zones_from_the_configured_attribute_and_roles_by_their_shared_names() -> None:
    from types import SimpleNamespace

    from orchestrator.shards.adapter import ShardClusterAdapter

    rest = SimpleNamespace(label="Elasticsearch", endpoints=("http://x:9200",),
                           request=lambda what, method, path, *_: answers())
    for attribute, zones in (("rack_id", ["r1", "r0", "r1"]), ("zone", [None, None, None])):
        adapter = ShardClusterAdapter(rest, awareness_attribute=attribute)  # type: ignore[arg-type]
        assert [n.zone for n in adapter.nodes()] == zones
    # OpenSearch names the master role cluster_manager: the shared decisions read it as master.
    renamed = answers()
    for n in renamed["nodes"].values():
        n["roles"] = ["cluster_manager" if r == "master" else r for r in n.get("roles", [])]
    rest.request = lambda *_: renamed
    assert [n.is_master_eligible for n in ShardClusterAdapter(rest).nodes()] == [True, False, True]


def test_only_the_given_endpoint_is_written_unless_all_are_asked_for_and_never_a_link_local_one() -> None:
    raw = answers()
    first = next(iter(raw["nodes"]))
    raw["nodes"][first]["http"]["publish_address"] = "169.254.169.254:9200"  # a cloud's metadata address
    facts = Facts.from_answers("prod", raw, {})
    doc, notes = inventory_document(facts, "https://10.0.0.2:9200", {}, SshView())
    assert doc["cluster"]["endpoints"] == ["https://10.0.0.2:9200"]
    assert any("not written as endpoints" in n and "169.254.169.254" in n for n in notes), notes
    doc, notes = inventory_document(facts, "https://10.0.0.2:9200", {}, SshView(), all_endpoints=True)
    assert doc["cluster"]["endpoints"] == ["https://10.0.0.2:9200", "https://10.0.0.3:9200"]
    assert notes == ["https://169.254.169.254:9200 left out of the endpoints (link-local, unspecified or multicast)"]
