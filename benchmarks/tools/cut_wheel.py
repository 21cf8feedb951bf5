"""Cut gensim's wheel for the GPU machine (benchmarks/gpu_check.sh pack): its C sources and test data go,
but for the five test-data files the benchmarks and tests read (skipgram_measures.py, zoo corpus
``gensim:`` names), so that the tree and both wheel folders fit one device call's 64 MiB.

    python benchmarks/tools/cut_wheel.py .gpu/wheels2/gensim-4.4.0-*.whl
"""

import sys
import zipfile
from pathlib import Path

KEEP = {"lee_background.cor", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
        "wordsim353.tsv", "simlex999.txt", "questions-words.txt"}


def dropped(name: str) -> bool:
    if "/test_data/" in name:
        return name.rsplit("/", 1)[-1] not in KEEP
    return name.endswith((".c", ".cpp", ".pyx", ".pxd"))


def cut(wheel: Path) -> None:
    part = wheel.with_suffix(".part")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if not dropped(item.filename):
                dst.writestr(item, src.read(item.filename))
    part.replace(wheel)  # pip installs what the archive holds; RECORD's extra lines are not checked


if __name__ == "__main__":
    for name in sys.argv[1:]:
        cut(Path(name))
