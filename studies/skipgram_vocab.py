"""The corpus pass before training, side by side with gensim: the zoo's ``build_corpus`` (vocabulary,
and the text encoded to word ids on disk, read once) against gensim's ``Word2Vec.build_vocab`` over
``LineSentence`` (vocabulary, subsampling and noise tables; gensim encodes while it trains), both
from a cold cache, min_count 5, in this process, alternating, median of --repeats (CPU only). With
--compress gzip (bzip2, xz) both read the file compressed so (gensim by its suffix, the zoo by its
first bytes).

    python studies/skipgram_vocab.py --corpora lee,wiki,wiki10m --repeats 3
    python studies/skipgram_vocab.py --corpora wiki10m --compress gzip \
        --out studies/results/skipgram_vocab_gzip.json

Writes studies/results/skipgram_vocab.json.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, processor, resolve_device  # noqa: E402
from benchmarks.common.skipgram_measures import big_corpus, lee_corpus, wiki_corpus  # noqa: E402

CORPORA = {"lee": lee_corpus, "wiki": wiki_corpus, "wiki10m": lambda work: big_corpus(work, 10_000_000)}
COMPRESSORS = {"gzip": (gzip.open, ".gz"), "bzip2": (bz2.open, ".bz2"), "xz": (lzma.open, ".xz")}


def compressed(corpus: Path, kind: str) -> Path:
    """A compressed copy of ``corpus`` beside it (made once), named as gensim's smart_open expects."""
    opener, suffix = COMPRESSORS[kind]
    path = corpus.with_name(corpus.name + suffix)
    if not path.exists():
        with open(corpus, "rb") as src, opener(path, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    return path


def zoo_pass(corpus: Path, cache: Path) -> tuple[float, int]:
    from zoo.models.skipgram.corpus import build_corpus, load_corpus

    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    folder = build_corpus([corpus], cache, min_count=5)
    seconds = time.perf_counter() - start
    return seconds, len(load_corpus(folder)[0])


def gensim_pass(corpus: Path) -> tuple[float, int]:
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    model = Word2Vec(vector_size=100, window=5, min_count=5, sample=1e-3, sg=1, negative=5, workers=2)
    start = time.perf_counter()
    model.build_vocab(LineSentence(str(corpus)))
    return time.perf_counter() - start, len(model.wv.index_to_key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default="lee,wiki,wiki10m", help=f"of {sorted(CORPORA)}")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compress", choices=["none", *COMPRESSORS], default="none",
                        help="read the corpora compressed so (both tools)")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_vocab.json"))
    add_device_option(parser)
    args = parser.parse_args()
    if resolve_device(args.device).type != "cpu":
        parser.error("reading text runs on the CPU in both tools: --device cpu")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.corpora.split(","):
        corpus = CORPORA[name](work)
        if args.compress != "none":
            corpus = compressed(corpus, args.compress)
        zoo, gensim = [], []
        for _ in range(args.repeats):  # alternating, so that a slow spell of the machine hits both
            zoo.append(zoo_pass(corpus, work / "vocab_cache"))
            gensim.append(gensim_pass(corpus))
        z, g = statistics.median(s for s, _ in zoo), statistics.median(s for s, _ in gensim)
        row = {"corpus": name, "file": str(corpus), "compress": args.compress, "zoo_s": [round(s, 3) for s, _ in zoo],
               "gensim_s": [round(s, 3) for s, _ in gensim], "zoo_median_s": round(z, 3),
               "gensim_median_s": round(g, 3), "gensim_over_zoo": round(g / z, 2),
               "vocabulary": {"zoo": zoo[0][1], "gensim": gensim[0][1]}}
        rows.append(row)
        print(f"{name}: zoo {z:.2f} s, gensim {g:.2f} s, gensim / zoo {g / z:.2f}x "
              f"(vocabulary {zoo[0][1]:,} / {gensim[0][1]:,} words)", flush=True)
    shutil.rmtree(work / "vocab_cache", ignore_errors=True)
    report = {"what": "the corpus pass before training, min_count 5: zoo build_corpus (vocabulary + ids on disk) vs "
                      f"gensim build_vocab (LineSentence); median of {args.repeats}, alternating; files "
                      f"{'plain' if args.compress == 'none' else args.compress + '-compressed'}",
              "command": "python " + " ".join(sys.argv), "device": str(args.device), "processor": processor(),
              "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
