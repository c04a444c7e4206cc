"""Several commands on one host in one round trip, each with its own exit code, stdout and stderr.

The one way the tool batches remote commands (tuning reads, tuning fixes, Riak's status
commands): over SSH a round trip costs far more than a small command. Each command runs in a
subshell with stdin closed; its outputs go through files, so none can interleave with another's.
"""

from __future__ import annotations

import secrets

from orchestrator.config.model import NodeEntry
from orchestrator.errors import HostError
from orchestrator.hosts.transport import CommandResult, Transport


def script(commands: list[str], token: str, stop_at_failure: bool, reads_input: bool = False) -> str:
    """The shell script: runs the commands (all, or up to the first that fails), then prints, per
    command run, a ``token`` line, its exit code, its stdout, a token line, its stderr, a token line
    (each output with one newline added before its token)."""
    lines = ["T=$(mktemp -d) || exit 97", "S="]
    for i, cmd in enumerate(commands):
        stdin = "" if reads_input else " </dev/null"
        run = f'( {cmd}\n) >"$T/o{i}" 2>"$T/e{i}"{stdin}; echo $? >"$T/r{i}"'
        if stop_at_failure:
            run = f'if [ -z "$S" ]; then {run}; [ "$(cat "$T/r{i}")" = 0 ] || S=1; fi'
        lines.append(run)
    lines.append(f"for i in $(seq 0 {len(commands) - 1}); do [ -f \"$T/r$i\" ] || break; "
                 f"printf '%s\\n' {token}; cat \"$T/r$i\" \"$T/o$i\"; printf '\\n%s\\n' {token}; "
                 f"cat \"$T/e$i\"; printf '\\n%s\\n' {token}; done")
    lines.append('rm -rf "$T"')
    return "\n".join(lines)


def parse(out: str, token: str) -> list[CommandResult]:
    parts = out.split(f"{token}\n")
    if (len(parts) - 1) % 3:
        raise HostError("batched commands: the output does not match the script's format")
    results = []
    for i in range((len(parts) - 1) // 3):
        head, err = parts[1 + 3 * i], parts[2 + 3 * i]
        rc_text, _, stdout = head.partition("\n")
        results.append(CommandResult(int(rc_text), stdout[:-1], err[:-1]))
    return results


def run_batch(transport: Transport, node: NodeEntry, commands: list[str], stop_at_failure: bool = False,
              timeout_s: float | None = None, stdin: bytes | None = None) -> list[CommandResult] | None:
    """The results of ``commands`` run on ``node`` in one round trip; with ``stop_at_failure``, of those
    up to and including the first that failed. None when the host cannot run the script (no mktemp).
    ``stdin`` is the script's standard input: commands that read it (file writes) take their share in
    order; every other command runs with its input closed."""
    if not commands:
        return []
    token = f"@@orchestrator-{secrets.token_hex(8)}@@"
    result = transport.run(node, script(commands, token, stop_at_failure, reads_input=stdin is not None), timeout_s,
                           stdin=stdin)
    if result.rc == 97:
        return None
    results = parse(result.stdout, token)
    complete = len(results) == len(commands) or (stop_at_failure and results and not results[-1].ok)
    if not complete:
        raise HostError(f"{node.name}: batched commands: {len(results)} of {len(commands)} results came back "
                        f"(exit {result.rc}: {result.stderr.strip()[-200:]})")
    return results
