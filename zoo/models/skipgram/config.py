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
    # contexts one after another, each seeing the centre's output vector as the previous one left it
    # (word2vec's order: 2W calls per minibatch); at_once = all of a window's pairs from the same vectors
    # (Ji et al. 2016; fewer, larger calls, 4.5-5x faster a word on a CPU). Wikipedia, one thread, 3 seeds,
    # agreement with gensim: 0.560 in_turn against 0.546 at_once at 5,120 windows, 0.535 / 0.532 at 65,536
    interleave: int = at_least(1, 0)  # minibatch updates: 1 = a minibatch is batch_centres consecutive windows;
    # s = each run of s minibatches covers s x batch_centres consecutive windows, minibatch j taking every
    # s-th from the j-th (B streams of s windows stepped together: a passage's repeated words are not all
    # updated in one step); 0 = the whole chunk. Wikipedia, 5,120 windows, 3 seeds: agreement with gensim
    # 0.560 at 1, 0.566 at 2, 0.552 at 8 (gensim's vector lengths), 0.516 at 0 (a lower probe loss than gensim's)
    share_negatives: bool = True  # at_once: k noise words per window (Ji et al. 2016) instead of per pair
    init_range: float = positive(0.5)  # word vectors start U(-r/D, r/D): 0.5 = word2vec.c, 1.0 = gensim 4
    lr: float = positive(0.025)  # initial SGD learning rate (word2vec's skip-gram default)
    min_lr_ratio: float = between(1e-4, 0, 1)  # lr falls linearly to lr * min_lr_ratio over all epochs (gensim:
    # min_alpha / alpha = 0.004; word2vec.c's floor: 1e-4)
    updates: str = choice("auto", ["auto", "sequential", "minibatch"])  # how SGD visits the pairs:
    # sequential = word2vec's update after every pair: a compiled CPU kernel (kernel.py; best quality
    # and speed on a CPU), on a CUDA GPU the same updates in a Triton kernel, gpu_jobs warps at once
    # (gpu_kernel.py; an H100 and a CPU model of it in docs/skipgram.md); minibatch = batch_centres windows per
    # vectorised update (torch, any device, and the only one for full_softmax); auto = sequential on a CPU
    # for nce / negative_sampling, else minibatch. batch_centres, window_pairs, interleave, share_negatives
    # and step_cap are minibatch settings.
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
    # each one warp walking its tokens in order, all at once (Hogwild over warps, as BlazingText). More jobs
    # keep more of the GPU busy (an H100, kernel alone: 40M words/s at 1,024, 74M at 4,096, when rows were
    # stored) and compute more steps from rows others have moved. A CPU model of the jobs with the kernel's
    # atomic adds (benchmarks/skipgram_lockstep.py, Wikipedia, 3 seeds), striped: agreement with gensim 0.56 at
    # 256 and 512, 0.55 at 1,024, 0.53 at 2,048 (gensim's own 0.58), probe loss and scores at gensim's
    # (docs/skipgram.md). What fewer jobs cost on a GPU is unmeasured, so the default stays 1,024
    gpu_stripe: int = at_least(16, 0)  # sequential updates on a GPU: job j takes the stripes of this many tokens
    # j, j + J, j + 2J, ... of a chunk, so that the jobs sweep it side by side and the text is read nearly in
    # order; 0 = each job one contiguous part of the chunk. In the CPU model, 1,024 jobs: agreement with gensim
    # 0.55 with stripes of 16 (0.547 with 8, 0.539 with 32, 0.49 with 256, one seed) against 0.48 contiguous;
    # on 10M words 0.67 (256 jobs: 0.69) against 0.63 contiguous and gensim's own 0.69 (docs/skipgram.md)
    step_cap: bool = True  # minibatch updates: damp each row's step where the minibatch's many simultaneous
    # terms on it would overshoot (nets.SkipGram._capped_step). Without it 65,536-window steps diverge on
    # Wikipedia and 5,120-window ones agree less with gensim (0.473 against 0.550, pairs at once); false = plain SGD
    step_cap_method: str = choice("auto", ["auto", *CAP_METHODS])  # newton = 2 conjugate-gradient
    # iterations of the damped Newton step per row; line = the step along the row's summed gradient only
    # (one Hessian-vector product instead of two); auto = newton for nce / negative_sampling, line for
    # full_softmax. Wikipedia, one thread, pairs at once, agreement with gensim: newton 0.550 / line 0.516 at 5,120
    # windows, 0.532 / 0.500 at 65,536; planted corpus, full_softmax without subsampling: newton 0.597,
    # line 0.941 (docs/skipgram.md)
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
