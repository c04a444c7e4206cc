"""Finding a JDK able to run a given Elasticsearch version."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from orchestrator.errors import SandboxError

JVM_ROOT = Path("/usr/lib/jvm")


def required_java(es_version: str) -> int:
    """Elasticsearch 9 needs Java 21 or later; 8.x runs on 17."""
    major = int(es_version.split(".")[0])
    return 21 if major >= 9 else 17


def java_major(java_home: Path) -> int | None:
    java = java_home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)', out.stderr)
    return int(match.group(1)) if match else None


def find_java_home(es_version: str, need: int | None = None, product: str = "Elasticsearch",
                   below: int | None = None) -> Path:
    """The first JDK (with javac) that is new enough: $ORCHESTRATOR_JAVA_HOME, $JAVA_HOME, then /usr/lib/jvm.
    ``need``: the Java major version, when not Elasticsearch's for ``es_version``; ``below``: the first
    major version that cannot run it (OpenSearch 2.x needs the security manager, gone in Java 24)."""
    need = need or required_java(es_version)
    candidates: list[Path] = []
    for var in ("ORCHESTRATOR_JAVA_HOME", "JAVA_HOME"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]))
    if JVM_ROOT.is_dir():
        # Prefer the newest JDK: sort by the version number in the directory name.
        found = [p for p in JVM_ROOT.iterdir() if p.is_dir() and not p.is_symlink()]
        candidates += sorted(found, key=lambda p: [int(n) for n in re.findall(r"\d+", p.name)[:1] or [0]], reverse=True)
    seen: list[str] = []
    for home in candidates:
        major = java_major(home)
        seen.append(f"{home} (java {major if major else '?'})")
        if major is not None and major >= need and (below is None or major < below) and \
                (home / "bin" / "javac").is_file():
            return home
    wanted = f"a JDK {need} or later" + (f", before {below}," if below else "")
    raise SandboxError(
        f"{product} {es_version} needs {wanted} with javac, and none was found.\n"
        f"Looked at: {', '.join(seen) or 'nothing'}.\n"
        f"Install one (e.g. `apt-get install openjdk-{max(need, 17)}-jdk-headless`) or set ORCHESTRATOR_JAVA_HOME."
    )
