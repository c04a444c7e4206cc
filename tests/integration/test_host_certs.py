"""Hosts verified by their OpenSSH host certificates: the sandbox's hosts present a certificate signed
by the sandbox's host CA, and a known_hosts that lists no host, only that `@cert-authority` line, is
enough for the tool's SSH (real sshd, real certificates from ssh-keygen); another authority is refused."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import assert_no_traceback, orchestrate
from tests.integration.conftest import SandboxManager, Shape


def with_known_hosts(tmp_path: Path, info: dict[str, Any], known_hosts: Path) -> Path:
    inv = yaml.safe_load(Path(info["inventory"]).read_text())
    inv["ssh"]["known_hosts"] = str(known_hosts)
    path = tmp_path / f"inventory-{known_hosts.name}.yaml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_a_known_hosts_with_only_the_cert_authority_line_reaches_the_hosts(sandboxes: SandboxManager,
                                                                           tmp_path: Path) -> None:
    info = sandboxes.get(Shape())
    ca_only = Path(info["known_hosts_ca"])
    assert ca_only.read_text().startswith("@cert-authority ") and len(ca_only.read_text().splitlines()) == 1
    checked = orchestrate("tune", "--config", str(with_known_hosts(tmp_path, info, ca_only)), "--check", "--json")
    assert_no_traceback(checked)
    reports = [json.loads(line) for line in checked.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 3 and all(r["error"] is None and r["knobs"] for r in reports), reports

    other = tmp_path / "other-ca"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    kind, key, *_ = Path(str(other) + ".pub").read_text().split()
    wrong = tmp_path / "known_hosts_other_ca"
    wrong.write_text(f"@cert-authority 10.231.0.* {kind} {key}\n")
    refused = orchestrate("tune", "--config", str(with_known_hosts(tmp_path, info, wrong)), "--check", "--json")
    assert_no_traceback(refused)
    errors = [json.loads(line)["error"] for line in refused.stdout.splitlines() if line.startswith("{")]
    assert len(errors) == 3 and all("host certificate refused: the certificate is signed by an authority not "
                                    "listed" in (e or "") for e in errors), errors
