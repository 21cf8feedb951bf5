"""Corpora streamed from disk in bounded memory.

1. ``read_sentences`` reads text files (plain, or gzip / bzip2 / xz / a zip of one file, as gensim
   reads .gz and .bz2) in blocks of ``read_chars`` characters (never a whole line: text8 is one
   100 MB line) and yields sentences: a line, cut every ``max_sentence_length`` words (gensim cuts
   at 10,000; word2vec.c at 1,000). A file that is not text is refused, not read as "words".
2. ``build_corpus`` reads the text once: each word gets a first-seen id as it is read (a dict
   lookup in C), written to disk as int32 with -1 after every sentence. From the counts comes
   the vocabulary, saved as a Hugging Face ``tokenizers`` WordLevel tokenizer (WhitespaceSplit
   pre-tokenizer; words seen ``min_count`` times, ids count-descending, ties in code-point
   order, as tokenizers' trainer gives); one array then maps the first-seen ids to vocabulary
   ids in blocks (``ids.bin``), dropping out-of-vocabulary words as word2vec does. Memory: the
   dict of distinct words and one block.
3. ``CorpusChunks`` (an IterableDataset) memory-maps ``ids.bin`` and yields chunks that end at
   sentence boundaries, already subsampled and with a reduced window drawn per word, from a
   generator seeded by (seed, epoch, chunk): an epoch is reproducible and resumable.
"""

# cpu file: datamodule: corpus chunks, subsampled and windowed on the CPU (tests/platform/test_device_agnostic.py)

from __future__ import annotations

import array
import glob
import hashlib
import importlib.util
import itertools
import json
import os
import re
import shutil
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.utils.data import IterableDataset, get_worker_info

from zoo.core.files import missing_folders, open_text, refuse_binary, remove_empty, replace_undecoded
from zoo.errors import UserError
from zoo.models.skipgram.sampling import keep_probability
from zoo.models.skipgram.threads import torch_threads
from zoo.paths import readable

CACHE_VERSION = 2  # bumped when the cached vocabulary or encoding changes
_PUNCTUATION = re.compile(r"[^\w\s]+")


def read_sentences(paths: list[Path], max_sentence_length: int = 10000, read_chars: int = 1 << 20,
                   lowercase: bool = False, strip_punctuation: bool = False) -> Iterator[list[str]]:
    """Sentences (lists of words) of the files, reading ``read_chars`` characters at a time.
    ``strip_punctuation`` turns every run of characters that are neither word characters nor
    whitespace into a space ("fire," -> "fire", "south-west" -> "south west")."""

    def clean(text: str) -> str:
        text = text.lower() if lowercase else text
        return _PUNCTUATION.sub(" ", text) if strip_punctuation else text

    for path in paths:
        pending: list[str] = []  # words of the current line not yet yielded
        tail = ""  # a word cut by the block boundary
        with open_text(path, "corpus file") as f:  # a byte-order mark skipped; .gz / .bz2 / .xz / .zip read as text
            first = True
            while True:
                block = f.read(read_chars)
                if first:  # binary data (or UTF-16) would train on made-up "words"
                    refuse_binary(block, path, "point data.files at UTF-8 text files, plain or compressed")
                    first = False
                block = replace_undecoded(block, path)  # not UTF-8: U+FFFD, and one warning
                if not block:
                    break
                text = tail + block
                cut = len(text)
                while cut > 0 and not text[cut - 1].isspace():  # keep a word cut by the block end
                    cut -= 1
                tail, text = text[cut:], text[:cut]
                lines = clean(text).split("\n")
                for i, line in enumerate(lines):
                    pending.extend(line.split())
                    # whole sentences by offset: slicing each off the front would copy the rest
                    full = len(pending) - len(pending) % max_sentence_length
                    for start in range(0, full, max_sentence_length):
                        yield pending[start:start + max_sentence_length]
                    if full:
                        pending = pending[full:]
                    if i < len(lines) - 1 and pending:  # the line ended here
                        yield pending
                        pending = []
        pending.extend(clean(tail).split())
        while pending:
            yield pending[:max_sentence_length]
            pending = pending[max_sentence_length:]


def resolve_files(spec: str | list, what: str = "corpus") -> list[Path]:
    """Paths from a glob, a path, a list of them, or ``gensim:NAME`` (a file gensim ships in
    ``gensim/test/test_data``)."""
    specs = [spec] if isinstance(spec, str) else list(spec)
    out: list[Path] = []
    for item in specs:
        item = str(item)
        if item.startswith("gensim:"):
            spec = importlib.util.find_spec("gensim")  # where gensim is, without importing it (a slow import)
            if spec is None or spec.origin is None:
                raise UserError(f"{what} '{item}' needs gensim installed (pip install gensim), or give "
                                "a path to the file instead")
            path = Path(spec.origin).parent / "test" / "test_data" / item[len("gensim:"):]
            if not path.exists():
                raise UserError(f"{what} '{item}': gensim has no {path}")
            out.append(path)
            continue
        if not item.strip():
            raise UserError(f"{what}: an empty path; give a file, a folder, a glob or a list of them")
        matches = sorted(Path(m) for m in glob.glob(item)) if any(ch in item for ch in "*?[") else []
        if not matches and Path(item).is_dir():  # a folder: every file in it, as gensim's PathLineSentences
            matches = sorted(p for p in Path(item).iterdir() if p.is_file() and not p.name.startswith("."))
            if not matches:
                raise UserError(f"{what} folder {item} holds no files; point data.files at text files")
        if not matches and not Path(item).exists():
            hint = []
            if "text8" in item:
                hint = ["get text8 (100M characters of Wikipedia, 17M words): wget http://mattmahoney.net/dc/text8.zip "
                        "&& unzip text8.zip -d data/ (or keep the zip: data.files=data/text8.zip reads it as it is)"]
            raise UserError(f"{what} not found: {item}. Point data.files at your text files (a path, a glob or a list)",
                            details=[f"looked at {Path(item).resolve()}", *hint])
        out.extend(p for p in (matches or [Path(item)]) if not p.is_dir())  # a glob may match folders
    if not out:
        raise UserError(f"{what}: {spec!r} names no files")
    return out


def _cache_key(paths: list[Path], options: dict) -> str:
    h = hashlib.sha1(json.dumps({"v": CACHE_VERSION, **options}, sort_keys=True).encode())
    for p in paths:
        st = p.stat()
        h.update(f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def kept_order(words: list[str], counts: np.ndarray, min_count: int, max_vocab: int | None) -> list[int]:
    """Indices into ``words`` of the vocabulary, in id order: the words seen at least ``min_count``
    times, by count descending, ties in code-point order (what tokenizers' ``WordLevelTrainer``
    gives; tested), the first ``max_vocab`` of them."""
    n = counts.tolist()
    kept = sorted(np.flatnonzero(counts >= min_count).tolist(), key=lambda i: (-n[i], words[i]))
    return kept[:max_vocab] if max_vocab else kept


def word_level_tokenizer(vocabulary: list[str]):
    """A ``tokenizers`` WordLevel tokenizer: id 0 [UNK], then ``vocabulary`` in its order."""
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(vocabulary)}}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def build_corpus(paths: list[Path], cache_root: Path, min_count: int = 5, max_vocab: int | None = None,
                 max_sentence_length: int = 10000, read_chars: int = 1 << 20, lowercase: bool = False,
                 strip_punctuation: bool = False) -> Path:
    """Vocabulary + encoded corpus in ``cache_root/<key>/`` (reused while the files are unchanged).
    Returns that folder: tokenizer.json, counts.npy (per word, frequency order), ids.bin, meta.json."""
    opts = {"min_count": min_count, "max_vocab": max_vocab, "max_sentence_length": max_sentence_length,
            "lowercase": lowercase, "strip_punctuation": strip_punctuation}
    folder = Path(cache_root) / _cache_key(paths, opts)
    if (folder / "meta.json").exists():
        return folder
    made = missing_folders(folder.parent)  # removed again on failure
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        sentences = read_sentences(paths, max_sentence_length, read_chars, lowercase, strip_punctuation)
        _encode_corpus(tmp, sentences, paths, opts)
    except BaseException:  # a refused corpus, a read error, a full disk, Ctrl-C: no half-written cache stays
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(made)  # only the folders this call created, and only if empty
        raise
    try:
        tmp.rename(folder)
    except OSError:  # another process built the same cache meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _encode_corpus(tmp: Path, sentences: Iterator[list[str]], paths: list[Path], opts: dict,
                   block: int = 1 << 24) -> None:
    """ids.bin, tokenizer.json, counts.npy and meta.json of ``build_corpus`` into ``tmp``, reading the
    text once: every word gets a first-seen id as it is read (written as int32, -1 after every
    sentence), and once the counts are known one array maps first-seen ids to vocabulary ids, ``block``
    ids at a time. Two passes over the text (count, then encode with the vocabulary's dict) took 4.8 s
    on 10M words, this 2.1 s, writing the same files to the byte. Memory: the dict of distinct words
    and one block."""
    seen: defaultdict[str, int] = defaultdict(itertools.count().__next__)  # word -> first-seen id
    first_seen = tmp / "first_seen.bin"
    with open(first_seen, "wb") as out:
        buffer = array.array("i")
        for sentence in sentences:
            buffer.extend(map(seen.__getitem__, sentence))  # new words get the next id (in C, no Python loop)
            buffer.append(-1)
            if len(buffer) >= 1 << 22:
                buffer.tofile(out)
                del buffer[:]
        buffer.tofile(out)
    words = list(seen)  # in first-seen id order
    empty = first_seen.stat().st_size == 0  # (a memmap cannot map 0 bytes)
    raw = np.empty(0, np.int32) if empty else np.memmap(first_seen, np.int32, "r")  # (N,) first-seen ids, -1 ends
    seen_counts = np.zeros(len(words), dtype=np.int64)
    for start in range(0, len(raw), block):
        part = raw[start:start + block]
        seen_counts += np.bincount(part + 1, minlength=len(words) + 1)[1:]  # + 1: ends (-1) to bin 0
    order = kept_order(words, seen_counts, opts["min_count"], opts["max_vocab"])
    if not order:
        raise UserError(f"no word occurs min_count={opts['min_count']} times in the corpus: lower data.min_count or "
                        "give a bigger corpus", details=[f"files: {', '.join(str(p) for p in paths)}"])
    to_id = np.full(len(words) + 1, -2, dtype=np.int32)  # first-seen id -> vocabulary id; -2 out of vocabulary
    to_id[-1] = -1  # a sentence end (-1) reads the last cell and stays -1
    to_id[order] = np.arange(len(order), dtype=np.int32)
    n_sentences = 0
    last = -1  # the last id written: an end only follows a word
    with open(tmp / "ids.bin", "wb") as out:
        for start in range(0, len(raw), block):
            ids = to_id[raw[start:start + block]]
            ids = ids[ids != -2]  # out-of-vocabulary words dropped, as word2vec does
            word = ids >= 0
            keep = word.copy()
            keep[1:] |= word[:-1]  # an end only right after a word: sentences left empty vanish
            keep[:1] |= last >= 0
            ids = ids[keep]
            if len(ids):
                ids.tofile(out)
                last = int(ids[-1])
                n_sentences += int((ids < 0).sum())
    del raw
    first_seen.unlink()
    counts = seen_counts[order]  # dropping other words and empty sentences leaves a kept word's count as it was
    n_ids = int(counts.sum()) + n_sentences
    word_level_tokenizer([words[i] for i in order]).save(str(tmp / "tokenizer.json"))
    np.save(tmp / "counts.npy", counts)
    meta = {"n_ids": n_ids, "train_words": int(counts.sum()), "sentences": n_sentences,
            "files": [str(p) for p in paths], **opts}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))


def load_corpus(folder: Path) -> tuple[list[str], np.ndarray, dict]:
    """(words in id order, counts, meta) of a corpus cache folder."""
    tokenizer = Tokenizer.from_file(str(readable(folder / "tokenizer.json")))  # else a bare Exception
    vocab = tokenizer.get_vocab()
    words = [""] * (len(vocab) - 1)
    for word, i in vocab.items():
        if i > 0:
            words[i - 1] = word
    return words, np.load(folder / "counts.npy"), json.loads((folder / "meta.json").read_text())


def chunk_bounds(ids_path: Path, n_ids: int, chunk_tokens: int) -> list[int]:
    """Start offsets (plus the end) of chunks of about ``chunk_tokens`` ids, each ending right
    after a sentence end when one lies in the chunk."""
    ids = np.memmap(ids_path, dtype=np.int32, mode="r", shape=(n_ids,))
    bounds, start = [0], 0
    while start < n_ids:
        end = min(start + chunk_tokens, n_ids)
        if end < n_ids:
            ends = np.flatnonzero(ids[start:end] < 0)
            if len(ends):
                end = start + int(ends[-1]) + 1
        bounds.append(end)
        start = end
    return bounds


class CorpusChunks(IterableDataset):
    """Subsampled chunks of the encoded corpus.

    Each item: ``tokens`` (N,) kept word ids, ``sentence`` (N,) sentence number, ``window`` (N,)
    reduced half-width b ~ U{1..window}, ``raw_words`` the in-vocabulary words before subsampling
    (what word2vec's learning-rate schedule counts). Under DDP each rank takes every
    world_size-th chunk, and all ranks take the same number (ceil(chunks / world_size), the last
    ones wrapping round to the first chunks, as DistributedSampler pads): the model synchronises
    after every chunk, so an extra chunk on one rank would leave the others waiting forever.
    With DataLoader workers (``data.num_workers``) worker w of W takes the rank's chunks w, w + W,
    ..., which the loader interleaves back into the order one process gives: without this every
    worker read every chunk, and training saw each chunk W times and the run differed."""

    def __init__(self, ids_path: Path, n_ids: int, counts: np.ndarray, chunk_tokens: int, window: int,
                 sample: float, seed: int = 0):
        self.ids_path, self.n_ids, self.window, self.seed = Path(ids_path), n_ids, window, seed
        self.keep = keep_probability(torch.as_tensor(counts), sample)  # (V,)
        self.bounds = chunk_bounds(self.ids_path, n_ids, chunk_tokens)
        self.epoch = 0  # set by the datamodule before every epoch

    def _shard(self) -> tuple[int, int]:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1

    def chunk_order(self) -> list[int]:
        """Indices of the chunks this rank trains on, in order."""
        rank, world = self._shard()
        n = len(self.bounds) - 1
        return [k % n for k in range(rank, -(-n // world) * world, world)]

    def __len__(self) -> int:
        return len(self.chunk_order())

    def __iter__(self) -> Iterator[dict]:
        ids = np.memmap(self.ids_path, dtype=np.int32, mode="r", shape=(self.n_ids,))
        order, worker = self.chunk_order(), get_worker_info()
        for k in order if worker is None else order[worker.id::worker.num_workers]:
            block = torch.from_numpy(np.array(ids[self.bounds[k]:self.bounds[k + 1]], dtype=np.int64))
            g = torch.Generator().manual_seed((self.seed * 1_000_003 + self.epoch) * 1_000_003 + k)
            with torch_threads(1):  # cheap elementwise ops: intra-op threads only add barrier stalls
                item = self.subsample(block, g)
            yield item

    def subsample(self, block: torch.Tensor, g: torch.Generator) -> dict:
        """block: (L,) ids with -1 sentence ends -> the training item (see the class docstring)."""
        words = block >= 0
        sentence = torch.cumsum(~words, 0)  # (L,) sentence number of every position
        coin = torch.rand(len(block), generator=g)
        kept = words & (coin < self.keep[block.clamp(min=0)])
        tokens = block[kept]
        window = torch.randint(1, self.window + 1, (len(tokens),), generator=g)
        return {"tokens": tokens, "sentence": sentence[kept], "window": window, "raw_words": int(words.sum())}
