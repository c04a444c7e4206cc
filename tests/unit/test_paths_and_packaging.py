"""Where playbooks, tuning profiles and inventories are found, and that the wheel ships them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from orchestrator.config.inventory import load_inventory
from orchestrator.config.playbook import load_playbook
from orchestrator.errors import ConfigError
from orchestrator.tuning.profile import load_profile
from tests.helpers import REPO

SHIPPED = (REPO / "playbooks" / "elasticsearch-rolling.yaml").read_text()


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ORCHESTRATOR_CONFIGS", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def playbook_named(description: str) -> str:
    return SHIPPED.replace("description: Restrict", f"description: {description}. Restrict")


def test_playbook_search_order_never_looks_in_the_current_directory(homes: Path) -> None:
    (homes / "work" / "playbooks").mkdir()
    (homes / "work" / "playbooks" / "elasticsearch-rolling.yaml").write_text(playbook_named("cwd"))
    assert load_playbook("elasticsearch-rolling").description.startswith("Restrict"), "the shipped one"
    (homes / "home" / "playbooks").mkdir(parents=True)
    (homes / "home" / "playbooks" / "elasticsearch-rolling.yaml").write_text(playbook_named("user"))
    assert load_playbook("elasticsearch-rolling").description.startswith("user")
    inventory_dir = homes / "inv"
    (inventory_dir / "playbooks").mkdir(parents=True)
    (inventory_dir / "playbooks" / "elasticsearch-rolling.yaml").write_text(playbook_named("beside"))
    assert load_playbook("elasticsearch-rolling", inventory_dir).description.startswith("beside")
    (inventory_dir / "mine.yaml").write_text(playbook_named("explicit"))
    assert load_playbook("mine.yaml", inventory_dir).description.startswith("explicit"), "relative to the inventory"


def test_unknown_playbook_and_profile_say_where_they_looked(homes: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_playbook("nope")
    assert str(homes / "home") in str(err.value) and str(err.value).count("playbooks/nope.yaml") == 2
    with pytest.raises(ConfigError) as err:
        load_profile("nope")
    assert str(err.value).count("tuning/nope.yaml") == 2 and "'none' turns tuning off" in str(err.value)


def test_tuning_profile_beside_the_inventory_wins(homes: Path) -> None:
    shipped = load_profile("elasticsearch")
    (homes / "inv" / "tuning").mkdir(parents=True)
    text = (REPO / "configs" / "tuning" / "elasticsearch.yaml").read_text()
    (homes / "inv" / "tuning" / "elasticsearch.yaml").write_text(text.replace(shipped.description, "mine", 1))
    assert load_profile("elasticsearch", homes / "inv").description == "mine"


def test_an_inventory_finds_its_playbook_beside_it(homes: Path) -> None:
    clusters = homes / "home" / "clusters"
    (clusters / "playbooks").mkdir(parents=True)
    (clusters / "playbooks" / "custom.yaml").write_text(playbook_named("custom").replace(
        "name: elasticsearch-rolling", "name: custom"))
    (clusters / "prod.yaml").write_text("cluster: {name: prod, endpoints: ['http://10.0.0.1:9200']}\n"
                                        "ssh: {transport: local}\nnodes: [{name: a, host: h1}]\nplaybook: custom\n")
    inv, path = load_inventory("prod", None)
    assert path == clusters / "prod.yaml" and inv.directory == clusters
    assert load_playbook(inv.playbook, inv.directory).name == "custom"


def test_every_package_is_listed_for_the_wheel() -> None:
    """pyproject lists packages by hand (two are mapped from other folders): none may be forgotten."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {".".join(Path(folder).parts) for folder in setup["package-dir"].values()}
    listed = set(setup["packages"]) | mapped  # a folder mapped to another package's name is listed as that
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "orchestrator").rglob("*")
             if p.suffix in (".py", ".java", ".c") or p.parent.name == "host_files"}
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_the_wheel_installs_under_its_own_name_and_its_command_runs_outside_the_checkout(tmp_path: Path) -> None:
    """`pip install rolling-orchestrator` (a name free on PyPI: `orchestrator` is another project's) gives the
    `orchestrate` command and the `orchestrator` package, shipped playbooks and profiles with it."""
    import os
    import subprocess
    import sys

    wheels, site, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
                   check=True, timeout=600, cwd=elsewhere)
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith("rolling_orchestrator-0.1.0-")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, timeout=300, cwd=elsewhere)
    env = {**os.environ, "PYTHONPATH": str(site)}
    version = subprocess.run([str(site / "bin" / "orchestrate"), "--version"], capture_output=True, text=True,
                             cwd=elsewhere, env=env, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == "orchestrator 0.1.0", version
    shipped = subprocess.run([sys.executable, "-c", "import orchestrator, importlib.resources as r; "
                              "print(orchestrator.__file__); "
                              "print(r.files('orchestrator.shipped.playbooks').joinpath('elasticsearch-rolling.yaml')"
                              ".is_file(), r.files('orchestrator.shipped.tuning').joinpath('elasticsearch.yaml')"
                              ".is_file())"], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    where, found = shipped.stdout.splitlines()
    assert where.startswith(str(site)) and found == "True True", shipped
    # A pip or pipx user has the example DAGs and their settings to copy.
    copied = subprocess.run([str(site / "bin" / "orchestrate"), "docs", "examples", "--to", str(tmp_path / "dags")],
                            capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    assert copied.returncode == 0, copied.stderr
    assert sorted(f.name for f in (tmp_path / "dags").iterdir()) == [
        "fleet.yaml", "fleet_dag.py", "pipeline.yaml", "post_index_dag.py"]
    assert (tmp_path / "dags" / "fleet_dag.py").read_text() == (REPO / "docs" / "examples" / "fleet_dag.py").read_text()


def test_the_guides_messages_point_to_are_shipped_and_shown_by_orchestrate_docs() -> None:
    from tests.helpers import orchestrate

    listed = orchestrate("docs", timeout=60)
    assert listed.returncode == 0 and {"privileges", "upgrade", "safety"} <= set(listed.stdout.split())
    shown = orchestrate("docs", "privileges", timeout=60)
    assert shown.returncode == 0 and shown.stdout.startswith("# ") and "sudo_rules" in shown.stdout
    unknown = orchestrate("docs", "nope", timeout=60)
    assert unknown.returncode == 2 and "no guide named 'nope'" in unknown.stderr
    import re

    for source in (REPO / "orchestrator").rglob("*.py"):  # a message never names a file the wheel lacks
        for found in re.findall(r"docs/([a-z-]+)\.md", source.read_text()):
            assert (REPO / "docs" / f"{found}.md").is_file(), (source, found)
