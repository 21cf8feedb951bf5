"""What making skip-gram's training chunks costs, apart from training them: the datamodule's reader
(subsampling, reduced windows, sentence ids) over the Wikipedia text of skipgram_vs_gensim.py, each
chunk moved to --device, for several chunk sizes and DataLoader workers. On a GPU the training loop
trained 2.8M words/s and one chunk's step alone 6.4M (benchmarks/results/gpu_h200_2026-11-26.json):
is the reader the difference?

    python studies/skipgram_reader.py [--device cpu] [--chunks 250000,1000000] [--workers 0,1]

One epoch per repeat, median of --repeats; writes studies/results/skipgram_reader.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))  # skipgram_vs_gensim.py
from skipgram_vs_gensim import ZOO_HYPER, wiki_corpus  # noqa: E402

from benchmarks.common.devices import add_device_option, describe, processor, resolve_device, synchronize  # noqa: E402


def read_epoch(corpus: Path, cache: Path, chunk_tokens: int, workers: int, device: torch.device) -> dict:
    from zoo.models.skipgram.data import TextCorpusData

    data = TextCorpusData({"files": str(corpus), "root": str(cache), **ZOO_HYPER["data"], "chunk_tokens": chunk_tokens,
                           "seed": 0, "num_workers": workers, "val_similarity": ["gensim:wordsim353.tsv"]})
    data.prepare_data()
    data.setup("fit")
    start, words, chunks = time.perf_counter(), 0, 0
    for batch in data.train_dataloader():
        moved = {k: v.to(device) for k, v in batch.items() if isinstance(v, torch.Tensor)}
        words, chunks = words + len(moved["tokens"]), chunks + 1
    synchronize(device)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "words": words, "chunks": chunks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", default="250000,1000000", help="data.chunk_tokens values")
    parser.add_argument("--workers", default="0,1", help="DataLoader workers")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "skipgram_reader.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    work = Path(args.work)
    corpus = wiki_corpus(work)
    rows = []
    for chunk_tokens in (int(c) for c in args.chunks.split(",")):
        for workers in (int(w) for w in args.workers.split(",")):
            cache = work / "reader_cache"
            runs = [read_epoch(corpus, cache, chunk_tokens, workers, device) for _ in range(args.repeats)]
            seconds = statistics.median(r["seconds"] for r in runs)
            row = {"chunk_tokens": chunk_tokens, "workers": workers, "chunks": runs[0]["chunks"],
                   "words": runs[0]["words"], "seconds_median": round(seconds, 4),
                   "seconds": [round(r["seconds"], 4) for r in runs],
                   "ms_per_chunk": round(1000 * seconds / runs[0]["chunks"], 2),
                   "words_per_s": round(runs[0]["words"] / seconds)}
            rows.append(row)
            print(f"chunk_tokens {chunk_tokens:>9,} workers {workers}: {row['chunks']} chunks, {row['words']:,} words, "
                  f"{row['ms_per_chunk']} ms a chunk, {row['words_per_s']:,} words/s", flush=True)
    report = {"what": "one epoch of skip-gram's chunk reader on the Wikipedia text, chunks moved to the device; "
                      f"median of {args.repeats} repeats", "command": "python " + " ".join(sys.argv),
              "device": str(device), "device_name": describe(device), "torch": torch.__version__,
              "machine": processor(),
              "threads": torch.get_num_threads(), "rows": rows}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
