"""Running the playbook's hooks (config/hooks.py): commands here or on a node's host, HTTP calls.

Each hook gets the run's facts (run id, cluster, point, batch, nodes, node, host) and the values
earlier hooks saved (an alert silence's id, say): as ORCHESTRATOR_* variables for a command, as
`{name}` templates in an HTTP call. A failure is said, then stops the run (`on_failure: abort`) or
is only said (`warn`). Secrets (a URL or header from a secret source) never appear in messages.
"""

from __future__ import annotations

import json
import os
import shlex
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from orchestrator.config.hooks import TEMPLATE, Hook, HookPoint, HttpCall
from orchestrator.config.model import NodeEntry
from orchestrator.errors import HookFailed, OrchestratorError
from orchestrator.hosts.environment import BASE_ENVIRONMENT
from orchestrator.hosts.transport import LocalTransport
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event

MAX_ANSWER_BYTES = 1_000_000
# A saved value (an alert silence's id) goes into later hooks' URLs, bodies and environment: a short
# printable text or a number, never a NUL byte (no environment can hold one) or a megabyte.
MAX_SAVED_CHARS = 1_000


class HookError(Exception):
    """Why one hook failed, in words safe to show."""


def facts(ctx: RunContext, point: HookPoint, batch: int | None = None, label: str = "", nodes: tuple[str, ...] = (),
          node: NodeEntry | None = None) -> dict[str, str]:
    out = {"run_id": ctx.journal.run_id, "cluster": ctx.journal.cluster, "point": point.value,
           "batch": "" if batch is None else str(batch), "batch_label": label, "nodes": ",".join(nodes),
           "node": node.name if node else "", "host": node.host if node else ""}
    out.update({f"saved.{k}": v for k, v in ctx.journal.hook_values.items()})
    return out


def render(text: str, values: dict[str, str]) -> str:
    return TEMPLATE.sub(lambda m: values.get(m.group(1), ""), text)


def render_json(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        return render(value, values)
    if isinstance(value, dict):
        return {k: render_json(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [render_json(v, values) for v in value]
    return value


def environment(values: dict[str, str]) -> dict[str, str]:
    return {"ORCHESTRATOR_" + k.upper().replace(".", "_"): v for k, v in values.items()}


def run_command(ctx: RunContext, hook: Hook, values: dict[str, str], node: NodeEntry | None) -> None:
    assert hook.run is not None
    env = environment(values)
    try:
        if hook.where == "host":
            assert node is not None  # checked when the playbook was loaded: host hooks have a node
            exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
            result = ctx.transport.run(node, exports + hook.run, hook.timeout_s)
        else:
            names = (*BASE_ENVIRONMENT, *hook.env)
            local_env = {**{k: os.environ[k] for k in names if k in os.environ}, **env}
            here = node or NodeEntry(name="local", host="localhost")
            result = LocalTransport(env=local_env).run(here, hook.run, hook.timeout_s)
    except OrchestratorError as exc:  # a host that cannot be reached, a command past its timeout
        raise HookError(str(exc)) from None
    if not result.ok:
        raise HookError(f"exit {result.rc}: {(result.stderr or result.stdout).strip()[-300:]}")


def url_fit(url: str) -> bool:
    """Whether ``url`` can be called and shown (its scheme, host and port read): a URL from a secret source
    is checked only once resolved, and a port that is no number would otherwise fail later, with the URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0


def where_to(call: HttpCall, url: str) -> str:
    """What may be shown of a call: its method and server, never a path or query (they may hold tokens)."""
    parts = urllib.parse.urlsplit(url)
    return f"{call.method} {parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}"


def origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urllib.parse.urlsplit(url)
    return parts.scheme.lower(), parts.hostname, parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())


class SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only to the call's own origin (scheme, host and port): the call may carry
    secret headers, which urllib's default handler would send on to any server a redirect names, and
    https to http would send them in clear."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        if origin(newurl) != origin(req.full_url):
            fp.close()
            raise HookError(f"{req.get_method()} {where_origin(req.full_url)} redirected to another server "
                            f"({where_origin(newurl)}): refused, the call's headers are not sent elsewhere")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def where_origin(url: str) -> str:
    scheme, host, port = origin(url)
    return f"{scheme}://{host}:{port}"


OPENER = urllib.request.build_opener(SameOriginRedirects())


def call_http(ctx: RunContext, hook: Hook, values: dict[str, str]) -> None:
    call = hook.http
    assert call is not None
    try:
        url = render(call.url, {k: urllib.parse.quote(v, safe="") for k, v in values.items()}) if call.url \
            else call.url_from.resolve()  # type: ignore[union-attr]
        headers = {k: render(v, values) for k, v in call.headers.items()}
        headers.update({k: s.resolve() for k, s in call.secret_headers.items()})
    except ValueError as exc:  # a secret source that cannot be read; its message never holds the secret
        raise HookError(str(exc)) from None
    if not url_fit(url):
        raise HookError("the URL is not an http:// or https:// URL with a host and a port from 1 to 65535 "
                        "(not shown: it may be a secret)")
    data = None
    if call.body is not None:
        data = json.dumps(render_json(call.body, values)).encode()
        if not any(k.lower() == "content-type" for k in headers):  # a type of the user's own, in any case, stays
            headers["Content-Type"] = "application/json"
    shown = where_to(call, url)
    request = urllib.request.Request(url, data=data, headers=headers, method=call.method)
    try:
        with OPENER.open(request, timeout=hook.timeout_s) as answer:  # http(s) only: checked above
            text = answer.read(MAX_ANSWER_BYTES).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the connection: left to the garbage collector, a socket leaks until then
        raise HookError(f"{shown} answered {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise HookError(f"{shown} failed: {type(reason).__name__}") from None
    if call.save:
        try:
            answer_json = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested past what any answer holds
            raise HookError(f"{shown}: the answer is not JSON, so {', '.join(call.save)} cannot be saved") from None
        found = {name: answer_json.get(field) if isinstance(answer_json, dict) else None
                 for name, field in call.save.items()}
        missing = [call.save[n] for n, v in found.items() if v is None]
        if missing:
            raise HookError(f"{shown}: the answer has no {', '.join(missing)}")
        for name, value in found.items():
            if not saveable(value):
                raise HookError(f"{shown}: the answer's {call.save[name]} is not a short printable text or a number "
                                f"(at most {MAX_SAVED_CHARS} characters): not saved")
        ctx.journal.save_hook_values({n: str(v) for n, v in found.items()})


def saveable(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    text = str(value)
    return 0 < len(text) <= MAX_SAVED_CHARS and text.isprintable()


def run_hooks(ctx: RunContext, point: HookPoint, hooks: list[Hook], batch: int | None = None, label: str = "",
              nodes: tuple[str, ...] = (), node: NodeEntry | None = None, never_abort: bool = False) -> None:
    """Run ``hooks`` of ``point`` in order (a batch hook with `where: host` on each node of the batch).
    An `abort` hook that fails raises HookFailed, unless ``never_abort`` (hooks that run because the
    run already ended: after_run, on_failure)."""
    for hook in hooks:
        on_each = hook.where == "host" and node is None
        for target in [ctx.node(n) for n in nodes] if on_each else [node]:
            run_one(ctx, point, hook, facts(ctx, point, batch, label, nodes, target), target, never_abort)


def run_one(ctx: RunContext, point: HookPoint, hook: Hook, values: dict[str, str], node: NodeEntry | None,
            never_abort: bool) -> None:
    batch = int(values["batch"]) if values["batch"] else None
    where = f" for {node.name}" if node else (f" for batch {batch}" if batch is not None else "")
    started = time.monotonic()
    try:
        if hook.http is not None:
            call_http(ctx, hook, values)
        else:
            run_command(ctx, hook, values, node)
    except HookError as exc:
        message = f"hook {point}/{hook.name}{where} failed: {exc}"
        if hook.on_failure == "abort" and not never_abort:
            raise HookFailed(f"{message} (on_failure: abort)") from None
        ctx.emit(Event("warning", f"{message} (on_failure: {hook.on_failure}; going on)", batch=batch,
                       node=node.name if node else None))
        return
    ctx.emit(Event("step", f"hook {point}/{hook.name}{where} done in {time.monotonic() - started:.1f} s",
                   batch=batch, node=node.name if node else None))
