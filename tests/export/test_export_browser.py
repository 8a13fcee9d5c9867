"""The report in a real browser: Debian's chromium, headless, renders the page; its DOM has the
leaderboard and the plots, and a screenshot is taken (look at it when changing the page)."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from export_studies import Run

from itemeval.export import write_report

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """Debian's chromium, installed with apt-get when missing (root with the Debian mirror
    reachable), else the test is skipped with the reason."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("chromium is not installed and this user cannot apt-get install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    failure = ""
    for commands in (
        [["apt-get", "install", "-y", "chromium"]],
        [["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]],
    ):
        try:
            for command in commands:
                subprocess.run(command, check=True, capture_output=True, timeout=900, env=env)
        except (OSError, subprocess.SubprocessError) as exc:
            stderr = getattr(exc, "stderr", b"") or b""
            failure = f"{exc}: {stderr.decode(errors='replace')[-300:]}"
            continue
        if os.path.exists(CHROMIUM):
            return CHROMIUM
    pytest.skip(f"could not install chromium from the Debian mirror ({failure})")


class _Dom(HTMLParser):
    """Counts what the test looks for in the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.in_leaderboard = False
        self.leaderboard_rows = 0
        self.svg_depth = 0
        self.svgs: list[int] = []  # drawn elements per <svg>
        self.figures: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "table" and attributes.get("id") == "leaderboard":
            self.in_leaderboard = True
        elif tag == "tr" and self.in_leaderboard:
            self.leaderboard_rows += 1
        elif tag == "figure":
            self.figures.append(attributes.get("data-plot") or "")
        elif tag == "svg":
            self.svg_depth += 1
            self.svgs.append(0)
        elif self.svg_depth and tag in ("rect", "circle", "line", "text", "path"):
            self.svgs[-1] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_leaderboard = False
        elif tag == "svg":
            self.svg_depth -= 1


def test_report_renders_in_headless_chromium(demo_run: Run, tmp_path: Path):
    browser = chromium()
    report = write_report(demo_run.plan(), str(tmp_path / "report"))
    url = Path(report.html).as_uri()
    profile = tmp_path / "profile"

    dom = subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    parsed = _Dom()
    parsed.feed(dom)
    conditions = len(demo_run.plan().design.generate)
    assert parsed.leaderboard_rows == conditions + 1  # header + one row per condition
    drawn = [count for count in parsed.svgs if count >= 10]
    assert len(drawn) >= 3, parsed.svgs
    assert {"leaderboard", "model-prompt", "cost", "difficulty"} <= set(parsed.figures)

    screenshot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={screenshot}",
            "--window-size=1400,2400",
            url,
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    image = screenshot.read_bytes()
    assert image[:8] == b"\x89PNG\r\n\x1a\n" and len(image) > 50_000
