"""What a command the tool starts on this machine sees of the tool's environment: a small base, and for an
SSH config's commands (ProxyCommand, `Match exec` while `ssh -G` reads it) the user's shell and SSH agent.
Never the rest of it: the cluster's password, a sudo password, a scheduler's secrets are in it."""

from __future__ import annotations

import os

BASE_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME")


def base_environment() -> dict[str, str]:
    return {k: os.environ[k] for k in BASE_ENVIRONMENT if k in os.environ}


# What a ProxyCommand (often `ssh -W %h:%p bastion`) needs besides: the user's shell and SSH agent. Never the
# rest of the tool's environment: the cluster's and sudo's passwords, a scheduler's secrets.
PROXY_ENVIRONMENT = ("SHELL", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "XDG_RUNTIME_DIR")


def proxy_environment() -> dict[str, str]:
    return {**base_environment(), **{k: os.environ[k] for k in PROXY_ENVIRONMENT if k in os.environ}}
