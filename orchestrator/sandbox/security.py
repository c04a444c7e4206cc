"""A secured sandbox, as production clusters are: a private CA, TLS on HTTP and transport, the `elastic`
superuser, and the tool's own least-privilege `orchestrator` role, user and API key.

Secrets live in files readable by root only (`SandboxPaths.secrets_dir`); the inventory names the
files, never the values.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path
from typing import Any

from orchestrator.errors import OrchestratorError, SandboxError
from orchestrator.paths import write_atomically
from orchestrator.retry import Seen, wait_until
from orchestrator.sandbox import certs
from orchestrator.sandbox.layout import SandboxPaths
from orchestrator.sandbox.node import bootstrap_password_file
from orchestrator.sandbox.rest import SandboxAccess, rest_for
from orchestrator.shards.privileges import role_body
from orchestrator.shards.rest import HttpError

SUPERUSER = "elastic"
TOOL_USER = "orchestrator"  # the user (and role) the sandbox's inventory connects as
ELASTIC_PASSWORD = "elastic.password"
TOOL_PASSWORD = "orchestrator.password"
TOOL_API_KEY = "orchestrator.api_key"
# What a search probe (`search.probe`) needs beyond the run's role: `read` on the index it searches. The sandbox's
# load writes `load*` indices; its user has this role beside the run's, as docs/privileges.md tells operators.
PROBE_ROLE = "orchestrator-probe"
PROBE_ROLE_BODY = {"indices": [{"names": ["load*"], "privileges": ["read"], "allow_restricted_indices": False}]}


def write_secret(path: Path, value: str) -> None:
    """A secret file readable by root only, in a directory only root may enter."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_atomically(path, value + "\n", mode=0o600)


def prepare(paths: SandboxPaths) -> None:
    """A fresh CA and a fresh superuser password for this `sandbox up` (nothing of an earlier one kept)."""
    shutil.rmtree(paths.tls_dir, ignore_errors=True)
    shutil.rmtree(paths.secrets_dir, ignore_errors=True)
    paths.secrets_dir.mkdir(parents=True, mode=0o700)
    certs.make_ca(paths.tls_dir)
    paths.ca_cert.chmod(0o644)  # public: what clients trust
    write_secret(paths.secret(ELASTIC_PASSWORD), secrets.token_urlsafe(18))


def install_node_files(paths: SandboxPaths, node_dir: Path, host_name: str, addresses: list[str]) -> None:
    """The node's certificate (its name and addresses), the CA, and the superuser's bootstrap password,
    in its config directory (owned by the node's user afterwards, like the rest of it)."""
    where = node_dir / "config" / "certs"
    ca = certs.Issued(paths.ca_cert, paths.tls_dir / "ca.key")
    certs.issue(ca, where, "node", host_name, addresses)
    shutil.copy2(paths.ca_cert, where / "ca.crt")
    write_secret(bootstrap_password_file(node_dir), paths.secret(ELASTIC_PASSWORD).read_text().strip())


def superuser_access(paths: SandboxPaths) -> SandboxAccess:
    return SandboxAccess(str(paths.ca_cert), SUPERUSER, paths.secret(ELASTIC_PASSWORD).read_text().strip())


def create_tool_user(paths: SandboxPaths, endpoints: list[str], timeout_s: float = 120) -> None:
    """As `elastic`: the `orchestrator` role (exactly what a run needs), a user with it, and an API key
    limited to it; their secrets written beside the superuser's."""
    rest = rest_for("elasticsearch", endpoints, timeout_s=30, access=superuser_access(paths))
    password = secrets.token_urlsafe(18)

    def as_superuser(what: str, method: str, path: str, body: dict[str, Any]) -> Any:
        # The first security write creates the `.security` index; until its primary is active the
        # reserved realm cannot read `elastic`'s entry and answers 401 (or 503), although the
        # bootstrap password is right. Seen on a busy CI machine: wait for it, bounded.
        def attempt(seen: Seen[Any]) -> Any:
            try:
                return rest.request(what, method, path, body=body)
            except HttpError as exc:
                if exc.status not in (401, 503):
                    raise
                seen.text = str(exc)
                return None
        return wait_until(attempt, what=f"the security index to accept `{SUPERUSER}` ({what})",
                          timeout_s=timeout_s, interval_s=1)

    try:
        as_superuser("create the orchestrator role", "PUT", f"/_security/role/{TOOL_USER}", role_body())
        as_superuser("create the search probe's role", "PUT", f"/_security/role/{PROBE_ROLE}", PROBE_ROLE_BODY)
        as_superuser("create the orchestrator user", "PUT", f"/_security/user/{TOOL_USER}",
                     {"password": password, "roles": [TOOL_USER, PROBE_ROLE]})
        key = as_superuser("create an API key", "POST", "/_security/api_key",
                           {"name": f"{TOOL_USER}-sandbox",
                            "role_descriptors": {TOOL_USER: role_body(), PROBE_ROLE: PROBE_ROLE_BODY}})
    except OrchestratorError as exc:
        raise SandboxError(f"setting up the sandbox's users failed: {exc}") from exc
    write_secret(paths.secret(TOOL_PASSWORD), password)
    write_secret(paths.secret(TOOL_API_KEY), str(key["encoded"]))


def status_fields(paths: SandboxPaths, secured: bool) -> dict[str, Any]:
    """What scripts need to reach a secured sandbox with curl: `curl --cacert CA -u elastic:$(cat FILE)`."""
    if not secured:
        return {"secured": False, "ca_file": None, "username": None, "password_file": None}
    return {"secured": True, "ca_file": str(paths.ca_cert), "username": SUPERUSER,
            "password_file": str(paths.secret(ELASTIC_PASSWORD)),
            "tool_username": TOOL_USER, "tool_password_file": str(paths.secret(TOOL_PASSWORD)),
            "tool_api_key_file": str(paths.secret(TOOL_API_KEY))}


def inventory_cluster_fields(paths: SandboxPaths) -> dict[str, Any]:
    """The inventory's `cluster:` connection for a secured sandbox: the tool's own user, the CA."""
    return {"ca_file": str(paths.ca_cert), "username": TOOL_USER,
            "password": {"file": str(paths.secret(TOOL_PASSWORD))}}
