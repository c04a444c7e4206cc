"""Discovery is pure over the cluster's answers and the operator's SSH view."""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config.discovered import SshView, ansible_view, inventory_document
from orchestrator.config.model import Inventory
from orchestrator.errors import ClusterError, ClusterUnreachable, ConfigError
from orchestrator.hosts.ssh_config import SshConfig
from orchestrator.runs.discover import discover, ssh_config_view
from orchestrator.shards.discover import facts_from_answers


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


def test_an_inventory_from_the_answers_uses_the_awareness_attribute_in_use_and_the_ssh_config(
        tmp_path: Path) -> None:
    facts = facts_from_answers("prod", answers(), {"cluster.routing.allocation.awareness.attributes": "rack_id"})
    config = tmp_path / "ssh_config"
    config.write_text(SSH_CONFIG)
    view = ssh_config_view(SshConfig(config, True), facts.nodes)  # read by `ssh -G`, as ssh reads it
    doc, notes = inventory_document(facts, "https://es-1:9200", {"username": "orchestrator",
                                                                 "password": {"env": "ES_PASSWORD"}}, view,
                                    all_endpoints=True)
    inv = Inventory.model_validate(doc)
    assert inv.cluster.name == "prod" and inv.cluster.awareness_attribute == "rack_id"
    assert inv.cluster.endpoints == ["https://10.0.0.1:9200", "https://10.0.0.2:9200", "https://10.0.0.3:9200"]
    assert inv.cluster.password is not None and inv.cluster.password.env == "ES_PASSWORD"
    assert [(n.name, n.host, n.zone, n.data_paths, n.ssh_port) for n in inv.nodes] == [
        ("es-1", "es-1", "r1", ["/var/lib/es"], None), ("es-2", "es-2", "r0", ["/data/1", "/data/2"], 2222),
        ("es-3", "es-3", "r1", ["/var/lib/es"], None)]
    # The hosts are the config's aliases, resolved again by each run through the config it names.
    assert inv.ssh.config_file == config
    assert inv.ssh.user == "deploy" and str(inv.ssh.key_file) == "/home/op/.ssh/es"
    assert str(inv.ssh.known_hosts) == "/home/op/.ssh/known_hosts_es"
    assert notes == []


def test_without_awareness_no_zone_and_ansible_hosts_map_by_name_or_address() -> None:
    facts = facts_from_answers("c", answers(), {})
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
    facts = facts_from_answers("c", answers(), {"cluster.routing.allocation.awareness.attributes": "rack_id,zone"})
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
    facts = facts_from_answers("prod", raw, {})
    doc, notes = inventory_document(facts, "https://10.0.0.2:9200", {}, SshView())
    assert doc["cluster"]["endpoints"] == ["https://10.0.0.2:9200"]
    assert any("not written as endpoints" in n and "169.254.169.254" in n for n in notes), notes
    doc, notes = inventory_document(facts, "https://10.0.0.2:9200", {}, SshView(), all_endpoints=True)
    assert doc["cluster"]["endpoints"] == ["https://10.0.0.2:9200", "https://10.0.0.3:9200"]
    assert notes == ["https://169.254.169.254:9200 left out of the endpoints (link-local, unspecified or multicast)"]


@pytest.mark.parametrize(("published", "given", "why"), [
    ("[::ffff:127.0.0.1]:9200", "https://10.0.0.2:9200", "loopback, while the given endpoint is not"),
    ("[::ffff:169.254.169.254]:9200", "https://10.0.0.2:9200", "link-local, unspecified or multicast"),
    ("[fd00:ec2::254]:9200", "https://[fd00:ec2::1]:9200", "a cloud's instance metadata address"),
    ("100.100.100.200:9200", "https://100.100.0.1:9200", "a cloud's instance metadata address"),
    ("[fd12::5]:9200", "https://10.0.0.2:9200", "unique local, while the given endpoint is not"),
    ("100.64.1.2:9200", "https://es.example:9200", "shared (carrier-grade NAT), while the given endpoint is not"),
    # L8: NAT64 (well-known and local-use), 6to4, Teredo (its client, obfuscated) and IPv4-compatible forms.
    ("[64:ff9b::7f00:1]:9200", "https://10.0.0.2:9200", "loopback, while the given endpoint is not"),
    ("[64:ff9b:1::a9fe:a9fe]:9200", "https://10.0.0.2:9200", "link-local, unspecified or multicast"),
    ("[2002:a9fe:a9fe::1]:9200", "https://10.0.0.2:9200", "link-local, unspecified or multicast"),
    ("[2001:0:4136:e378:8000:63bf:80ff:fffe]:9200", "https://10.0.0.2:9200",
     "loopback, while the given endpoint is not"),
    ("[::127.0.0.1]:9200", "https://10.0.0.2:9200", "loopback, while the given endpoint is not"),
    ("[::a9fe:a9fe]:9200", "https://10.0.0.2:9200", "link-local, unspecified or multicast"),
    ("[64:ff9b::a00:9]:9200", "https://10.0.0.2:9200", None),
    ("[fd12::5]:9200", "https://[fd12::1]:9200", None),
    ("100.64.1.2:9200", "https://100.64.0.1:9200", None),
    ("127.0.0.2:9200", "https://localhost:9200", None),
    ("10.0.0.9:9200", "https://es.example:9200", None),
])
def test_an_address_in_disguise_or_of_another_kind_than_the_given_one_is_never_written(
        published: str, given: str, why: str | None) -> None:
    """IPv4 addresses written as IPv6 are what they are; metadata services, unique-local and shared (CGNAT)
    addresses are written only beside a given endpoint of their own kind: the credentials go to each."""
    from orchestrator.config.discovered import unfit_endpoint

    assert unfit_endpoint(f"https://{published}", given) == why


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                       max_size=3), max_leaves=12)


def damaged(base: Any, draw_path: list[str], value: Any) -> Any:
    """``base`` with the value at ``draw_path`` (keys into nested dicts) replaced."""
    out = json.loads(json.dumps(base))
    here = out
    for key in draw_path[:-1]:
        here = here[key]
    here[draw_path[-1]] = value
    return out


NODE_PATHS = [["nodes"], ["nodes", "a"], ["nodes", "a", "name"], ["nodes", "a", "ip"], ["nodes", "a", "roles"],
              ["nodes", "a", "attributes"], ["nodes", "a", "settings"], ["nodes", "a", "settings", "path"],
              ["nodes", "a", "settings", "path", "data"], ["nodes", "a", "http"],
              ["nodes", "a", "http", "publish_address"]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(NODE_PATHS), value=json_values)
def test_any_damaged_nodes_answer_is_read_or_refused_as_the_clusters_fault(where: list[str], value: Any) -> None:
    try:
        facts = facts_from_answers("c", damaged(answers(), where, value), {})
    except ClusterError as exc:
        assert "GET _nodes/settings,http is not what" in str(exc) and len(str(exc)) < 2000
        return
    inventory_document(facts, "http://10.0.0.1:9200", {}, SshView(), all_endpoints=True)


HOST_PATHS = [["_meta"], ["_meta", "hostvars"], ["_meta", "hostvars", "es-1"],
              ["_meta", "hostvars", "es-1", "ansible_host"], ["_meta", "hostvars", "es-1", "ansible_user"],
              ["_meta", "hostvars", "es-1", "ansible_port"],
              ["_meta", "hostvars", "es-1", "ansible_ssh_private_key_file"]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(HOST_PATHS), value=json_values)
def test_any_damaged_ansible_listing_is_read_or_refused_naming_the_file(where: list[str], value: Any) -> None:
    listing = {"_meta": {"hostvars": {"es-1": {"ansible_host": "192.0.2.11", "ansible_user": "admin",
                                               "ansible_port": 22, "ansible_ssh_private_key_file": "/k"}}}}
    facts = facts_from_answers("c", answers(), {})
    try:
        view = ansible_view(damaged(listing, where, value), facts.nodes, "ansible.json")
    except ConfigError as exc:
        assert exc.source == "ansible.json" and "not what `ansible-inventory --list` prints" in str(exc)
        return
    inventory_document(facts, "http://10.0.0.1:9200", {}, view)


@pytest.mark.parametrize("published", ["10.0.0.1:99999", "10.0.0.1:0", "10.0.0.1:abc", "10.0.0.1", "a b:9200",
                                       "http://x:9200"])
def test_a_published_address_with_no_valid_port_is_refused_not_wrapped_around(published: str) -> None:
    raw = damaged(answers(), ["nodes", "a", "http", "publish_address"], published)
    with pytest.raises(ClusterError, match="publish_address"):
        facts_from_answers("c", raw, {})


def test_a_published_address_with_its_name_is_written_by_its_name() -> None:
    raw = damaged(answers(), ["nodes", "a", "http", "publish_address"], "es-1.example.com/10.0.0.1:9200")
    assert facts_from_answers("c", raw, {}).nodes[0].http == "es-1.example.com:9200"


@pytest.mark.parametrize("port", [99999, 0, "abc", -22])
def test_an_ansible_port_out_of_range_is_refused(port: Any) -> None:
    facts = facts_from_answers("c", answers(), {})
    with pytest.raises(ConfigError, match="ansible_port"):
        ansible_view({"_meta": {"hostvars": {"es-1": {"ansible_port": port}}}}, facts.nodes, "ansible.json")


def test_an_endpoint_port_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="port 99999"):
        Inventory.model_validate({"cluster": {"name": "c", "endpoints": ["http://10.0.0.1:99999"]},
                                  "ssh": {"transport": "local"}, "nodes": [{"name": "a", "host": "h"}]})


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_discovery_never_writes_or_opens_a_special_file_as_a_key(special: str, tmp_path: Path) -> None:
    path = tmp_path / "fifo" if special == "fifo" else Path(special)
    if special == "fifo":
        os.mkfifo(path)
    facts = facts_from_answers("c", answers(), {})
    config = tmp_path / "ssh_config"
    config.write_text(f"Host es-*\n  IdentityFile {path}\n")
    with answering_cluster() as url, pytest.raises(ConfigError, match="is not a regular file"):
        discover(url, {}, ssh_config=config)
    listing = tmp_path / "ansible.json"
    listing.write_text(json.dumps({"_meta": {"hostvars": {"es-1": {"ansible_ssh_private_key_file": str(path)}}}}))
    with answering_cluster() as url, pytest.raises(ConfigError, match="is not a regular file"):
        discover(url, {}, ansible=listing)
    with answering_cluster() as url, pytest.raises(ConfigError, match="is not a regular file"):
        discover(url, {"ca_file": str(path)})
    assert facts.nodes  # the answers themselves are fine


class answering_cluster:
    """A fake Elasticsearch on 127.0.0.1 that answers discovery's three requests; ``drip_s``: each answer
    sent a byte at a time, this long apart (a server that never quite stops answering)."""

    def __init__(self, drip_s: float = 0) -> None:
        answers_by_path = {"/_cluster/health": {"cluster_name": "c", "status": "green"},
                           "/_nodes/settings,http": answers(),
                           "/_cluster/settings": {"persistent": {}, "transient": {}, "defaults": {}}}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(answers_by_path.get(self.path.split("?")[0], {})).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not drip_s:
                    self.wfile.write(body)
                    return
                deadline = time.monotonic() + 30  # bounded: the test ends long before
                for i in range(len(body)):
                    if time.monotonic() > deadline:
                        break
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(drip_s)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_cluster_answering_a_byte_at_a_time_is_given_up_after_the_deadline_not_held_by_each_read() -> None:
    started = time.monotonic()
    with answering_cluster(drip_s=0.2) as url, pytest.raises(ClusterUnreachable, match="within 2 s in all"):
        discover(url, {"request_timeout_s": 1})  # each byte comes well inside the 1 s read timeout
    took = time.monotonic() - started
    print(f"a dripping cluster given up after {took:.1f} s (deadline 2 s)")
    assert took < 5


def test_a_cluster_that_answers_is_discovered_through_the_whole_path() -> None:
    with answering_cluster() as url:
        text, _ = discover(url, {})
    assert "name: es-2" in text and f"endpoints:\n  - {url}" in text
