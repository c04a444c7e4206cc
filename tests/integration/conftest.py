"""The real sandbox for integration tests: one at a time, reused while the wanted shape matches."""

from __future__ import annotations

import gc
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.sandbox.rest import access_of, rest_for
from tests.helpers import OPENED, closed_at_teardown, es_client, orchestrate

__all__ = ["es_client"]  # the integration tests import it from here

pytestmark = pytest.mark.integration

# Tests run grouped by the sandbox they need, so each shape is started once: a `sandbox up` costs
# 15-20 s. Unmarked tests use the default 3-node sandbox; `sandbox_last` tests end their group, and a
# `sandbox_first` test opens it: one that asks a fresh sandbox (`get(shape, fresh=True)`) then costs no start of
# its own, as the group's first start is its fresh one.
SHAPE_ORDER = ["default", "zones", "es8", "bastion", "host-cpus", "local", "opensearch", "opensearch-2", "os-packages",
               "riak"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def key(item: pytest.Item) -> tuple[int, int]:
        marker = item.get_closest_marker("sandbox_shape")
        group = SHAPE_ORDER.index(marker.args[0]) if marker else 0
        order = 2 if item.get_closest_marker("sandbox_last") else 0 if item.get_closest_marker("sandbox_first") else 1
        return (group, order)

    items.sort(key=key)  # stable: file order is kept within a group


@dataclass(frozen=True)
class Shape:
    nodes: int = 3
    zones: int = 1
    es_version: str = "9.5.3"
    hosts: str = "netns"
    product: str = "elasticsearch"
    masters: int = 0  # the first N nodes master-eligible, the rest data-only; 0: every node
    also_versions: tuple[str, ...] = ()  # versions each host can switch to (`orchestrate upgrade --to`)
    bastion: bool = False  # SSH reaches the node hosts only through a bastion host
    # Elasticsearch's security on (TLS, users, the tool as its least-privilege user), as in production.
    # False (`--insecure`) only where a group does not care and its time counts.
    secured: bool = True
    packages: bool = False  # Elasticsearch installed from the sandbox's apt repository (upgrades with apt)
    host_cpus: float = 0  # each test host's CPU quota, 0: none


# The two Elasticsearch versions of the upgrade tests: from the last 8.x to 9.
OLD_ES, NEW_ES = "8.19.21", "9.5.3"
# The "zones" group: 9 nodes in 3 zones, the first 3 master-eligible (es-1, es-2, es-3: one in each zone, holding
# data too), the other 6 data-only, two in each zone: room for a window of 3 without zones and of a zone's two
# with them (test_window.py), and a zone-mode upgrade of three zones of three nodes under writes, its last test
# (one sandbox for all: each costs CI minutes). Insecure: nine secured JVMs booting on two cores cost minutes,
# and zone logic and the window's proof do not depend on TLS (the secured upgrade is the three-node one).
NINE_NODES_THREE_ZONES = Shape(nodes=9, zones=3, masters=3, es_version=OLD_ES, also_versions=(NEW_ES,),
                               secured=False)


class SandboxManager:
    def __init__(self) -> None:
        self.shape: Shape | None = None
        self.used = False

    def status(self) -> dict[str, Any]:
        """What `sandbox status --json` says, read here (it reads the sandbox's state file and the nodes'
        processes: a command of its own would cost a second before each test)."""
        from orchestrator.sandbox import lifecycle
        from orchestrator.sandbox.layout import SandboxPaths

        return lifecycle.status(SandboxPaths.default()).as_json()

    def get(self, shape: Shape, fresh: bool = False) -> dict[str, Any]:
        self.used = True
        if self.shape == shape and not fresh:
            info = self.status()
            if info.get("running"):
                return info
        orchestrate("sandbox", "down")
        version = ("--os-version" if shape.product == "opensearch" else "--es-version", shape.es_version)
        proc = orchestrate("sandbox", "up", "--nodes", str(shape.nodes), "--zones", str(shape.zones), *version,
                           "--hosts", shape.hosts, "--product", shape.product,
                           "--masters", str(shape.masters),
                           *(a for v in shape.also_versions for a in ("--also-version", v)),
                           *(["--bastion"] if shape.bastion else []),
                           *([] if shape.secured else ["--insecure"]),
                           *(["--packages"] if shape.packages else []),
                           *(["--host-cpus", str(shape.host_cpus)] if shape.host_cpus else []), timeout=600)
        assert proc.returncode == 0, f"sandbox up failed:\n{proc.stderr}"
        self.shape = shape
        return self.status()

    def forget(self) -> None:
        self.shape = None

    def down(self) -> None:
        orchestrate("sandbox", "down")
        self.shape = None


@pytest.fixture(scope="session")
def sandboxes() -> Iterator[SandboxManager]:
    manager = SandboxManager()
    yield manager
    if manager.used:  # a session that never asked for a sandbox leaves alone one it did not start
        manager.down()


class PreviousTest:
    """The name of the integration test that ran last: the one to blame when the sandbox is left dirty."""

    name = "(none: this is the first integration test)"


def status_of_sandbox(timeout_s: float = 180) -> dict[str, Any]:
    """`status --json`, once the cluster answers: a test may have just rebooted a host or started a fresh
    sandbox, whose cluster state is still being recovered (HTTP 503) for a few seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = orchestrate("status", "--cluster", "sandbox", "--json", timeout=120)
        if status.returncode == 0:
            return dict(json.loads(status.stdout))
        assert time.monotonic() < deadline, f"`status` kept failing for {timeout_s:.0f} s: {status.stderr[-1500:]}"
        time.sleep(2)


def start_stopped_services(info: dict[str, Any]) -> None:
    """Start the service of each node that has no process: a test that stopped one to cause a fault
    and failed before starting it again would otherwise leave every later resume waiting for it."""
    stopped = [n["name"] for n in info.get("nodes", ()) if n.get("pid") is None]
    if not stopped:
        return
    service = yaml.safe_load(Path(info["inventory"]).read_text()).get("service") or {}
    unit = service.get("unit")
    assert service.get("manager") == "systemd" and unit, f"nodes {stopped} are stopped; cannot start {service}"
    for name in stopped:
        started = subprocess.run(["ssh", "-F", info["ssh_config"], name, f"systemctl start {unit}"],
                                 capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, f"starting {unit} on {name} failed: {started.stderr[-500:]}"


def settle(sandboxes: SandboxManager) -> None:
    """Bring the running sandbox to a known state: no unfinished run (it is resumed), no lock, no
    temporary setting left, healthy. Raises AssertionError saying what could not be settled."""
    info = sandboxes.status()
    if not info.get("running"):
        sandboxes.forget()  # a test stopped it; the next test starts the shape it needs
        return
    start_stopped_services(info)
    before = status_of_sandbox()
    if before.get("pause"):  # a pause left asked would hold every later run at its first batch
        orchestrate("continue", "--cluster", "sandbox", timeout=120)
    run = before["run"]
    unfinished = run is not None and run["state"] != "succeeded"
    if unfinished:
        # --yes: a test may have run with its own inventory; the journal's own spec is what resumes.
        resumed = orchestrate("resume", "--cluster", "sandbox", "--yes", "--json", timeout=900)
        assert resumed.returncode == 0, (f"run {run['run_id']} was left {run['state']} and `resume` could not "
                                         f"finish it: {resumed.stderr[-1500:]}")
    if before.get("lock") is not None or unfinished:
        orchestrate("unlock", "--cluster", "sandbox", "--yes", timeout=120)
    # Asked again only when something was done: each `status` is a second before every test.
    now = status_of_sandbox() if unfinished or before.get("pause") or before.get("lock") is not None else before
    assert now["temporary_settings"] == [], f"temporary settings left: {now['temporary_settings']}"
    assert now["lock"] is None, f"a lock is still held: {now['lock']}"
    assert now.get("pause") is None, f"a pause is still asked: {now['pause']}"
    if info.get("product") == "riak":
        return
    rest = closed_at_teardown(rest_for(info["product"], info["endpoints"], timeout_s=150, access=access_of(info)))
    health = rest.request("health", "GET", "/_cluster/health", {
        "wait_for_status": "green", "wait_for_nodes": str(len(info["nodes"])), "timeout": "120s"})
    assert health["status"] == "green", f"the cluster is not green: {dict(health)}"
    flat = rest.request("settings", "GET", "/_cluster/settings", {"flat_settings": "true"})
    left = [k for scope in ("persistent", "transient") for k in flat[scope] if k.startswith(MANAGED_PREFIXES)]
    assert left == [], f"settings the tool manages are still set: {left}"


# Keys a restart changes temporarily; a test that sets one itself must unset it before it ends.
MANAGED_PREFIXES = ("cluster.routing.allocation.enable", "cluster.routing.allocation.node_concurrent",
                    "cluster.routing.allocation.node_initial_primaries", "indices.recovery.max_")


@pytest.fixture(autouse=True)
def _known_sandbox_state(sandboxes: SandboxManager, request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test starts from a known sandbox: what the previous test left is finished or undone here,
    and if that cannot be done this test fails at once, naming the test that left it."""
    if sandboxes.shape is not None:
        try:
            settle(sandboxes)
        except (AssertionError, subprocess.TimeoutExpired) as exc:
            sandboxes.forget()  # the next test starts a fresh sandbox rather than inherit this one
            pytest.fail(f"the sandbox was not left in a known state by {PreviousTest.name}: {exc}", pytrace=False)
    yield
    PreviousTest.name = request.node.nodeid
    close_what_the_test_opened()


def close_what_the_test_opened() -> None:
    """Its clients and loads closed, then the collector run here: a socket the test still leaves open is its own
    error, at its teardown, not one of whichever later test the collector would otherwise pass in."""
    while OPENED:
        OPENED.pop().close()
    gc.collect()
