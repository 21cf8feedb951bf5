"""Every run is on record in benchmarks/results/, and benchmarks/README.md lists every record: each entry
(file or folder) directly under benchmarks/results/ that git tracks appears there by its exact name, and
each result file named there on its own in backticks exists."""

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "benchmarks" / "README.md"


# A name stands alone: not part of a longer name (a full stop may end the sentence after it).
NAME_CHARS = r"[\w.-]"
# A backtick span that is one result file's name, possibly with its folder: not a command (those name the
# file they wrote, which may have been renamed since), not a pattern (`*`, `<recipe>`, `{0,1,2}`, `..._`).
LISTED_NAME = re.compile(r"`(?:benchmarks/results/)?([\w.-]+\.json)`")


def tracked_entries() -> set[str]:
    """Names directly under benchmarks/results/ that git tracks; without git, what the folder holds, less
    what git ignores there (*.png) or cannot track (empty folders)."""
    git = shutil.which("git")
    if git:
        done = subprocess.run([git, "-C", str(ROOT), "ls-files", "-z", "--", "benchmarks/results"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout:
            prefix = "benchmarks/results/"
            return {path[len(prefix):].split("/")[0] for path in done.stdout.split("\0") if path.startswith(prefix)}
    return {entry.name for entry in RESULTS.iterdir()
            if entry.suffix != ".png" and (entry.is_file() or any(p.is_file() for p in entry.rglob("*")))}


def named(name: str, text: str) -> bool:
    return re.search(rf"(?<!{NAME_CHARS}){re.escape(name)}(?!{NAME_CHARS}*\w)", text) is not None


def test_every_record_is_listed_in_the_benchmarks_readme():
    text = README.read_text()
    entries = tracked_entries()
    assert entries, f"no records found under {RESULTS}"
    missing = sorted(name for name in entries if not named(name, text))
    assert not missing, ("records in benchmarks/results/ not named in benchmarks/README.md (add each by its exact "
                         f"name, with what it is, its command and its time): {', '.join(missing)}")


def test_every_result_file_the_readme_names_exists():
    names = {name for name in LISTED_NAME.findall(README.read_text()) if not name.startswith(".")}
    assert names, "no result file names found in benchmarks/README.md"
    absent = sorted(name for name in names if not (RESULTS / name).exists())
    assert not absent, f"benchmarks/README.md names result files that benchmarks/results/ lacks: {', '.join(absent)}"
