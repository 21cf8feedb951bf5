"""word2vec's sequential SGD on a GPU (Triton): the updates of the CPU kernel (``kernel.py``), one job per warp.

The minibatch path (``loop.py``) is the GPU path that needs nothing but torch; its simultaneous steps
of tens of thousands of windows agree less with gensim than sequential updates do (0.53 at 65,536
windows against gensim's own 0.58 on Wikipedia, docs/skipgram.md), and they are what makes it fast.
This kernel keeps word2vec's update instead: the chunk is cut into ``jobs`` jobs, either contiguous parts
or, with ``stripe`` S, stripes of S tokens dealt out in turn (job j takes stripes j, j + J, j + 2J, ..., so
the jobs sweep the chunk side by side and the text is read nearly in order), and each
job is one Triton program (one warp) that walks its tokens in order and, for every (context, word)
pair and each of its noise words, reads the two rows, updates the output row and then the context row
exactly as ``kernel._train_part`` does (with its noise words drawn for every pair, or once for a window's
pairs or every n of them: ``share_noise``). Many jobs run at once on the shared tables without locks:
Hogwild over warps, as BlazingText runs word2vec on GPUs (Gupta & Khare 2017). Each step is added to
its row atomically, so no warp's step is lost, though a warp may compute it from a row another has
since moved; rows are read from L2, which the multiprocessors share (an SM's L1 may hold a stale row). The
lanes of a warp share the dimensions of a row (``BLOCK`` >= D, masked); every lane computes the same
scalars (the score, the step, the random stream), so no lane waits on another but for the dot
product's sum.

Random numbers are word2vec.c's linear congruential generator, each job seeded as the CPU kernel
seeds its jobs (seed + 7919 (j + 1)), noise words come from the same alias table and the sigmoid from
the same table: with the jobs run one after another (``TRITON_INTERPRET=1`` runs the programs in
order on the CPU) the tables equal the CPU kernel's over the same jobs, up to float32 rounding of the
dot product (tested). On a GPU the jobs run concurrently: how the embedding changes with their number
is modelled on a CPU by ``benchmarks/common/skipgram_lockstep.py`` (stored rather than added rows lose
steps and agree less with gensim the more jobs, on an H100; added steps hold it near 0.48 from 256 to
4,096 jobs on Wikipedia, and stripes of 16 tokens raise it to 0.55 at 1,024, 0.56 at 256) and measured by
``benchmarks/skipgram_vs_gensim.py --device cuda --zoo updates=sequential gpu_jobs=N gpu_stripe=S``.

No maintained library runs word2vec's updates on torch tensors on a GPU, so it is written here.
"""

from __future__ import annotations

import functools
import re

import torch

# The module, not its SIGMOID32 array: Triton 3.0's interpreter (torch 2.4) compares every global of a
# kernel's module with triton.language and fails on a numpy array ("truth value ... ambiguous").
from zoo.models.skipgram import kernel as cpu_kernel
from zoo.models.skipgram.kernel import MAX_SCORE, TABLE_SCALE

try:  # Triton comes with torch's CUDA builds; without it the GPU trains with minibatch updates
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only where triton is missing
    triton = None

LOSS_PAIRS_PER_JOB = 32  # pairs per job whose loss is summed (the reported train/loss): logs cost as much as updates
MIN_JOB_TOKENS = 16  # a chunk is cut into at most len(chunk) / this many jobs


# the oldest Triton the kernel is known to run with (torch 2.11's 3.6.0 on an H100; the interpreter tests use
# 3.8); Triton 3.0 (torch 2.4, the oldest torch pyproject.toml allows) fails on it even in its interpreter
MIN_TRITON = (3, 6)


def triton_version() -> tuple[int, ...] | None:
    return None if triton is None else tuple(int(part) for part in re.findall(r"\d+", triton.__version__)[:2])


def available() -> bool:
    """Triton is installed and new enough for this kernel (else the GPU trains with minibatch updates)."""
    version = triton_version()
    return version is not None and version >= MIN_TRITON


if triton is not None:
    SATURATION = tl.constexpr(MAX_SCORE)  # a kernel reads module constants only as constexpr

    @triton.jit
    def _train_jobs(tokens, sentence, reduced, bounds, syn0, syn1, keep, alias, log_kq, sigmoid,
                    losses, counted, pairs_out, n_total, vocab, negative, lr0, lr1, seed, table_scale, loss_pairs,
                    stripe, share, DIM: tl.constexpr, BLOCK: tl.constexpr, NEG_BLOCK: tl.constexpr, NCE: tl.constexpr,
                    SKIP_SATURATED: tl.constexpr, STRIPED: tl.constexpr):
        job = tl.program_id(0)
        lanes = tl.arange(0, BLOCK)  # (BLOCK,) the row's dimensions, BLOCK >= DIM
        in_row = lanes < DIM
        slots = tl.arange(0, NEG_BLOCK)  # (NEG_BLOCK,) the noise words of the last draw, NEG_BLOCK >= negative
        drawn = tl.zeros([NEG_BLOCK], tl.int64)
        if STRIPED:  # job j takes the stripes of `stripe` tokens j, j + J, j + 2J, ...: the jobs sweep the chunk
            start = job.to(tl.int64) * stripe
            step = tl.num_programs(0).to(tl.int64) * stripe
            length = stripe + tl.zeros([], tl.int64)  # (an int argument of 1 arrives as a constant)
            parts = (n_total - start + step - 1) // step  # <= 0 where the job has no stripe
        else:  # job j is the contiguous tokens bounds[j]..bounds[j + 1]
            start = tl.load(bounds + job)
            step = tl.zeros([], tl.int64)
            length = tl.load(bounds + job + 1) - start
            parts = 1
        rng = (seed + 7919 * (job.to(tl.int64) + 1)).to(tl.uint64)  # the CPU kernel's seed of job j
        multiplier = tl.full([], 25214903917, tl.uint64)  # word2vec.c's generator
        loss = tl.zeros([], tl.float32)
        pairs = tl.zeros([], tl.int32)
        for part in range(0, parts):
            for i in range(start + part * step, tl.minimum(start + part * step + length, n_total)):
                word = tl.load(tokens + i)
                half = tl.load(reduced + i)
                sent = tl.load(sentence + i)
                lr = lr0 + (lr1 - lr0) * (i / n_total)
                first = tl.maximum(i - half, 0)  # contexts may lie in a neighbouring job, as on the CPU
                last = tl.minimum(i + half, n_total - 1)
                p = tl.zeros([], tl.int32)  # the centre's pairs so far: pair p draws where p % share == 0
                for j in range(first, last + 1):
                    if (j != i) & (tl.load(sentence + j) == sent):
                        ctx = tl.load(tokens + j)
                        fresh = tl.where(share > 0, p % tl.maximum(share, 1) == 0, p == 0)  # share 0: the window's
                        # the tables' rows are read from L2 (.cg), which every multiprocessor shares: a row kept in one
                        # multiprocessor's L1 would stay as it was while other warps move it
                        v = tl.load(syn0 + ctx * DIM + lanes, mask=in_row, other=0.0, cache_modifier=".cg")  # (BLOCK,)
                        work = tl.zeros([BLOCK], syn0.dtype.element_ty)  # the context row's step, after the outputs'
                        for k in range(negative + 1):
                            target = word
                            label = 1.0
                            if k > 0:
                                if fresh:  # a noise word: one step of the generator, then the alias table
                                    rng = rng * multiplier + 11
                                    r = rng >> 16
                                    column = (r % vocab.to(tl.uint64)).to(tl.int64)
                                    coin = (r >> 24).to(tl.float64) * (1.0 / 16777216.0)
                                    target = tl.where(coin < tl.load(keep + column), column, tl.load(alias + column))
                                    drawn = tl.where(slots == k - 1, target, drawn)
                                else:  # the window's earlier pair's k-th noise word
                                    target = tl.sum(tl.where(slots == k - 1, drawn, 0))
                                label = 0.0
                            if (k == 0) | (target != word):
                                u = tl.load(syn1 + target * DIM + lanes, mask=in_row, other=0.0,
                                            cache_modifier=".cg")  # (BLOCK,)
                                f = tl.sum(v * u)
                                if NCE:
                                    f -= tl.load(log_kq + target)
                                if pairs < loss_pairs:
                                    z = tl.where(label > 0.5, f, -f)  # -log sigmoid(z) is this term's loss
                                    loss += tl.where(z > -30.0, tl.log(1.0 + tl.exp(-z)), -z).to(tl.float32)
                                cell = tl.minimum(tl.maximum(((f + SATURATION) * table_scale).to(tl.int32), 0), 1000)
                                g = (label - tl.load(sigmoid + cell)) * lr
                                saturated = (f > SATURATION) | (f < -SATURATION)
                                if SKIP_SATURATED:  # gensim: no update from a saturated score
                                    g = tl.where(saturated, 0.0, g)
                                else:  # word2vec.c: sigmoid taken as 1 or 0
                                    g = tl.where(saturated, tl.where(f > 0, (label - 1.0) * lr, label * lr), g)
                                if g != 0.0:  # steps are added atomically: another warp's step to the row is never lost
                                    work += g * u
                                    tl.atomic_add(syn1 + target * DIM + lanes, g * v, mask=in_row, sem="relaxed")
                        tl.atomic_add(syn0 + ctx * DIM + lanes, work, mask=in_row, sem="relaxed")
                        pairs += 1
                        p += 1
        tl.store(losses + job, loss)
        tl.store(counted + job, tl.minimum(pairs, loss_pairs))
        tl.store(pairs_out + job, pairs)


@functools.cache
def _sigmoid_table(device: torch.device) -> torch.Tensor:
    """kernel.SIGMOID32 on ``device``, copied there once, not once a chunk."""
    return torch.as_tensor(cpu_kernel.SIGMOID32, device=device)


def job_bounds(n: int, jobs: int, device: torch.device) -> torch.Tensor:
    """(J + 1,) the first token of each job and n: ``jobs`` near-equal contiguous parts (fewer on a short chunk)."""
    jobs = max(1, min(jobs, n // MIN_JOB_TOKENS))
    return torch.linspace(0, n, jobs + 1, dtype=torch.float64, device=device).round().long()


def train_chunk(centre: torch.Tensor, context: torch.Tensor, tokens: torch.Tensor, sentence: torch.Tensor,
                reduced: torch.Tensor, noise: tuple[torch.Tensor, torch.Tensor], log_kq: torch.Tensor | None,
                negative: int, lr_start: float, lr_end: float, seed: int, jobs: int = 1024,
                skip_saturated: bool = False, sigmoid_index: str = "exact",
                bounds: torch.Tensor | None = None, stripe: int = 0, share_noise: int = 1) -> dict[str, torch.Tensor]:
    """``kernel.train_chunk``'s sequential SGD with ``jobs`` jobs run at once on the tables' device.

    centre, context: (V, D) float32 (or float64) tables; tokens, sentence, reduced: (N,) int64 on their device;
    noise: the (keep probability float64, alias int64) columns of the alias table there
    (``kernel.noise_table``); ``bounds`` (J + 1,) overrides the jobs (tests). stripe = 0: job j is
    the contiguous part j of the chunk; stripe = S: job j takes the stripes of S tokens j, j + J, j + 2J, ...,
    so that the jobs sweep the chunk side by side and its text is read nearly in order. share_noise: as
    ``kernel.train_chunk``'s (1: k noise words for every pair; n: for every n pairs of a window; 0: once a
    window), the same draws from each job's stream. Returns
    {"loss": mean loss per pair over each job's first pairs, "pairs": pairs trained}, as 0-dim
    tensors: reading one waits for the kernel."""
    if triton is None:
        raise RuntimeError("triton is not installed (it comes with torch's CUDA builds): "
                           "use model.updates=minibatch on this GPU")
    device, n = centre.device, len(tokens)
    if n == 0:
        zero = torch.zeros((), device=device)
        return {"loss": zero, "pairs": zero}
    bounds = job_bounds(n, jobs, device) if bounds is None else bounds.to(device=device, dtype=torch.int64)
    count = len(bounds) - 1 if stripe <= 0 else min(len(bounds) - 1, -(-n // stripe))
    losses = torch.zeros(count, device=device)
    counted, pairs = (torch.zeros(count, device=device, dtype=torch.int32) for _ in range(2))
    sigmoid = _sigmoid_table(device)
    nce = log_kq is not None
    log_kq = log_kq.to(device=device, dtype=torch.float32) if nce else losses  # unread without NCE
    dim = centre.shape[1]
    _train_jobs[(count,)](tokens, sentence, reduced, bounds, centre, context, *noise, log_kq, sigmoid,
                          losses, counted, pairs, n, centre.shape[0], int(negative), float(lr_start),
                          float(lr_end), int(seed) % (1 << 62), TABLE_SCALE[sigmoid_index], LOSS_PAIRS_PER_JOB,
                          max(int(stripe), 1), max(int(share_noise), 0), DIM=dim,
                          BLOCK=max(32, triton.next_power_of_2(dim)),
                          NEG_BLOCK=triton.next_power_of_2(max(1, int(negative))), NCE=nce,
                          SKIP_SATURATED=bool(skip_saturated), STRIPED=stripe > 0, num_warps=1, num_stages=1)
    return {"loss": losses.sum() / counted.sum().clamp(min=1), "pairs": pairs.sum()}
