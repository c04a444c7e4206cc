"""Hooks in a playbook: the operator's own commands and HTTP calls at points of a run.

A load balancer drain before a node stops, an alert silence for the run, a chat message per batch.
Each hook is a command (here, or on the node's host) or an HTTP call, with a timeout and a failure
policy. What a hook is told comes as environment variables (commands) or `{name}` templates (HTTP),
never secrets unless it names a secret source itself.
"""

from __future__ import annotations

import re
import urllib.parse
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from orchestrator.config.model import SecretSource
from orchestrator.config.model_base import Model


class HookPoint(StrEnum):
    """Where in a run a playbook's hooks run: each is a list of the same name under `hooks:`."""

    BEFORE_RUN = "before_run"  # each time the run starts or resumes
    AFTER_RUN = "after_run"  # after success (or a stop asked for with --stop-after)
    ON_FAILURE = "on_failure"  # after a failure or an abort; never aborts
    BEFORE_BATCH = "before_batch"  # the gate passed, nothing done yet
    AFTER_BATCH = "after_batch"  # the batch recovered
    BEFORE_STOP = "before_stop"  # per node, just before its stop
    AFTER_START = "after_start"  # per node, back as a new process


RUN_POINTS = (HookPoint.BEFORE_RUN, HookPoint.AFTER_RUN, HookPoint.ON_FAILURE)
TEMPLATE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")
# What a hook is told: templates {name} in an HTTP call, ORCHESTRATOR_NAME in a command's environment.
VARIABLES = ("run_id", "cluster", "point", "batch", "batch_label", "nodes", "node", "host")
ENV_NAME = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class HttpCall(Model):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: str | None = Field(None, pattern=r"^https?://[^\s]+$", max_length=2008)
    url_from: SecretSource | None = None  # a URL that is itself a secret (a chat webhook), kept out of files
    headers: dict[str, str] = Field(default_factory=dict, max_length=30)
    secret_headers: dict[str, SecretSource] = Field(default_factory=dict, max_length=10)  # Authorization, say
    body: Any = None  # JSON; its text values may hold templates
    # name -> a top-level field of the JSON answer, kept in the journal for later hooks as {saved.name}
    save: dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,40}$")], str] = Field(default_factory=dict,
                                                                                       max_length=10)

    @model_validator(mode="after")
    def one_url(self) -> HttpCall:
        if (self.url is None) == (self.url_from is None):
            raise ValueError("give exactly one of `url` or `url_from` (a secret source holding the URL)")
        if self.url is not None and not TEMPLATE.search(self.url.split("/", 3)[2]):
            try:
                port = urllib.parse.urlsplit(self.url).port
            except ValueError:
                port = 0
            if port == 0:
                raise ValueError("the URL's port must be a number from 1 to 65535")
        return self


class Hook(Model):
    name: str = Field(pattern=r"^[a-z0-9_-]{1,40}$")
    run: str | None = Field(None, min_length=1, max_length=4000)  # a shell command
    where: Literal["local", "host"] = "local"  # host: on the node's host (node and batch hooks)
    http: HttpCall | None = None
    timeout_s: float = Field(30, ge=1, le=3600)
    on_failure: Literal["abort", "warn"] = "abort"
    env: list[ENV_NAME] = Field(default_factory=list, max_length=50)  # variables of this process a local command gets

    @model_validator(mode="after")
    def one_action(self) -> Hook:
        if (self.run is None) == (self.http is None):
            raise ValueError(f"hook {self.name}: give exactly one of `run` (a command) or `http` (a call)")
        for name in templates_in(self.http.model_dump(exclude={"url_from", "secret_headers"}) if self.http else {}):
            if name not in VARIABLES and not re.fullmatch(r"saved\.[a-z][a-z0-9_]{0,40}", name):
                raise ValueError(f"hook {self.name}: unknown template {{{name}}}; known: "
                                 f"{', '.join(VARIABLES)} and saved.NAME")
        return self


def templates_in(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(TEMPLATE.findall(value))
    if isinstance(value, dict):
        return set().union(*(templates_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(templates_in(v) for v in value)) if value else set()
    return set()


class Hooks(Model):
    before_run: list[Hook] = Field(default_factory=list, max_length=20)  # each time the run starts or resumes
    after_run: list[Hook] = Field(default_factory=list, max_length=20)  # after success
    on_failure: list[Hook] = Field(default_factory=list, max_length=20)  # after a failure or a stop; never aborts
    before_batch: list[Hook] = Field(default_factory=list, max_length=20)  # the gate passed, nothing done yet
    after_batch: list[Hook] = Field(default_factory=list, max_length=20)  # the batch recovered
    before_stop: list[Hook] = Field(default_factory=list, max_length=20)  # per node, just before its stop
    after_start: list[Hook] = Field(default_factory=list, max_length=20)  # per node, back as a new process

    @model_validator(mode="after")
    def placed_well(self) -> Hooks:
        names = [h.name for point in HookPoint for h in self.at(point)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"hooks: name(s) used twice: {', '.join(repeated)}")
        for point in RUN_POINTS:
            if any(h.where == "host" for h in self.at(point)):
                raise ValueError(f"hooks.{point}: a run-level hook has no node; `where: host` is for node and "
                                 "batch hooks")
        return self

    def at(self, point: HookPoint) -> list[Hook]:
        return list({HookPoint.BEFORE_RUN: self.before_run, HookPoint.AFTER_RUN: self.after_run,
                     HookPoint.ON_FAILURE: self.on_failure, HookPoint.BEFORE_BATCH: self.before_batch,
                     HookPoint.AFTER_BATCH: self.after_batch, HookPoint.BEFORE_STOP: self.before_stop,
                     HookPoint.AFTER_START: self.after_start}[point])
