"""From an Airflow Connection to the inventory's `cluster:` keys: endpoints, user, secrets.

The secrets never reach a file or a journal: each is put in this process's environment under a name
derived from the connection's id, and the inventory names that variable (`password: {env: NAME}`),
as an operator's own inventory does. The names are stable, so a resumed run sees the inventory it
started with.

Fields: host (one host or URL, or several separated by commas), port, schema (http or https; https
when empty), login and password (a user), extra: `api_key` (instead of a user), `endpoints` (a list
of URLs, or one text of them comma-separated, instead of host and port), `ca_file`, `verify_certs`,
`request_timeout_s`, `inventory` (the inventory file's path, when the task names none). The connection
type `orchestrator`'s form (provider_info.py) keeps these same keys; one left empty is not given.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any

from orchestrator.errors import ConfigError

EXTRA_KEYS = {"api_key", "endpoints", "ca_file", "verify_certs", "request_timeout_s", "inventory"}
FORM_PREFIX = "extra__orchestrator__"  # how a form's field may be kept in the extra (Airflow's own convention)


def given_extra(extra: Any) -> dict[str, Any]:
    """The extra's keys without the form's prefix, a field left empty in the form (null, "") as not given. An
    extra that is JSON but not an object (a list, a number) is the connection's error, not a crash."""
    if extra is None or extra == "":
        return {}
    if not isinstance(extra, dict):
        raise ConfigError("connection", [f"extra: give a JSON object of keys, not {type(extra).__name__}"])
    return {str(k).removeprefix(FORM_PREFIX): v for k, v in extra.items() if v is not None and v != ""}


# A secret is put in this process's environment, which each later subprocess (a local hook, the SSH agent's
# ProxyCommand) inherits: past Linux's 128 KiB for one variable every such start fails ("Argument list too
# long"). No real password or API key comes near it.
MAX_SECRET_BYTES = 64 * 1024


def secret_value(conn_id: str, what: str, value: str) -> str:
    if len(value.encode()) > MAX_SECRET_BYTES:
        raise ConfigError(f"connection {conn_id}", [f"{what}: longer than {MAX_SECRET_BYTES // 1024} KiB; no password "
                                                    "or API key is: is it the right field?"])
    return value


@dataclass(frozen=True)
class ConnectionFields:
    """What the provider reads of an Airflow Connection (so that the mapping is tested without Airflow)."""

    conn_id: str
    host: str | None = None
    port: int | None = None
    schema: str | None = None
    login: str | None = None
    password: str | None = None
    extra: dict[str, Any] | None = None


def secret_variable(conn_id: str, what: str) -> str:
    """The environment variable a connection's secret is put in: its id made a variable's name, and a digest
    of the id itself, so that `prod-es`, `prod_es` and `prod.es` (one name once made a variable's) never
    share one in a triggerer that serves them all."""
    digest = hashlib.sha256(conn_id.encode()).hexdigest()[:10].upper()
    return f"ORCHESTRATOR_AIRFLOW_{re.sub(r'[^A-Z0-9]', '_', conn_id.upper())}_{digest}_{what}"


def with_port(host: str, port: int | None) -> str:
    """``host`` (a name, an IPv4 address, an IPv6 one bracketed or not, each perhaps with its port) with
    ``port`` where it has none."""
    try:
        if ipaddress.ip_address(host.strip("[]")).version == 6:
            host = f"[{host.strip('[]')}]"  # bare or bracketed: no port of its own
            return host + (f":{port}" if port else "")
    except ValueError:
        pass
    has_port = host.rsplit("]", 1)[-1].count(":") == 1 if host.startswith("[") else ":" in host
    return host + (f":{port}" if port and not has_port else "")


def endpoints_of(fields: ConnectionFields) -> list[str]:
    extra = given_extra(fields.extra)
    if extra.get("endpoints"):
        given = extra["endpoints"]
        if isinstance(given, str):  # the form's text field: comma-separated
            given = [u.strip() for u in given.split(",") if u.strip()]
        if not isinstance(given, list) or not all(isinstance(u, str) for u in given):
            raise ConfigError(f"connection {fields.conn_id}", ["extra.endpoints: give a list of http(s)://host:port"])
        return list(given)
    if not fields.host:
        return []
    scheme = (fields.schema or "https").lower()
    if scheme not in ("http", "https"):
        raise ConfigError(f"connection {fields.conn_id}", [f"schema {fields.schema!r}: give http or https"])
    out = []
    for host in (h.strip() for h in fields.host.split(",") if h.strip()):
        out.append(host if "://" in host else f"{scheme}://{with_port(host, fields.port)}")
    return out


def cluster_keys(fields: ConnectionFields, environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, Any]:
    """The `cluster:` keys the connection gives (its secrets put in ``environ``, named there)."""
    extra = given_extra(fields.extra)
    unknown = sorted(set(extra) - EXTRA_KEYS)
    if unknown:
        known = ", ".join(sorted(EXTRA_KEYS))
        raise ConfigError(f"connection {fields.conn_id}", [f"extra.{k}: unknown key (known: {known})" for k in unknown])
    keys: dict[str, Any] = {}
    endpoints = endpoints_of(fields)
    if endpoints:
        keys["endpoints"] = endpoints
    if fields.login:
        keys["username"] = fields.login
    if fields.password:
        name = secret_variable(fields.conn_id, "PASSWORD")
        environ[name] = secret_value(fields.conn_id, "password", fields.password)
        keys["password"] = {"env": name}
    if extra.get("api_key"):
        name = secret_variable(fields.conn_id, "API_KEY")
        environ[name] = secret_value(fields.conn_id, "extra.api_key", str(extra["api_key"]))
        keys["api_key"] = {"env": name}
    for key, kinds, said in (("ca_file", (str,), "a path"), ("verify_certs", (bool,), "true or false"),
                             ("request_timeout_s", (int, float), "a number of seconds")):
        if key in extra:
            value = extra[key]
            # "no" or "false" as text would read as true, or be taken as off: only JSON's own values.
            if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
                raise ConfigError(f"connection {fields.conn_id}", [f"extra.{key}: give {said} (JSON), not "
                                                                   f"{type(value).__name__}"])
            keys[key] = value
    return keys


def inventory_of(fields: ConnectionFields) -> str | None:
    value = given_extra(fields.extra).get("inventory")
    return str(value) if value else None
