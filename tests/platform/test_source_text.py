"""What the zoo's source says in its comments and docstrings: each line once, and a paper cited by its title."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for folder in ("zoo", "bench", "benchmarks", "studies") for p in (ROOT / folder).rglob("*.py")
                 if "results" not in p.parts)


def test_no_comment_line_repeats_the_one_above():
    wrong = []
    for path in SOURCES:
        lines = path.read_text(encoding="utf-8").splitlines()
        wrong += [f"{path.relative_to(ROOT)}:{i + 1}: {line.strip()}" for i, line in enumerate(lines[1:], 1)
                  if line.lstrip().startswith("#") and line == lines[i - 1]]
    assert wrong == []


def test_papers_are_cited_by_title_not_by_a_seed_number():
    """A "Seed NNN" names a document the reader of the zoo does not have."""
    wrong = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for path in SOURCES
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bSeed \d{3}\b", line)]
    assert wrong == []
