"""Skip-gram side by side: the zoo's `skipgram` (through Lightning) vs gensim 4 Word2Vec.

Same corpus file, same hyperparameters (sg=1, dim 100, window 5, negative 5, min_count 5,
sample 1e-3, lr 0.025 -> 0.0001, same epochs), 2 threads each (gensim workers=2; ours 2 Hogwild
threads of single-threaded torch ops). Corpora:
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

    python benchmarks/skipgram_vs_gensim.py [--repeats 3] [--epochs 5] [--corpora lee,synthetic] [--device cuda]
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
from devices import accelerator, add_device_option, describe, resolve_device, synchronize

ROOT = Path(__file__).resolve().parent.parent
HYPER = {"dim": 100, "window": 5, "negative": 5, "min_count": 5, "sample": 1e-3, "lr": 0.025, "min_lr": 1e-4}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def lee_corpus(folder: Path, min_tokens: int = 1_000_000) -> Path:
    import gensim
    from gensim.utils import simple_preprocess

    path = folder / "lee_background_1m.txt"
    if not path.exists():
        src = Path(gensim.__file__).parent / "test" / "test_data" / "lee_background.cor"
        docs = [" ".join(simple_preprocess(line)) for line in src.read_text(encoding="utf-8").splitlines()]
        n = sum(len(d.split()) for d in docs)
        path.write_text("\n".join(docs * -(-min_tokens // n)) + "\n")
    return path


def wiki_corpus(folder: Path, min_tokens: int = 1_000_000) -> Path:
    """The text of the 106 Wikipedia articles in gensim's shortened enwiki dump (453k tokens,
    extracted by gensim's WikiCorpus: lowercased, markup and punctuation removed), repeated to
    >= min_tokens. Real, varied English with a larger vocabulary than the Lee corpus."""
    import gensim
    from gensim.corpora.wikicorpus import WikiCorpus

    path = folder / "enwiki_shortened_1m.txt"
    if not path.exists():
        dump = (Path(gensim.__file__).parent / "test" / "test_data"
                / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
        docs = [" ".join(tokens) for tokens in WikiCorpus(str(dump), dictionary={}, processes=1).get_texts()]
        n = sum(len(d.split()) for d in docs)
        path.write_text("\n".join(docs * -(-min_tokens // n)) + "\n")
    return path


def synthetic_corpus(folder: Path) -> tuple[Path, list[str], list[str]]:
    from zoo.models.skipgram.synthetic import PlantedCorpus, generate

    out = generate(PlantedCorpus(tokens=1_000_000), folder)
    return out / "corpus.txt", [str(out / "planted_test.tsv")], [str(out / "planted_analogies.txt")]


def score(vectors: torch.Tensor, words: list[str], similarity: list[str], analogies: list[str]) -> dict:
    from zoo.models.skipgram.evaluation import (
        analogy_score,
        read_analogies,
        read_similarity,
        similarity_score,
    )

    index = {w: i for i, w in enumerate(words)}
    out = {}
    for path in similarity:
        r = similarity_score(vectors, index, read_similarity(path), lowercase=True)
        out[Path(path).stem] = {"spearman": round(r["spearman"], 4), "oov": round(r["oov"], 3)}
    for path in analogies:
        r = analogy_score(vectors, index, read_analogies(path), 30000, lowercase=True)
        out[Path(path).stem] = {"accuracy": round(r.get("all", float("nan")), 4), "oov": round(r["oov"], 3)}
    return out


def objective_probe(corpus: Path, n_tokens: int = 100_000, negative: int = 5, seed: int = 0) -> dict:
    """Fixed (context, word, k noise words) triples, as words, from the start of the corpus (full
    window 5, no subsampling; noise from the corpus unigram^0.75): the negative-sampling loss on
    them measures how well each tool optimised the shared objective, with less noise than the
    similarity files."""
    from collections import Counter

    from zoo.models.skipgram.corpus import read_sentences

    words: list[str] = []
    for sentence in read_sentences([corpus]):
        words.extend(sentence)
        if len(words) >= n_tokens:
            break
    counts = Counter(words)
    vocab = sorted(counts)
    q = torch.tensor([counts[w] for w in vocab], dtype=torch.float64) ** 0.75  # cpu: word lists
    g = torch.Generator().manual_seed(seed)  # cpu: the probe is a list of words
    centre, context = [], []
    for i in range(len(words)):
        for j in range(max(0, i - 5), min(len(words), i + 6)):
            if j != i:
                centre.append(words[i])
                context.append(words[j])
    pick = torch.randperm(len(centre), generator=g)[:100_000].tolist()  # cpu: see above
    noise = torch.multinomial(q / q.sum(), len(pick) * negative, replacement=True, generator=g)
    noise = noise.view(-1, negative)
    return {"context": [context[i] for i in pick], "word": [centre[i] for i in pick],
            "noise": [[vocab[k] for k in row] for row in noise.tolist()]}


def objective_loss(probe: dict, centre: torch.Tensor, context: torch.Tensor, words: list[str]) -> float:
    """Mean negative-sampling loss per pair over the probe triples whose words are all known."""
    index = {w: i for i, w in enumerate(words)}
    rows = [(index[c], index[w], [index[n] for n in ns]) for c, w, ns in zip(probe["context"], probe["word"],
                                                                             probe["noise"])
            if c in index and w in index and all(n in index for n in ns)]
    c = torch.tensor([r[0] for r in rows], device=centre.device)  # (P,)
    out = torch.tensor([[r[1], *r[2]] for r in rows], device=centre.device)  # (P, 1 + k)
    s = (context[out] * centre[c][:, None, :]).sum(-1)  # (P, 1 + k)
    loss = -(torch.nn.functional.logsigmoid(s[:, 0]) + torch.nn.functional.logsigmoid(-s[:, 1:]).sum(1))
    return round(float(loss.mean()), 4)


def run_gensim(corpus: Path, epochs: int, seed: int) -> tuple[dict, torch.Tensor, list[str]]:
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    sentences = list(LineSentence(str(corpus)))  # in memory, so reading the file is not timed
    model = Word2Vec(vector_size=HYPER["dim"], window=HYPER["window"], min_count=HYPER["min_count"],
                     sample=HYPER["sample"], sg=1, hs=0, negative=HYPER["negative"], alpha=HYPER["lr"],
                     min_alpha=HYPER["min_lr"], workers=2, seed=seed)
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
            device: torch.device = torch.device("cpu")) -> tuple[dict, torch.Tensor, list[str]]:
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
    shutil.rmtree(cache, ignore_errors=True)  # time a cold vocabulary + encoding pass
    start = time.perf_counter()
    data = TextCorpusData({"files": str(corpus), "root": str(cache), "min_count": HYPER["min_count"],
                           "sample": HYPER["sample"], "window": HYPER["window"], "chunk_tokens": 250_000,
                           "val_similarity": ["gensim:wordsim353.tsv"]})
    data.prepare_data()
    data.setup("fit")
    vocab_s = time.perf_counter() - start
    model = SkipGramModule({"dim": HYPER["dim"], "negative": HYPER["negative"], "lr": HYPER["lr"],
                            "min_lr_ratio": HYPER["min_lr"] / HYPER["lr"], "threads": threads, **model_options},
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
    return stats, model.vectors.cpu().clone(), list(model.words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--corpora", default="lee,wiki,synthetic")
    parser.add_argument("--threads", default="2,1", help="zoo thread counts; the first is compared")
    parser.add_argument("--zoo", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra options of the zoo's model, e.g. batch_centres=2048 step_cap=true")
    parser.add_argument("--work", default=str(ROOT / "data" / "skipgram_bench"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "skipgram_vs_gensim.json"))
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    import gensim

    ws353 = str(Path(gensim.__file__).parent / "test" / "test_data" / "wordsim353.tsv")
    simlex = str(Path(gensim.__file__).parent / "test" / "test_data" / "simlex999.txt")
    questions = str(Path(gensim.__file__).parent / "test" / "test_data" / "questions-words.txt")
    corpora = {}
    if "lee" in args.corpora:
        corpora["lee"] = (lee_corpus(work), [ws353, simlex], [questions])
    if "wiki" in args.corpora:
        corpora["wiki"] = (wiki_corpus(work), [ws353, simlex], [questions])
    if "synthetic" in args.corpora:
        corpora["synthetic"] = synthetic_corpus(work)
    threads = [int(t) for t in args.threads.split(",")]
    model_options = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.zoo)}
    report = {"hyperparameters": {**HYPER, "epochs": args.epochs, "sg": 1, "gensim_workers": 2},
              "zoo_options": model_options, "device": str(device), "device_name": describe(device),
              "command": "python " + " ".join(sys.argv),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                          "gensim": gensim.__version__}, "corpora": {}}
    for name, (path, similarity, analogies) in corpora.items():
        probe = objective_probe(path)
        runs: dict[str, list] = {"gensim": [], **{f"zoo_threads{t}": [] for t in threads}}
        quality: dict[str, list] = {k: [] for k in runs}
        for rep in range(args.repeats):
            for key in runs:  # alternate, so both tools see the same machine load
                if key == "gensim":
                    stats, vectors, words = run_gensim(path, args.epochs, seed=rep)
                else:
                    stats, vectors, words = run_zoo(path, args.epochs, rep, int(key[len("zoo_threads"):]),
                                                    work / "cache", model_options, device)
                stats["quality"] = score(vectors, words, similarity, analogies)
                loss = objective_loss(probe, vectors, stats.pop("context_vectors"), words)
                stats["quality"]["probe"] = {"ns_loss": loss}
                runs[key].append(stats)
                quality[key].append(stats["quality"])
                print(f"{name} {key} run {rep}: {stats['words_per_s']:,} words/s, "
                      f"load {stats['load_before']}, {stats['quality']}", flush=True)
        summary = {key: {"median_words_per_s": statistics.median(r["words_per_s"] for r in rs),
                         "median_words_per_cpu_s": statistics.median(r["words_per_cpu_s"] for r in rs),
                         "median_quality": {f"{f}.{m}": statistics.median(q[f][m] for q in quality[key])
                                            for f in quality[key][0] for m in quality[key][0][f]}}
                   for key, rs in runs.items()}
        best_zoo = f"zoo_threads{threads[0]}"
        summary["speed_ratio_zoo_over_gensim"] = round(summary[best_zoo]["median_words_per_s"]
                                                       / summary["gensim"]["median_words_per_s"], 3)
        summary["per_cpu_ratio_zoo_over_gensim"] = round(summary[best_zoo]["median_words_per_cpu_s"]
                                                         / summary["gensim"]["median_words_per_cpu_s"], 3)
        report["corpora"][name] = {"file": str(path), "summary": summary, "runs": runs}
        print(name, json.dumps(summary, indent=1), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
