"""Tuning profiles: which knobs a host of a given service should have, as typed config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from orchestrator.config.loader import load_model
from orchestrator.config.model_base import ABSOLUTE_PATH, Model
from orchestrator.errors import ConfigError
from orchestrator.paths import search

SYSCTL_KEY = re.compile(r"[a-z0-9_]{1,64}(\.[a-z0-9_]{1,64}){1,8}")
SYSCTL_VALUE = re.compile(r"(>=)?-?\d{1,19}")


class ThpSpec(Model):
    enabled: Literal["never", "madvise", "always"] = "never"
    defrag: Literal["never", "madvise", "always", "defer", "defer+madvise"] = "never"


class NumadSpec(Model):
    state: Literal["disabled", "enabled"] = "disabled"


class IoSchedulerSpec(Model):
    choice: Literal["noop", "none", "deadline", "mq-deadline", "kyber", "bfq", "cfq"] = "noop"


class ErlangSchedulersSpec(Model):
    riak_conf: ABSOLUTE_PATH = "/etc/riak/riak.conf"


class Knobs(Model):
    thp: ThpSpec | None = None
    numad: NumadSpec | None = None
    io_scheduler: IoSchedulerSpec | None = None
    sysctl: dict[str, str] = Field(default_factory=dict)
    erlang_schedulers: ErlangSchedulersSpec | None = None

    @field_validator("sysctl")
    @classmethod
    def sysctl_values(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not SYSCTL_KEY.fullmatch(key):
                raise ValueError(f"{key!r} is not a sysctl name such as vm.swappiness")
            if not SYSCTL_VALUE.fullmatch(str(value)):
                raise ValueError(f"{key}: {value!r} is not a number or '>=N'")
        return v


class Profile(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""
    knobs: Knobs


def load_profile(name: str, inventory_dir: Path | None = None) -> Profile:
    """A tuning profile, found in the documented order (orchestrator.paths.search)."""
    found, looked = search("tuning", name, inventory_dir)
    if found is None:
        raise ConfigError("inventory", [f"tuning.profile: {name!r} not found; looked for {', '.join(looked)} "
                                        "('none' turns tuning off)"])
    return load_model(found, Profile)
