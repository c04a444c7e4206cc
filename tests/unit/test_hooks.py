"""Hooks, over the fake cluster, calling a small HTTP server of the test's own on 127.0.0.1 and
local commands: their order, what they are told, their failure policies, and secrets kept out."""

from __future__ import annotations

import io
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.hooks import Hook, HookPoint, Hooks
from orchestrator.config.model import NodeEntry
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError, HookFailed, HostError, StoppedAfter
from orchestrator.hosts.transport import CommandResult
from orchestrator.restart.context import RunContext
from orchestrator.restart.events import Event
from orchestrator.restart.journal import Journal, RunState
from orchestrator.restart.procedure import resolve
from orchestrator.testing.fake import PRODUCT, FakeCluster, FakeTransport
from tests.helpers import Receiver
from tests.unit.test_engine import (
    ORIGINAL,
    PLAYBOOK,
    assert_finished_cleanly,
    context_of,
    engine,
    fake,
    inventory,
    new_journal,
    state_dir,
)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


def playbook_with(hooks: dict[str, Any]) -> Playbook:
    return Playbook.model_validate({**PLAYBOOK.model_dump(mode="json"), "hooks": hooks})


def run_with(playbook: Playbook, names: list[str], events: list[Event] | None = None,
             cluster: FakeCluster | None = None, stop_after: int = 0) -> tuple[FakeCluster, Journal]:
    inv = inventory(names)
    cluster = cluster or FakeCluster.of(names, settings=dict(ORIGINAL))
    journal = new_journal(inv, cluster)
    eng = engine(inv, cluster, journal, events if events is not None else [])
    eng.procedure = resolve(playbook, PRODUCT)
    eng.stop_after = stop_after
    eng.run()
    return cluster, journal


def test_hooks_run_in_order_with_the_documented_facts(receiver: Receiver, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "commands.log"
    monkeypatch.setenv("HOOK_LOG", str(log))
    monkeypatch.setenv("ALERT_TOKEN", "tok-S3cr3t")
    record = ('echo "$ORCHESTRATOR_POINT run=$ORCHESTRATOR_RUN_ID cluster=$ORCHESTRATOR_CLUSTER '
              'batch=$ORCHESTRATOR_BATCH nodes=$ORCHESTRATOR_NODES node=$ORCHESTRATOR_NODE '
              'silence=$ORCHESTRATOR_SAVED_SILENCE" >> "$HOOK_LOG"')
    hooks = {
        "before_run": [{"name": "silence", "http": {
            "method": "POST", "url": receiver.url + "/api/v2/silences",
            "secret_headers": {"Authorization": {"env": "ALERT_TOKEN"}},
            "body": {"comment": "rolling restart {run_id} of {cluster}", "matchers": []},
            "save": {"silence": "silenceID"}}}],
        "before_batch": [{"name": "batch-start", "run": record, "env": ["HOOK_LOG"]}],
        "before_stop": [{"name": "lb-drain", "http": {"method": "PUT", "url": receiver.url + "/lb/{node}/drain"}}],
        "after_start": [{"name": "lb-back", "run": record, "env": ["HOOK_LOG"]}],
        "after_batch": [{"name": "chat", "http": {"url": receiver.url + "/chat",
                                                  "body": {"text": "batch {batch} ({batch_label}) done"}}}],
        "after_run": [{"name": "unsilence", "http": {"method": "DELETE",
                                                     "url": receiver.url + "/api/v2/silence/{saved.silence}"}}],
    }
    with state_dir():
        events: list[Event] = []
        cluster, journal = run_with(playbook_with(hooks), ["a", "b"], events)
        assert_finished_cleanly(cluster, journal)
        calls = [(c["method"], c["path"]) for c in receiver.calls]
        assert calls == [("POST", "/api/v2/silences"), ("PUT", "/lb/a/drain"), ("POST", "/chat"),
                         ("PUT", "/lb/b/drain"), ("POST", "/chat"), ("DELETE", "/api/v2/silence/sil-42")]
        assert json.loads(receiver.calls[0]["body"])["comment"] == f"rolling restart {journal.run_id} of fake"
        assert receiver.calls[0]["auth"] == "tok-S3cr3t"
        assert json.loads(receiver.calls[2]["body"]) == {"text": "batch 1 (a) done"}
        lines = log.read_text().splitlines()
        assert lines == [
            f"before_batch run={journal.run_id} cluster=fake batch=1 nodes=a node= silence=sil-42",
            f"after_start run={journal.run_id} cluster=fake batch=1 nodes=a node=a silence=sil-42",
            f"before_batch run={journal.run_id} cluster=fake batch=2 nodes=b node= silence=sil-42",
            f"after_start run={journal.run_id} cluster=fake batch=2 nodes=b node=b silence=sil-42"]
        assert Journal.load(journal.path).hook_values == {"silence": "sil-42"}  # type: ignore[arg-type]
        said = " ".join(e.message for e in events) + Path(journal.path).read_text()  # type: ignore[arg-type]
        assert "tok-S3cr3t" not in said


def test_a_failing_abort_hook_stops_the_run_with_every_setting_restored(receiver: Receiver) -> None:
    hooks = {"before_stop": [{"name": "lb-drain", "http": {"url": receiver.url + "/fail/lb/{node}"}}],
             "on_failure": [{"name": "page", "http": {"url": receiver.url + "/page",
                                                      "body": {"text": "{cluster}: run {run_id} stopped"}}}]}
    with state_dir():
        events: list[Event] = []
        with pytest.raises(HookFailed, match=r"hook before_stop/lb-drain for a failed: POST http://127\.0\.0\.1:"
                                             r"\d+ answered 500 \(on_failure: abort\)") as err:
            run_with(playbook_with(hooks), ["a", "b"], events)
        assert err.value.exit_code == 6
        assert [c["path"] for c in receiver.calls] == ["/fail/lb/a", "/page"]
        journal = Journal.load(latest_journal())
        assert journal.state is RunState.ABORTED and "temporary settings restored" in journal.message
        assert journal.batches[0].state == "pending", "the batch starts over on resume"


def test_a_stop_after_n_batches_ends_with_the_after_run_hooks_not_on_failure(receiver: Receiver) -> None:
    hooks = {"after_run": [{"name": "unsilence", "http": {"method": "DELETE", "url": receiver.url + "/silence"}}],
             "on_failure": [{"name": "page", "http": {"url": receiver.url + "/page"}}]}
    with state_dir(), pytest.raises(StoppedAfter):
        run_with(playbook_with(hooks), ["a", "b"], stop_after=1)
    assert [c["path"] for c in receiver.calls] == ["/silence"]


def latest_journal() -> Path:
    return max(Path(os.environ["ORCHESTRATOR_STATE"], "runs", "fake").glob("*.json"), key=lambda p: p.stat().st_mtime)


def test_a_failing_warn_hook_is_said_and_the_run_goes_on(receiver: Receiver) -> None:
    hooks = {"after_batch": [{"name": "chat", "on_failure": "warn", "http": {"url": receiver.url + "/fail/chat"}},
                             {"name": "never", "on_failure": "warn", "run": "exit 3"}]}
    with state_dir():
        events: list[Event] = []
        cluster, journal = run_with(playbook_with(hooks), ["a"], events)
        assert_finished_cleanly(cluster, journal)
        warnings = [e.message for e in events if e.kind == "warning"]
        assert any("hook after_batch/chat for batch 1 failed" in w and "answered 500" in w for w in warnings)
        assert any("hook after_batch/never for batch 1 failed: exit 3" in w for w in warnings)


def test_a_secret_url_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAT_WEBHOOK", "http://127.0.0.1:9/services/T0/B0/s3cr3t-path")
    hooks = {"after_batch": [{"name": "chat", "on_failure": "warn", "timeout_s": 2,
                              "http": {"url_from": {"env": "CHAT_WEBHOOK"}, "body": {"text": "x"}}}]}
    with state_dir():
        events: list[Event] = []
        run_with(playbook_with(hooks), ["a"], events)
        warning = next(e.message for e in events if e.kind == "warning")
        assert "POST http://127.0.0.1:9 failed" in warning and "s3cr3t" not in warning


@pytest.mark.parametrize("url", ["http://127.0.0.1:s3cr3t-port/x", "https://tok:s3cr3t@h:99999/x",
                                 "ftp://h/s3cr3t", "http:///s3cr3t"])
def test_a_secret_url_that_cannot_be_called_fails_its_hook_without_showing_it(
        monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """As the probe saw it: a non-numeric port in a `url_from` URL crashed the run (exit 70) with the secret in
    its output, journal and crash file. It fails the hook, as a URL that cannot be called, never shown."""
    monkeypatch.setenv("CHAT_WEBHOOK", url)
    hooks = {"after_batch": [{"name": "chat", "on_failure": "warn", "timeout_s": 2,
                              "http": {"url_from": {"env": "CHAT_WEBHOOK"}, "body": {"text": "x"}}}]}
    with state_dir():
        events: list[Event] = []
        cluster, journal = run_with(playbook_with(hooks), ["a"], events)
        assert_finished_cleanly(cluster, journal)
        warning = next(e.message for e in events if e.kind == "warning")
        assert "not an http:// or https:// URL" in warning
        said = " ".join(e.message for e in events) + Path(journal.path).read_text()  # type: ignore[arg-type]
        assert "s3cr3t" not in said


@pytest.mark.parametrize(("hooks", "says"), [
    ({"before_run": [{"name": "x", "run": "true", "where": "host"}]}, "a run-level hook has no node"),
    ({"after_batch": [{"name": "x"}]}, "exactly one of `run`"),
    ({"after_batch": [{"name": "x", "run": "true", "http": {"url": "http://h/"}}]}, "exactly one of `run`"),
    ({"after_batch": [{"name": "x", "http": {"url": "http://h/{secret}"}}]}, "unknown template {secret}"),
    ({"after_batch": [{"name": "x", "http": {"url": "file:///etc/passwd"}}]}, "url"),
    ({"after_batch": [{"name": "x", "run": "a"}], "before_stop": [{"name": "x", "run": "b"}]}, "used twice"),
    ({"after_batch": [{"name": "x", "http": {"url": "http://h/", "url_from": {"env": "U"}}}]}, "exactly one of `url`"),
    ({"on_the_moon": []}, "on_the_moon"),
])
def test_a_bad_hook_is_refused_when_the_playbook_is_loaded(hooks: dict[str, Any], says: str,
                                                           tmp_path: Path) -> None:
    import yaml

    from orchestrator.config.loader import load_model

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**PLAYBOOK.model_dump(mode="json", exclude={"hooks"}), "hooks": hooks}))
    with pytest.raises(ConfigError) as err:
        load_model(path, Playbook)
    assert says in " ".join(err.value.problems)


def test_a_batch_hook_on_the_host_runs_on_each_node_of_the_batch() -> None:
    from orchestrator.restart.plan import Mode
    from tests.unit.test_engine import FakeTransport

    hooks = {"after_batch": [{"name": "mark", "where": "host", "run": "touch /tmp/marked"}]}
    with state_dir():
        names, zones = ["a", "b", "c"], ["z1", "z1", "z2"]
        inv = inventory(names, zones)
        cluster = FakeCluster.of(names, zones, settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster, Mode.ZONE)
        eng = engine(inv, cluster, journal, [])
        eng.procedure = resolve(playbook_with(hooks), PRODUCT)
        eng.run()
        assert isinstance(eng.ctx.transport, FakeTransport)
        marked = [(node, cmd) for node, cmd in eng.ctx.transport.commands if cmd.endswith("touch /tmp/marked")]
        assert [node for node, _ in marked] == ["a", "b", "c"]
        assert "export ORCHESTRATOR_NODE=a;" in marked[0][1] and "export ORCHESTRATOR_NODES=a,b;" in marked[0][1]
        assert "export ORCHESTRATOR_BATCH=2;" in marked[2][1]


def test_a_redirect_to_another_server_is_refused_and_the_secret_header_never_goes_there(
        receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "Bearer t0ken-canary")
    with Receiver() as elsewhere:
        # Same host, another port: another origin, as https -> http or another host would be.
        hooks = {"after_batch": [
            {"name": "away", "on_failure": "warn", "timeout_s": 5,
             "http": {"url": f"{receiver.url}/redirect?to={urllib.parse.quote(elsewhere.url + '/x', safe='')}",
                      "secret_headers": {"Authorization": {"env": "HOOK_TOKEN"}}}},
            {"name": "home", "on_failure": "warn", "timeout_s": 5,
             "http": {"url": f"{receiver.url}/redirect?to={urllib.parse.quote(receiver.url + '/y', safe='')}",
                      "secret_headers": {"Authorization": {"env": "HOOK_TOKEN"}}}}]}
        with state_dir():
            events: list[Event] = []
            run_with(playbook_with(hooks), ["a"], events)
        assert elsewhere.calls == [], "nothing, and no secret header, reached the other server"
        warnings = [e.message for e in events if e.kind == "warning"]
        assert any("redirected to another server" in w and "t0ken" not in w for w in warnings), warnings
        # A redirect within the same origin is followed, with its header.
        assert [c["path"] for c in receiver.calls if c["path"] == "/y"] == ["/y"]
        assert next(c for c in receiver.calls if c["path"] == "/y")["auth"] == "Bearer t0ken-canary"


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/x", "http://127.0.0.1:abc/x", "http://127.0.0.1:0/x"])
def test_a_hook_url_with_an_impossible_port_is_refused_when_loaded(url: str, tmp_path: Path) -> None:
    import yaml

    from orchestrator.config.loader import load_model

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({**PLAYBOOK.model_dump(mode="json", exclude={"hooks"}),
                                    "hooks": {"after_batch": [{"name": "x", "http": {"url": url}}]}}))
    with pytest.raises(ConfigError) as err:
        load_model(path, Playbook)
    assert "port must be a number from 1 to 65535" in " ".join(err.value.problems)


def test_an_answer_nested_past_any_real_one_fails_the_hook_not_the_run(receiver: Receiver) -> None:
    """The probe's: a hook's answer nested 100,000 deep crashed the run (RecursionError, exit 70)."""
    receiver.answer = b"[" * 100_000 + b"]" * 100_000
    hooks = {"before_run": [{"name": "silence", "on_failure": "warn",
                             "http": {"url": receiver.url + "/silences", "save": {"silence": "silenceID"}}}]}
    with state_dir():
        events: list[Event] = []
        cluster, journal = run_with(playbook_with(hooks), ["a"], events)
        assert_finished_cleanly(cluster, journal)
        assert any("the answer is not JSON" in e.message for e in events if e.kind == "warning")


@pytest.mark.parametrize("silence", ["sil\x00-42", "x" * 900_000, "line\nbreak", {"id": 1}, ["a"], True, ""])
def test_a_hostile_answer_is_not_saved_and_the_run_stops_cleanly_with_its_hooks(receiver: Receiver,
                                                                               silence: Any) -> None:
    """An answer whose saved field holds a NUL byte (no environment can carry it), 900 KB or a structure:
    the hook fails as a hook (abort: every setting restored, on_failure run), never a crash mid-run."""
    receiver.answer = {"silenceID": silence}
    hooks = {"before_run": [{"name": "silence", "http": {"url": receiver.url + "/silences",
                                                         "save": {"silence": "silenceID"}}}],
             "before_batch": [{"name": "tell", "run": "echo $ORCHESTRATOR_SAVED_SILENCE"}],
             "on_failure": [{"name": "page", "http": {"url": receiver.url + "/page"}}]}
    with state_dir():
        cluster = FakeCluster.of(["a"], settings=dict(ORIGINAL))
        with pytest.raises(HookFailed) as err:
            run_with(playbook_with(hooks), ["a"], cluster=cluster)
        assert "the answer's silenceID is not a short printable text or a number" in str(err.value)
        assert len(str(err.value)) < 1000 and "\x00" not in str(err.value)
        assert cluster.settings == ORIGINAL, "the run's raised limit put back"
        assert [c["path"] for c in receiver.calls] == ["/silences", "/page"]
        journal = Journal.load(latest_journal())
        assert journal.state is RunState.ABORTED and journal.hook_values == {}


def test_a_redirect_from_https_to_http_on_the_same_host_and_port_is_refused() -> None:
    """The origin is the scheme as well as the host and port: https to http would send the call's secret
    headers in clear (a check that ignored the scheme passed the test above)."""
    import io
    import urllib.request

    from orchestrator.restart.hooks import HookError, SameOriginRedirects

    request = urllib.request.Request("https://127.0.0.1:8443/x", headers={"Authorization": "Bearer t"})
    with pytest.raises(HookError, match="redirected to another server"):
        SameOriginRedirects().redirect_request(request, io.BytesIO(), 302, "Found", {}, "http://127.0.0.1:8443/y")
    followed = SameOriginRedirects().redirect_request(request, io.BytesIO(), 302, "Found", {},
                                                      "https://127.0.0.1:8443/y")
    assert followed is not None and followed.full_url == "https://127.0.0.1:8443/y"


def test_each_hook_point_is_a_list_of_the_playbook_and_each_list_a_point() -> None:
    """The engine names points by HookPoint; `Hooks.at` reads each one's own list (a point added to one and not
    the other fails here, not in the middle of a run)."""
    assert {p.value for p in HookPoint} == set(Hooks.model_fields)
    hooks = Hooks.model_validate({p.value: [{"name": f"h-{p.value}", "run": "true"}] for p in HookPoint})
    for point in HookPoint:
        assert [h.name for h in hooks.at(point)] == [f"h-{point.value}"]
        assert isinstance(hooks.at(point)[0], Hook)


# --- each part of a hook, exactly (mutation testing found these unpinned) -------------------------------
def test_templates_fill_strings_in_lists_and_maps_and_an_unknown_name_is_empty() -> None:
    from orchestrator.restart.hooks import render, render_json

    values = {"node": "es-1", "cluster": "prod"}
    assert render("{cluster}/{node}/{nope}", values) == "prod/es-1/"
    assert render_json({"tags": ["{node}", "x-{cluster}", 3], "n": None, "deep": [{"k": "{node}"}]}, values) == \
        {"tags": ["es-1", "x-prod", 3], "n": None, "deep": [{"k": "es-1"}]}


def test_a_redirect_is_followed_only_to_the_calls_own_origin_default_ports_included() -> None:
    from orchestrator.restart.hooks import origin, url_fit, where_origin

    assert origin("HTTP://h/x") == ("http", "h", 80) and origin("https://h:8443/") == ("https", "h", 8443)
    assert origin("https://h/") == origin("https://h:443/") != origin("http://h/")
    assert where_origin("https://h/a?token=t") == "https://h:443"
    assert url_fit("https://h/x") and url_fit("http://h:1/") and not url_fit("http://h:0/")
    assert not url_fit("ftp://h/") and not url_fit("http:///x") and not url_fit("http://h:no/")


def test_a_redirect_to_another_server_is_refused_naming_both_origins(receiver: Receiver) -> None:
    hooks = {"before_run": [{"name": "go", "http": {"url": receiver.url + "/redirect?to=http://127.0.0.2:9/x"}}]}
    with state_dir(), pytest.raises(HookFailed) as err:
        run_with(playbook_with(hooks), ["a"])
    port = receiver.url.rsplit(":", 1)[1]
    assert (f"POST http://127.0.0.1:{port} redirected to another server (http://127.0.0.2:9): refused, the call's "
            "headers are not sent elsewhere") in str(err.value)


def test_a_redirect_to_the_same_server_is_followed_a_post_as_urllib_follows_a_302(receiver: Receiver) -> None:
    """A 302 to the call's own origin is followed: a GET as it was; a POST as urllib (and browsers) follow a 302,
    as a GET without its body."""
    target = urllib.parse.quote(receiver.url + "/landed", safe="")
    hooks = {"before_run": [{"name": "get", "http": {"method": "GET", "url": receiver.url + f"/redirect?to={target}"}},
                            {"name": "post", "http": {"method": "POST", "url": receiver.url + f"/redirect?to={target}",
                                                      "body": {"run": "{run_id}"}}}]}
    with state_dir():
        run_with(playbook_with(hooks), ["a"])
    assert [(c["method"], c["path"]) for c in receiver.calls] == [
        ("GET", f"/redirect?to={target}"), ("GET", "/landed"), ("POST", f"/redirect?to={target}"), ("GET", "/landed")]
    assert receiver.calls[2]["body"] and not receiver.calls[3]["body"]


def test_a_content_type_of_the_users_own_is_kept_whatever_its_case(receiver: Receiver) -> None:
    """The JSON body's default type never replaces the user's own (given as `Content-Type` or `content-type`)."""
    hooks = {"before_run": [
        {"name": name, "http": {"url": receiver.url + "/x", "body": {"a": 1}, "headers": headers}}
        for name, headers in (("mixed", {"Content-Type": "application/x-ndjson"}),
                              ("lower", {"content-type": "text/plain"}), ("none", {}))]}
    with state_dir():
        run_with(playbook_with(hooks), ["a"])
    assert [c["content_type"] for c in receiver.calls] == ["application/x-ndjson", "text/plain", "application/json"]


def test_a_refused_redirect_closes_the_answer_it_came_in() -> None:
    """The refused redirect's answer holds the connection: closed at once, not left to the garbage collector."""
    from orchestrator.restart.hooks import HookError, SameOriginRedirects

    class Answer:
        closed = False

        def close(self) -> None:
            self.closed = True

    answer = Answer()
    with pytest.raises(HookError, match="redirected to another server"):
        SameOriginRedirects().redirect_request(urllib.request.Request("http://127.0.0.1:5/a", method="POST"), answer,
                                               302, "Found", {}, "http://127.0.0.2:5/b")
    assert answer.closed


def test_a_same_origin_redirect_urllib_does_not_follow_fails_the_call_with_its_own_answer() -> None:
    """A POST redirected by a 307 within its origin is not followed (urllib would have to send the body again): the
    call fails with the redirect's own status, reason and headers, and its error holds the answer it came in, so
    that closing the error (call_http does) closes that connection."""
    from orchestrator.restart.hooks import SameOriginRedirects

    answer, headers = io.BytesIO(b""), {"Location": "/b"}
    request = urllib.request.Request("http://127.0.0.1:5/a", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as raised:
        SameOriginRedirects().redirect_request(request, answer, 307, "Temporary Redirect", headers,
                                               "http://127.0.0.1:5/b")
    error = raised.value
    assert (error.code, error.reason, error.headers) == (307, "Temporary Redirect", headers)
    error.close()
    assert answer.closed, "the redirect's answer is closed with its error"


def test_values_in_a_url_are_quoted_whole_and_headers_are_templated(receiver: Receiver) -> None:
    hooks = {"before_stop": [{"name": "lb", "http": {"method": "PUT", "url": receiver.url + "/lb/{batch_label}",
                                                     "headers": {"Authorization": "Node {node}"}}}]}
    with state_dir():
        cluster = FakeCluster.of(["a"], settings=dict(ORIGINAL))
        run_with(playbook_with(hooks), ["a"], cluster=cluster)
    assert receiver.calls[0]["path"] == "/lb/a" and receiver.calls[0]["auth"] == "Node a"


def test_a_failed_command_hook_says_its_exit_and_the_end_of_what_it_printed(tmp_path: Path) -> None:
    long = "x" * 400 + "END"
    for run, said in ((f"echo {long} >&2; exit 3", f"exit 3: {long[-300:]}"),
                      ("echo only-stdout; exit 4", "exit 4: only-stdout")):
        hooks = {"before_run": [{"name": "check", "run": run}]}
        with state_dir(), pytest.raises(HookFailed) as err:
            run_with(playbook_with(hooks), ["a"])
        assert f"hook before_run/check failed: {said}" in str(err.value), err.value


class RecordingHosts(FakeTransport):
    def __init__(self, cluster: FakeCluster) -> None:
        super().__init__(cluster)
        self.timeouts: list[tuple[str, float | None]] = []

    def run(self, node: NodeEntry, command: str, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        self.timeouts.append((command, timeout_s))
        return super().run(node, command, timeout_s, stdin)


def test_a_host_hook_runs_on_the_nodes_host_with_its_facts_exported_and_its_timeout() -> None:
    from orchestrator.restart.hooks import run_hooks

    hook = Hook.model_validate({"name": "mark", "run": "touch /tmp/mark", "where": "host", "timeout_s": 7})
    with state_dir():
        inv, cluster = fake(["a"])
        journal = new_journal(inv, cluster)
        eng = engine(inv, cluster, journal, [])
        hosts = RecordingHosts(cluster)
        eng.ctx.transport = hosts
        run_hooks(eng.ctx, HookPoint.AFTER_START, [hook], 1, "a", ("a",), eng.ctx.node("a"))
    command, timeout = hosts.timeouts[0]
    assert timeout == 7 and command.endswith("; touch /tmp/mark")
    assert "export ORCHESTRATOR_POINT=after_start; " in command and "export ORCHESTRATOR_NODE=a; " in command
    assert f"export ORCHESTRATOR_RUN_ID={journal.run_id}; " in command


def test_a_hook_is_told_every_fact_by_its_documented_name() -> None:
    from orchestrator.restart.hooks import facts

    with state_dir():
        inv, cluster = fake(["a", "b"])
        journal = new_journal(inv, cluster)
        ctx = context_of(inv, cluster, journal)
        journal.save_hook_values({"silence": "s-1"})
        assert facts(ctx, HookPoint.AFTER_START, 2, "zone-b", ("a", "b"), ctx.node("b")) == {
            "run_id": journal.run_id, "cluster": "fake", "point": "after_start", "batch": "2",
            "batch_label": "zone-b", "nodes": "a,b", "node": "b", "host": "h-b", "saved.silence": "s-1"}
        assert facts(ctx, HookPoint.BEFORE_RUN) == {
            "run_id": journal.run_id, "cluster": "fake", "point": "before_run", "batch": "", "batch_label": "",
            "nodes": "", "node": "", "host": "", "saved.silence": "s-1"}


def test_a_failed_warn_hook_is_a_warning_of_its_batch_or_node(receiver: Receiver) -> None:
    hooks = {"before_batch": [{"name": "chat", "on_failure": "warn", "http": {"url": receiver.url + "/fail/chat"}}],
             "before_stop": [{"name": "lb", "on_failure": "warn", "http": {"url": receiver.url + "/fail/lb"}}]}
    with state_dir():
        events: list[Event] = []
        run_with(playbook_with(hooks), ["a"], events)
    warned = [(e.message, e.batch, e.node) for e in events if e.kind == "warning"]
    port = receiver.url.rsplit(":", 1)[1]
    assert warned == [
        (f"hook before_batch/chat for batch 1 failed: POST http://127.0.0.1:{port} answered 500 (on_failure: warn; "
         "going on)", 1, None),
        (f"hook before_stop/lb for a failed: POST http://127.0.0.1:{port} answered 500 (on_failure: warn; going on)",
         1, "a")]


def test_a_json_body_is_sent_as_json_and_a_saved_field_must_be_there(receiver: Receiver) -> None:
    hooks = {"before_run": [{"name": "open", "http": {"url": receiver.url + "/open", "body": {"a": "{cluster}"},
                                                      "save": {"ticket": "ticketID", "other": "otherID"}}}]}
    with state_dir(), pytest.raises(HookFailed) as err:
        run_with(playbook_with(hooks), ["a"])
    assert receiver.calls[0]["content_type"] == "application/json"
    assert ": the answer has no ticketID, otherID (on_failure: abort)" in str(err.value), err.value


def test_a_saved_value_is_a_short_printable_text_or_a_number() -> None:
    from orchestrator.restart.hooks import MAX_SAVED_CHARS, saveable

    assert saveable("x") and saveable("x" * MAX_SAVED_CHARS) and saveable(42) and saveable(1.5)
    assert not saveable("") and not saveable("x" * (MAX_SAVED_CHARS + 1)) and not saveable("a\nb")
    assert not saveable(True) and not saveable(None) and not saveable(["x"])


def test_a_server_that_cannot_be_reached_is_named_with_the_kind_of_failure() -> None:
    hooks = {"before_run": [{"name": "gone", "http": {"url": "http://127.0.0.1:9/x"}}]}
    with state_dir(), pytest.raises(HookFailed) as err:
        run_with(playbook_with(hooks), ["a"])
    assert "hook before_run/gone failed: POST http://127.0.0.1:9 failed: ConnectionRefusedError" in str(err.value)


def test_a_command_hook_past_its_timeout_fails_in_its_time_and_says_so() -> None:
    hooks = {"before_run": [{"name": "slow", "run": "sleep 30", "timeout_s": 1}]}
    began = time.monotonic()
    with state_dir(), pytest.raises(HookFailed) as err:
        run_with(playbook_with(hooks), ["a"])
    assert time.monotonic() - began < 20, "the hook's own timeout ended it"
    assert "hook before_run/slow failed: local: command did not finish in 1 s: sleep 30" in str(err.value), err.value


def test_a_done_hook_is_a_step_of_its_batch_and_node_and_a_failing_hook_after_a_failure_never_aborts(
        receiver: Receiver) -> None:
    hooks = {"before_stop": [{"name": "lb", "http": {"url": receiver.url + "/lb/{node}"}}]}
    with state_dir():
        events: list[Event] = []
        run_with(playbook_with(hooks), ["a"], events)
    done = [(e.kind, e.batch, e.node) for e in events if e.message.startswith("hook before_stop/lb for a done in ")]
    assert done == [("step", 1, "a")], done
    failing = {"before_stop": [{"name": "lb", "http": {"url": receiver.url + "/fail/lb"}}],
               "on_failure": [{"name": "page", "on_failure": "abort", "http": {"url": receiver.url + "/fail/page"}}]}
    with state_dir(), pytest.raises(HookFailed) as err:
        run_with(playbook_with(failing), ["a"])
    assert "hook before_stop/lb for a failed" in str(err.value), "the run's own failure, not the page hook's"


def test_an_after_run_or_on_failure_hook_that_fails_never_changes_how_the_run_ended() -> None:
    """Their on_failure is abort by default; the run has already ended, so they warn."""
    with state_dir():
        events: list[Event] = []
        _, journal = run_with(playbook_with({"after_run": [{"name": "unsilence", "run": "exit 3"}]}), ["a"], events)
        assert journal.state is RunState.SUCCEEDED
        assert any(e.kind == "warning" and "hook after_run/unsilence failed" in e.message for e in events)
    with state_dir():
        events = []
        failing = FakeCluster.of(["a"], settings=dict(ORIGINAL))
        failing.nodes["a"].start_fails = True
        with pytest.raises(HostError):
            run_with(playbook_with({"on_failure": [{"name": "page", "run": "exit 3"}]}), ["a"], events, failing)
        assert any(e.kind == "warning" and "hook on_failure/page failed" in e.message for e in events)


def direct_context() -> RunContext:
    """A run's context over the fake cluster, for calling one hook at a time."""
    return context_of(*fake(["a"]))


def http_hook(**http: Any) -> Hook:
    return Hook.model_validate({"name": "h", "timeout_s": 2, "http": http})


def test_an_http_hook_at_its_edges_quotes_whole_values_and_fails_as_a_hook_saying_what(
        receiver: Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.restart.hooks import HookError, call_http, where_to

    with state_dir():
        ctx = direct_context()
        call_http(ctx, http_hook(url=receiver.url + "/s/{cluster}"), {"cluster": "eu/1 x"})
        assert receiver.calls[-1]["path"] == "/s/eu%2F1%20x", "a value is quoted whole, slashes too"
        receiver.answer = ["a list"]
        with pytest.raises(HookError, match=r"the answer has no silenceID$"):
            call_http(ctx, http_hook(url=receiver.url + "/s", save={"id": "silenceID"}), {})
        receiver.answer = b"not json"
        with pytest.raises(HookError, match=r"the answer is not JSON, so id, other cannot be saved$"):
            call_http(ctx, http_hook(url=receiver.url + "/s", save={"id": "silenceID", "other": "o"}), {})
        receiver.answer = json.dumps({"silenceID": "x", "pad": "y" * 1_000_000}).encode()
        with pytest.raises(HookError, match="is not JSON"):  # read no further than 1 MB
            call_http(ctx, http_hook(url=receiver.url + "/s", save={"id": "silenceID"}), {})
        receiver.answer = b'{"silenceID": "x\xff"}'
        call_http(ctx, http_hook(url=receiver.url + "/s", save={"id": "silenceID"}), {})
        assert ctx.journal.hook_values == {"id": "x\ufffd"}, "bytes that are no UTF-8 are replaced, not fatal"
        monkeypatch.setenv("HOOK_URL", "ftp://h/x")
        with pytest.raises(HookError) as unfit:
            call_http(ctx, http_hook(url_from={"env": "HOOK_URL"}), {})
        assert str(unfit.value) == ("the URL is not an http:// or https:// URL with a host and a port from 1 to 65535 "
                                    "(not shown: it may be a secret)")
        with pytest.raises(HookError, match=f"^cannot read secret file {tmp_path / 'gone'}: file not found$"):
            call_http(ctx, http_hook(url_from={"file": str(tmp_path / "gone")}), {})
    call = http_hook(url="http://h/").http
    assert call is not None
    assert where_to(call, "http://h.example/x?token=t") == "POST http://h.example"
    assert where_to(call, "https://h.example:8443/x") == "POST https://h.example:8443"


def test_an_http_hook_whose_server_never_answers_fails_at_its_timeout_naming_the_error() -> None:
    import socket

    from orchestrator.restart.hooks import HookError, call_http

    with socket.socket() as silent, state_dir():
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # the connection is taken into the backlog; nothing ever answers
        started = time.monotonic()
        hook = Hook.model_validate({"name": "h", "timeout_s": 1,
                                    "http": {"url": f"http://127.0.0.1:{silent.getsockname()[1]}/x"}})
        with pytest.raises(HookError) as err:
            call_http(direct_context(), hook, {})
        assert str(err.value).endswith(" failed: TimeoutError") and time.monotonic() - started < 10, err.value


def test_a_command_hook_exports_its_facts_on_the_host_and_is_timed_out_here() -> None:
    from orchestrator.restart.hooks import HookError, run_command, run_one

    with state_dir():
        ctx = direct_context()
        on_host = Hook.model_validate({"name": "h", "run": "true", "where": "host"})
        run_command(ctx, on_host, {"node": "a", "batch_label": "z 1"}, ctx.node("a"))
        assert ctx.transport.commands[-1] == (  # type: ignore[attr-defined]
            "a", "export ORCHESTRATOR_NODE=a; export ORCHESTRATOR_BATCH_LABEL='z 1'; true")
        slow = Hook.model_validate({"name": "slow", "run": "sleep 30", "where": "local", "timeout_s": 1})
        started = time.monotonic()
        with pytest.raises(HookError):
            run_command(ctx, slow, {}, None)
        assert time.monotonic() - started < 10, "its own timeout, not the transport's default"
        said: list[Event] = []
        ctx.emit = said.append
        run_one(ctx, HookPoint.AFTER_RUN, Hook.model_validate({"name": "quick", "run": "true", "where": "local"}),
                {"batch": ""}, None, never_abort=True)
        seconds = float(said[-1].message.removeprefix("hook after_run/quick done in ").removesuffix(" s"))
        assert 0 <= seconds < 10, said[-1].message


def test_a_run_level_local_hook_is_audited_as_run_here(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from orchestrator.restart.hooks import run_command

    with state_dir(), caplog.at_level(logging.INFO):
        run_command(direct_context(), Hook.model_validate({"name": "note", "run": "true", "where": "local"}), {}, None)
    audits = [r.audit for r in caplog.records if hasattr(r, "audit")]  # type: ignore[attr-defined]
    assert [(a["node"], a["host"], a["command"], a["rc"]) for a in audits] == [("local", "localhost", "true", 0)]


def test_a_run_level_hook_has_no_batch_or_label_in_its_facts(tmp_path: Path) -> None:
    from orchestrator.restart.hooks import run_hooks

    seen = tmp_path / "facts"
    said = '"[$ORCHESTRATOR_BATCH][$ORCHESTRATOR_BATCH_LABEL][$ORCHESTRATOR_NODES]"'
    hook = Hook.model_validate({"name": "note", "where": "local", "run": f"echo {said} > {seen}"})
    with state_dir():
        run_hooks(direct_context(), HookPoint.BEFORE_RUN, [hook])
    assert seen.read_text() == "[][][]\n"


def test_a_node_hook_of_a_zone_batch_has_its_batch_s_number_and_label(receiver: Receiver) -> None:
    """A zone batch's nodes go through their steps each at its own pace; a node's hook still says the batch it is
    in, by number and label (the zone), beside its own node."""
    from orchestrator.restart.plan import Mode

    names = ["a", "b"]
    hooks = {"before_stop": [{"name": "lb", "http": {"method": "PUT",
                                                     "url": receiver.url + "/lb/{batch}/{batch_label}/{node}"}}]}
    with state_dir():
        inv = inventory(names, zones=["z1", "z1"])
        cluster = FakeCluster.of(names, settings=dict(ORIGINAL))
        journal = new_journal(inv, cluster, Mode.ZONE)
        [batch] = journal.batches
        assert batch.nodes == names
        batch.label = "z1"  # as the real plan labels a zone's batch (the fake product's plan does not)
        eng = engine(inv, cluster, journal, [])
        eng.procedure = resolve(playbook_with(hooks), PRODUCT)
        eng.run()
    assert sorted(c["path"] for c in receiver.calls) == ["/lb/1/z1/a", "/lb/1/z1/b"]
