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
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "orchestrator").rglob("*")
             if p.suffix in (".py", ".java", ".c") or p.parent.name == "host_files"}
    assert found - listed == set(), f"packages missing from pyproject.toml: {sorted(found - listed)}"
