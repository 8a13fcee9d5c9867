"""The report in a real browser: chromium, headless, renders the page; its DOM has the
leaderboard and the plots, and a screenshot is taken (look at it when changing the page).

The test never installs anything: without a chromium on PATH it is skipped, and the skip reason
(shown by `make test`, which runs pytest with `-ra`) names the command that installs one."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from export_studies import Run

from itemeval.report import write_report

pytestmark = pytest.mark.browser

#: Executable names of chromium (Debian: `chromium`; other distributions: `chromium-browser`) and
#: of Google Chrome, which takes the same flags.
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
INSTALL = "sudo apt-get install -y chromium"
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


def find_browser() -> str | None:
    """The first browser of `BROWSERS` on PATH."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


BROWSER = find_browser()


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


# A marker, not a skip inside the test: the skip costs nothing (no demo study is run for it).
@pytest.mark.skipif(
    BROWSER is None,
    reason=f"no headless browser on PATH (looked for {', '.join(BROWSERS)}); "
    f"install one to run this test, on Debian/Ubuntu: `{INSTALL}`",
)
def test_report_renders_in_headless_chromium(demo_run: Run, tmp_path: Path):
    assert BROWSER is not None
    browser = BROWSER
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
