"""One Airflow home for the test process, set before Airflow is first imported (Airflow reads its
configuration then): a SQLite database, a DAGs folder, no example DAGs. Import this module before
anything of Airflow's."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

HOME = Path(os.environ.get("ORCHESTRATOR_TEST_AIRFLOW_HOME") or tempfile.mkdtemp(prefix="airflow-home-"))
if "ORCHESTRATOR_TEST_AIRFLOW_HOME" not in os.environ:
    atexit.register(shutil.rmtree, HOME, True)  # made for this process: gone with it
    os.environ["ORCHESTRATOR_TEST_AIRFLOW_HOME"] = str(HOME)  # a DAG run in a child process shares it
DAGS = HOME / "dags"
SETTINGS = {
    "AIRFLOW_HOME": str(HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{HOME}/airflow.db",
}
os.environ.update(SETTINGS)
_migrated = False


def migrated() -> Path:
    """The home with its database made (once per process; about 3 s)."""
    global _migrated
    if not _migrated:
        DAGS.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
                              capture_output=True, text=True, timeout=300, env={**os.environ, **SETTINGS})
        assert proc.returncode == 0, proc.stderr[-2000:]
        _migrated = True
    return HOME


def dag_module(source: Path, name: str, beside: dict[str, str] | None = None) -> ModuleType:
    """A DAG file copied into the DAGs folder (files ``beside`` it written there too) and imported."""
    migrated()
    target = DAGS / f"{name}.py"
    shutil.copyfile(source, target)
    for file_name, text in (beside or {}).items():
        (DAGS / file_name).write_text(text)
    spec = importlib.util.spec_from_file_location(name, target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
