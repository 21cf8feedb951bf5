"""Noise sampler, subsampling formula, dynamic window pairs, and the minibatch trainer's pair set and order."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from zoo.models.skipgram.corpus import CorpusChunks
from zoo.models.skipgram.loop import train_chunk
from zoo.models.skipgram.nets import SkipGram
from zoo.models.skipgram.sampling import (
    AliasSampler,
    keep_probability,
    noise_distribution,
    skipgram_pairs,
    window_contexts,
)


def test_noise_sampler_matches_unigram_to_the_three_quarters():
    counts = torch.tensor([5000, 1200, 800, 300, 100, 40, 10, 5])
    q = noise_distribution(counts, 0.75)
    assert torch.allclose(q, counts.double() ** 0.75 / (counts.double() ** 0.75).sum())
    g = torch.Generator().manual_seed(0)
    draws = AliasSampler(q).sample((200_000,), g)
    observed = torch.bincount(draws, minlength=len(counts)).numpy()
    # seed 0, 200k draws: the chi-square test must not reject q at the 0.1% level ...
    assert chisquare(observed, q.numpy() * len(draws)).pvalue > 1e-3
    # ... and must reject the plain unigram distribution (power 1) by a mile
    unigram = counts.double() / counts.sum()
    assert chisquare(observed, unigram.numpy() * len(draws)).pvalue < 1e-12


def test_alias_sampler_handles_zero_and_single_mass():
    g = torch.Generator().manual_seed(1)
    draws = AliasSampler(torch.tensor([0.0, 1.0, 0.0])).sample((1000,), g)
    assert (draws == 1).all()


def test_keep_probability_is_word2vecs_formula():
    counts = torch.tensor([600, 300, 90, 10])  # total 1000
    t = 1e-2  # threshold * total = 10
    keep = keep_probability(counts, t)
    f = counts.double() / 1000
    expected = ((f / t).sqrt() + 1) * t / f
    assert torch.allclose(keep.double(), expected.clamp(max=1), atol=1e-6)
    # by hand, f = 0.6: (sqrt(0.6 / 0.01) + 1) * 0.01 / 0.6
    assert keep[0] == pytest.approx((60 ** 0.5 + 1) / 60, rel=1e-5)
    assert keep[3] == 1.0  # words rarer than the threshold are always kept
    assert (keep_probability(counts, 0) == 1).all()


def test_subsampling_keeps_words_at_that_rate(tmp_path):
    counts = np.array([8000, 1000, 1000])
    rng = np.random.default_rng(0)
    ids = rng.choice(3, size=10_000, p=counts / counts.sum()).astype(np.int32)
    ids[::50] = -1
    ids.tofile(tmp_path / "ids.bin")
    chunks = CorpusChunks(tmp_path / "ids.bin", len(ids), counts, 4000, window=5, sample=1e-2, seed=3)
    kept = torch.cat([c["tokens"] for c in chunks])
    raw = torch.bincount(torch.from_numpy(ids[ids >= 0]).long(), minlength=3).double()
    rate = torch.bincount(kept, minlength=3).double() / raw
    expected = keep_probability(torch.from_numpy(counts), 1e-2).double()
    # binomial standard error of the most subsampled word is ~0.004 here; allow 4 of them
    assert torch.allclose(rate, expected, atol=0.02), (rate, expected)


def test_dynamic_window_pairs_on_a_tiny_sentence():
    tokens = torch.tensor([10, 11, 12, 13, 14, 15])
    sentence = torch.tensor([0, 0, 0, 0, 1, 1])  # the last two words are another sentence
    reduced = torch.tensor([1, 2, 1, 3, 1, 2])
    centre, context = skipgram_pairs(tokens, sentence, reduced)
    got = sorted(zip(centre.tolist(), context.tolist()))
    expected = sorted([(10, 11),                       # b=1: right neighbour only (sentence start)
                       (11, 10), (11, 12), (11, 13),   # b=2: two left would leave the sentence
                       (12, 11), (12, 13),             # b=1
                       (13, 10), (13, 11), (13, 12),   # b=3: never crosses into sentence 1
                       (14, 15),                       # sentence 1
                       (15, 14)])
    assert got == expected


def test_window_contexts_marks_out_of_range_and_other_sentence():
    sentence = torch.tensor([0, 0, 1, 1, 1])
    pos, valid = window_contexts(torch.tensor([0, 3]), 2, sentence)
    assert pos.tolist() == [[0, 0, 1, 2], [1, 2, 4, 4]]
    assert valid.tolist() == [[False, False, True, False], [False, True, True, False]]


@pytest.mark.parametrize("interleave", [1, 3, 0])
@pytest.mark.parametrize("window_pairs", ["in_turn", "at_once"])
def test_trainer_visits_exactly_the_window_pairs(window_pairs, interleave):
    g = torch.Generator().manual_seed(0)
    n = 3000
    tokens = torch.randint(0, 50, (n,), generator=g)
    sentence = torch.cumsum(torch.rand(n, generator=g) < 0.05, 0)
    window = torch.randint(1, 6, (n,), generator=g)
    net = SkipGram(torch.full((50,), 10), dim=8, objective="negative_sampling")
    stats = train_chunk(net, tokens, sentence, window, 5, 0.01, 0.001, batch_centres=700, seed=0,
                        window_pairs=window_pairs, interleave=interleave)
    centre, _ = skipgram_pairs(tokens, sentence, window)
    assert stats["pairs"] == len(centre)
    # and the pairs themselves, position by position, each once
    recorder = PairRecorder(n)
    train_chunk(recorder, torch.arange(n), sentence, window, 5, 0.01, 0.01, batch_centres=700,
                window_pairs=window_pairs, interleave=interleave)
    visited = sorted(zip(torch.cat([c for c, _ in recorder.pairs]).tolist(),
                         torch.cat([o for _, o in recorder.pairs]).tolist()))
    reference = skipgram_pairs(torch.arange(n), sentence, window)
    assert visited == sorted(zip(*(t.tolist() for t in reference)))


def test_in_turn_visits_each_windows_contexts_left_to_right_one_per_call():
    """``window_pairs=in_turn``: every call holds at most one pair of a window, and a window's
    pairs come in the order of their positions (word2vec's); ``at_once`` puts them in one call."""
    g = torch.Generator().manual_seed(1)
    n = 2000
    sentence = torch.cumsum(torch.rand(n, generator=g) < 0.02, 0)
    window = torch.randint(1, 6, (n,), generator=g)
    seen: dict[int, list[int]] = {}
    recorder = PairRecorder(n)
    train_chunk(recorder, torch.arange(n), sentence, window, 5, 0.01, 0.01, batch_centres=300)
    for centres, contexts in recorder.pairs:
        assert len(set(centres.tolist())) == len(centres)  # one pair per window in a call
        for c, o in zip(centres.tolist(), contexts.tolist()):
            seen.setdefault(c, []).append(o)
    assert all(order == sorted(order) for order in seen.values())
    assert max(len(order) for order in seen.values()) == 10  # some window has all 2W contexts
    recorder = PairRecorder(n)
    train_chunk(recorder, torch.arange(n), sentence, window, 5, 0.01, 0.01, batch_centres=300,
                window_pairs="at_once")
    assert any(len(set(c.tolist())) < len(c) for c, _ in recorder.pairs)  # a window's pairs share a call


@pytest.mark.parametrize("interleave", [1, 4, 0])
@pytest.mark.parametrize("window_pairs", ["in_turn", "at_once"])
def test_interleaved_minibatches_step_streams_of_consecutive_windows(window_pairs, interleave):
    """``interleave=s``: every run of s minibatches covers s * B consecutive windows and minibatch j
    of the run holds windows j, j + s, j + 2s, ... of them (0: s is the chunk's number of minibatches,
    m), so B streams of s consecutive windows are stepped together, each in text order; 1: a
    minibatch is one run of consecutive centres."""
    g = torch.Generator().manual_seed(2)
    n, batch = 2000, 90
    m = -(-n // batch)  # 23 minibatches
    s = interleave or m
    sentence = torch.cumsum(torch.rand(n, generator=g) < 0.02, 0)
    window = torch.randint(1, 6, (n,), generator=g)
    recorder = PairRecorder(n)
    train_chunk(recorder, torch.arange(n), sentence, window, 5, 0.01, 0.01, batch_centres=batch,
                window_pairs=window_pairs, interleave=interleave)
    visits = []
    for centres, _ in recorder.pairs:
        c = centres.unique()
        run = int(c.min()) // (s * batch)  # the run of s minibatches the call belongs to
        assert int(c.max()) // (s * batch) == run  # within one run's s * B windows
        stride = min(s, -(-(min(n, (run + 1) * s * batch) - run * s * batch) // batch))  # the last run is shorter
        assert bool(((c - c.min()) % stride == 0).all())  # every stride-th window
        visits.append((run, int(c.min()) % stride))
    assert visits == sorted(visits)  # runs in text order, and each run's minibatches j = 0, 1, ...
    assert len(set(visits)) == m  # every minibatch of the chunk


@pytest.mark.parametrize("interleave", [1, 2, 0])
def test_an_empty_chunk_trains_nothing(interleave):
    """A chunk that subsampling emptied: no pairs, no error, the tables untouched."""
    net = SkipGram(torch.full((50,), 10), dim=8, objective="negative_sampling")
    before = net.centre.clone()
    empty = torch.zeros(0, dtype=torch.long)
    stats = train_chunk(net, empty, empty, empty, 5, 0.01, 0.001, batch_centres=700, interleave=interleave)
    assert stats["pairs"] == 0 and torch.equal(net.centre, before)


class PairRecorder:
    """Stands in for ``SkipGram`` in ``train_chunk`` and records the (centre, context) pairs it is
    given: ``cond[valid]`` are the conditioning (context) words, ``target`` the predicted centre."""

    def __init__(self, vocab: int):
        self.centre = torch.zeros(vocab, 1)
        self.step_cap, self.hogwild_threads, self.replicas, self.pairs = False, 1, 1, []

    def sgd_windows(self, cond, valid, target, lr, generator, share_negatives, with_loss=False):
        self.pairs.append((target[:, None].expand_as(cond)[valid], cond[valid]))
        return 0.0, int(valid.sum())


def test_pipeline_windows_and_trained_pairs_follow_the_dynamic_window(tmp_path):
    """The data pipeline's own draws (CorpusChunks.subsample) and the pairs the trainer actually
    visits: b ~ U{1..W} per centre, so a context at distance d is used with probability
    P(b >= d) = (W - d + 1) / W. One sentence of L distinct words (id = position) makes every
    pair's distance readable; centres within W of the ends are left out (truncated windows).
    Seed 3, L = 30,000, W = 5: chi-square must not reject at the 0.1 % level, and must reject a
    fixed window (every distance equally often) and a window drawn on 0..W-1 by far."""
    L, W = 30_000, 5
    ids = np.arange(L, dtype=np.int32)
    ids.tofile(tmp_path / "ids.bin")
    chunks = CorpusChunks(tmp_path / "ids.bin", L, np.ones(L, dtype=np.int64), L, window=W, sample=0, seed=3)
    (item,) = list(chunks)
    assert torch.equal(item["tokens"], torch.arange(L))  # sample=0 keeps every word
    drawn = np.bincount(item["window"].numpy(), minlength=W + 1)
    assert drawn[0] == 0 and len(drawn) == W + 1  # never 0, never above W
    assert chisquare(drawn[1:]).pvalue > 1e-3  # uniform on 1..W

    recorder = PairRecorder(L)
    train_chunk(recorder, item["tokens"], item["sentence"], item["window"], W, 0.01, 0.01, batch_centres=4096)
    centre = torch.cat([c for c, _ in recorder.pairs])
    context = torch.cat([o for _, o in recorder.pairs])
    reference = skipgram_pairs(item["tokens"], item["sentence"], item["window"])
    assert sorted(zip(centre.tolist(), context.tolist())) == sorted(zip(*(t.tolist() for t in reference)))
    inner = (centre >= W) & (centre < L - W)
    distance = (context - centre)[inner].abs()
    per_side = np.bincount(distance.numpy(), minlength=W + 1)[1:]  # (W,) pairs at distance 1..W
    expected = np.arange(W, 0, -1, dtype=float)  # W - d + 1
    assert chisquare(per_side, expected / expected.sum() * per_side.sum()).pvalue > 1e-3
    assert chisquare(per_side).pvalue < 1e-12  # a fixed window: every distance equally often
    off_by_one = np.arange(W - 1, -1, -1, dtype=float) + 0.5  # b ~ U{0..W-1}-like weights
    assert chisquare(per_side, off_by_one / off_by_one.sum() * per_side.sum()).pvalue < 1e-12
    # left and right contexts alike
    signed = (context - centre)[inner]
    assert abs(int((signed > 0).sum()) - int((signed < 0).sum())) < 4 * float(len(signed)) ** 0.5


@pytest.mark.parametrize("window_pairs", ["in_turn", "at_once"])
def test_in_turn_is_word2vecs_sequential_sgd_within_a_window(window_pairs):
    """One word, so the noise word always equals the predicted word and is skipped (as in
    word2vec): the updates are deterministic. With one window per minibatch, ``in_turn`` must be
    word2vec's sequential SGD exactly (each pair: g = 1 - sig(v.u); u += lr g v; v += lr g u_old,
    windows in order, contexts left to right), so the window with two contexts sees the first
    one's update of u; ``at_once`` takes both of that window's steps from the same u, and differs."""
    D, lr = 4, 0.5
    tokens = sentence = torch.zeros(3, dtype=torch.long)  # one sentence of the one word
    window = torch.ones(3, dtype=torch.long)
    net = SkipGram(torch.tensor([10.0]), dim=D, negative=2, step_cap=False)
    with torch.no_grad():
        net.centre.copy_(torch.tensor([[0.3, -0.2, 0.5, 0.1]]))
        net.context.copy_(torch.tensor([[0.4, 0.1, -0.3, 0.2]]))
    v, u = net.centre[0].detach().clone().double(), net.context[0].detach().clone().double()
    for _ in range(4):  # the pairs (centre, context position) (0, 1), (1, 0), (1, 2), (2, 1): all word 0 -> 0
        g = 1 - torch.sigmoid(v @ u)
        u, v = u + lr * g * v, v + lr * g * u
    stats = train_chunk(net, tokens, sentence, window, 1, lr, lr, batch_centres=1, window_pairs=window_pairs)
    assert stats["pairs"] == 4
    error = float((net.centre[0].double() - v).abs().max() + (net.context[0].double() - u).abs().max())
    if window_pairs == "in_turn":
        assert error < 1e-6
    else:
        assert error > 1e-3


@pytest.mark.parametrize("window_pairs", ["in_turn", "at_once"])
def test_the_minibatch_path_reads_no_count_back_per_call(window_pairs):
    """On a GPU reading a value back (``int(t)``, ``.item()``) holds the host until the queue drains;
    reading once per sgd_windows call (the pair count: 10 a minibatch in turn, as
    benchmarks/skipgram_ops.py counts), and the loss of the first minibatch once per call too, would stall it. A
    chunk reads three values at its end: the loss, its pairs and all pairs. Counted on the CPU, where
    the same operations run."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Reads(TorchDispatchMode):
        count, uniques = 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Reads.count += func.overloadpacket.__name__ == "_local_scalar_dense"
            Reads.uniques += "unique" in func.overloadpacket.__name__  # its size is read back too
            return func(*args, **(kwargs or {}))

    g = torch.Generator().manual_seed(0)
    n = 3000
    tokens = torch.randint(0, 5000, (n,), generator=g)  # a vocabulary large enough for the sparse step
    sentence = torch.cumsum(torch.rand(n, generator=g) < 0.05, 0)
    window = torch.randint(1, 6, (n,), generator=g)
    net = SkipGram(torch.full((5000,), 10), dim=8, objective="negative_sampling")
    net.sync_free_rows = True  # the step cap's rows by a sort: no torch.unique either
    with torch.no_grad(), Reads():
        stats = train_chunk(net, tokens, sentence, window, 5, 0.01, 0.001, batch_centres=500, seed=0,
                            window_pairs=window_pairs)
    assert stats["pairs"] == len(skipgram_pairs(tokens, sentence, window)[0])  # 6 minibatches, counted right
    assert Reads.count == 3 and Reads.uniques == 0, (Reads.count, Reads.uniques)
