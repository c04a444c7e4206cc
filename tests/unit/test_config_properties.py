"""Property-based: any malformed or hostile inventory gives a ConfigError naming its place, never a traceback."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config.loader import load_model
from orchestrator.config.model import Inventory
from orchestrator.config.playbook import Playbook
from orchestrator.errors import ConfigError

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=30), st.sampled_from(["http://x:9200", "; rm -rf /", "$(id)", "../../etc"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                      max_leaves=20)
keys = st.sampled_from(["cluster", "ssh", "service", "nodes", "timeouts", "recovery", "tuning", "playbook",
                        "name", "endpoints", "host", "zone", "password", "extra"])
documents = st.dictionaries(keys, values, max_size=8)


# Where a problem is: its key and line (`nodes[0].host (line 4): ...`), a line and column (YAML that does not
# parse), or the document as a whole.
PLACE = re.compile(r"\(line \d+\)|^line \d+, column \d+: |at the top level")


def load_text(text: str, model: type[Any]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.yaml"
        path.write_text(text)
        try:
            load_model(path, model)
        except ConfigError as exc:
            assert exc.problems and all(isinstance(p, str) and PLACE.search(p) for p in exc.problems), exc.problems


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents)
def test_any_mapping_gives_a_model_or_a_config_error(doc: dict[str, Any]) -> None:
    load_text(yaml.safe_dump(doc), Inventory)
    load_text(yaml.safe_dump(doc), Playbook)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_a_model_or_a_config_error(text: str) -> None:
    load_text(text, Inventory)


def test_a_playbook_with_a_command_step_is_recorded_in_a_journal_without_warnings() -> None:
    """The journal records the playbook as JSON; pydantic warned (on the operator's stderr) serializing a
    command step, and pytest turns warnings into errors."""
    playbook = Playbook.model_validate({"name": "p", "batch": [
        "stop_service", {"command": {"name": "drain", "run": "/usr/local/bin/drain {node}"}}, "start_service"]})
    recorded = playbook.model_dump(mode="json")
    assert recorded["batch"][1]["command"]["run"] == "/usr/local/bin/drain {node}"
    assert Playbook.model_validate(recorded) == playbook
