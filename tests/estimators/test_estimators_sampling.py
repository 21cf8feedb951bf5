"""Gumbel sampling, Gumbel-top-k, truncated Gumbels, stochastic and deterministic beam search
against exact probabilities computed by enumeration. Statistical tests use fixed seeds and
reject at p < 0.001 (chi-square / Kolmogorov-Smirnov) or 4.5 standard errors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from zoo.estimators import (
    beam_search,
    gumbel_max_sample,
    gumbel_topk,
    gumbel_with_maximum,
    stochastic_beam_search,
    truncated_gumbel,
)

N = 20000


def chi2_p(counts: np.ndarray, probs: np.ndarray) -> float:
    probs = np.asarray(probs, dtype=np.float64)
    expected = probs / probs.sum() * counts.sum()
    return float(stats.chisquare(counts, expected).pvalue)


def test_gumbel_max_matches_softmax():
    g = torch.Generator().manual_seed(0)
    logits = torch.tensor([0.5, -1.0, 2.0, 0.0, 1.0])
    idx = gumbel_max_sample(logits, n=N, generator=g)
    counts = np.bincount(idx.numpy(), minlength=5)
    assert chi2_p(counts, logits.softmax(-1).numpy()) > 1e-3


def test_gumbel_topk_ordered_pairs_match_sampling_without_replacement():
    g = torch.Generator().manual_seed(1)
    logits = torch.tensor([1.0, 0.2, -0.5, 0.7])
    idx, keys = gumbel_topk(logits.expand(N, 4), k=2, generator=g)
    assert (keys[:, 0] >= keys[:, 1]).all() and (idx[:, 0] != idx[:, 1]).all()
    p = logits.softmax(-1).double().numpy()
    pairs = [(i, j) for i in range(4) for j in range(4) if i != j]
    exact = np.array([p[i] * p[j] / (1 - p[i]) for i, j in pairs])  # P(first i, then j)
    code = (idx[:, 0] * 4 + idx[:, 1]).numpy()
    counts = np.array([(code == i * 4 + j).sum() for i, j in pairs])
    assert chi2_p(counts, exact) > 1e-3


def test_truncated_gumbel_distribution():
    g = torch.Generator().manual_seed(2)
    phi, T = 0.7, 0.3
    x = truncated_gumbel(torch.full((N,), phi, dtype=torch.float64), T, generator=g).numpy()
    assert (x <= T + 1e-12).all()
    cdf = lambda v: np.exp(np.exp(phi - T) - np.exp(phi - np.minimum(v, T)))  # noqa: E731 (Xu's softmax lecture notes)
    assert stats.kstest(x, cdf).pvalue > 1e-3
    far = truncated_gumbel(torch.tensor([50.0, -50.0]), torch.tensor([-40.0, 60.0]))
    assert torch.isfinite(far).all() and (far <= torch.tensor([-40.0, 60.0])).all()


def test_gumbel_with_maximum():
    g = torch.Generator().manual_seed(3)
    phi = torch.tensor([0.0, 1.0, -1.0]).expand(N, 3)
    T = torch.randn(N, generator=g) * 5
    shifted, arg = gumbel_with_maximum(phi, T, generator=g)
    assert torch.allclose(shifted.max(-1).values, T, atol=1e-5)
    assert torch.equal(shifted.gather(1, arg[:, None])[:, 0], T)  # the argmax is kept (ties only by rounding)
    counts = np.bincount(arg.numpy(), minlength=3)
    assert chi2_p(counts, phi[0].softmax(-1).numpy()) > 1e-3


# ---- a tiny autoregressive model: vocab 3, length 3, fixed random log-prob table ----------------
V, L, START = 3, 3, 0


def make_model(seed: int = 0, scale: float = 1.0):
    gen = torch.Generator().manual_seed(seed)
    tables = [torch.log_softmax(torch.randn(*(V,) * (t + 1), generator=gen) * scale, -1) for t in range(L)]

    def step_fn(prefixes: torch.Tensor, state):
        t = prefixes.shape[1] - 1  # tokens after the start token
        table = tables[t]
        for j in range(t):
            tok = prefixes[:, 1 + j]
            table = table[tok] if j == 0 else table[torch.arange(len(prefixes)), tok]
        return table.expand(len(prefixes), V) if t == 0 else table, state

    def logp(seq) -> float:
        return float(sum(tables[t][tuple(seq[: t + 1])] for t in range(len(seq))))

    return step_fn, logp


def test_step_fn_fixture_is_normalised():
    _, logp = make_model()
    total = sum(math.exp(logp(s)) for s in itertools.product(range(V), repeat=L))
    assert abs(total - 1) < 1e-5


def inclusion_probs(p: np.ndarray, k: int) -> np.ndarray:
    """P(item in a without-replacement sample of size k), by enumerating ordered k-tuples."""
    out = np.zeros(len(p))
    for tup in itertools.permutations(range(len(p)), k):
        prob, left = 1.0, 1.0
        for i in tup:
            prob *= p[i] / left
            left -= p[i]
        out[list(tup)] += prob
    return out


def test_stochastic_beam_search_samples_without_replacement():
    torch.manual_seed(4)
    step_fn, logp = make_model(seed=4, scale=1.2)
    seqs = list(itertools.product(range(V), repeat=L))
    p = np.array([math.exp(logp(s)) for s in seqs])
    k = 3
    res = stochastic_beam_search(step_fn, batch_size=N, k=k, max_len=L, start_token=START)
    assert res.sequences.shape == (N, k, L)
    code = (res.sequences * torch.tensor([V * V, V, 1])).sum(-1).numpy()  # (N, k) sequence ids
    assert (np.sort(code, 1)[:, 1:] != np.sort(code, 1)[:, :-1]).all()  # k distinct per element
    assert (res.keys[:, :-1] >= res.keys[:, 1:]).all()
    # log-probs are the exact sequence log-probs
    exact_lp = torch.tensor([logp(seqs[c]) for c in code[:50, 0]])
    assert torch.allclose(res.log_probs[:50, 0], exact_lp, atol=1e-5)
    # first draw ~ p; inclusion frequencies ~ exact without-replacement inclusion probabilities
    assert chi2_p(np.bincount(code[:, 0], minlength=len(p)), p) > 1e-3
    incl = np.array([(code == i).any(1).mean() for i in range(len(p))])
    exact = inclusion_probs(p, k)
    se = np.sqrt(exact * (1 - exact) / N)
    assert (np.abs(incl - exact) < 4.5 * se + 1e-4).all(), np.abs(incl - exact) / se
    # the largest key of a full tree is Gumbel(log sum p = 0): mean = Euler's gamma
    assert abs(float(res.keys[:, 0].mean()) - 0.5772) < 4.5 * math.pi / math.sqrt(6 * N)


def test_stochastic_beam_search_with_end_token():
    """Token 2 ends a sequence; complete sequences have length 1..3; first draws ~ their probabilities."""
    torch.manual_seed(5)
    step_fn, logp = make_model(seed=5)
    END = 2
    complete = [s for n in range(1, L + 1) for s in itertools.product(range(V), repeat=n)
                if (s[-1] == END or n == L) and END not in s[:-1]]
    p = np.array([math.exp(logp(s)) for s in complete])
    assert abs(p.sum() - 1) < 1e-5
    res = stochastic_beam_search(step_fn, batch_size=N, k=2, max_len=L, start_token=START, end_token=END)
    index = {s: i for i, s in enumerate(complete)}
    seqs, lens = res.sequences.tolist(), res.lengths.tolist()
    first = [index[tuple(row[0][: n[0]])] for row, n in zip(seqs, lens)]
    assert chi2_p(np.bincount(first, minlength=len(p)), p) > 1e-3
    for row, n in zip(res.sequences[:200].reshape(-1, L).tolist(), res.lengths[:200].reshape(-1).tolist()):
        assert all(tok == END for tok in row[n:])  # padded with the end token after finishing
    second = [index[tuple(row[1][: n[1]])] for row, n in zip(seqs, lens)]
    assert all(a != b for a, b in zip(first, second))


def test_beam_search_finds_true_top_k():
    step_fn, logp = make_model(seed=6)
    seqs = sorted(itertools.product(range(V), repeat=L), key=logp, reverse=True)
    k = V * V  # with k >= V^(L-1) every prefix survives, so beam search is exact
    res = beam_search(step_fn, batch_size=2, k=k, max_len=L, start_token=START)
    got = [tuple(s) for s in res.sequences[0].tolist()]
    assert got == seqs[:k]
    assert torch.allclose(res.log_probs[1], torch.tensor([logp(s) for s in seqs[:k]]), atol=1e-5)


def test_beam_beats_greedy_on_a_trap():
    """Greedy takes the likelier first token (0.6) whose continuations are flat; beam width 2 finds
    the sequence through the 0.4 branch whose continuation is near certain."""
    first = torch.tensor([0.6, 0.4]).log()
    second = torch.tensor([[0.5, 0.5], [0.02, 0.98]]).log()

    def step_fn(prefixes, state):
        if prefixes.shape[1] == 1:
            return first.expand(len(prefixes), 2), state
        return second[prefixes[:, 1]], state

    greedy = beam_search(step_fn, 1, k=1, max_len=2, start_token=0)
    beam = beam_search(step_fn, 1, k=2, max_len=2, start_token=0)
    assert greedy.sequences[0, 0].tolist() == [0, 0]
    assert beam.sequences[0, 0].tolist() == [1, 1]
    assert abs(float(beam.log_probs[0, 0]) - math.log(0.4 * 0.98)) < 1e-5


def test_beam_search_end_token_and_length_penalty():
    """No beam ever finishes (end token impossible) -> no crash; all finish at once -> early stop."""
    never = lambda pre, st: (torch.tensor([0.0, 0.0, -float("inf")]).expand(len(pre), 3), st)  # noqa: E731
    res = beam_search(never, 3, k=2, max_len=4, start_token=0, end_token=2)
    assert res.sequences.shape == (3, 2, 4) and (res.lengths == 4).all()
    always = lambda pre, st: (torch.tensor([-5.0, -5.0, 0.0]).expand(len(pre), 3), st)  # noqa: E731
    res = beam_search(always, 2, k=3, max_len=6, start_token=0, end_token=2)
    assert res.sequences.shape[-1] < 6  # stopped once every beam had finished
    assert res.sequences[0, 0, 0].item() == 2 and res.lengths[0, 0].item() == 1


def test_length_penalty_reranks_a_longer_sequence_first():
    """Tokens {0, A=1, END=2}. First step: A 0.451, END 0.549; after A: END 0.9. The beams are [END]
    (log p = log 0.549 = -0.600) and [A, END] (log 0.451 + log 0.9 = -0.902): by log p the short one
    wins; by log p / length (alpha = 1) the long one does (-0.451 > -0.600)."""
    def step_fn(prefixes, state):
        probs = [1e-9, 0.451, 0.549] if prefixes.shape[1] == 1 else [1e-9, 0.1, 0.9]
        return torch.tensor(probs).log().expand(len(prefixes), 3), state

    plain = beam_search(step_fn, 1, k=2, max_len=3, start_token=0, end_token=2)
    normed = beam_search(step_fn, 1, k=2, max_len=3, start_token=0, end_token=2, length_penalty=1.0)
    assert plain.sequences[0, 0, :1].tolist() == [2] and plain.lengths[0].tolist() == [1, 2]
    assert normed.sequences[0, 0].tolist() == [1, 2] and normed.lengths[0].tolist() == [2, 1]
    long_lp = math.log(0.451) + math.log(0.9)
    assert float(normed.log_probs[0, 0]) == pytest.approx(long_lp, abs=1e-5)
    assert normed.scores[0].tolist() == pytest.approx([long_lp / 2, math.log(0.549)], abs=1e-5)


@pytest.mark.parametrize("stochastic", [True, False])
def test_state_is_reordered_with_the_beams(stochastic):
    """A step function that reads only its recurrent state (like an LSTM, state_dim=1 as in nn.LSTM's
    (h, c)) gives the same result as one that reads the prefixes."""
    step_fn, _ = make_model(seed=7)
    code_table = {}

    def stateful(prefixes, state):
        h, c = state  # (1, N, 1) each: c encodes the prefix before the last token
        code = c[0, :, 0].long() * (V + 1) + prefixes[:, -1] + 1  # now includes the last token
        logp, _ = step_fn(prefixes, None)
        for cd, row in zip(code.tolist(), logp):
            code_table.setdefault(cd, row)
        out = torch.stack([code_table[cd] for cd in code.tolist()])  # looked up from the state only
        new_c = code.double().view(1, -1, 1)
        return out, (h, new_c)

    B, k = 4, 3
    state = (torch.zeros(1, B, 1), torch.zeros(1, B, 1, dtype=torch.float64))
    search = stochastic_beam_search if stochastic else beam_search
    kw = {"generator": torch.Generator().manual_seed(8)} if stochastic else {}
    a = search(stateful, B, k, L, START, state=state, state_dim=1, **kw)
    kw = {"generator": torch.Generator().manual_seed(8)} if stochastic else {}
    b = search(step_fn, B, k, L, START, **kw)
    assert torch.equal(a.sequences, b.sequences)
    assert torch.allclose(a.scores, b.scores)
