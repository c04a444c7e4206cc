"""The one exception hierarchy of the orchestrator.

Every error raised on purpose is an ``OrchestratorError`` whose message is written for the
operator: what went wrong, and what to do. Errors of the libraries below (elasticsearch-py,
paramiko, subprocess) are translated at the adapter that calls them. Only the CLI prints
errors and chooses exit codes.

    OrchestratorError
    ├── ConfigError            bad inventory, playbook or profile (lists every problem)
    ├── SandboxError           the local sandbox cannot be built, started or stopped
    ├── ClusterError           Elasticsearch (or Riak) refused or failed a call
    │   ├── ClusterUnreachable the endpoint did not answer, or refused credentials it had
    │   │                      accepted (no elected master): waits ride it out
    │   └── IncompleteAnswer   an answer that leaves out part of what was asked (a node whose stats
    │                          failed, a node not under its planned id): never read as "nothing
    │                          there"; waits ride it out, a last look refuses on it
    ├── HostError              a command on a host failed
    │   ├── HostUnreachable    SSH could not connect, or the host key was refused
    │   └── HostDidNotReturn   a rebooted host did not come back in time (the run ends with its
    │                          temporary settings restored)
    ├── PreflightFailed        a check before the run failed; nothing was changed
    ├── UnsafeToProceed        the cluster is not safe for the next step
    ├── WaitTimeout            a wait ran out of time (says what it saw)
    ├── RunLocked              another run holds this cluster's lock
    ├── JournalError           the run's journal is missing, corrupt or of another version
    ├── Aborted                the operator interrupted the run (Ctrl-C / SIGTERM)
    │   ├── HookFailed         a hook with the `abort` policy failed
    │   └── StoppedAfter       the run stopped after the batches asked (--stop-after)
    │       └── OutsideWindow  the next batch would not end before the maintenance window closes
    └── RunFailed              a run that had started failed: its cause and its journal
                               (restart/journal.py; exit code of the cause)
"""

from __future__ import annotations

from datetime import datetime


def listed(problems: list[str]) -> str:
    return "\n".join(f"  - {p}" for p in problems)


RESUME_HERE = "`orchestrate resume`"  # how an operator at a terminal tries a run again


def with_next_try(what: str, resume: str, next_try: str | None = RESUME_HERE) -> str:
    """``what`` happened, then what the run's next try does (``resume``), said as ``next_try`` names that try
    (None: not said, for a run that will not be tried again)."""
    return f"{what}; {next_try} {resume}" if resume and next_try else what


class OrchestratorError(Exception):
    """Base of every error the orchestrator raises for an operator to read. ``resume``: what the run's next try
    does ("waits again"), a field and not words of the message, so that each front end says it its own way (a
    terminal's `orchestrate resume`, an Airflow task's next try) and an abandoned run not at all."""

    exit_code = 1
    # A run that fails keeps its temporary settings in force (allocation restricted) unless its error
    # says otherwise: with a node in trouble, restoring them would start copying its shards elsewhere.
    restores_settings = False

    def __init__(self, *args: object, resume: str = "") -> None:
        super().__init__(*args)
        self.resume = resume

    @property
    def what(self) -> str:
        """The message, without the next try."""
        return super().__str__()

    def told(self, next_try: str | None = RESUME_HERE) -> str:
        """The message with the next try named as ``next_try`` (None: without it)."""
        return with_next_try(self.what, self.resume, next_try)

    def __str__(self) -> str:
        return self.told()


class ConfigError(OrchestratorError):
    """Configuration is invalid. ``problems`` holds one line per problem, each with its place."""

    exit_code = 2

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s):\n{listed(problems)}")


class SandboxError(OrchestratorError):
    exit_code = 3


class ClusterError(OrchestratorError):
    exit_code = 4


class ClusterUnreachable(ClusterError):
    pass


class IncompleteAnswer(ClusterError):
    """The cluster answered 200 without part of what was asked: what is not there was not seen, which is not
    the same as "holds nothing" (issue 56, H2)."""


class WrongProduct(ClusterError):
    """The server is another product than the client's (Elasticsearch vs OpenSearch): the inventory's
    `cluster.product` is wrong, and the message says which to set. Discovery then asks the next product."""


class HostError(OrchestratorError):
    exit_code = 4


class HostUnreachable(HostError):
    pass


class HostDidNotReturn(HostError):
    """A rebooted host is still away after `timeouts.reboot_s`: not a node in a short restart any more but a
    node lost for longer than planned. The run restores its settings, so the cluster can copy the lost
    node's shards elsewhere instead of waiting on it with allocation restricted."""

    restores_settings = True


class PreflightFailed(OrchestratorError):
    """A preflight check failed before anything was changed."""

    exit_code = 5

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"preflight failed, nothing was changed:\n{listed(problems)}")


class UnsafeToProceed(OrchestratorError):
    exit_code = 6


class WaitTimeout(OrchestratorError):
    exit_code = 6


class RunLocked(OrchestratorError):
    exit_code = 7


class JournalError(OrchestratorError):
    exit_code = 8


class Aborted(OrchestratorError):
    exit_code = 130


class HookFailed(Aborted):
    """A hook whose failure policy is `abort` failed: the run stops at once, as on Ctrl-C (settings
    restored), but it is a failure, not the operator's stop."""

    exit_code = 6


class StoppedAfter(Aborted):
    """The run did the number of batches asked (--stop-after) and stopped at that boundary, every
    temporary setting restored: not a failure, but not the end either (`resume` goes on)."""

    exit_code = 11


class OutsideWindow(StoppedAfter):
    """The next batch would not end before the maintenance window (or ``--until``) closes: the run stopped
    before it, as ``--stop-after`` stops, every node back and every setting restored. ``opens``: when the
    next window opens (None: none ahead); a run told to wait holds until then and goes on."""

    exit_code = 12

    def __init__(self, message: str, opens: datetime | None = None, resume: str = "") -> None:
        self.opens = opens
        super().__init__(message, resume=resume)
