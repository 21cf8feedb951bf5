"""The skip-gram LightningModule: one training step = one corpus chunk of vectorised updates."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
from lightning.pytorch.utilities import rank_zero_info

from zoo.callbacks.guards import NonFiniteLossError
from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.models.skipgram import gpu_kernel, kernel
from zoo.models.skipgram.config import OBJECTIVES, SKIPGRAM_SPEC
from zoo.models.skipgram.evaluation import MIN_PAIRS, analogy_score, similarity_score
from zoo.models.skipgram.loop import train_chunk
from zoo.models.skipgram.nets import SkipGram
from zoo.models.skipgram.plots import embedding_map
from zoo.models.skipgram.predict import SkipGramAPI, predict_cli
from zoo.models.skipgram.sampling import offsets
from zoo.models.skipgram.threads import torch_threads


class SkipGramModule(SkipGramAPI, ZooModule):
    """Skip-gram word embeddings trained with NCE, negative sampling or a full softmax."""

    spec = SKIPGRAM_SPEC  # its options, monitor (val/spearman, max) and precisions

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, packed_vocabulary(data_info or {}))
        c = self.cfg
        if c.objective not in OBJECTIVES:
            raise UserError(f"model.objective must be one of {', '.join(OBJECTIVES)}, got '{c.objective}'")
        if c.dim < 1 or c.negative < 1 or c.batch_centres < 1 or c.threads < 1 or c.lr <= 0:
            raise UserError("model.dim, model.negative, model.batch_centres, model.threads must be >= 1 and "
                            "model.lr > 0")
        if c.updates == "sequential" and c.objective == "full_softmax":
            raise UserError("model.updates=sequential is word2vec's per-pair update for nce / negative_sampling; "
                            "full_softmax trains with model.updates=minibatch (or auto)")
        if "vocab" not in self.data_info or "counts" not in self.data_info:  # seqgan_text has a vocab, no counts
            raise UserError("the skipgram model needs a corpus datamodule: use data.name=skipgram_text "
                            "or data.name=skipgram_synthetic")
        self.words, counts = unpacked_vocabulary(self.data_info)
        self.few_pairs_said: set[str] = set()  # similarity sets said to have too few known pairs
        vocab = len(counts)
        if vocab < 2:  # every context and every noise word is that word: the loss is 0 and nothing is learnt
            raise UserError(f"the corpus has {vocab} word type{'' if vocab == 1 else 's'} after min_count "
                            f"({', '.join(self.words[:1]) or 'none'}): skip-gram learns which words occur near "
                            "which, and needs at least 2 distinct words; give a larger corpus (data.files=) "
                            "or lower data.min_count")
        small = self.small_vocabulary = 4 * vocab < c.batch_centres  # every row is hot: hundreds of terms
        # per minibatch, and Hogwild ("Hogwild!: A Lock-Free Approach to Parallelizing Stochastic Gradient
        # Descent") needs updates that rarely touch the same rows: one thread, whose torch ops use the cores
        self.threads, self.intra_op_threads = (1, c.threads) if small else (c.threads, 1)
        step_cap = c.step_cap is not False  # None in a checkpoint that predates the option: automatic
        self.net = SkipGram(counts, c.dim, c.objective, c.negative, c.noise_power, step_cap,
                            c.init_range, self.cap_method())
        self.register_buffer("words_done", torch.zeros((), dtype=torch.float64))  # raw words trained on
        self.automatic_optimization = False  # updates are hand-written sparse SGD (see nets.py)
        self._index: dict[str, int] | None = None
        self._seed = torch.initial_seed()
        self._anchors: list[torch.Tensor] | None = None  # DDP: tables after the last synchronisation
        self._noise = None  # the kernel's (keep, alias) noise table, built on first use
        self._noise_gpu = None  # the same on the GPU, for gpu_kernel

    def cap_method(self) -> str:
        """``step_cap_method`` with auto resolved (see SkipGramConfig)."""
        if self.cfg.step_cap_method != "auto":
            return self.cfg.step_cap_method
        return "line" if self.cfg.objective == "full_softmax" else "newton"

    def sequential(self) -> bool:
        """Whether training steps use the sequential kernel (see ``SkipGramConfig.updates``)."""
        mode = self.cfg.updates
        if mode == "auto":
            return self.device.type == "cpu" and self.cfg.objective != "full_softmax" and kernel.available()
        if mode == "sequential" and (self.device.type not in ("cpu", "cuda") or self.cfg.objective == "full_softmax"):
            raise UserError(f"model.updates=sequential runs on a CPU or a CUDA GPU for nce / negative_sampling "
                            f"(here: {self.device.type}, {self.cfg.objective}); use model.updates=minibatch or auto")
        if mode == "sequential" and self.device.type == "cuda":
            if not gpu_kernel.available():
                found = gpu_kernel.triton_version()
                have = "none is installed" if found is None else f"found {'.'.join(map(str, found))}"
                need = ".".join(map(str, gpu_kernel.MIN_TRITON))
                raise UserError(f"model.updates=sequential on a GPU needs triton >= {need} ({have}; it comes with "
                                "torch's CUDA builds: a newer torch, or pip install -U triton); or use "
                                "model.updates=minibatch")
        return mode == "sequential"

    @property
    def index(self) -> dict[str, int]:
        if self._index is None:
            self._index = {w: i for i, w in enumerate(self.words)}
        return self._index

    @property
    def vectors(self) -> torch.Tensor:
        """(V, D) the word vectors (the ``centre`` table, as word2vec exports syn0)."""
        return self.net.centre.detach()

    def configure_optimizers(self):
        # A placeholder so Lightning counts steps (global_step) and checkpoints an optimizer; the
        # tables have no .grad, so its step() changes nothing. The real update is in training_step.
        return torch.optim.SGD([self.net.centre, self.net.context], lr=self.cfg.lr)

    # ---- training ---------------------------------------------------------------------------
    def lr_at(self, words_done: float) -> float:
        """lr0 -> lr0 * min_ratio linearly over all epochs (gensim's alpha -> min_alpha). word2vec.c falls
        towards 0 and stops at the floor lr0 * 1e-4: with min_ratio 1e-4 the two differ by 1e-4 lr0 at
        most, but with gensim's 1e-4 / 0.025 = 0.004 that schedule gives 0.4 % less step in all, and
        shorter vectors than gensim's (docs/skipgram.md)."""
        epochs = self.trainer.max_epochs if self._trainer is not None and self.trainer.max_epochs else 1
        total = max(1, self.data_info["train_words"] * max(1, epochs))
        ratio = self.cfg.min_lr_ratio
        return self.cfg.lr * max(ratio, 1.0 - (1.0 - ratio) * words_done / total)

    def on_train_epoch_start(self) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if hasattr(datamodule, "set_epoch"):
            datamodule.set_epoch(self.current_epoch)

    def training_step(self, batch: dict, batch_idx: int) -> None:
        start = time.perf_counter()
        raw = int(batch["raw_words"])
        done = float(self.words_done)
        lr0, lr1 = self.lr_at(done), self.lr_at(done + raw)
        world, rank = self.world()
        seed = ((self._seed % (1 << 40)) * 1_000_003 + self.global_step) * 64 + rank  # negatives' seed
        # the hand-written updates add into the float32 tables: no autocast (trainer.precision=bf16-mixed
        # runs the rest of the loop as usual, these updates in float32)
        with torch.autocast(self.device.type, enabled=False):
            if self.sequential():
                stats = self.sequential_chunk(batch, lr0, lr1, seed)
            else:
                stats = train_chunk(self.net, batch["tokens"], batch["sentence"], batch["window"],
                                    int(self.data_info["window"]), lr0, lr1, self.cfg.batch_centres, seed,
                                    self.threads, self.cfg.share_negatives, self.intra_op_threads,
                                    1 if self.small_vocabulary else world,  # ranks whose updates are summed
                                    self.cfg.window_pairs, self.cfg.interleave)
        # the loss is summed before each update: a chunk whose own updates diverge shows only in the
        # tables (one sum each), and would otherwise reach the last checkpoint
        if math.isfinite(stats["loss"]) and not self.tables_finite():
            stats["loss"] = float("nan")
        if not math.isfinite(stats["loss"]):
            raise NonFiniteLossError(self.global_step, self.current_epoch, stats["loss"])
        self.words_done += raw * world
        self.optimizers().step()  # no-op (see configure_optimizers); advances global_step
        seconds = time.perf_counter() - start
        metrics = {"train/loss": stats["loss"], "train/lr": lr1, "train/words_per_s": len(batch["tokens"]) / seconds}
        self.log_train(metrics, batch_size=1, prog_bar=("train/loss", "train/words_per_s"))

    def tables_finite(self) -> bool:
        """Whether both tables are finite (one sum each), on one intra-op thread (``threads.torch_threads``)."""
        with torch_threads(1):
            return bool(torch.isfinite(self.net.centre.sum() + self.net.context.sum()))

    def sequential_chunk(self, batch: dict, lr0: float, lr1: float, seed: int) -> dict[str, float]:
        """One chunk through word2vec's per-pair updates: kernel.py's, Hogwild over cfg.threads, or on a
        CUDA GPU gpu_kernel.py's, Hogwild over cfg.gpu_jobs warps in stripes of cfg.gpu_stripe tokens."""
        if self._noise is None:
            self._noise = kernel.noise_table(self.net.sampler)
        log_kq = self.net.log_kq if self.cfg.objective == "nce" else None
        if self.device.type == "cuda":
            device = batch["tokens"].device
            if self._noise_gpu is None or self._noise_gpu[0].device != device:  # copied once
                self._noise_gpu = tuple(torch.as_tensor(column, device=device) for column in self._noise)
            jobs = min(self.cfg.gpu_jobs, max(1, len(self.words) // 4))  # Hogwild needs sparse updates: on a
            # tiny vocabulary fewer warps write at once (as the CPU's threads, see __init__)
            stats = gpu_kernel.train_chunk(self.net.centre, self.net.context, batch["tokens"], batch["sentence"],
                                           batch["window"], self._noise_gpu, log_kq, self.cfg.negative, lr0, lr1, seed,
                                           jobs, skip_saturated=self.cfg.saturated == "skip",
                                           sigmoid_index=self.cfg.sigmoid_index, stripe=self.cfg.gpu_stripe,
                                           share_noise=self.share_noise())
            return {"loss": float(stats["loss"]), "pairs": float(stats["pairs"])}  # one wait a chunk
        return kernel.train_chunk(self.net.centre, self.net.context, batch["tokens"], batch["sentence"],
                                  batch["window"], self._noise, log_kq, self.cfg.negative, lr0, lr1, seed,
                                  self.cfg.threads, skip_saturated=self.cfg.saturated == "skip",
                                  job_tokens=self.cfg.job_tokens, sigmoid_index=self.cfg.sigmoid_index,
                                  share_noise=self.share_noise())

    def share_noise(self) -> int:
        """The kernels' share_noise: 0 (one draw of k noise words a window) or 1 (a draw every pair)."""
        return 0 if self.cfg.share_negatives else 1

    def estimator_loss(self, batch: dict, centres: int = 512) -> torch.Tensor:
        """A fresh Monte Carlo estimate (new noise words) of the mean loss per pair on the first
        ``centres`` windows of a chunk, differentiable wrt both tables: what
        ``GradientVarianceCallback`` needs to measure the variance of the NCE / negative-sampling
        gradient (zero for ``full_softmax``, which has no noise)."""
        tokens, sentence, reduced = batch["tokens"], batch["sentence"], batch["window"]
        window = int(self.data_info["window"])
        pos = torch.arange(min(centres, len(tokens)), device=tokens.device)
        rel = offsets(window, tokens.device)  # (2W,)
        ctx = pos[:, None] + rel[None, :]  # (B, 2W)
        clamped = ctx.clamp(0, len(tokens) - 1)
        valid = ((ctx >= 0) & (ctx < len(tokens)) & (sentence[clamped] == sentence[pos][:, None])
                 & (rel.abs()[None, :] <= reduced[pos][:, None]))
        noise = self.net.sampler.sample((len(pos), self.cfg.negative), device=tokens.device)  # (B, k)
        out = torch.cat([tokens[pos][:, None], noise], 1)  # (B, 1 + k)
        loss = self.net.loss(self.net.centre, self.net.context, tokens[clamped], valid, out)
        return loss / valid.sum().clamp(min=1)

    def on_train_start(self) -> None:
        # Lightning skips on_train_epoch_start when it resumes into an epoch (from the middle of one, or after
        # the previous one's last batch): the corpus's subsampling is keyed by the epoch it goes on with
        self.on_train_epoch_start()
        note = self.threads_note()
        if note:
            rank_zero_info(note)
        if self.trainer.world_size > 1:
            # the tables every rank starts from (DDP has broadcast rank 0's; a resume has loaded them)
            self._anchors = [t.detach().clone() for t in (self.net.centre, self.net.context)]

    def threads_note(self) -> str | None:
        """What a tiny vocabulary does to model.threads, on the minibatch path only: the sequential kernel keeps
        its Hogwild threads (one update a pair, not a minibatch's); said once training starts on its device."""
        if self.small_vocabulary and self.cfg.threads > 1 and not self.sequential():
            return (f"skipgram: vocabulary of {len(self.words)} words < batch_centres / 4: {self.cfg.threads} "
                    f"intra-op threads instead of {self.cfg.threads} Hogwild threads (Hogwild needs sparse updates)")
        return None

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        """DDP: every rank trained its own chunk from the same tables; add up their changes (not
        their mean, which would divide each word's learning rate by the world size): the updates
        are sparse, so this is Hogwild across processes, synchronised once per chunk. On a tiny
        vocabulary, where every chunk moves every row (and Hogwild threads are off), average."""
        if self._anchors is None:  # one process
            return
        for table, anchor in zip((self.net.centre, self.net.context), self._anchors):
            delta = table.data - anchor
            torch.distributed.all_reduce(delta)  # sum over ranks
            if self.small_vocabulary:
                delta /= self.trainer.world_size
            table.data.copy_(anchor.add_(delta))  # the anchor becomes the synchronised table

    # ---- evaluation -------------------------------------------------------------------------
    def evaluate_set(self, batch: dict, stage: str) -> dict[str, float]:
        name, log = batch["name"], {}
        if batch["kind"] == "similarity":
            r = similarity_score(self.vectors, self.index, batch["pairs"], batch["lowercase"])
            log = {f"{stage}/{name}_spearman": r["spearman"], f"{stage}/{name}_oov": r["oov"]}
            if r["pairs"] < MIN_PAIRS and name not in self.few_pairs_said:  # once a set, not every validation
                self.few_pairs_said.add(name)
                rank_zero_info(f"note: {name}: {int(r['pairs'])} of its {len(batch['pairs'])} pairs have both words "
                               f"in the vocabulary, under the {MIN_PAIRS} a Spearman needs, so it is not reported "
                               "(nan); a larger corpus or a lower data.min_count gives more")
            if batch.get("primary"):
                log[f"{stage}/spearman"] = r["spearman"]
        else:
            r = analogy_score(self.vectors, self.index, batch["sections"], self.cfg.analogy_restrict,
                              batch["lowercase"])
            keys = r if stage == "test" else {k: r[k] for k in ("all", "oov") if k in r}
            log = {f"{stage}/{name}_{'acc' if k == 'all' else k}": v for k, v in keys.items()}
        for key, value in log.items():
            self.log(key, value, batch_size=1)
        return log

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        with torch_threads(1):  # a few hundred pairs' cosines: a second thread costs more than it saves
            self.evaluate_set(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self.evaluate_set(batch, "test")

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        if self.cfg.neighbours and self.trainer.is_global_zero:
            with torch_threads(1):  # a few words' cosines against the vocabulary
                self.print(self.neighbour_table(self.cfg.neighbours, self.cfg.topn))

    def on_train_end(self) -> None:
        self._plot()  # once, not every epoch: the figure costs about as much as a small epoch's validation

    def on_test_epoch_end(self) -> None:
        self._plot()

    def _plot(self) -> None:
        if self._trainer is not None and not self.trainer.is_global_zero:
            return
        figure = embedding_map(self.vectors, self.words, self.data_info.get("word_groups"))
        self.save_figure("embedding_pca", figure)

    # ---- python -m zoo.predict (the inference API is predict.py's) --------------------------
    def export(self, path: str, binary: bool | None = None):
        """Write the word vectors in word2vec text (.txt/.vec) or binary (.bin) format (by the suffix)."""
        return self.save_word2vec(path, Path(path).suffix == ".bin" if binary is None else binary)

    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)


def packed_vocabulary(data_info: dict) -> dict:
    """``data_info`` with its vocabulary and counts each as one string (the words joined by newlines, the
    counts by spaces), as checkpoints and the pretrained format's JSON hold them: saving a list pickles every
    word and count one by one through torch's pickler (70k objects for a 34k-word vocabulary, ~0.1 s a save,
    two saves an epoch). Already packed, or a word with a newline in it (the corpus reader splits words on
    whitespace, so only a hand-made vocabulary): returned as it is."""
    words, counts = data_info.get("vocab"), data_info.get("counts")
    if not isinstance(words, (list, tuple)) or not isinstance(counts, (list, tuple)) or len(words) != len(counts):
        return data_info
    joined = "\n".join(words)
    if joined.count("\n") != len(words) - 1:  # a word with a newline: the string would split it
        return data_info
    return {**data_info, "vocab": joined, "counts": " ".join(str(int(n)) for n in counts)}


def unpacked_vocabulary(data_info: dict) -> tuple[list[str], list[int]]:
    """(words in id order, their counts) from ``data_info``, packed (``packed_vocabulary``) or as lists."""
    words, counts = data_info["vocab"], data_info["counts"]
    words = words.split("\n") if isinstance(words, str) else list(words)
    counts = [int(n) for n in counts.split()] if isinstance(counts, str) else list(counts)
    return words, counts
