"""The documentation site, built strictly and looked at in a real browser.

The site (mkdocs.yml) is built once for this file with ``mkdocs build --strict`` (a broken link or anchor, a
missing page, an unreadable docstring fails it), served on 127.0.0.1 by http.server in a thread, and every page
is opened in headless Chromium (Debian's ``chromium`` and ``chromedriver``, driven by Selenium: no browser
download). A page fails on a picture that did not load (``naturalWidth`` 0), on any request the server answered
with an error (a 404), on an error in the browser's console, on a picture shown smaller than it is that does not
open at full size on click, on prose or a table wider than the column, on a name broken mid-word in a table, on
a code block that scrolls sideways at 1280 px, and on math that MathJax did not typeset. Every page is looked at
1280 px wide; the pages of ``NARROW`` again at 390 px (a phone). Each page's screenshot (``page.png``, and
``page_390.png``) is saved into the test's temporary folder (``pytest --basetemp=DIR`` keeps them where you want;
pytest keeps the last three runs' folders under its own temporary root either way).

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
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "docs" / "gallery.md"
# the pages looked at again at a phone's width: the home page, pictures, tables, math, a long study
NARROW = ("index.html", "gallery.html", "vae.html", "estimators.html", "reference/estimators.html",
          "studies/2026-11-27-skipgram-vs-gensim.html")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built strictly from this checkout into a temporary folder: (folder)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("ZOO_REPO_URL", None)  # mkdocs.yml's placeholder address, as a checkout builds it
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-6000:]}"
    return out


class Server:
    """http.server on 127.0.0.1 (a free port) in a thread, serving ``folder`` under the path ``base`` (a site
    published under a sub-path: mkdocs.yml's site_url), recording the status of every request."""

    def __init__(self, folder: Path, base: str = "/"):
        self.answers: list[tuple[str, int]] = []  # (path, status) of every request, in order
        self.base = base
        answers = self.answers

        class Handler(http.server.SimpleHTTPRequestHandler):
            def translate_path(self, path):
                inside = path.startswith(base)  # anything else is not the site's: a 404
                return super().translate_path("/" + path[len(base):] if inside else "/\0outside")

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

# What a visitor cannot read, as a list of problems; arguments[0]: whether code blocks must fit (a wide window).
# The column is Material's .md-content (its tables' scroll boxes reach 0.8rem into its padding); a code span's
# padding at the end of a line overflows its paragraph by a few px, hence the slack.
LAYOUT = """const wide = arguments[0], SLACK = 24, problems = [];
const doc = document.documentElement;
if (doc.scrollWidth > doc.clientWidth + 1) problems.push(`the page scrolls sideways (${doc.scrollWidth} px)`);
const article = document.querySelector("article") || document.body;
const right = (document.querySelector(".md-content") || article).getBoundingClientRect().right + 1;
const label = el => (el.textContent || "").trim().slice(0, 50);
for (const el of article.querySelectorAll("p, li, h1, h2, h3, h4, figcaption")) {
  if (el.closest("pre, table, .arithmatex")) continue;
  if (el.scrollWidth > el.clientWidth + SLACK || el.getBoundingClientRect().right > right)
    problems.push(`prose wider than the column: "${label(el)}"`);
}
for (const table of article.querySelectorAll("table")) {
  const box = table.closest(".md-typeset__scrollwrap") || table;
  if (box.getBoundingClientRect().right > right) problems.push(`a table wider than the column: "${label(table)}"`);
  for (const code of table.querySelectorAll("td code, th code"))
    if (!/[\\s\\-\\/]/.test(code.textContent) && code.getClientRects().length > 1)
      problems.push(`a name broken mid-word in a table: ${code.textContent}`);
}
if (wide) for (const code of article.querySelectorAll("pre > code"))
  if (code.scrollWidth > code.clientWidth + 1) problems.push(`a code block scrolls sideways: "${label(code)}"`);
for (const img of article.querySelectorAll("img")) {
  const link = img.closest("a"), full = link && new URL(link.href, location.href).href === img.src;
  if (img.naturalWidth > 0 && img.getBoundingClientRect().width + 1 < img.naturalWidth && !full)
    problems.push(`a picture shown at ${Math.round(img.getBoundingClientRect().width)} of its ` +
                  `${img.naturalWidth} px that does not open at full size: ${img.getAttribute("src")}`);
}
return problems;"""

# Math: once MathJax has typeset the page (its startup promise), every arithmatex element holds its rendering. A
# page with math loads MathJax itself, as the script #MathJax-script (docs/javascripts/mathjax-config.js): wait
# for that script's load event when it has not run yet.
MATH = """const done = arguments[arguments.length - 1];
const untypeset = () => Array.from(document.querySelectorAll(".arithmatex"))
    .filter(el => !el.querySelector("mjx-container")).map(el => el.textContent.trim().slice(0, 50));
const typeset = () => MathJax.startup.promise.then(() => done(untypeset()), err => done([`MathJax failed: ${err}`]));
const script = document.getElementById("MathJax-script");
if (!document.querySelector(".arithmatex")) done([]);
else if (window.MathJax && MathJax.startup && MathJax.startup.promise) typeset();
else if (script) {
  script.addEventListener("load", typeset);
  script.addEventListener("error", () => done(["MathJax did not load"]));
}
else done(["MathJax did not load"]);"""


def pages(site: Path) -> list[str]:
    """Every page of the site, as paths relative to it (use_directory_urls is off: one .html each)."""
    return sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if "assets" not in p.parts)


def system_chromium() -> tuple[str, str]:
    found = chromium()
    if found is None:
        pytest.skip("no chromium and chromedriver on this machine: `make browser` installs Debian's "
                    "(apt-get, as root; CI does), or `apt-get install chromium chromium-driver`")
    return found


def look_at(folder: Path, shots: Path, narrow: tuple[str, ...] = NARROW, base: str = "/") -> tuple[list[str],
                                                                                                 dict[str, int]]:
    """Every page of ``folder`` served under ``base`` and opened in Chromium 1280 px wide, the pages of ``narrow``
    looked at again in a window narrowed to 390 px, a screenshot of each saved into ``shots``: (the problems
    found, {page: pictures on it})."""
    problems, shown = [], {}
    with Server(folder, base) as server:
        driver = browser_driver(*system_chromium())
        driver.set_script_timeout(30)
        try:
            for page in pages(folder):
                before = len(server.answers)
                driver.get(f"{server.url}{base}{page}")  # returns once the page and its pictures loaded
                stem = page.replace("/", "__").removesuffix(".html")
                at = f"{page} (1280 px)"
                problems += [f"{at}: math not typeset: {what}" for what in driver.execute_async_script(MATH)]
                problems += [f"{at}: broken picture {src}" for src in driver.execute_script(BROKEN_IMAGES)]
                shown[page] = driver.execute_script("return document.images.length;")
                problems += [f"{at}: {what}" for what in driver.execute_script(LAYOUT, True)]
                driver.save_screenshot(str(shots / f"{stem}.png"))
                if page in narrow:  # the same page in a phone's width: the layout follows the window
                    driver.set_window_size(390, 900)
                    problems += [f"{page} (390 px): {what}" for what in driver.execute_script(LAYOUT, False)]
                    driver.save_screenshot(str(shots / f"{stem}_390.png"))
                    driver.set_window_size(1280, 900)
                errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
                failed = [f"{path} -> {code}" for path, code in server.answers[before:] if code >= 400]
                problems += [f"{at}: console error {msg}" for msg in errors]
                problems += [f"{at}: request {f}" for f in failed]
        finally:
            driver.quit()
    return problems, shown


@pytest.mark.slow
def test_every_page_opens_in_chromium_without_a_broken_picture_a_404_or_a_console_error(site, tmp_path):
    from urllib.parse import urlparse

    from mkdocs.config import load_config

    system_chromium()
    base = urlparse(load_config(str(ROOT / "mkdocs.yml"))["site_url"]).path  # the 404 page's links start there
    problems, shown = look_at(site, tmp_path, base=base)
    assert not problems, "\n".join(problems)
    assert {"index.html", "gallery.html", "reference/models.html", "changelog.html"} <= set(shown)
    # the gallery shows its pictures (every one loaded: no broken picture above)
    in_gallery = len(re.findall(r"!\[[^\]]*\]\(gallery/[^)]+\.png\)", GALLERY.read_text()))
    assert shown["gallery.html"] >= in_gallery >= 10
    assert len(list(tmp_path.glob("*.png"))) == len(shown) + len(NARROW)
    assert set(NARROW) <= set(shown)


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
    Image.new("RGB", (2000, 40), "blue").save(site / "wide.png")
    # sound: a small picture, a wide one shrunk but linked to itself (opens at full size), a table that fits
    (site / "good.html").write_text(f'<html>{head}<body><article><img src="dot.png"><p><a href="wide.png">'
                                    '<img src="wide.png" style="max-width:100%"></a></p>'
                                    '<table><tr><td><code>gumbel_softmax</code></td></tr></table></article></body></html>')
    (site / "bad.html").write_text(f'<html>{head}<body><article><img src="missing.png">'
                                   '<script>console.error("something broke")</script>'
                                   '<img src="wide.png" style="width:300px">'  # shrunk, no link
                                   '<p>' + "x" * 400 + '</p>'  # one word wider than a phone
                                   '<table style="width:60px"><tr><td style="width:40px"><code style="word-break:'
                                   'break-all">a_long_estimator_name</code></td></tr></table>'
                                   '<pre><code style="display:block;overflow-x:auto">' + "z" * 300 + '</code></pre>'
                                   '<span class="arithmatex">\\(x\\)</span></article></body></html>')
    problems, shown = look_at(site, shots, narrow=("bad.html",))
    assert shown == {"bad.html": 2, "good.html": 2}
    assert not [p for p in problems if p.startswith("good.html")], problems
    bad = "\n".join(problems)
    assert "bad.html (1280 px): broken picture missing.png" in bad
    assert "bad.html (1280 px): request /missing.png -> 404" in bad
    assert "something broke" in bad
    assert "bad.html (1280 px): a picture shown at 300 of its 2000 px that does not open at full size: wide.png" in bad
    assert "bad.html (390 px): prose wider than the column: \"xxx" in bad
    assert "bad.html (1280 px): a name broken mid-word in a table: a_long_estimator_name" in bad
    assert "bad.html (1280 px): a code block scrolls sideways" in bad
    assert "bad.html (390 px): a code block" not in bad  # a phone may scroll code
    assert "bad.html (1280 px): math not typeset: MathJax did not load" in bad
    assert sorted(p.name for p in shots.iterdir()) == ["bad.png", "bad_390.png", "good.png"]


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


# ---- what the built pages hold (no browser) -------------------------------------------------------------------


def article(html: str) -> str:
    """A page's content: its <article>, without the menus and the header."""
    return html.split("<article", 1)[1].split("</article>", 1)[0]


def site_pages(site: Path) -> dict[str, str]:
    return {page: (site / page).read_text() for page in pages(site)}


def test_the_home_page_is_a_front_door(site):
    """What the zoo is, then install (git clone, make demo, pip install), a short quickstart, a picture from the
    gallery, then the ways into the docs; the header links the repository and shows the version."""
    import tomllib

    html = (site / "index.html").read_text()
    text = re.sub(r"</?span[^>]*>", "", article(html))  # code without its highlighting
    order = [text.index(s) for s in ("through randomness", 'id="install"', "git clone", "make demo",
                                     "pip install", 'id="quickstart"', "zoo.load", 'src="gallery/',
                                     'id="where-next"')]
    assert order == sorted(order), order
    quickstart = re.search(r'id="quickstart".*?<pre.*?</pre>', text, re.S).group(0)
    assert len(re.sub(r"<[^>]+>", "", quickstart.split("<pre", 1)[1]).strip().splitlines()) <= 6
    assert len(re.findall(r'href="(?:vae|captioning|seqgan|skipgram|ood|maml|gallery|api|training)\.html', text)) >= 9
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    source = re.search(r'<a href="([^"]+)"[^>]*class="md-source".*?</a>', html, re.S)
    assert source and source.group(1).startswith("https://")  # mkdocs.yml's placeholder, the header's link
    clone = re.search(r"git clone (\S+)", re.sub(r"<[^>]+>", "", text)).group(1)  # ZOO_REPO_URL unset
    assert clone == "&lt;repository-address&gt;" and source.group(1) not in text  # the placeholder is no address
    assert project["version"] in source.group(0) and project["name"] in source.group(0)
    assert "README.md" not in text and (site / "overview.html").is_file()  # the README is a page of its own


def test_no_page_gives_the_placeholder_addresses(site, monkeypatch):
    """mkdocs.yml's repo_url and site_url are placeholders where ZOO_REPO_URL / ZOO_SITE_URL are unset (a
    checkout knows no published address): the header links the repository, and no page's text gives either
    address as the zoo's."""
    from mkdocs.config import load_config

    monkeypatch.delenv("ZOO_REPO_URL", raising=False)
    monkeypatch.delenv("ZOO_SITE_URL", raising=False)
    config = load_config(str(ROOT / "mkdocs.yml"))
    placeholders = [config["repo_url"].rstrip("/"), config["site_url"].rstrip("/")]
    found = [f"{page}: {p}" for page, html in site_pages(site).items() for p in placeholders if p in article(html)]
    assert not found, "\n".join(found)


def test_link_texts_are_words_not_file_paths(site):
    path = re.compile(r"<a [^>]*>\s*(?:<code>)?([\w.\-]+/)*[\w.\-]*(\.md|/)(?:</code>)?\s*</a>")
    found = [f"{page}: {m.group(0)}" for page, html in site_pages(site).items() for m in path.finditer(article(html))]
    assert not found, "\n".join(found[:20])


def test_no_code_block_is_really_a_table_or_prose(site):
    """A markdown table or paragraph indented under a list item the wrong way renders as a code block."""
    found = []
    for page, html in site_pages(site).items():
        for block in re.findall(r"<pre[^>]*>(.*?)</pre>", article(html), re.S):
            text = re.sub(r"<[^>]+>", "", block)
            if re.search(r"^\s*\|.*\|\s*$\n^\s*\|[\s:|-]+\|\s*$", text, re.M):
                found.append(f"{page}: {text.strip()[:80]!r}")
    assert not found, "\n".join(found)


def test_every_page_has_one_title_and_the_menu_names_each_page_once(site):
    from mkdocs.config import load_config

    titles = {page: len(re.findall(r"<h1[ >]", article(html))) for page, html in site_pages(site).items()}
    assert not {p: n for p, n in titles.items() if n != 1 and p != "404.html"}, titles
    names = []

    def walk(items):
        for item in items:
            for title, value in (item.items() if isinstance(item, dict) else [(None, item)]):
                names.append(title)
                if isinstance(value, list):
                    walk(value)

    walk(load_config(str(ROOT / "mkdocs.yml"))["nav"])
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_each_model_page_shows_a_picture_and_links_its_gallery_section(site):
    for page, released in (("vae", "vae-digits"), ("captioning", "sat-shapes-hard"),
                           ("seqgan", "seqgan-oracle-small"), ("skipgram", "skipgram-synthetic")):
        text = article((site / f"{page}.html").read_text())
        assert re.search(r'<img [^>]*src="gallery/[^"]+\.png"', text), f"{page}: no picture"
        assert f'href="gallery.html#{released}"' in text, f"{page}: no link to the gallery's {released}"
        assert f'id="{released}"' in (site / "gallery.html").read_text()


def test_the_sitemap_and_the_404_page_know_where_the_site_lives(site):
    from mkdocs.config import load_config

    url = load_config(str(ROOT / "mkdocs.yml"))["site_url"]
    assert url and url.startswith("https://")
    locs = re.findall(r"<loc>([^<]+)</loc>", (site / "sitemap.xml").read_text())
    assert len(locs) >= 30 and all(loc.startswith(url) for loc in locs)
    from urllib.parse import urlparse

    base = urlparse(url).path  # the 404 page is served at any depth: its links are absolute, under the site's path
    assert f'href="{base}index.html"' in (site / "404.html").read_text()


def test_the_studies_index_lists_every_study_in_date_order():
    studies = ROOT / "studies"
    listed = re.findall(r"\]\((20\d\d-[^)]+\.md)\)", (studies / "README.md").read_text())
    dated = sorted(p.name for p in studies.glob("20*.md"))
    assert listed == dated


PSEUDO_MATH = ["sum_i alpha_ti", "(-1)^b~", "sum_k p_k f(k)", "grad E[f] = E[f grad log p]", "KL(q(z|x) || p(z))",
               "1/2 sum_d (sigma_d^2", "e_ti = w^T tanh", "sum_n (log K - H(q_n))"]


def test_the_math_is_tex_and_mathjax_comes_from_the_site(site):
    """The formulas of the estimators, captioning, VAE and SeqGAN pages are TeX for MathJax (arithmatex), and
    MathJax is a file of the site (the browser test checks that it typesets every formula)."""
    for page in ("estimators", "captioning", "vae", "seqgan"):
        source = (ROOT / "docs" / f"{page}.md").read_text()
        assert not [s for s in PSEUDO_MATH if re.search(r"(?<![\\\w])" + re.escape(s), source)], page
        assert len(re.findall(r'class="arithmatex"', (site / f"{page}.html").read_text())) >= 2, page
    assert (site / "javascripts" / "mathjax" / "tex-svg.js").stat().st_size > 1_000_000
    scripts = re.findall(r'<script[^>]* src="([^"]+)"', (site / "vae.html").read_text())
    assert any("mathjax-config.js" in s for s in scripts) and not [s for s in scripts if "://" in s]
    assert '"mathjax/tex-svg.js"' in (site / "javascripts" / "mathjax-config.js").read_text()


def test_make_docs_installs_the_docs_extra_only():
    """`make docs` needs mkdocs and its plugins, not torch: mkdocstrings reads the zoo's source statically."""
    import tomllib

    make = (ROOT / "Makefile").read_text()
    target = re.search(r"^docs:(.*)$", make, re.M).group(1).split()
    assert "install" not in target and any("docs-installed" in t for t in target)
    docs = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert not [d for d in docs if d.startswith(("torch", "lightning"))]
    assert {"mkdocs-glightbox", "django-static-mathjax"} <= {re.split(r"[<>=]", d)[0] for d in docs}


# the names an estimator's author uses, each documented with its fields or arguments and an example
REFERENCE = ["zoo.estimators.base.Estimator", "zoo.estimators.base.Estimator.sample",
             "zoo.estimators.base.Estimator.loss", "zoo.estimators.base.StochasticSample",
             "zoo.estimators.base.get_estimator", "zoo.estimators.base.Capabilities",
             "zoo.estimators.seam.StochasticNode", "zoo.estimators.baselines.Baseline"]


def reference_object(dotted: str):
    import importlib

    module, _, rest = dotted.partition(".estimators.")
    parts = rest.split(".")
    obj = importlib.import_module(f"zoo.estimators.{parts[0]}")
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def test_the_estimator_reference_documents_what_an_extension_author_uses(site):
    html = (site / "reference" / "estimators.html").read_text()
    for dotted in REFERENCE:
        assert f'id="{dotted}"' in html, f"{dotted} is not on the reference page"
        obj = reference_object(dotted)
        doc = (obj.__doc__ or "") + (getattr(obj, "forward", None).__doc__ or "" if dotted.endswith("Baseline") else "")
        assert ("Attributes:" in doc or "Args:" in doc) and "```python" in doc, f"{dotted}: fields or example missing"


def test_the_estimator_reference_examples_run(monkeypatch):
    """Every example of the reference's docstrings runs, each in a namespace of its own; what one registers
    (the Estimator example's estimator) leaves the registry with the test."""
    import inspect
    import textwrap

    from zoo.registry import ESTIMATORS

    ESTIMATORS.entry("reinforce")  # the built-ins declared, then a copy of the entries that the test may change
    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))
    examples = [(dotted, textwrap.dedent(block)) for dotted in REFERENCE
                for block in re.findall(r"```python\n(.*?)```", inspect.getdoc(reference_object(dotted)), re.S)]
    assert len(examples) >= len(REFERENCE)
    for dotted, block in examples:
        module = types.ModuleType("zoo_docs_example")  # a module of its own: a dataclass looks its module up
        monkeypatch.setitem(sys.modules, module.__name__, module)
        exec(compile(block, f"the example of {dotted}", "exec"), module.__dict__)
