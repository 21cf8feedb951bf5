"""Skip-gram side by side: the zoo's `skipgram` (through Lightning) vs gensim 4 Word2Vec.

Same corpus file, same hyperparameters (sg=1, dim 100, window 5, negative 5, min_count 5,
sample 1e-3, lr 0.025 -> 0.0001, same epochs), 2 threads each (gensim workers=2; ours 2 Hogwild
threads of the compiled kernel). The zoo's other settings (saturated scores, initial range, job size)
are the ``skipgram_lee`` recipe's, in the loop runs as in the whole command; ``--zoo`` overrides them.
Corpora:
- ``lee``: gensim's real English ``lee_background.cor`` (simple_preprocess'ed), repeated to >= 1M tokens;
- ``wiki``: the 106 Wikipedia articles of gensim's shortened enwiki dump (453k tokens), repeated x3;
- ``synthetic``: the zoo's planted-groups corpus (1M tokens), with its ground-truth similarity.

Speed = effective words per second of training (words left after min_count and subsampling,
as gensim's ``train()`` reports them; ours counts the same), excluding the one-time vocabulary
pass, which is reported separately (``vocab_s``: gensim's ``build_vocab`` on sentences already in
memory; ours reads the file, trains the tokenizers vocabulary and writes the encoded corpus).
``words_per_cpu_s`` divides by the process CPU time instead: on a machine shared with other jobs
(Linux autogroup scheduling gives each session a share, whatever its thread count) it is the
steadier measure of efficiency. Both models are scored by the same evaluation code.
Other processes share the CPU: the load average (``uptime``) is recorded with the numbers, and
the runs alternate so that both tools see the same load.

Whole command (``--what e2e``): from the text file to vectors on disk, each tool in a fresh process
timed from launch to exit: ``python -m zoo.train recipe=skipgram_lee data.files=FILE ...`` (start-up,
vocabulary and encoding, training, validation, last.ckpt) against a gensim script that streams the
file with ``LineSentence``, trains and saves the vectors in word2vec format. The zoo's part
breakdown (start-up = importing torch/lightning/zoo; vocabulary; training loop; the rest: Lightning
set-up, validation, checkpoints) comes from the same settings run in-process.

Agreement: for the 1,000 most frequent words, the share of their 10 nearest neighbours (cosine,
among the words both vocabularies have) that two embeddings have in common; zoo vs gensim with the
same seed, against gensim vs gensim and zoo vs zoo with different seeds. Quality and agreement are
reported per seed and as median (min-max) over the seeds (``--repeats``, default 3).

    python benchmarks/skipgram_vs_gensim.py [--repeats 3] [--epochs 5] [--corpora lee,synthetic] [--device cuda]
    python benchmarks/skipgram_vs_gensim.py --what e2e --corpora lee,wiki,wiki10m     # whole commands
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device, synchronize
from benchmarks.common.paths import shown
from benchmarks.common.skipgram_measures import (
    big_corpus,
    lee_corpus,
    neighbour_agreement,
    objective_loss,
    objective_probe,
    score,
    similarity_files,
    synthetic_corpus,
    wiki_corpus,
)
from zoo.spread import median_range

ROOT = Path(__file__).resolve().parent.parent
HYPER = {"dim": 100, "window": 5, "negative": 5, "min_count": 5, "sample": 1e-3, "lr": 0.025, "min_lr": 1e-4}
# HYPER as the zoo's options, in the loop runs and the whole command alike (not the recipe's: its lr
# floor is word2vec.c's lr * 1e-4, gensim's min_alpha is 1e-4)
ZOO_HYPER = {"model": {"dim": HYPER["dim"], "negative": HYPER["negative"], "lr": HYPER["lr"],
                       "min_lr_ratio": HYPER["min_lr"] / HYPER["lr"]},
             "data": {"window": HYPER["window"], "min_count": HYPER["min_count"], "sample": HYPER["sample"]}}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_gensim(corpus: Path, epochs: int, seed: int, workers: int = 2) -> tuple[dict, torch.Tensor, list[str]]:
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    sentences = list(LineSentence(str(corpus)))  # in memory, so reading the file is not timed
    model = Word2Vec(vector_size=HYPER["dim"], window=HYPER["window"], min_count=HYPER["min_count"],
                     sample=HYPER["sample"], sg=1, hs=0, negative=HYPER["negative"], alpha=HYPER["lr"],
                     min_alpha=HYPER["min_lr"], workers=workers, seed=seed)
    start = time.perf_counter()
    model.build_vocab(sentences)
    vocab_s = time.perf_counter() - start
    load = load_average()
    start, cpu = time.perf_counter(), time.process_time()
    effective, raw = model.train(sentences, total_examples=len(sentences), epochs=epochs)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = {"effective_words": effective, "raw_words": raw, "train_s": round(seconds, 3),
             "words_per_s": round(effective / seconds), "cpu_s": round(cpu, 3),
             "words_per_cpu_s": round(effective / cpu), "vocab_s": round(vocab_s, 3), "load_before": load,
             "load_after": load_average()}
    stats["context_vectors"] = torch.from_numpy(model.syn1neg.copy())
    return stats, torch.from_numpy(model.wv.vectors.copy()), list(model.wv.index_to_key)


def run_zoo(corpus: Path, epochs: int, seed: int, threads: int, cache: Path, model_options: dict,
            device: torch.device = torch.device("cpu"), chunk_tokens: int = 250_000,
            ) -> tuple[dict, torch.Tensor, list[str]]:
    import lightning as L

    from zoo.models.skipgram.data import TextCorpusData
    from zoo.models.skipgram.module import SkipGramModule

    class Clock(L.Callback):
        def on_train_start(self, trainer, module):
            self.words, self.start, self.cpu = 0, time.perf_counter(), time.process_time()

        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.words += len(batch["tokens"])

        def on_train_end(self, trainer, module):
            synchronize(module.device)
            self.seconds, self.cpu = time.perf_counter() - self.start, time.process_time() - self.cpu

    L.seed_everything(seed, verbose=False)
    # this process's own cache folder: two benchmarks sharing one --work emptied each other's
    cache = cache.parent / f"{cache.name}-{os.getpid()}"
    shutil.rmtree(cache, ignore_errors=True)  # time a cold vocabulary + encoding pass
    start = time.perf_counter()
    data = TextCorpusData({"files": str(corpus), "root": str(cache), **ZOO_HYPER["data"], "chunk_tokens": chunk_tokens,
                           "seed": seed, "val_similarity": ["gensim:wordsim353.tsv"]})
    data.prepare_data()
    data.setup("fit")
    vocab_s = time.perf_counter() - start
    model = SkipGramModule({**recipe_model_options(), **ZOO_HYPER["model"], "threads": threads, **model_options},
                           data.info())
    clock = Clock()
    acc, devices = accelerator(device)
    trainer = L.Trainer(max_epochs=epochs, accelerator=acc, devices=devices, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        num_sanity_val_steps=0, callbacks=[clock])
    load = load_average()
    trainer.fit(model, datamodule=data)
    stats = {"effective_words": clock.words, "raw_words": int(model.words_done),
             "train_s": round(clock.seconds, 3),
             "words_per_s": round(clock.words / clock.seconds), "cpu_s": round(clock.cpu, 3),
             "words_per_cpu_s": round(clock.words / clock.cpu), "vocab_s": round(vocab_s, 3),
             "load_before": load, "load_after": load_average(), "threads": threads,
             "threads_used": model.threads,
             "intra_op_threads": model.intra_op_threads}
    stats["context_vectors"] = model.net.context.detach().cpu().clone()
    shutil.rmtree(cache, ignore_errors=True)
    return stats, model.vectors.cpu().clone(), list(model.words)


def recipe_model_options() -> dict:
    """The model settings of ``skipgram_lee`` that no hyperparameter here fixes (saturated, init_range,
    job_tokens, ...), so that the loop runs train as the whole command (the recipe) does."""
    from zoo.config import load_config

    model = load_config("skipgram_lee")["model"]
    return {k: v for k, v in model.items() if k not in ("name", "neighbours")}


GENSIM_E2E = r"""
import sys, time
t0 = time.perf_counter()
from gensim.models import Word2Vec
from gensim.models.word2vec import LineSentence
path, out, epochs, seed, workers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
t1 = time.perf_counter()
model = Word2Vec(LineSentence(path), vector_size=100, window=5, min_count=5, sample=1e-3, sg=1, hs=0, negative=5,
                 alpha=0.025, min_alpha=1e-4, workers=workers, epochs=epochs, seed=seed)
t2 = time.perf_counter()
model.wv.save_word2vec_format(out, binary=True)
print("PARTS", t1 - t0, t2 - t1, time.perf_counter() - t2)
"""


def e2e_gensim(corpus: Path, epochs: int, seed: int, work: Path) -> tuple[dict, torch.Tensor, list[str]]:
    """gensim from the text file to saved vectors, in a fresh process."""
    import subprocess

    from gensim.models import KeyedVectors

    out = work / f"gensim_{seed}.bin"
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", GENSIM_E2E, str(corpus), str(out), str(epochs), str(seed), "2"],
                       capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    parts = [float(x) for x in p.stdout.split("PARTS")[1].split()]
    kv = KeyedVectors.load_word2vec_format(str(out), binary=True)
    stats = {"wall_s": round(wall, 2), "import_s": round(parts[0], 2), "vocab_and_train_s": round(parts[1], 2),
             "save_s": round(parts[2], 2)}
    return stats, torch.from_numpy(kv.vectors.copy()), list(kv.index_to_key)


def e2e_zoo(corpus: Path, epochs: int, seed: int, threads: int, work: Path,
            model_options: dict, device: torch.device) -> tuple[dict, torch.Tensor, list[str]]:
    """``python -m zoo.train recipe=skipgram_lee`` on the file, cold cache, in a fresh process."""
    import subprocess

    import zoo

    run_dir, cache = work / f"zoo_run_{seed}", work / f"zoo_cache_{seed}"
    for folder in (run_dir, cache):
        shutil.rmtree(folder, ignore_errors=True)
    acc, devices = accelerator(device)
    args = ["recipe=skipgram_lee", f"data.files={corpus}", f"data.root={cache}", "data.lowercase=false",
            "data.strip_punctuation=false", f"model.threads={threads}", f"trainer.max_epochs={epochs}",
            f"seed={seed}", f"data.seed={seed}", f"run_dir={run_dir}", "test_after_fit=false",
            *[f"{part}.{k}={v}" for part, opts in ZOO_HYPER.items() for k, v in opts.items()],
            "trainer.enable_progress_bar=false", f"trainer.accelerator={acc}", f"trainer.devices={devices}",
            *[f"model.{k}={v}" for k, v in model_options.items()]]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "zoo.train", *args], capture_output=True, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    model = zoo.load(str(next(run_dir.glob("**/checkpoints/last.ckpt"))))  # run_dir/<recipe>/<timestamp>/
    return {"wall_s": round(wall, 2), "command": "python -m zoo.train " + " ".join(args)}, \
        model.vectors.cpu().clone(), list(model.words)


WARM_KERNEL = r"""
import torch
from zoo.models.skipgram import kernel
from zoo.models.skipgram.sampling import AliasSampler
n, vocab = 4000, 50
g = torch.Generator().manual_seed(0)
tokens = torch.randint(0, vocab, (n,), generator=g)
noise = kernel.noise_table(AliasSampler(torch.full((vocab,), 1.0 / vocab, dtype=torch.float64)))
kernel.train_chunk(torch.rand(vocab, 8), torch.zeros(vocab, 8), tokens, torch.zeros(n, dtype=torch.int64),
                   torch.randint(1, 6, (n,), generator=g), noise, None, 5, 0.025, 0.02, 1, 2, skip_saturated=True,
                   job_tokens=1000)
"""


def warm_kernel() -> None:
    """Compile the CPU kernel into numba's cache (next to kernel.py) before any whole command is timed: a fresh
    checkout, or a changed kernel.py, compiles it once (~15-25 s of CPU), as gensim's Cython is compiled when it
    is installed; every later command loads the cached machine code."""
    import subprocess

    subprocess.run([sys.executable, "-c", WARM_KERNEL], check=True, cwd=ROOT)


def import_seconds() -> float:
    """Start-up of the zoo's command: importing torch, lightning and the zoo's trainer."""
    import subprocess

    code = "import time; t = time.perf_counter(); import zoo.train, lightning, torch; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                cwd=ROOT).stdout.split()[-1])


def quality_medians(runs: list[dict]) -> dict:
    """{"<file>.<measure>": median (range) over the runs} of every run's ``quality``."""
    return {f"{f}.{m}": median_range([r["quality"][f][m] for r in runs])
            for f in runs[0]["quality"] for m in runs[0]["quality"][f]}


def loop_quality(stats: dict, vec: torch.Tensor, words: list[str], similarity: list[str], analogies: list[str],
                 probe: dict) -> dict:
    """A loop run's quality: similarity and analogy scores, and the probe loss from its context vectors
    (taken out of ``stats``, which is returned with ``quality`` set)."""
    stats["quality"] = score(vec, words, similarity, analogies)
    stats["quality"]["probe"] = {"ns_loss": objective_loss(probe, vec, stats.pop("context_vectors"), words)}
    return stats


def run_corpus(name: str, path: Path, similarity: list[str], analogies: list[str], args, threads: list[int],
               model_options: dict, device: torch.device, work: Path) -> dict:
    """Every run of one corpus: the training loop (in-process) and/or whole commands, per seed."""
    entry: dict = {"file": shown(path), "runs": {}, "summary": {}}
    vectors: dict[str, list] = {}
    if "loop" in args.what:
        probe = objective_probe(path)
        runs: dict[str, list] = {"gensim": [], **{f"zoo_threads{t}": [] for t in threads}}
        for rep in range(args.repeats):
            for key in runs:  # alternate, so both tools see the same machine load
                if key == "gensim":
                    stats, vec, words = run_gensim(path, args.epochs, rep, args.gensim_workers)
                else:
                    stats, vec, words = run_zoo(path, args.epochs, rep, int(key[len("zoo_threads"):]),
                                                work / "cache", model_options, device, args.chunk_tokens)
                runs[key].append(loop_quality(stats, vec, words, similarity, analogies, probe))
                vectors.setdefault(f"loop_{key}", []).append((vec, words))
                print(f"{name} loop {key} seed {rep}: {stats['words_per_s']:,} words/s, "
                      f"load {stats['load_before']}, {stats['quality']}", flush=True)
        summary = {key: {"words_per_s": median_range([r["words_per_s"] for r in rs]),
                         "words_per_cpu_s": median_range([r["words_per_cpu_s"] for r in rs]),
                         "vocab_s": median_range([r["vocab_s"] for r in rs]),
                         "quality": quality_medians(rs)}
                   for key, rs in runs.items()}
        best = f"zoo_threads{threads[0]}"
        summary["speed_ratio_zoo_over_gensim"] = round(summary[best]["words_per_s"]["median"]
                                                       / summary["gensim"]["words_per_s"]["median"], 3)
        summary["per_cpu_ratio_zoo_over_gensim"] = round(summary[best]["words_per_cpu_s"]["median"]
                                                         / summary["gensim"]["words_per_cpu_s"]["median"], 3)
        entry["runs"]["loop"], entry["summary"]["loop"] = runs, summary
    if "e2e" in args.what:
        if device.type == "cpu":
            warm_kernel()
        runs = {"gensim": [], "zoo": []}
        for rep in range(args.repeats):
            for key in runs:
                if key == "gensim":
                    stats, vec, words = e2e_gensim(path, args.epochs, rep, work)
                else:
                    stats, vec, words = e2e_zoo(path, args.epochs, rep, threads[0], work, model_options, device)
                stats["quality"] = score(vec, words, similarity, analogies)
                runs[key].append(stats)
                vectors.setdefault(f"e2e_{key}", []).append((vec, words))
                print(f"{name} e2e {key} seed {rep}: {stats['wall_s']} s, {stats['quality']}", flush=True)
        summary = {key: {"wall_s": median_range([r["wall_s"] for r in rs]),
                         "quality": quality_medians(rs)}
                   for key, rs in runs.items()}
        summary["speed_ratio_gensim_over_zoo"] = round(summary["gensim"]["wall_s"]["median"]
                                                       / summary["zoo"]["wall_s"]["median"], 3)
        if "loop" in entry["summary"]:  # where the zoo's whole command spends its time
            loop = entry["summary"]["loop"][f"zoo_threads{threads[0]}"]
            train_s = statistics.median(r["train_s"] for r in entry["runs"]["loop"][f"zoo_threads{threads[0]}"])
            startup = import_seconds()
            summary["zoo_breakdown_s"] = {
                "start_up_imports": round(startup, 2), "vocabulary_and_encoding": loop["vocab_s"]["median"],
                "training_loop": train_s,
                "rest_lightning_validation_checkpoints": round(summary["zoo"]["wall_s"]["median"] - startup
                                                               - loop["vocab_s"]["median"] - train_s, 2)}
        entry["runs"]["e2e"], entry["summary"]["e2e"] = runs, summary
    # neighbour agreement: zoo vs gensim (same seed) against each tool's seed-to-seed agreement
    agreement = {}
    for kind in ("e2e", "loop"):
        g = vectors.get(f"{kind}_gensim")
        z = vectors.get(f"{kind}_zoo") or vectors.get(f"{kind}_zoo_threads{threads[0]}")
        if not g or not z:
            continue
        pairs = [(i, j) for i in range(len(g)) for j in range(i + 1, len(g))]
        agreement[kind] = {
            "zoo_vs_gensim": median_range([neighbour_agreement(*z[i], *g[i]) for i in range(len(g))]),
            "gensim_vs_gensim": median_range([neighbour_agreement(*g[i], *g[j]) for i, j in pairs]) if pairs else None,
            "zoo_vs_zoo": median_range([neighbour_agreement(*z[i], *z[j]) for i, j in pairs]) if pairs else None,
        }
        for t in threads[1:] if kind == "loop" else []:  # the other thread counts, against gensim and the first
            other = vectors[f"loop_zoo_threads{t}"]
            agreement[kind][f"zoo_threads{t}_vs_gensim"] = median_range(
                [neighbour_agreement(*other[i], *g[i]) for i in range(len(g))])
            agreement[kind][f"zoo_threads{t}_vs_zoo_threads{threads[0]}"] = median_range(
                [neighbour_agreement(*other[i], *z[i]) for i in range(len(g))])
    entry["summary"]["neighbour_agreement_top10_of_1000"] = agreement
    return entry


def main() -> None:
    from zoo.tracking import quiet_lightning

    quiet_lightning()  # the Trainers built here: no cloud tip, no LeafSpec warning
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="seeds per tool")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--corpora", default="lee,wiki,synthetic",
                        help="lee, wiki, synthetic, wiki10m, wiki50m (the Wikipedia text repeated, text8's format)")
    parser.add_argument("--what", default="loop,e2e", help="loop (training loop, in-process), e2e (whole commands)")
    parser.add_argument("--threads", default="2", help="zoo thread counts for the loop; the first is compared")
    parser.add_argument("--gensim-workers", type=int, default=2, help="gensim's threads in the loop runs")
    parser.add_argument("--zoo", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra options of the zoo's model, e.g. updates=minibatch batch_centres=2048")
    parser.add_argument("--chunk-tokens", type=int, default=250_000,
                        help="the loop's words per training step (data.chunk_tokens; the recipes use 1M): each chunk "
                             "pays Lightning's step and a table check, so a GPU's large minibatches want large chunks")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "skipgram_vs_gensim.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    import gensim

    ws353, simlex, questions = similarity_files()
    builders = {"lee": lambda: lee_corpus(work), "wiki": lambda: wiki_corpus(work),
                "wiki10m": lambda: big_corpus(work, 10_000_000), "wiki50m": lambda: big_corpus(work, 50_000_000)}
    corpora = {}
    for name in args.corpora.split(","):
        if name == "synthetic":
            corpora[name] = synthetic_corpus(work)
        elif name in builders:
            corpora[name] = (builders[name](), [ws353, simlex], [questions])
        else:
            raise SystemExit(f"unknown corpus {name!r}: choose from synthetic, {', '.join(builders)}")
    threads = [int(t) for t in args.threads.split(",")]
    model_options = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.zoo)}
    report = {"hyperparameters": {**HYPER, "epochs": args.epochs, "sg": 1, "gensim_workers": args.gensim_workers},
              "zoo_options": model_options, "chunk_tokens": args.chunk_tokens,
              "device": str(device), "device_name": describe(device),
              "command": "python " + " ".join(sys.argv), "repeats": args.repeats, "what": args.what,
              "machine": {"processor": processor(), "cpus": os.cpu_count(),
                          "platform": platform.platform(), "torch": torch.__version__,
                          "gensim": gensim.__version__, "load_average_at_start": load_average()}, "corpora": {}}
    for name, (path, similarity, analogies) in corpora.items():
        try:
            report["corpora"][name] = run_corpus(name, path, similarity, analogies, args, threads, model_options,
                                                 device, work)
        except Exception as err:  # a run that diverges or crashes is a result too: recorded, then the next corpus
            report["corpora"][name] = {"file": shown(path), "failed": f"{type(err).__name__}: {err}", "summary": {}}
        print(name, json.dumps(report["corpora"][name].get("failed") or report["corpora"][name]["summary"],
                               indent=1), flush=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")  # after every corpus: nothing lost
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
