"""`orchestrate sandbox`: a real local Elasticsearch cluster to try the tool on, and to test it."""

from __future__ import annotations

import os
import time
from enum import StrEnum

import typer

from orchestrator.cli.output import emit_json, say, terminal
from orchestrator.errors import SandboxError
from orchestrator.sandbox.layout import SandboxPaths

app = typer.Typer(help="A real Elasticsearch (or OpenSearch) cluster on this machine, assembled from Maven "
                       "Central, in test hosts of its own; or a Riak cluster of the Riak stand-in (`up --product "
                       "riak`, from a source checkout).",
                  no_args_is_help=True)


class HostsMode(StrEnum):
    netns = "netns"
    local = "local"


class Product(StrEnum):
    elasticsearch = "elasticsearch"
    opensearch = "opensearch"
    riak = "riak"


@app.command()
def up(
    nodes: int = typer.Option(3, help="Number of nodes (1-12)."),
    zones: int = typer.Option(1, help="Spread nodes over this many awareness zones (node attribute `zone`)."),
    masters: int = typer.Option(0, help="Only the first N nodes are master-eligible, the others data-only "
                                        "(0: every node). 6 nodes, 2 zones, 3 masters: a zone holding two."),
    es_version: str = typer.Option("9.5.3", help="Elasticsearch version: 9.5.3 or 8.19.21 are tested."),
    also_version: list[str] = typer.Option(None, "--also-version", metavar="VERSION",
                                           help="Also assemble VERSION, so that `orchestrate upgrade --to VERSION` "
                                                "can switch the hosts to it (e.g. --es-version 8.19.21 "
                                                "--also-version 9.5.3; OpenSearch: --product opensearch "
                                                "--es-version 2.19.1 --also-version 3.8.0)."),
    bastion: bool = typer.Option(False, "--bastion", help="SSH reaches the node hosts only through a bastion "
                                                          "host (ProxyJump in the written ssh config, which the "
                                                          "inventory uses); direct SSH to them fails."),
    insecure: bool = typer.Option(False, "--insecure", help="Elasticsearch without its security: plain HTTP, no "
                                                            "users (faster to start; for tests that do not care). "
                                                            "By default the sandbox is secured as production is: "
                                                            "TLS with the sandbox's own CA, the `elastic` superuser, "
                                                            "and an `orchestrator` user and API key with the least "
                                                            "privileges a run needs (`orchestrate docs "
                                                            "privileges`). OpenSearch and Riak sandboxes are always "
                                                            "insecure."),
    packages: bool = typer.Option(False, "--packages", help="Install Elasticsearch (or OpenSearch) on each test host "
                                                            "from a local apt repository of Debian packages built "
                                                            "from the assembled versions (official layout: "
                                                            "/etc/elasticsearch as conffiles, the package's unit), "
                                                            "so that `orchestrate upgrade` runs apt-get "
                                                            "(upgrade.install: package)."),
    hosts: HostsMode = typer.Option(
        None, help="netns: each node in its own test host with sshd (default as root). "
                   "local: nodes on 127.0.0.1 ports, no SSH."),
    heap_mb: int = typer.Option(256, help="JVM heap per node, in MiB."),
    host_cpus: float = typer.Option(0, help="Limit each test host to this many CPUs (a CPU cgroup quota, e.g. "
                                            "0.5), as hosts of their own are: a booting node cannot then take "
                                            "the CPU the other nodes serve searches with. 0: no limit. "
                                            "Netns only."),
    timeout: float = typer.Option(180, help="Seconds to wait for a green cluster."),
    product: Product = typer.Option(Product.elasticsearch, help="opensearch: OpenSearch nodes (--os-version) "
                                                                "instead of Elasticsearch. riak: Riak test hosts "
                                                                "running a Riak stand-in (netns only; it is in a "
                                                                "source checkout, tests/fixtures/riak, not in the "
                                                                "installed package)."),
    os_version: str = typer.Option("3.8.0", help="OpenSearch version, with --product opensearch: 3.8.0 (the last "
                                                 "with its netty module on Maven Central, on Java 21+) and 2.19.1 "
                                                 "(on a JDK 17-23: it needs the security manager) are tested."),
) -> None:
    """Start the sandbox and return when the cluster is green (Riak: every node serving riak_kv).

    Writes an inventory so that `--cluster sandbox` works in every other command (as the
    `orchestrator` user when secured), and (netns) an ssh config:
    `ssh -F $(orchestrate sandbox status --json | jq -r .ssh_config) es-1 uptime`.
    A secured sandbox with curl: `curl --cacert CA_FILE -u elastic:$(cat PASSWORD_FILE) URL`,
    the three from `sandbox status --json` (ca_file, username, password_file).
    """
    from orchestrator.sandbox import lifecycle
    from orchestrator.sandbox.shape import SandboxShape, mode_named, product_named

    mode = mode_named(hosts.value if hosts else ("netns" if os.geteuid() == 0 else "local"))
    version = os_version if product is Product.opensearch else es_version
    shape = SandboxShape(nodes=nodes, zones=zones, es_version=version, mode=mode, heap_mb=heap_mb,
                         product=product_named(product.value), masters=masters, also_versions=tuple(also_version or ()),
                         bastion=bastion, secured=product is Product.elasticsearch and not insecure, packages=packages,
                         host_cpus=host_cpus)
    lifecycle.up(SandboxPaths.default(), shape, timeout, say)
    _print_status(as_json=False)


@app.command()
def prepare(es_version: str = typer.Option("9.5.3", help="Elasticsearch version to assemble.")) -> None:
    """Assemble Elasticsearch from Maven Central into the cache, and (as root) build the test hosts' Debian
    root file system with debootstrap, without starting anything."""
    from orchestrator.sandbox.assemble import cache_root, ensure_es_home
    from orchestrator.sandbox.rootfs import ensure_rootfs

    home = ensure_es_home(es_version, say)
    say(f"Elasticsearch {es_version} ready in {home.path} (java: {home.java_home})")
    if os.geteuid() == 0:
        ensure_rootfs(cache_root(), say)


@app.command()
def load(
    docs: int = typer.Option(20000, help="Documents to index, spread over the indices."),
    indices: int = typer.Option(3, help="Number of sample-N indices (3 shards, 1 replica each)."),
    duration: float = typer.Option(None, "--duration", min=1, max=3600, help="Instead: keep indexing (acknowledged, "
                                   "by id) and searching through every node for this many seconds, then check "
                                   "that every acknowledged document is there. Run it beside a restart."),
) -> None:
    """Index sample data into the running sandbox, or (--duration) generate traffic while you restart it."""
    from orchestrator.sandbox import lifecycle
    from orchestrator.sandbox.rest import access_of

    sandbox = lifecycle.status(SandboxPaths.default())
    if not sandbox.running or sandbox.state is None:
        raise SandboxError("no sandbox is running: `orchestrate sandbox up` first")
    product = sandbox.state.product
    if product == "riak":
        raise SandboxError("`sandbox load` indexes into Elasticsearch or OpenSearch; the running sandbox is Riak")
    access = access_of(sandbox.as_json())
    if duration is None:
        from orchestrator.sandbox.data import load_sample_data

        load_sample_data(sandbox.endpoints, docs, indices, say, product, access)
        return
    from orchestrator.sandbox.load import LoadGenerator

    gen = LoadGenerator(sandbox.endpoints, duration_s=duration, product=product, access=access)
    gen.start()
    say(f"load: indexing and searching through {len(sandbox.endpoints)} nodes for {duration:.0f} s")
    try:
        while any(t.is_alive() for t in gen.threads):
            time.sleep(1)
    except KeyboardInterrupt:
        say("load: stopping")
    gen.stop()
    report = gen.report()
    missing = gen.missing_acknowledged()
    emit_json({**report, "missing_acknowledged": len(missing)})
    if missing or report["red_samples"]:
        raise SandboxError(f"{len(missing)} acknowledged document(s) missing, {report['red_samples']} red sample(s)")


@app.command()
def reboot(node: str = typer.Argument(..., help="Test host to power-cycle, e.g. es-2.")) -> None:
    """Reboot one test host (its systemd, as by Ctrl-Alt-Del): knobs back to boot defaults, then the boot
    replays what was persisted (sysctl.d, udev rules, enabled units). Shows whether tuning survives it."""
    from orchestrator.sandbox import lifecycle

    lifecycle.reboot(SandboxPaths.default(), node, say)


@app.command()
def down() -> None:
    """Stop every process the sandbox started (by PID) and remove its namespaces. Safe to repeat."""
    from orchestrator.sandbox import lifecycle

    lifecycle.down(SandboxPaths.default(), say)


@app.command()
def status(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Nodes, endpoints, inventory and ssh config of the running sandbox."""
    _print_status(json_out)


def _print_status(as_json: bool) -> None:
    from orchestrator.sandbox import lifecycle

    info = lifecycle.status(SandboxPaths.default()).as_json()
    if as_json:
        emit_json(info)
        return
    if not info.get("nodes"):
        terminal.out.print("no sandbox (start one with `orchestrate sandbox up`)")
        return
    terminal.out.print(f"sandbox: {info['describe']}, mode {info['mode']}, "
                      f"{'running' if info['running'] else 'STOPPED'}")
    for n in info["nodes"]:
        terminal.out.print(f"  {n['name']:<8} {n['host']:<15} {n['zone']:<8} {n['http'] or '-':<28} pid {n['pid']}")
    terminal.out.print(f"inventory:  {info['inventory']}  (use --cluster sandbox)")
    if info.get("ssh_config"):
        terminal.out.print(f"ssh config: {info['ssh_config']}  (ssh -F <file> {info['nodes'][0]['name']} CMD)")
    if info.get("secured"):
        terminal.out.print(f"secured:    curl --cacert {info['ca_file']} -u {info['username']}:$(cat "
                          f"{info['password_file']}) {info['nodes'][0]['http']}/_cluster/health", markup=False,
                          highlight=False)
