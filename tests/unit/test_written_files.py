"""Files the tool writes where an operator points it (issue 56, M6, L1, L2): the metrics textfile of a run
and of `pending`, the HTML report, an inventory, a saved snapshot. Only a regular file, or nothing, is
replaced, always atomically; anything else is a ConfigError naming the path, never a traceback and never a
device replaced by a file (`--metrics-textfile /dev/null`, as root, replaced the machine's /dev/null)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.paths import write_file_for_the_operator
from orchestrator.runs.pending import PendingReport, write_textfile


def places(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-directory").mkdir()
    os.mkfifo(tmp_path / "a-fifo")
    (tmp_path / "target").write_text("keep me\n")
    os.symlink(tmp_path / "target", tmp_path / "a-link")
    return {"a directory": tmp_path / "a-directory", "a FIFO": tmp_path / "a-fifo",
            "a symbolic link": tmp_path / "a-link", "a character device": Path("/dev/null"),
            "too long": tmp_path / ("x" * 300), "in /proc": Path("/proc/self/orchestrator.prom"),
            "a NUL in it": Path(f"{tmp_path}/a\x00b")}


def test_only_a_regular_file_or_nothing_is_replaced(tmp_path: Path) -> None:
    null = os.stat("/dev/null")
    for said, path in places(tmp_path).items():
        with pytest.raises(ConfigError) as refused:
            write_file_for_the_operator(path, "x\n", 0o644)
        assert repr(str(path))[:40] in str(refused.value), said
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == null.st_rdev, "/dev/null is still the device"
    assert (tmp_path / "target").read_text() == "keep me\n" and (tmp_path / "a-link").is_symlink()
    assert (tmp_path / "a-directory").is_dir() and stat.S_ISFIFO(os.lstat(tmp_path / "a-fifo").st_mode)


def test_a_regular_file_of_another_mode_is_replaced_whole_with_the_tools_mode(tmp_path: Path) -> None:
    """L1: an existing page another user left with mode 666 is replaced by a new file, not written into."""
    page = tmp_path / "report.html"
    page.write_text("old")
    os.chmod(page, 0o666)
    before = os.stat(page).st_ino
    write_file_for_the_operator(page, "<html>new</html>", 0o600)
    assert page.read_text() == "<html>new</html>" and stat.S_IMODE(os.stat(page).st_mode) == 0o600
    assert os.stat(page).st_ino != before, "a new file renamed into place: never half-written"


def test_pendings_textfile_on_a_directory_or_a_proc_path_is_a_clear_error(tmp_path: Path) -> None:
    """L2: `pending --metrics-textfile` crashed on a directory, a name too long or a /proc path."""
    report = PendingReport("prod", (), 0.0)
    for path in (tmp_path, tmp_path / ("y" * 300), Path("/proc/self/x.prom")):
        with pytest.raises(ConfigError):
            write_textfile(report, path)
    write_textfile(report, tmp_path / "ok.prom")
    assert "orchestrator_pending_checked_timestamp_seconds" in (tmp_path / "ok.prom").read_text()


def test_a_test_product_is_refused_in_an_inventory_until_code_enables_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """L5: `product: fake-elasticsearch` was selectable from a production inventory (it took a real cluster's
    lock and restricted its allocation). The distribution declares no test product; an inventory naming one is
    refused saying how a test enables it, and enabled in code it is found."""
    import tomllib

    from orchestrator import products

    declared = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"].get(
        "entry-points", {}).get(products.ENTRY_POINTS, {})
    assert not set(declared) & set(products.FOR_TESTS)
    monkeypatch.setattr(products, "PLUGINS", dict(products.BUILT_IN))
    for name in products.FOR_TESTS:
        with pytest.raises(ConfigError, match=r"a fake for tests.*orchestrator\.testing\.enable\(\)"):
            products.get(name)
    import orchestrator.testing

    orchestrator.testing.enable()
    assert products.get("fake-elasticsearch").name == "fake-elasticsearch"
