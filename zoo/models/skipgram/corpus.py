"""Corpora streamed from disk in bounded memory.

1. ``read_sentences`` reads text files in blocks of ``read_chars`` characters (never a whole
   line: text8 is one 100 MB line) and yields sentences: a line, cut every
   ``max_sentence_length`` words (gensim cuts at 10,000; word2vec.c at 1,000).
2. ``build_corpus`` makes one pass to train the vocabulary with Hugging Face ``tokenizers``
   (WordLevel model, WhitespaceSplit pre-tokenizer, ``min_frequency=min_count``; ids come out
   count-descending, ties alphabetical) and one pass that writes the corpus as int32 word ids
   with -1 after every sentence (``ids.bin``), dropping out-of-vocabulary words as word2vec
   does. Both passes hold one block at a time. Encoding looks words up in the tokenizer's vocab
   dict, five times faster than ``encode_batch`` for already split words.
3. ``CorpusChunks`` (an IterableDataset) memory-maps ``ids.bin`` and yields chunks that end at
   sentence boundaries, already subsampled and with a reduced window drawn per word, from a
   generator seeded by (seed, epoch, chunk): an epoch is reproducible and resumable.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from zoo.core.files import missing_folders, remove_empty, replace_undecoded
from zoo.errors import UserError
from zoo.models.skipgram.sampling import keep_probability
from zoo.paths import readable

CACHE_VERSION = 2  # bumped when the cached vocabulary or encoding changes (v2: no 30k cap)
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
        with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:  # a byte-order mark skipped
            while True:
                block = replace_undecoded(f.read(read_chars), path)  # not UTF-8: U+FFFD, and one warning
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
                    while len(pending) >= max_sentence_length:
                        yield pending[:max_sentence_length]
                        pending = pending[max_sentence_length:]
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
            try:
                import gensim
            except ImportError:
                raise UserError(f"{what} '{item}' needs gensim installed (pip install gensim), or give "
                                "a path to the file instead") from None
            path = Path(gensim.__file__).parent / "test" / "test_data" / item[len("gensim:"):]
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
            hint = ""
            if "text8" in item:
                hint = (" Get text8 (100M characters of Wikipedia, 17M words): "
                        "wget http://mattmahoney.net/dc/text8.zip && unzip text8.zip -d data/ ")
            raise UserError(f"{what} not found: {item} (looked at {Path(item).resolve()}).{hint}"
                            " Point data.files at your text files (a path, a glob or a list).")
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


def train_vocabulary(sentences: Iterator[list[str]], min_count: int, max_vocab: int | None):
    """A ``tokenizers`` WordLevel vocabulary of the words seen at least ``min_count`` times: id 0
    is [UNK], then the words by count, descending, ties in code-point order (what tokenizers'
    ``WordLevelTrainer`` gives; tested). The words are counted with ``collections.Counter``, which
    takes half the trainer's time (10M words: 2.9 s vs 6.2 s), and the vocabulary handed to
    ``WordLevel``, so the saved tokenizer is the same."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    counts: Counter[str] = Counter()
    for sentence in sentences:
        counts.update(sentence)
    kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(kept[:max_vocab] if max_vocab else kept)}}
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

    def sentences() -> Iterator[list[str]]:
        return read_sentences(paths, max_sentence_length, read_chars, lowercase, strip_punctuation)

    tokenizer = train_vocabulary(sentences(), min_count, max_vocab)
    lookup = tokenizer.get_vocab()  # word -> tokenizer id; [UNK] is 0, words 1.. by count
    lookup.pop("[UNK]", None)
    if not lookup:  # before any folder is made: a refused corpus leaves nothing on disk
        raise UserError(f"no word occurs min_count={min_count} times in {[str(p) for p in paths]}: lower "
                        "data.min_count or give a bigger corpus")
    made = missing_folders(folder.parent)  # removed again on failure
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        _encode_corpus(tmp, sentences(), lookup, tokenizer, paths, opts)
    except BaseException:  # a read error, a full disk, Ctrl-C: no half-written cache stays behind
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(made)  # only the folders this call created, and only if empty
        raise
    try:
        tmp.rename(folder)
    except OSError:  # another process built the same cache meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _encode_corpus(tmp: Path, sentences: Iterator[list[str]], lookup: dict[str, int], tokenizer, paths: list[Path],
                   opts: dict) -> None:
    """ids.bin, tokenizer.json, counts.npy and meta.json of ``build_corpus`` into ``tmp``."""
    counts = np.zeros(len(lookup) + 1, dtype=np.int64)
    n_ids = n_sentences = 0
    with open(tmp / "ids.bin", "wb") as out:
        buffer: list[int] = []
        for sentence in sentences:
            ids = [i for i in map(lookup.get, sentence) if i is not None]
            if ids:
                buffer.extend(ids)
                buffer.append(0)  # sentence end (becomes -1)
            if len(buffer) >= 1 << 20:
                n_ids, n_sentences = _flush(out, buffer, counts, n_ids, n_sentences)
        n_ids, n_sentences = _flush(out, buffer, counts, n_ids, n_sentences)
    tokenizer.save(str(tmp / "tokenizer.json"))
    np.save(tmp / "counts.npy", counts[1:])
    meta = {"n_ids": n_ids, "train_words": int(counts[1:].sum()), "sentences": n_sentences,
            "files": [str(p) for p in paths], **opts}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))


def _flush(out, buffer: list[int], counts: np.ndarray, n_ids: int, n_sentences: int) -> tuple[int, int]:
    arr = np.asarray(buffer, dtype=np.int64)
    counts += np.bincount(arr, minlength=len(counts))
    n_sentences += int((arr == 0).sum())
    (arr - 1).astype(np.int32).tofile(out)  # word ids 0.., sentence ends -1
    buffer.clear()
    return n_ids + len(arr), n_sentences


def load_corpus(folder: Path) -> tuple[list[str], np.ndarray, dict]:
    """(words in id order, counts, meta) of a corpus cache folder."""
    from tokenizers import Tokenizer

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
            previous = torch.get_num_threads()
            torch.set_num_threads(1)  # cheap elementwise ops: intra-op threads only add barrier stalls
            try:
                item = self.subsample(block, g)
            finally:
                torch.set_num_threads(previous)
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
