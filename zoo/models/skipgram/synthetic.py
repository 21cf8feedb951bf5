"""A generated corpus with planted structure, so embedding quality has a ground truth offline.

Content words are (group g, form f) cells, written ``g07b`` (group 7, form b); like topics and
inflections. Every sentence has a topic group and a form; each of its words is
- a function word (``fn03``) with probability ``p_function``, Zipfian among themselves (so
  frequent-word subsampling has something to do),
- else a content word whose group is the sentence's topic with probability ``p_topic`` (else a
  random group) and whose form is the sentence's form with probability ``p_form`` (else random).
Topics are Zipf-distributed, so word frequencies are too. Words of one group share contexts
(strongly), words of one form share contexts (weakly), and since the two channels are
independent the co-occurrence statistics are additive in (g, f): ``g1b - g1a + g2a ~ g2b``.

Written next to the corpus:
- ``planted_{val,test}.tsv`` (WordSim353 format): pairs of content words scored 8 (same
  group), 3 (same form) or 0 (neither), equally many of each kind, split in two halves;
- ``planted_analogies.txt`` (questions-words format): ``g1f1 g1f2 g2f1 g2f2`` per ordered form pair.
"""

# cpu file: datamodule: synthetic corpus (tests/platform/test_device_agnostic.py)

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np

from zoo.models.skipgram.config import PlantedCorpus


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def word_name(group: int, form: int) -> str:
    return f"g{group:02d}{chr(ord('a') + form)}"


def generate(spec: PlantedCorpus, root: str | Path) -> Path:
    """Write the corpus and its evaluation files under ``root/skipgram_synthetic/<hash>/``
    (reused when present: generation is deterministic in ``spec``). Returns the folder."""
    key = hashlib.sha1(json.dumps(asdict(spec), sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(root) / "skipgram_synthetic" / key
    if (folder / "spec.json").exists():
        return folder
    rng = np.random.default_rng(spec.seed)
    tmp = folder.with_name(f"{key}.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    G, F = spec.groups, spec.forms
    names = np.array([word_name(g, f) for g in range(G) for f in range(F)]
                     + [f"fn{i:02d}" for i in range(spec.function_words)], dtype=object)

    lengths = rng.integers(spec.min_len, spec.max_len + 1, spec.tokens // spec.min_len + 1)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), spec.tokens) + 1]
    n = int(lengths.sum())
    sent = np.repeat(np.arange(len(lengths)), lengths)  # (n,) sentence of every token
    topic = rng.choice(G, size=len(lengths), p=_zipf(G, spec.zipf))[sent]
    form = rng.integers(0, F, len(lengths))[sent]
    group = np.where(rng.random(n) < spec.p_topic, topic, rng.choice(G, size=n, p=_zipf(G, spec.zipf)))
    form = np.where(rng.random(n) < spec.p_form, form, rng.integers(0, F, n))
    ids = group * F + form
    if spec.function_words:
        func = G * F + rng.choice(spec.function_words, size=n, p=_zipf(spec.function_words, 1.0))
        ids = np.where(rng.random(n) < spec.p_function, func, ids)
    words = names[ids]
    with open(tmp / "corpus.txt", "w") as f:
        ends = np.cumsum(lengths)
        for start, end in zip(np.concatenate([[0], ends[:-1]]), ends):
            f.write(" ".join(words[start:end]) + "\n")

    # similarity ground truth: same group (8), same form (3), neither (0); up to pairs_per_kind each
    a, b = np.triu_indices(G * F, k=1)  # every unordered pair of content words
    same_group, same_form = a // F == b // F, a % F == b % F
    kinds = []
    for mask, score in ((same_group, 8.0), (same_form, 3.0), (~same_group & ~same_form, 0.0)):
        idx = np.flatnonzero(mask)
        idx = rng.choice(idx, size=min(len(idx), spec.pairs_per_kind), replace=False)
        kinds.append([(str(names[a[i]]), str(names[b[i]]), score) for i in idx])
    pairs = [p for k in kinds for p in k]
    order = rng.permutation(len(pairs))
    for split, part in (("val", order[0::2]), ("test", order[1::2])):
        with open(tmp / f"planted_{split}.tsv", "w") as f:
            f.write("# planted similarity: 8 same group, 3 same form, 0 neither\n# Word 1\tWord 2\tScore\n")
            f.writelines(f"{pairs[i][0]}\t{pairs[i][1]}\t{pairs[i][2]}\n" for i in part)

    with open(tmp / "planted_analogies.txt", "w") as f:
        for f1 in range(F):
            for f2 in range(F):
                if f1 == f2:
                    continue
                f.write(f": form-{chr(97 + f1)}-to-{chr(97 + f2)}\n")
                for _ in range(spec.questions_per_section):
                    g1, g2 = rng.choice(G, 2, replace=False)
                    words_ = (word_name(g1, f1), word_name(g1, f2), word_name(g2, f1), word_name(g2, f2))
                    f.write(" ".join(words_) + "\n")
    groups = {str(w): (i // F if i < G * F else -1) for i, w in enumerate(names)}
    (tmp / "groups.json").write_text(json.dumps(groups))
    (tmp / "spec.json").write_text(json.dumps(asdict(spec), indent=1))
    try:
        tmp.rename(folder)
    except OSError:  # generated concurrently by another process
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
