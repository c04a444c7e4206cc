"""The run report in a real headless browser (Chromium, no network): a succeeded, a failed, and a
resumed-then-stopped run render without a console error, with every element the page promises
(tests/report_shots.py)."""

from __future__ import annotations

import struct
from pathlib import Path

from tests.report_shots import render, shoot


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_the_report_of_a_succeeded_a_failed_and_a_resumed_run_renders_in_chromium(tmp_path: Path) -> None:
    # Control: the console check sees what a page says (this one has a script; the report has none).
    noisy = tmp_path / "noisy.html"
    noisy.write_text('<!doctype html><p>x</p><script>console.error("report-check-42")</script>')
    assert any("report-check-42" in line for line in render(noisy, 400, 300).console)

    shots = shoot(tmp_path)
    for name, shot in shots.items():
        assert shot.console == [], f"{name}: the browser console said {shot.console}"
        assert png_size(shot.png) == (1280, 1500) and shot.png.stat().st_size > 20_000
        dom = shot.dom
        for element in ('id="summary"', 'id="timeline"', 'id="nodes"', 'id="recovery"', 'id="settings"'):
            assert element in dom, f"{name}: {element} missing from the rendered page"
        assert dom.count('class="node"') == 3, "every node of the plan has a row"
        assert "UTC" in dom and "GiB" in dom, "a wall-clock axis with its time zone, human units"
    ok, failed = shots["succeeded"].dom, shots["failed"].dom
    assert 'id="failure"' not in ok and "STILL SET" not in ok
    assert 'id="failure"' in failed and "timed out after 60 s waiting for the cluster" in failed
    assert 'data-node="es-3" data-state="not reached"' in failed
    assert 'data-node="es-2" data-state="failed"' in failed and 'class="failure"' in failed
    assert "STILL SET" in failed, "a setting left changed is listed"
    assert "0.50s" in ok and ">0s<" not in ok, "a short phase to the hundredth, never 0s"
    resumed = shots["resumed"].dom
    assert 'id="history"' in resumed and "inventory changed: ssh.user" in resumed, "the resume and its changes"
    assert resumed.count("<td class=\"name\">failed</td>") == 1 and "<td class=\"name\">resumed</td>" in resumed
    assert 'data-node="es-2" data-state="joined"' in resumed, "a node that came back, as the CLI says it"
    assert 'text-anchor="end"' in resumed, "the stopped mark's label kept inside the picture"
    assert 'id="history"' not in ok, "a run with one ending has no history table"
