"""Corpora and quality measures for the skip-gram benchmarks (``skipgram_vs_gensim.py``): the
real-text corpora built from gensim's test data, the similarity / analogy scores, the
negative-sampling loss on fixed probe pairs, and the top-k neighbour agreement of two embeddings."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import torch

from zoo.models.skipgram.evaluation import (
    analogy_score,
    read_analogies,
    read_similarity,
    similarity_score,
)
from zoo.spread import median_range

NORM_BANDS = [(0, 100), (100, 1000), (1000, 5000), (5000, 15000), (15000, 10**9)]  # frequency ranks


def lee_corpus(folder: Path, min_tokens: int = 1_000_000) -> Path:
    import gensim  # imported when used: gensim
    from gensim.utils import simple_preprocess  # imported when used: gensim

    path = folder / "lee_background_1m.txt"
    if not path.exists():
        src = Path(gensim.__file__).parent / "test" / "test_data" / "lee_background.cor"
        docs = [" ".join(simple_preprocess(line)) for line in src.read_text(encoding="utf-8").splitlines()]
        n = sum(len(d.split()) for d in docs)
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(docs * -(-min_tokens // n)) + "\n")
    return path


def wiki_corpus(folder: Path, min_tokens: int = 1_000_000) -> Path:
    """The text of the 106 Wikipedia articles in gensim's shortened enwiki dump (453k tokens,
    extracted by gensim's WikiCorpus: lowercased, markup and punctuation removed), repeated to
    >= min_tokens. Real, varied English with a larger vocabulary than the Lee corpus."""
    import gensim  # imported when used: gensim
    from gensim.corpora.wikicorpus import WikiCorpus  # imported when used: gensim

    path = folder / "enwiki_shortened_1m.txt"
    if not path.exists():
        dump = (Path(gensim.__file__).parent / "test" / "test_data"
                / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
        docs = [" ".join(tokens) for tokens in WikiCorpus(str(dump), dictionary={}, processes=1).get_texts()]
        n = sum(len(d.split()) for d in docs)
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(docs * -(-min_tokens // n)) + "\n")
    return path


def similarity_files() -> tuple[str, str, str]:
    """wordsim353, simlex999 and questions-words as gensim's test data ships them."""
    import gensim  # imported when used: gensim

    test_data = Path(gensim.__file__).parent / "test" / "test_data"
    return tuple(str(test_data / f) for f in ("wordsim353.tsv", "simlex999.txt", "questions-words.txt"))


def synthetic_corpus(folder: Path) -> tuple[Path, list[str], list[str]]:
    from zoo.models.skipgram.synthetic import PlantedCorpus, generate  # imported when used: numpy

    out = generate(PlantedCorpus(tokens=1_000_000), folder)
    return out / "corpus.txt", [str(out / "planted_test.tsv")], [str(out / "planted_analogies.txt")]


def score(vectors: torch.Tensor, words: list[str], similarity: list[str], analogies: list[str],
          analogy_restrict: int | None = None) -> dict:
    """Similarity and analogy scores (each with its share of questions out of vocabulary) and the mean
    vector length by frequency band. Analogies are answered among the whole vocabulary unless
    ``analogy_restrict`` says how many of the most frequent words (gensim's default, 300,000, is the
    whole vocabulary of every corpus here). Not word2vec's 30,000: the tools order words of equal count
    differently (the zoo by code point, gensim 4 by first appearance, the latest first), and in a repeated corpus, where
    every count is a multiple of the repeats, the 30,000th word falls inside a tie, so a cut there
    would give each tool other questions (10M words: 50.5 % vs 53.3 % skipped)."""
    index = {w: i for i, w in enumerate(words)}
    out = {}
    for path in similarity:
        r = similarity_score(vectors, index, read_similarity(path), lowercase=True)
        out[Path(path).stem] = {"spearman": round(r["spearman"], 4), "oov": round(r["oov"], 3)}
    for path in analogies:
        r = analogy_score(vectors, index, read_analogies(path), analogy_restrict or len(words), lowercase=True)
        out[Path(path).stem] = {"accuracy": round(r.get("all", float("nan")), 4), "oov": round(r["oov"], 3)}
    # mean vector length by frequency rank (both tools list words most frequent first): a small
    # systematic difference in training shows here when the scores cannot tell (docs/skipgram.md)
    norms = vectors.float().norm(dim=1)
    out["mean_norm"] = {f"rank{a}-{min(b, len(norms))}": round(float(norms[a:b].mean()), 3)
                        for a, b in NORM_BANDS if a < len(norms)}
    return out


def objective_probe(corpus: Path, n_tokens: int = 100_000, negative: int = 5, seed: int = 0) -> dict:
    """Fixed (context, word, k noise words) triples, as words, from the start of the corpus (full
    window 5, no subsampling; noise from the corpus unigram^0.75): the negative-sampling loss on
    them measures how well each tool optimised the shared objective, with less noise than the
    similarity files."""
    from zoo.models.skipgram.corpus import read_sentences  # imported when used: numpy

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


def big_corpus(folder: Path, tokens: int, shuffle_seed: int | None = None) -> Path:
    """The Wikipedia text repeated to ``tokens`` words (text8's format: one line, lowercase words).
    With ``shuffle_seed`` each repeat has the 106 articles in a new random order (seeded): the same
    text in another order (skipgram_gensim_order.py)."""
    if shuffle_seed is None:
        path = folder / f"enwiki_{tokens // 1_000_000}m.txt"
        if not path.exists():
            src = wiki_corpus(folder).read_text().split()[:453_000]  # one copy of the 106 articles
            with path.open("w") as f:
                for start in range(0, tokens, len(src)):
                    f.write(" ".join(src[: min(len(src), tokens - start)]) + " ")
        return path
    lines = wiki_corpus(folder).read_text(encoding="utf-8").splitlines()
    articles = [line.split() for line in lines[:lines.index(lines[0], 1)]]  # one copy of the articles
    rng, words = random.Random(shuffle_seed), []
    while len(words) < tokens:
        rng.shuffle(articles)
        for article in articles:
            words.extend(article)
    path = folder / f"enwiki_{tokens // 1_000_000}m_shuffled{shuffle_seed}.txt"
    path.write_text(" ".join(words[:tokens]) + " ", encoding="utf-8")
    return path


def neighbour_agreement(a: torch.Tensor, words_a: list[str], b: torch.Tensor, words_b: list[str],
                        n: int = 1000, k: int = 10) -> float:
    """Mean share of common top-k cosine neighbours of the n most frequent words, neighbours searched
    among the words both embeddings have. words_a and words_b list each table's words most frequent
    first; the n words are those with the smallest sum of their two ranks (ties by the word), so
    that the measure is symmetric: two tools order words of equal count differently, and taking the
    first n of one tool's list gives the two directions other words where a tie spans rank n."""
    index_b = {w: i for i, w in enumerate(words_b)}
    ia = {w: i for i, w in enumerate(words_a)}
    common = sorted((w for w in words_a if w in index_b), key=lambda w: (ia[w] + index_b[w], w))
    va = torch.nn.functional.normalize(a[[ia[w] for w in common]].float(), dim=1)
    vb = torch.nn.functional.normalize(b[[index_b[w] for w in common]].float(), dim=1)
    m = min(n, len(common))
    top = []
    for v in (va, vb):
        sims = v[:m] @ v.T  # (m, C)
        sims[:, :m].fill_diagonal_(-2.0)  # not oneself (row i is word i)
        top.append(sims.topk(k, dim=1).indices)
    same = [len(set(x.tolist()) & set(y.tolist())) / k for x, y in zip(*top)]
    return round(sum(same) / m, 4)


def agreement_between_processes(vectors: dict[str, list], digits: int = 4) -> dict:
    """{"<a>_vs_<b>": median (range) of the neighbour agreement of every pair of runs of variants a and b
    with different seeds} for every pair of variants, a variant with itself included. vectors: variant ->
    [(vectors, words) per seed, same seeds in the same order]. Runs of one seed share a start and, for
    gensim's 1- and 2-worker runs, most random draws; runs of different seeds share neither, so what is
    left of their agreement is how alike the two processes are (docs/skipgram.md)."""
    names = list(vectors)
    out = {}
    for i, a in enumerate(names):
        for b in names[i:]:
            n = min(len(vectors[a]), len(vectors[b]))
            pairs = [(x, y) for x in range(n) for y in range(n) if x != y and (a != b or x < y)]
            if pairs:
                out[f"{a}_vs_{b}"] = median_range([round(neighbour_agreement(*vectors[a][x], *vectors[b][y]), digits)
                                                   for x, y in pairs])
    return out
