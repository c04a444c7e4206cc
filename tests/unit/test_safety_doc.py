"""docs/safety.md cites, for each guarantee, the tests that show it: each must exist and run where the row
says (after `*unit*`: a unit test, over fakes; before it: an integration test, against the real sandbox)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from tests.helpers import REPO

# `file.py`, `file.py::test...`, `::test` (of the file cited before it), or a bare `test_name`.
CITED = re.compile(r"`(?:([A-Za-z0-9_/]+\.py)|(?=::|test_))(?:(?:::)?(test_[A-Za-z0-9_]+)(\.\.\.)?)?`")


@cache
def functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))


def parts(cell: str) -> list[str]:
    """The cell's parts, split at each `;` outside parentheses: `*unit* a; b` cites a unit test, then an
    integration one."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(cell):
        depth += (c == "(") - (c == ")")
        if c == ";" and depth == 0:
            out.append(cell[start:i])
            start = i + 1
    return [*out, cell[start:]]


def citations() -> list[tuple[int, str, str | None, bool, bool]]:
    """(line, file, test or None, a prefix only, cited as a unit test) for each test the table cites."""
    out = []
    for number, line in enumerate((REPO / "docs" / "safety.md").read_text().splitlines(), start=1):
        if not line.startswith("|") or line.startswith("|---") or line.count("|") < 3:
            continue
        cell = line.rstrip().rstrip("|").rsplit("|", 1)[-1]
        for part in parts(cell):
            unit_from = part.find("*unit*")
            file = None
            for found in CITED.finditer(part):
                if found[1] is None and found[2] is None:
                    continue
                is_unit = unit_from != -1 and found.start() > unit_from
                file = found[1] or (file if found.group(0).startswith("`::") else None) or anywhere(found[2], is_unit)
                out.append((number, file, found[2], bool(found[3]), is_unit))
    return out


def anywhere(test: str, is_unit: bool) -> str:
    """The file a bare test name is in, among the tests of the kind the row says (or "?")."""
    folder = REPO / "tests" / ("unit" if is_unit else "integration")
    return next((p.name for p in sorted(folder.glob("test_*.py")) if any(n.startswith(test) for n in functions(p))),
                f"? (no {folder.relative_to(REPO)} file has {test})")


def test_every_test_the_safety_table_cites_exists_and_runs_where_the_row_says() -> None:
    wrong = []
    for number, file, test, prefix, is_unit in citations():
        folder = REPO / "tests" / ("unit" if is_unit else "integration")
        path = folder / Path(file).name
        if not path.is_file():
            elsewhere = [p for p in (REPO / "tests").rglob(Path(file).name)]
            wrong.append(f"line {number}: {file} is not in {folder.relative_to(REPO)}"
                         + (f" (it is in {elsewhere[0].parent.relative_to(REPO)})" if elsewhere else " (no such file)"))
            continue
        if test is None:
            continue
        names = functions(path)
        if not (any(n.startswith(test) for n in names) if prefix else test in names):
            wrong.append(f"line {number}: {file}::{test}{'...' if prefix else ''} is not a function of {path.name}")
    assert wrong == [], "\n".join(wrong)


def test_the_check_reads_the_table() -> None:
    """Not vacuous: the table cites many tests, unit and integration, and a citation of a missing test fails."""
    cited = citations()
    assert len(cited) > 60 and any(c[4] for c in cited) and any(not c[4] for c in cited)
