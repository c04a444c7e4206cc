"""`orchestrate inventory`: write a cluster's inventory from what the cluster says about itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from orchestrator.cli.output import say, terminal
from orchestrator.errors import ConfigError
from orchestrator.paths import write_file_for_the_operator

app = typer.Typer(help="Inventories: write one from a running cluster.", no_args_is_help=True)


@app.command()
def discover(
    endpoint: str = typer.Option(..., "--endpoint", help="One HTTP(S) endpoint of the cluster, e.g. "
                                                         "https://es1.example:9200."),
    name: str = typer.Option(None, "--name", help="The inventory's cluster name (default: the cluster's own)."),
    username: str = typer.Option(None, "--username", help="User to connect as (with --password-env or "
                                                          "--password-file)."),
    password_env: str = typer.Option(None, "--password-env", metavar="VAR", help="The password is in this "
                                                                                  "environment variable."),
    password_file: Path = typer.Option(None, "--password-file", help="The password is in this file."),
    api_key_env: str = typer.Option(None, "--api-key-env", metavar="VAR", help="An API key is in this "
                                                                                "environment variable."),
    ca_file: Path = typer.Option(None, "--ca-file", help="CA certificate that signed the cluster's HTTP "
                                                         "certificate."),
    ssh_config: Path = typer.Option(None, "--ssh-config", help="OpenSSH client config whose Host blocks name the "
                                                               "nodes (HostName, User, Port, IdentityFile, "
                                                               "UserKnownHostsFile)."),
    from_ansible: Path = typer.Option(None, "--from-ansible", help="What `ansible-inventory -i INVENTORY --list` "
                                                                   "prints (JSON): nodes mapped to its hosts."),
    all_endpoints: bool = typer.Option(False, "--all-endpoints", help="Write every HTTP address the nodes publish "
                                                                      "as an endpoint (the credentials go to each), "
                                                                      "not only --endpoint; link-local and unexpected "
                                                                      "loopback addresses are still left out."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the inventory here (default: print it)."),
    force: bool = typer.Option(False, "--force", help="With -o: replace an existing file."),
) -> None:
    """Write an inventory from the cluster: every node (name, address, zone from the awareness attribute
    in use, data paths), its HTTP endpoint (--all-endpoints: every one it publishes), and how each host
    is reached (through your SSH config or Ansible inventory). Credentials are written as references to
    where they are ({env: VAR} or {file: PATH}), never as values. Reads only; the result is checked by
    the inventory's own rules."""
    from orchestrator.runs.discover import discover as run_discover

    if ssh_config is not None and from_ansible is not None:
        raise ConfigError("discover", ["give --ssh-config or --from-ansible, not both"])
    if password_env and password_file:
        raise ConfigError("discover", ["give --password-env or --password-file, not both"])
    if output is not None and output.exists() and not force:  # before asking the cluster anything
        raise ConfigError(str(output), ["exists; --force replaces it"])
    cluster: dict[str, Any] = {}
    if username:
        cluster["username"] = username
    if password_env or password_file:
        cluster["password"] = {"env": password_env} if password_env else {"file": str(password_file)}
    if api_key_env:
        cluster["api_key"] = {"env": api_key_env}
    if ca_file:
        cluster["ca_file"] = str(ca_file)
    text, notes = run_discover(endpoint, cluster, ssh_config, from_ansible, name, all_endpoints)
    for note in notes:
        say(f"note: {note}")
    if output is None:
        terminal.out.print(text, markup=False, highlight=False, end="")
        return
    write_file_for_the_operator(output, text, mode=0o644)
    say(f"inventory written to {output}")
