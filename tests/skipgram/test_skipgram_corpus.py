"""Streaming reader (bounded memory), vocabulary + encoded cache, chunking."""

import json
import tracemalloc

import numpy as np
import pytest
import torch

from zoo.errors import UserError
from zoo.models.skipgram.corpus import (
    CorpusChunks,
    build_corpus,
    load_corpus,
    read_sentences,
    resolve_files,
)

TEXT = "the cat sat on the mat\n\nthe dog  sat\tdown\nélan vital the end\nlast line no newline"


def whole_file_sentences(text: str, max_len: int) -> list[list[str]]:
    out = []
    for line in text.split("\n"):
        words = line.split()
        out.extend(words[i:i + max_len] for i in range(0, len(words), max_len))
    return out


@pytest.mark.parametrize("read_chars", [1, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("max_len", [2, 4, 10000])
def test_chunked_reader_equals_whole_file_read(tmp_path, read_chars, max_len):
    path = tmp_path / "c.txt"
    path.write_text(TEXT, encoding="utf-8")
    got = list(read_sentences([path], max_sentence_length=max_len, read_chars=read_chars))
    assert got == whole_file_sentences(TEXT, max_len)


def test_reader_lowercases_and_spans_files(tmp_path):
    (tmp_path / "a.txt").write_text("Hello World")
    (tmp_path / "b.txt").write_text("Again\n")
    got = list(read_sentences([tmp_path / "a.txt", tmp_path / "b.txt"], read_chars=4, lowercase=True))
    assert got == [["hello", "world"], ["again"]]  # a file end ends a sentence


def test_reader_strips_punctuation_across_block_boundaries(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("Fire, crews (south-west)... fought it.\nA new blaze!")
    expected = [["fire", "crews", "south", "west", "fought", "it"], ["a", "new", "blaze"]]
    for read_chars in (1, 5, 1000):
        got = list(read_sentences([path], read_chars=read_chars, lowercase=True, strip_punctuation=True))
        assert got == expected


def test_reader_memory_is_bounded_on_one_long_line(tmp_path):
    """text8 is a single 100 MB line: the reader must not hold the line."""
    path = tmp_path / "one_line.txt"
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon"])[rng.integers(0, 5, 800_000)]
    path.write_text(" ".join(words))  # ~4.8 MB, no newline
    tracemalloc.start()
    n = sum(len(s) for s in read_sentences([path], max_sentence_length=1000, read_chars=1 << 16))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 800_000
    assert peak < 1_500_000, f"peak {peak} bytes for a {path.stat().st_size} byte line"


def test_vocabulary_counts_and_encoded_ids(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("b a c a\nb a rare\n\nc b a\n")
    folder = build_corpus([path], tmp_path / "cache", min_count=2, read_chars=5)
    words, counts, meta = load_corpus(folder)
    assert words == ["a", "b", "c"]  # count-descending (a 4, b 3, c 2); 'rare' is below min_count
    assert counts.tolist() == [4, 3, 2]
    ids = np.fromfile(folder / "ids.bin", dtype=np.int32)
    assert ids.tolist() == [1, 0, 2, 0, -1, 1, 0, -1, 2, 1, 0, -1]  # OOV dropped, -1 ends a sentence
    assert meta["train_words"] == 9 and meta["sentences"] == 3
    assert json.loads((folder / "tokenizer.json").read_text())["model"]["type"] == "WordLevel"
    assert build_corpus([path], tmp_path / "cache", min_count=2) == folder  # cached
    assert build_corpus([path], tmp_path / "cache", min_count=1) != folder  # options are in the key


def test_vocabulary_keeps_every_word_above_min_count_beyond_30k(tmp_path):
    """tokenizers' WordLevelTrainer keeps 30,000 words unless told otherwise; text8 has 71k."""
    path = tmp_path / "c.txt"
    words = [f"w{i}" for i in range(30_500)]
    path.write_text("\n".join(" ".join(words) for _ in range(2)) + "\n")
    vocab, counts, _ = load_corpus(build_corpus([path], tmp_path / "cache", min_count=2))
    assert len(vocab) == 30_500 and counts.min() == 2


def test_vocabulary_ties_are_alphabetical_and_max_vocab(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("z y x z y x w\n")
    words, _, _ = load_corpus(build_corpus([path], tmp_path / "cache", min_count=1, max_vocab=3))
    assert words == ["x", "y", "z"]


@pytest.mark.parametrize("min_count,max_vocab", [(1, None), (2, None), (2, 5), (3, 1)])
def test_vocabulary_equals_the_tokenizers_trainer(tmp_path, min_count, max_vocab):
    """Words are counted as the corpus is read and handed to WordLevel; the vocabulary (ids and order:
    count descending, ties in code-point order, [UNK] 0) must be what tokenizers' own
    WordLevelTrainer gives, so that caches and released embeddings keep their word ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from zoo.models.skipgram import corpus as C

    rng = np.random.default_rng(0)
    pool = ["a", "z", "Z", "a.", "aa", "b", "ß", "ä", "é", "日本", "x", "y", "w1", "w10", "w2"]
    sentences = [list(rng.choice(pool, size=int(rng.integers(1, 12)))) for _ in range(40)]
    reference = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    reference.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(vocab_size=max_vocab + 1 if max_vocab else 1 << 31, min_frequency=min_count,
                                        special_tokens=["[UNK]"], show_progress=False)
    reference.train_from_iterator((" ".join(s) for s in sentences), trainer=trainer)
    C._encode_corpus(tmp_path, iter(sentences), [tmp_path / "c.txt"], {"min_count": min_count, "max_vocab": max_vocab})
    ours = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert ours.get_vocab() == reference.get_vocab()
    assert len(ours.get_vocab()) > 1


def reference_encoding(sentences: list[list[str]], min_count: int, max_vocab: int | None):
    """The two-pass encoding the one-pass build replaced: count, then look every word up."""
    from collections import Counter

    counts = Counter(w for s in sentences for w in s)
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))[:max_vocab]
    lookup = {w: i for i, w in enumerate(kept)}
    ids = []
    for s in sentences:
        encoded = [lookup[w] for w in s if w in lookup]
        ids.extend(encoded + [-1] if encoded else [])
    return kept, np.array(ids, dtype=np.int32)


@pytest.mark.parametrize("block", [1, 7, 1 << 24])
@pytest.mark.parametrize("min_count,max_vocab", [(1, None), (3, None), (3, 4)])
def test_one_pass_encoding_equals_count_then_look_up(tmp_path, block, min_count, max_vocab):
    """Sentences whose every word is out of the vocabulary vanish, also across the blocks in which
    first-seen ids are mapped to vocabulary ids (seed 0; rare words make many such sentences)."""
    from zoo.models.skipgram import corpus as C

    rng = np.random.default_rng(0)
    pool = [f"w{i}" for i in range(310)]  # 10 frequent words, 300 rare ones (each seen about once)
    sentences = [list(rng.choice(pool, size=int(rng.integers(1, 6)), p=np.r_[[0.05] * 10, [0.5 / 300] * 300]))
                 for _ in range(200)]
    words, ids = reference_encoding(sentences, min_count, max_vocab)
    assert min_count == 1 or (ids == -1).sum() < len(sentences)  # the case under test happens
    opts = {"min_count": min_count, "max_vocab": max_vocab}
    C._encode_corpus(tmp_path, iter(sentences), [tmp_path / "c.txt"], opts, block=block)
    got_words, counts, meta = load_corpus(tmp_path)
    assert got_words == words
    assert np.array_equal(np.fromfile(tmp_path / "ids.bin", dtype=np.int32), ids)
    assert np.array_equal(counts, np.bincount(ids[ids >= 0], minlength=len(words)))
    assert meta["n_ids"] == len(ids) and meta["sentences"] == int((ids == -1).sum())
    assert meta["train_words"] == int((ids >= 0).sum())
    assert not (tmp_path / "first_seen.bin").exists()


def test_chunks_end_at_sentences_and_cover_the_corpus(tmp_path):
    path = tmp_path / "c.txt"
    rng = np.random.default_rng(0)
    lines = [" ".join(f"w{i}" for i in rng.integers(0, 30, rng.integers(1, 40))) for _ in range(300)]
    path.write_text("\n".join(lines))
    folder = build_corpus([path], tmp_path / "cache", min_count=1)
    words, counts, meta = load_corpus(folder)
    ds = CorpusChunks(folder / "ids.bin", meta["n_ids"], counts, chunk_tokens=500, window=5, sample=0, seed=0)
    chunks = list(ds)
    assert len(chunks) == len(ds) > 5
    ids = np.fromfile(folder / "ids.bin", dtype=np.int32)
    assert all(ids[b - 1] == -1 for b in ds.bounds[1:])  # every chunk ends a sentence
    assert torch.equal(torch.cat([c["tokens"] for c in chunks]), torch.from_numpy(ids[ids >= 0]).long())
    assert sum(c["raw_words"] for c in chunks) == meta["train_words"]
    # sentence numbers restart per chunk and follow the -1 markers
    first = chunks[0]
    n_sent = int((ids[:ds.bounds[1]] == -1).sum())
    assert first["sentence"].max() == n_sent - 1 and first["window"].min() >= 1 and first["window"].max() <= 5
    # under DDP every rank gets the same number of chunks (they synchronise after each), all covered
    n = len(ds.bounds) - 1
    for world in (2, 3, 4):
        orders = []
        for rank in range(world):
            ds._shard = lambda rank=rank, world=world: (rank, world)
            orders.append(ds.chunk_order())
        assert len({len(o) for o in orders}) == 1 and len(orders[0]) == -(-n // world), (world, orders)
        assert set().union(*orders) == set(range(n))


def test_chunks_are_deterministic_per_seed_and_epoch(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("the a the b the c the d the e\n" * 200)
    folder = build_corpus([path], tmp_path / "cache", min_count=1)
    _, counts, meta = load_corpus(folder)

    def run(seed, epoch):
        ds = CorpusChunks(folder / "ids.bin", meta["n_ids"], counts, 1000, window=5, sample=0.05, seed=seed)
        ds.epoch = epoch
        return torch.cat([c["tokens"] for c in ds]), torch.cat([c["window"] for c in ds])

    a, b = run(0, 0), run(0, 0)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(run(0, 1)[1][:100], a[1][:100]) or not torch.equal(run(0, 1)[0], a[0])
    assert len(run(1, 0)[0]) != len(a[0]) or not torch.equal(run(1, 0)[0], a[0])


@pytest.mark.parametrize("workers", [2, 4])
def test_data_loader_workers_share_the_chunks_in_order(tmp_path, workers):
    """Each DataLoader worker takes its share of the chunks (not all of them), and the loader gives
    them in the order one process does: the same training data with any data.num_workers."""
    path = tmp_path / "c.txt"
    path.write_text("the a the b the c the d the e\n" * 200)
    folder = build_corpus([path], tmp_path / "cache", min_count=1)
    _, counts, meta = load_corpus(folder)
    ds = CorpusChunks(folder / "ids.bin", meta["n_ids"], counts, 1000, window=5, sample=0.05, seed=0)
    ds.epoch = 1
    alone = list(torch.utils.data.DataLoader(ds, batch_size=None))
    shared = list(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers))
    assert len(alone) == len(ds) == len(shared) == 3  # unequal shares; with 4 workers one has none
    for a, b in zip(alone, shared):
        assert torch.equal(a["tokens"], b["tokens"]) and torch.equal(a["window"], b["window"])


def test_missing_corpus_is_a_user_error_with_the_howto(tmp_path):
    with pytest.raises(UserError, match="text8.zip"):
        resolve_files(str(tmp_path / "text8"))
    with pytest.raises(UserError, match="not found"):
        resolve_files([str(tmp_path / "nothing*.txt")])


def test_a_folder_means_every_file_in_it_and_an_empty_path_is_refused(tmp_path):
    (tmp_path / "b.txt").write_text("two words\n")
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / ".hidden").write_text("skipped\n")
    (tmp_path / "sub").mkdir()  # a folder in the folder is not read (not an IsADirectoryError)
    assert resolve_files(str(tmp_path)) == [tmp_path / "a.txt", tmp_path / "b.txt"]
    assert resolve_files(str(tmp_path / "*")) == [tmp_path / "a.txt", tmp_path / "b.txt"]  # a glob's folders too
    with pytest.raises(UserError, match="an empty path"):  # '' is not the working directory
        resolve_files("")
    with pytest.raises(UserError, match="holds no files"):
        resolve_files(str(tmp_path / "sub"))
    with pytest.raises(UserError, match="names no files"):
        resolve_files([])


def test_gensim_shorthand_resolves_to_its_test_data(monkeypatch):
    """Found where gensim is installed without importing it (importing it takes 0.1 s of every real-text run);
    without gensim, a message that says how to get it or what to give instead."""
    import importlib.util
    import subprocess
    import sys

    (path,) = resolve_files("gensim:wordsim353.tsv")
    assert path.name == "wordsim353.tsv" and path.exists()
    code = ("import sys\nfrom zoo.models.skipgram.corpus import resolve_files\nresolve_files('gensim:lee.cor')\n"
            "print('gensim imported:', 'gensim' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert "gensim imported: False" in out.stdout, out.stdout + out.stderr
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    with pytest.raises(UserError, match="needs gensim installed .*or give a path to the file instead"):
        resolve_files("gensim:wordsim353.tsv")
