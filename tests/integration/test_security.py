"""The secured sandbox (Elasticsearch's own security from Maven Central): TLS with the sandbox's CA,
users and API keys; the tool connects as its least-privilege user, and a user lacking a privilege is
refused before any change."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.sandbox.rest import access_of
from orchestrator.shards.privileges import role_body
from tests.helpers import assert_no_traceback, json_lines, orchestrate
from tests.integration.conftest import SandboxManager, Shape
from tests.integration.test_restart import prepared, settings, starts_logged


def get(url: str, context: ssl.SSLContext | None, auth: tuple[str, str] | None = None) -> int:
    """The HTTP status of GET ``url`` (urllib, as a script with curl would: nothing of the tool's)."""
    import base64

    request = urllib.request.Request(url)
    if auth:
        request.add_header("authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_secured_sandbox_serves_tls_from_its_ca_and_asks_for_credentials(sandboxes: SandboxManager) -> None:
    info = sandboxes.get(Shape())
    assert info["secured"] is True and all(e.startswith("https://") for e in info["endpoints"])
    access = access_of(info)
    assert access.username == "elastic" and Path(info["password_file"]).stat().st_mode & 0o077 == 0
    trusted = ssl.create_default_context(cafile=info["ca_file"])  # verifies the host name (an IP SAN) too
    health = info["endpoints"][0] + "/_cluster/health"
    assert get(health, trusted, (access.username, access.password or "")) == 200
    assert get(health, trusted) == 401  # no credentials
    assert get(health, trusted, ("elastic", "not-the-password")) == 401
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        get(health, ssl.create_default_context())  # the system's CAs do not know the sandbox's
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        get(health.replace("https://", "http://"), None)  # no plain HTTP
    inventory = yaml.safe_load(Path(info["inventory"]).read_text())["cluster"]
    assert inventory["username"] == "orchestrator" and inventory["password"] == {"file": info["tool_password_file"]}
    assert inventory["ca_file"] == info["ca_file"]


def with_cluster(tmp_path: Path, info: dict[str, Any], **cluster: Any) -> Path:
    """The sandbox's inventory, its `cluster:` connection replaced by ``cluster``."""
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    for key in ("username", "password", "api_key"):
        inv["cluster"].pop(key, None)
    inv["cluster"].update(cluster)
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_user_lacking_manage_is_refused_at_preflight_with_nothing_changed(sandboxes: SandboxManager,
                                                                         tmp_path: Path) -> None:
    info, es = prepared(sandboxes, Shape())
    weak_role = role_body()
    weak_role["cluster"] = [p for p in weak_role["cluster"] if p != "manage"]
    es.security.put_role(name="orchestrator-no-manage", **weak_role)
    es.security.put_user(username="weak", password="weak-password-1", roles=["orchestrator-no-manage"])
    password_file = tmp_path / "weak.password"
    password_file.write_text("weak-password-1\n")
    password_file.chmod(0o600)
    path = with_cluster(tmp_path, info, username="weak", password={"file": str(password_file)})
    before, starts = settings(es), starts_logged(info)
    last_run = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)["run"]
    try:
        refused = orchestrate("restart", "--config", str(path), "--yes", "--json", timeout=300)
        assert refused.returncode == 5, refused.stderr[-2000:]
        assert_no_traceback(refused)
        assert "lacks privilege(s) the run needs: cluster:manage" in refused.stderr
        assert "`orchestrate docs privileges`" in refused.stderr
        plan = json.loads(orchestrate("plan", "--config", str(path), "--json").stdout)
        assert plan["safe"] is False and any("cluster:manage" in p for p in plan["problems"])
        assert settings(es) == before and starts_logged(info) == starts, "nothing changed"
        now = json.loads(orchestrate("status", "--cluster", "sandbox", "--json").stdout)
        assert now["run"] == last_run and now["lock"] is None, "no run journaled, no lock taken"
    finally:
        es.security.delete_user(username="weak")
        es.security.delete_role(name="orchestrator-no-manage")


def test_api_key_with_the_documented_role_runs(sandboxes: SandboxManager, tmp_path: Path) -> None:
    """The API key the sandbox made, limited to the documented role: a one-node restart goes through
    (its preflight asks `_has_privileges` as the key), as with the user the other tests connect as."""
    info, _es = prepared(sandboxes, Shape())
    path = with_cluster(tmp_path, info, api_key={"file": info["tool_api_key_file"]})
    run = orchestrate("restart", "--config", str(path), "--nodes", "es-3", "--yes", "--json", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json_lines(run.stdout)[-1]
    assert summary["result"] == "succeeded" and [n["name"] for n in summary["nodes"]] == ["es-3"]
    request = urllib.request.Request(info["endpoints"][0] + "/_security/_authenticate", headers={
        "authorization": "ApiKey " + Path(info["tool_api_key_file"]).read_text().strip()})
    with urllib.request.urlopen(request, timeout=30, context=ssl.create_default_context(cafile=info["ca_file"])) as a:
        me = json.load(a)
    assert me["authentication_type"] == "api_key", me  # made by `elastic`, limited to the documented role
