"""The documentation site, built strictly and looked at in a real browser.

The site (mkdocs.yml) is built once for this file with ``mkdocs build --strict`` (a broken link or anchor, a
missing page, an unreadable docstring fails it), served on 127.0.0.1 by http.server in a thread, and every page
is opened in headless Chromium (Debian's ``chromium`` and ``chromedriver``, driven by Selenium: no browser
download). A page fails on a picture that did not load (``naturalWidth`` 0), on any request the server answered
with an error (a 404), or on an error in the browser's console. Each page's screenshot is saved into the test's
temporary folder (``pytest --basetemp=DIR`` keeps them where you want).

Without chromium and chromedriver (``make browser`` installs them where apt-get runs as root, as on CI) the
browser test skips and says so; the strict build and the gallery checks run everywhere.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "docs" / "gallery.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built strictly from this checkout into a temporary folder: (folder)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


class Server:
    """http.server on 127.0.0.1 (a free port) in a thread, recording the status of every request."""

    def __init__(self, folder: Path):
        self.answers: list[tuple[str, int]] = []  # (path, status) of every request, in order
        answers = self.answers

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_request(self, code="-", size="-"):
                answers.append((self.path, int(getattr(code, "value", code))))

            def log_message(self, *args):  # quiet: the answers are recorded above
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                     functools.partial(Handler, directory=str(folder)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


def chromium() -> tuple[str, str] | None:
    """(browser, driver) paths of the system's Chromium, or None."""
    browser = next((p for name in ("chromium", "chromium-browser") if (p := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def browser_driver(browser: str, driver: str):
    from selenium import webdriver  # imported when used: selenium (the dev extra)
    from selenium.webdriver.chrome.service import Service  # imported when used: selenium

    options = webdriver.ChromeOptions()
    options.binary_location = browser  # the system's browser: Selenium downloads nothing
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--disable-extensions", "--no-first-run",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):  # a page needs nothing from elsewhere
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, read with get_log("browser")
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


BROKEN_IMAGES = """return Array.from(document.images)
    .filter(img => !img.complete || img.naturalWidth === 0).map(img => img.getAttribute('src'));"""


def pages(site: Path) -> list[str]:
    """Every page of the site, as paths relative to it (use_directory_urls is off: one .html each)."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "assets" not in p.parts)


def system_chromium() -> tuple[str, str]:
    found = chromium()
    if found is None:
        pytest.skip("no chromium and chromedriver on this machine: `make browser` installs Debian's "
                    "(apt-get, as root; CI does), or `apt-get install chromium chromium-driver`")
    return found


def look_at(folder: Path, shots: Path) -> tuple[list[str], dict[str, int]]:
    """Every page of ``folder`` served and opened in Chromium, a screenshot of each saved into ``shots``:
    (the problems found, {page: pictures on it})."""
    problems, shown = [], {}
    with Server(folder) as server:
        driver = browser_driver(*system_chromium())
        try:
            for page in pages(folder):
                before = len(server.answers)
                driver.get(f"{server.url}/{page}")  # returns once the page and its pictures loaded
                broken = driver.execute_script(BROKEN_IMAGES)
                shown[page] = driver.execute_script("return document.images.length;")
                errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                failed = [f"{path} -> {code}" for path, code in server.answers[before:] if code >= 400]
                driver.save_screenshot(str(shots / (page.replace("/", "__").removesuffix(".html") + ".png")))
                problems += [f"{page}: broken picture {src}" for src in broken]
                problems += [f"{page}: console error {msg}" for msg in errors]
                problems += [f"{page}: request {f}" for f in failed]
        finally:
            driver.quit()
    return problems, shown


def test_every_page_opens_in_chromium_without_a_broken_picture_a_404_or_a_console_error(site, tmp_path):
    system_chromium()
    problems, shown = look_at(site, tmp_path)
    assert not problems, "\n".join(problems)
    assert {"index.html", "gallery.html", "reference/models.html", "changelog.html"} <= set(shown)
    # the gallery shows its pictures (every one loaded: no broken picture above)
    in_gallery = len(re.findall(r"!\[[^\]]*\]\(gallery/[^)]+\.png\)", GALLERY.read_text()))
    assert shown["gallery.html"] >= in_gallery >= 10
    assert len(list(tmp_path.glob("*.png"))) == len(shown)


def test_the_browser_check_finds_a_broken_picture_a_404_and_a_console_error(tmp_path):
    """The check above on two hand-made pages: one sound, one with each fault."""
    from PIL import Image

    system_chromium()
    site, shots = tmp_path / "site", tmp_path / "shots"
    site.mkdir()
    shots.mkdir()
    Image.new("RGB", (4, 4), "red").save(site / "dot.png")
    # an icon of their own: without one, Chromium may or may not ask for /favicon.ico (a 404) before the check ends
    head = '<head><link rel="icon" href="data:,"></head>'
    (site / "good.html").write_text(f'<html>{head}<body><img src="dot.png"></body></html>')
    (site / "bad.html").write_text(f'<html>{head}<body><img src="missing.png">'
                                   '<script>console.error("something broke")</script></body></html>')
    problems, shown = look_at(site, shots)
    assert shown == {"bad.html": 1, "good.html": 1}
    assert not [p for p in problems if p.startswith("good.html")]
    bad = "\n".join(problems)
    assert "bad.html: broken picture missing.png" in bad
    assert "bad.html: request /missing.png -> 404" in bad
    assert "something broke" in bad
    assert sorted(p.name for p in shots.iterdir()) == ["bad.png", "good.png"]


def test_the_gallery_shows_every_released_model_from_its_weights():
    """docs/gallery.md (``make gallery``) has a section for each released model, each picture on it exists and
    is small, and each section shows the card that made the weights."""
    import zoo

    text = GALLERY.read_text()
    for name in zoo.list_pretrained():
        card = json.loads((ROOT / "zoo" / "pretrained" / f"{name}.json").read_text())
        assert f"## `{name}`" in text, f"docs/gallery.md has no section for {name}: run `make gallery`"
        section = text.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert card["command"] in section and card["sha256"][:12] in section, f"{name}: its card is not shown"
        assert re.search(r"!\[[^\]]*\]\(gallery/[^)]+\.png\)", section), f"{name}: no picture"
    for target in re.findall(r"!\[[^\]]*\]\((gallery/[^)]+\.png)\)", text):
        picture = ROOT / "docs" / target
        assert picture.is_file(), f"{target}: missing (run `make gallery`)"
        assert 1_000 < picture.stat().st_size < 400_000, f"{target}: {picture.stat().st_size} bytes"
