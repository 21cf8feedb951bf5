"""mkdocs hooks (mkdocs.yml): the pages that live outside docs/ join the site, and every page's links follow.

The repository is written to be read on a repository page: README.md links ``docs/vae.md``, docs/ pages link
``../studies/....md``. The site is built from docs/, so these hooks

- add README.md (as the overview page; docs/index.md is the site's home page), CHANGELOG.md, studies/*.md,
  benchmarks/README.md and data/README.md to the
  site as generated pages, their text read from the repository (nothing is copied by hand);
- rewrite each relative link of a page from the page's place in the repository to its place in the site;
  a link to something that is no page or picture of the site (a folder, a script) becomes the link's text
  followed by the repository path in code, since the site serves no repository files. A link whose text is
  a file path (``[docs/vae.md](docs/vae.md)``) shows the page's title instead;
- copy MathJax (``es5/tex-svg.js`` of the django-static-mathjax package: one file, its fonts inside) into the
  site, so that the math renders with nothing loaded from elsewhere;
- put the package's version (pyproject.toml) into ``config.extra.version`` for the header, and write the
  repository's address where a page says ``{{ repo_url }}``: ZOO_REPO_URL where the site is published with
  it, else ``<repository-address>``. mkdocs.yml's default ``repo_url`` (the header's link) is a placeholder,
  which no page presents as the address to clone.
"""

from __future__ import annotations

import importlib.util
import os
import posixpath
import re
import tomllib
from pathlib import Path

from mkdocs.structure.files import File, Files, InclusionLevel

# repository path -> the page's path in the site (docs/X stays X)
OUTSIDE = {"README.md": "overview.md", "CHANGELOG.md": "changelog.md", "benchmarks/README.md": "benchmarks/index.md",
           "data/README.md": "data/index.md", "studies/README.md": "studies/index.md"}
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)|`[^`\n]*`")  # a link, or a code span (no links inside)
FENCE = re.compile(r"^\s*(```|~~~)")
PATH_TEXT = re.compile(r"^`?[\w.\-/]*(\.md|/)`?$")  # a link text that is a file or folder path
MATHJAX = "javascripts/mathjax/tex-svg.js"  # where docs/javascripts/mathjax-config.js loads it from


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _outside_pages(root: Path) -> dict[str, str]:
    """Repository path -> site path of every page that lives outside docs/."""
    pages = dict(OUTSIDE)
    for study in sorted((root / "studies").glob("*.md")):
        pages.setdefault(f"studies/{study.name}", f"studies/{study.name}")
    return {repo: site for repo, site in pages.items() if (root / repo).is_file()}


def on_config(config):
    config.extra["version"] = tomllib.loads((_root(config) / "pyproject.toml").read_text())["project"]["version"]
    return config


def _mathjax() -> Path:
    """MathJax 3's single-file TeX-to-SVG build, from the installed django-static-mathjax package."""
    spec = importlib.util.find_spec("mathjax")
    found = Path(spec.origin).parent / "static" / "mathjax" / "es5" / "tex-svg.js" if spec and spec.origin else None
    if found is None or not found.is_file():
        raise SystemExit("docs/hooks.py: MathJax is missing: pip install -e '.[docs]' (django-static-mathjax)")
    return found


def on_files(files: Files, config) -> Files:
    root = _root(config)
    in_nav = set(OUTSIDE.values())  # the studies themselves are reached from studies/index.md and the pages
    for repo, site in _outside_pages(root).items():
        inclusion = InclusionLevel.INCLUDED if site in in_nav else InclusionLevel.NOT_IN_NAV
        files.append(File.generated(config, site, content=(root / repo).read_text(), inclusion=inclusion))
    files.append(File.generated(config, MATHJAX, abs_src_path=str(_mathjax())))
    return files


def _titles(config, root: Path) -> dict[str, str]:
    """Site path -> the title a link to that page shows: its menu entry, else its first heading."""
    titles: dict[str, str] = {}

    def walk(items) -> None:
        for item in items:
            for title, value in (item.items() if isinstance(item, dict) else [(None, item)]):
                if isinstance(value, list):
                    walk(value)
                elif title:
                    titles[value] = title

    walk(config["nav"] or [])
    for repo, site in _outside_pages(root).items():
        if site not in titles:
            heading = next((line[2:].strip() for line in (root / repo).read_text().split("\n")
                            if line.startswith("# ")), None)
            titles[site] = heading or site
    return titles


def _repo_path(site_path: str, root: Path) -> str:
    """The repository path of a site page (inverse of the mapping above)."""
    for repo, site in _outside_pages(root).items():
        if site == site_path:
            return repo
    return f"docs/{site_path}"


def _site_path(repo_path: str, root: Path) -> str | None:
    """Where a repository file is in the site, or None when the site does not serve it."""
    outside = _outside_pages(root)
    if repo_path in outside:
        return outside[repo_path]
    if repo_path.startswith("docs/") and (root / repo_path).is_file():
        return repo_path[len("docs/"):]
    return None


def _rewrite(line: str, page_repo: str, page_site: str, root: Path, titles: dict[str, str]) -> str:
    def one(m: re.Match) -> str:
        bang, text, target = m.groups()
        if target is None:  # a code span
            return m.group(0)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        file, hash_, anchor = target.partition("#")
        repo = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo), file))
        if not (root / repo).exists():
            return m.group(0)  # a broken link stays as it is: mkdocs --strict reports it
        site = _site_path(repo, root)
        if site is None:
            shown = repo + ("/" if file.endswith("/") else "")
            return f"{text} (`{shown}`)" if shown not in text else text
        if not bang and PATH_TEXT.match(text) and site in titles:
            text = titles[site]
        return f"{bang}[{text}]({posixpath.relpath(site, posixpath.dirname(page_site) or '.')}{hash_}{anchor})"

    return LINK.sub(one, line)


def repository_address() -> str:
    """What a page's ``{{ repo_url }}`` becomes: ZOO_REPO_URL (the real address, given where the site is
    published), else ``<repository-address>``: mkdocs.yml's default repo_url is a placeholder."""
    return os.environ.get("ZOO_REPO_URL", "").strip().rstrip("/") or "<repository-address>"


def on_page_markdown(markdown: str, page, config, files) -> str:
    root = _root(config)
    page_site = page.file.src_uri
    page_repo = _repo_path(page_site, root)
    titles = _titles(config, root)
    markdown = markdown.replace("{{ repo_url }}", repository_address())
    out, inside = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            inside = not inside
        out.append(line if inside else _rewrite(line, page_repo, page_site, root, titles))
    return "\n".join(out)
