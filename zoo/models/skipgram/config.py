"""Skip-gram's options (the model, the text corpora, the planted generator): no torch here, so a
recipe's keys are checked before torch and Lightning are imported (declared below: ``MODELS.declare``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from zoo.data_schema import DataOptions
from zoo.registry import DATAMODULES, MODELS, DataSpec, ModelSpec
from zoo.schema import at_least, between, choice, positive, validate

OBJECTIVES = ("nce", "negative_sampling", "full_softmax")
CAP_METHODS = ("newton", "line")  # see nets.SkipGram._capped_step
WINDOW_PAIRS = ("in_turn", "at_once")  # how a minibatch visits each window's pairs (module docstring)


@dataclass
class PlantedCorpus:
    """The planted corpus's generator settings (``synthetic.py``)."""

    groups: int = at_least(40, 2)  # topic groups
    forms: int = between(4, 2, 26)  # forms per group (content vocabulary = groups * forms), named a..z
    function_words: int = at_least(20, 0)  # very frequent words in every kind of sentence
    tokens: int = positive(1_000_000)  # corpus length in words
    min_len: int = positive(8)  # sentence length ~ U{min_len..max_len}
    max_len: int = positive(24)
    p_function: float = between(0.3, 0, 1)  # chance a word is a function word
    p_topic: float = between(0.8, 0, 1)  # chance a content word belongs to the sentence's topic group
    p_form: float = between(0.7, 0, 1)  # chance a content word has the sentence's form
    zipf: float = at_least(1.0, 0)  # topic popularity ~ 1 / rank^zipf
    pairs_per_kind: int = positive(200)  # similarity pairs of each kind (same group / same form / neither)
    questions_per_section: int = positive(100)  # analogy questions per ordered form pair
    seed: int = 0  # generator seed

    def __post_init__(self):
        if self.min_len > self.max_len or self.tokens < self.max_len:
            raise ValueError(f"need min_len <= max_len <= tokens, got {self.min_len}, {self.max_len}, {self.tokens}")


@dataclass
class SkipGramConfig:
    dim: int = positive(100)  # embedding size D
    objective: str = choice("negative_sampling", list(OBJECTIVES))  # full_softmax: exact, small vocabularies
    negative: int = positive(5)  # k noise words per positive pair
    noise_power: float = 0.75  # noise q(w) ~ count(w)^noise_power
    window_pairs: str = choice("in_turn", list(WINDOW_PAIRS))  # minibatch updates: in_turn = a window's
    # contexts one after another, each from the output vector the previous one left (word2vec's order: 2W
    # calls per minibatch); at_once = all its pairs from the same vectors (fewer, larger calls: "Parallelizing
    # Word2Vec in Shared and Distributed Memory"); both measured in studies/2026-11-27-skipgram-vs-gensim.md
    interleave: int = at_least(1, 0)  # minibatch updates: 1 = a minibatch is batch_centres consecutive windows;
    # s = each run of s minibatches covers s x batch_centres consecutive windows, minibatch j taking every
    # s-th from the j-th (a passage's repeated words are not all updated in one step); 0 = the whole chunk
    # (measured: studies/2026-11-27-skipgram-vs-gensim.md)
    share_negatives: bool = True  # k noise words drawn once per window and used by all its pairs ("Parallelizing
    # Word2Vec in Shared and Distributed Memory"), else for every pair (word2vec.c, gensim): the minibatch path's
    # at_once, and both sequential kernels (CPU, GPU), which still update pair after pair (on the CPU 1.6x faster
    # at 10M words at gensim's agreement: studies/2026-12-02-skipgram-shared-noise.md)
    init_range: float = positive(0.5)  # word vectors start U(-r/D, r/D): 0.5 = word2vec.c, 1.0 = gensim 4
    lr: float = positive(0.025)  # initial SGD learning rate (word2vec's skip-gram default)
    min_lr_ratio: float = between(1e-4, 0, 1)  # lr falls linearly to lr * min_lr_ratio over all epochs (gensim:
    # min_alpha / alpha = 0.004; word2vec.c's floor: 1e-4)
    updates: str = choice("auto", ["auto", "sequential", "minibatch"])  # how SGD visits the pairs:
    # sequential = word2vec's update after every pair: kernel.py on a CPU (best quality and speed there),
    # gpu_kernel.py on a CUDA GPU; minibatch = batch_centres windows per vectorised update (any device; the
    # only one for full_softmax); auto = sequential on a CPU for nce / negative_sampling, else minibatch
    saturated: str = choice("clip", ["clip", "skip"])  # sequential updates, a score beyond +-6: clip =
    # word2vec.c (sigmoid taken as 0 or 1: a full step), skip = gensim (no update from that term)
    sigmoid_index: str = choice("exact", ["exact", "word2vec"])  # sequential updates, where a score is
    # read in the sigmoid table: word2vec = word2vec.c's and gensim's (f + 6) * 83, from C integer
    # division, i.e. sigmoid(~0.996 f - 0.024); exact = (f + 6) * 1000 / 12 (kernel.TABLE_SCALE)
    batch_centres: int = positive(5120)  # window centres per minibatch (in_turn: 2W calls of up to this many pairs)
    threads: int = positive(1)  # Hogwild threads (>1: faster on several cores, not bit-reproducible)
    job_tokens: int = at_least(10000, 0)  # sequential updates: threads take turns on jobs of this many tokens
    # of a chunk (gensim's 10,000-word jobs); 0 = each thread one contiguous part of the chunk
    gpu_jobs: int = positive(1024)  # sequential updates on a GPU: a chunk is cut into this many jobs (gpu_stripe),
    # one warp each, walking its tokens in order, all at once (Hogwild over warps, as BlazingText): more jobs
    # keep more of the GPU busy and compute more steps from rows others have moved (speed and agreement with
    # gensim: studies/2026-11-27-skipgram-vs-gensim.md; fewer jobs are unmeasured on a GPU)
    gpu_stripe: int = at_least(16, 0)  # sequential updates on a GPU: job j takes the stripes of this many tokens
    # j, j + J, j + 2J, ... of a chunk, so that the jobs sweep it side by side and the text is read nearly in
    # order (closer to gensim than contiguous jobs: studies/2026-11-27-skipgram-vs-gensim.md); 0 = each job one
    # contiguous part of the chunk
    step_cap: bool = True  # minibatch updates: damp each row's step where the minibatch's many simultaneous
    # terms on it would overshoot (nets.SkipGram._capped_step; without it large minibatches diverge:
    # studies/2026-11-27-skipgram-vs-gensim.md); false = plain SGD
    step_cap_method: str = choice("auto", ["auto", *CAP_METHODS])  # newton = 2 conjugate-gradient
    # iterations of the damped Newton step per row; line = the step along the row's summed gradient only
    # (one Hessian-vector product instead of two); auto = newton for nce / negative_sampling, line for
    # full_softmax, each the better there (studies/2026-11-27-skipgram-vs-gensim.md)
    neighbours: list[str] = field(default_factory=list)  # probe words whose neighbours are printed at validation
    topn: int = positive(8)  # neighbours shown per probe word
    analogy_restrict: int = positive(30000)  # analogies are answered among this many most frequent words (word2vec)


@dataclass
class CorpusOptions(DataOptions):
    """What both corpora take. ``seed``: subsampling and windows (with the epoch and chunk number); ``root``:
    the data folder, where the encoded-corpus cache goes (<root>/skipgram_cache)."""

    min_count: int = 5  # words seen fewer times are dropped (word2vec's min_count)
    max_vocab: Optional[int] = at_least(None, 2)  # keep at most this many most frequent words (None: all; 0 would
    # mean all too, and 1 fails only after the corpus is encoded)
    sample: float = between(1e-3, 0, 1, high_open=True)  # subsampling threshold t of frequent words (0: off)
    window: int = positive(5)  # maximum half-width; each centre draws b ~ U{1..window}
    chunk_tokens: int = positive(1_000_000)  # words per training step (a chunk; ends at a sentence end)
    max_sentence_length: int = positive(10000)  # longer lines are cut (gensim's limit)
    read_chars: int = positive(1 << 20)  # characters read from disk at a time (bounded memory)
    lowercase: bool = False  # lower-case the corpus before counting
    strip_punctuation: bool = False  # replace punctuation by spaces ("fire," -> "fire")
    eval_lowercase: bool = True  # lower-case evaluation words (questions-words.txt is capitalised)
    val_analogies: list[str] = field(default_factory=list)  # analogy files evaluated every epoch (slow)


@dataclass
class TextCorpusConfig(CorpusOptions):
    files: Any = "data/text8"  # a path, a folder (its files), a glob, a list of them, or gensim:NAME; plain
    # UTF-8 text, or gzip / bzip2 / xz / a zip of one text file (told by its first bytes, read as it streams)
    download: bool = True  # a missing files path named text8 (or text8.zip): fetch text8.zip into its folder
    # (false: never touch the network)
    val_similarity: list[str] = field(default_factory=lambda: ["gensim:wordsim353.tsv"])  # first = val/spearman
    test_similarity: list[str] = field(default_factory=lambda: ["gensim:wordsim353.tsv", "gensim:simlex999.txt"])
    test_analogies: list[str] = field(default_factory=lambda: ["gensim:questions-words.txt"])  # word2vec's file


@dataclass
class SyntheticCorpusConfig(CorpusOptions):
    planted: dict = field(default_factory=dict)  # generator settings, see PlantedCorpus above
    test_analogies: bool = True  # evaluate the planted analogies at test time

    def __post_init__(self):
        validate(PlantedCorpus, self.planted or {}, "data.planted", what="generator setting")


# the folder's entries, each declared once as a spec its class points to: name, class (imported when first
# used), options and what the recipe check needs
SKIPGRAM_SPEC = MODELS.declare(ModelSpec(
    "skipgram", "zoo.models.skipgram.module:SkipGramModule", SkipGramConfig, monitor=("val/spearman", "max"),
    # no 16-mixed: the updates are hand-written in float32, and float16 AMP's GradScaler asserts on an optimizer
    # that has no gradients to unscale
    precisions=("32-true", "64-true", "bf16-mixed"),
    task="feature-extraction",
    compiled="its training step is a hand-written kernel (numba on the CPU, Triton on CUDA, batched in-place "
             "updates in loop.py) that adds into the tables outside any module's call, which is what compile compiles"))
SKIPGRAM_SYNTHETIC_SPEC = DATAMODULES.declare(DataSpec("skipgram_synthetic",
                                                       "zoo.models.skipgram.data:SyntheticCorpusData",
                                                       SyntheticCorpusConfig))
SKIPGRAM_TEXT_SPEC = DATAMODULES.declare(DataSpec("skipgram_text", "zoo.models.skipgram.data:TextCorpusData",
                                                  TextCorpusConfig))
