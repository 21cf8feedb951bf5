"""Every run is on record, and every record is listed: each entry (file or folder) directly under
benchmarks/results/ that git tracks appears in benchmarks/README.md by its exact name, each entry under
studies/results/ in studies/records.md, and each result file named in benchmarks/README.md on its own in
backticks exists."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "benchmarks" / "README.md"
INDEXES = {"benchmarks/results": README, "studies/results": ROOT / "studies" / "records.md"}


# A name stands alone: not part of a longer name (a full stop may end the sentence after it).
NAME_CHARS = r"[\w.-]"
# A backtick span that is one result file's name, possibly with its folder: not a command (those name the
# file they wrote, which may have been renamed since), not a pattern (`*`, `<recipe>`, `{0,1,2}`, `..._`).
LISTED_NAME = re.compile(r"`(?:benchmarks/results/)?([\w.-]+\.json)`")


def tracked_entries(folder: str = "benchmarks/results") -> set[str]:
    """Names directly under the folder that git tracks; without git, what the folder holds, less what git
    ignores there (*.png) or cannot track (empty folders)."""
    git = shutil.which("git")
    if git:
        done = subprocess.run([git, "-C", str(ROOT), "ls-files", "-z", "--", folder], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout:
            prefix = folder + "/"
            return {path[len(prefix):].split("/")[0] for path in done.stdout.split("\0") if path.startswith(prefix)}
    return {entry.name for entry in (ROOT / folder).iterdir()
            if entry.suffix != ".png" and (entry.is_file() or any(p.is_file() for p in entry.rglob("*")))}


def named(name: str, text: str) -> bool:
    return re.search(rf"(?<!{NAME_CHARS}){re.escape(name)}(?!{NAME_CHARS}*\w)", text) is not None


@pytest.mark.parametrize("folder", sorted(INDEXES))
def test_every_record_is_listed_in_its_index(folder):
    index = INDEXES[folder]
    text = index.read_text()
    entries = tracked_entries(folder)
    assert entries, f"no records found under {folder}"
    missing = sorted(name for name in entries if not named(name, text))
    assert not missing, (f"records in {folder}/ not named in {index.relative_to(ROOT)} (add each by its exact "
                         f"name, with what it is, its command and its time): {', '.join(missing)}")


def test_every_result_file_the_readme_names_exists():
    names = {name for name in LISTED_NAME.findall(README.read_text()) if not name.startswith(".")}
    assert names, "no result file names found in benchmarks/README.md"
    absent = sorted(name for name in names if not (RESULTS / name).exists())
    assert not absent, f"benchmarks/README.md names result files that benchmarks/results/ lacks: {', '.join(absent)}"
