"""Batched Monte Carlo rollouts: same completions as the per-step loop, prefixes kept, right
distribution, reward shapes; the sampler and the rollout-network update."""

import pytest
import torch

from zoo.models.seqgan.nets import LSTMLM, Discriminator, sample_categorical
from zoo.models.seqgan.rollout import (
    batched_rollouts,
    looped_rollouts,
    rollout_rewards,
    rollout_uniforms,
    update_rollout_net,
)


def net(V=12, seed=0, dtype=torch.float64) -> LSTMLM:
    return LSTMLM(V, 6, 7, start_token=0).init_normal(1.0, torch.Generator().manual_seed(seed)).to(dtype)


def test_batched_equals_looped_under_matched_noise():
    g = net()
    seqs = g.sample(5, 9, generator=torch.Generator().manual_seed(1))
    u = rollout_uniforms(5, 9, 3, torch.Generator().manual_seed(2))
    a, b = batched_rollouts(g, seqs, 3, u), looped_rollouts(g, seqs, 3, u)
    assert a.shape == (8, 3, 5, 9)
    assert torch.equal(a, b)
    for t in range(1, 9):  # rollouts keep the prefix Y_{1:t} and fill in the rest
        assert torch.equal(a[t - 1, :, :, :t], seqs[:, :t].expand(3, 5, t))
    # a different noise draw gives different completions (the test above is not vacuous)
    assert not torch.equal(
        a, batched_rollouts(g, seqs, 3, rollout_uniforms(5, 9, 3, torch.Generator().manual_seed(3)))
    )


def test_rollout_completions_follow_the_rollout_network():
    """The first completed token after prefix length t is distributed as p(y_{t+1} | Y_{1:t}):
    chi-square test over 4,000 rollouts of one prefix (seeded; df = V - 1 = 11, reject above 35,
    p ~ 2e-4 under the null)."""
    V, T, N = 12, 5, 4000
    g = net(V)
    seqs = g.sample(1, T, generator=torch.Generator().manual_seed(4))
    done = batched_rollouts(g, seqs, N, generator=torch.Generator().manual_seed(5))  # (T-1, N, 1, T)
    t = 2
    with torch.no_grad():
        probs = torch.softmax(g(seqs)[0, t], -1)  # p(y_{t+1} | y_1..y_t)
    counts = torch.bincount(done[t - 1, :, 0, t], minlength=V).double()
    expected = probs * N
    keep = expected > 5
    chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum().item()
    assert chi2 < 35, chi2


def test_sample_categorical_is_exact():
    """Inverse-CDF sampling: on a fine grid of uniforms, each category gets a share equal to its
    probability (to the grid resolution), including zero-probability categories."""
    logits = torch.log(torch.tensor([[0.1, 0.0, 0.6, 0.3]]))
    u = (torch.arange(10000) + 0.5) / 10000
    idx = sample_categorical(logits.expand(10000, 4), u)
    share = torch.bincount(idx, minlength=4).double() / 10000
    assert torch.allclose(share, torch.tensor([0.1, 0.0, 0.6, 0.3], dtype=torch.float64), atol=2e-4)


def test_rewards_shape_range_and_last_column():
    g = net(V=20, dtype=torch.float32)
    disc = Discriminator(20, 6, emb_dim=8, filter_sizes=(1, 2, 3), num_filters=(4, 4, 4), dropout=0.5)
    seqs = g.sample(7, 6, generator=torch.Generator().manual_seed(0))
    q = rollout_rewards(g, disc, seqs, 5, generator=torch.Generator().manual_seed(1))
    assert q.shape == seqs.shape == (7, 6)  # one reward per sampled token
    assert ((q > 0) & (q < 1)).all()
    assert disc.training  # scored without dropout, mode restored
    disc.eval()
    assert torch.allclose(q[:, -1], disc.prob_real(seqs))  # t = T: D of the sequence itself
    # batched and looped give the same Q under the same noise
    u = rollout_uniforms(7, 6, 5, torch.Generator().manual_seed(2))
    q1 = rollout_rewards(g, disc, seqs, 5, batched=True, uniforms=u)
    q2 = rollout_rewards(g, disc, seqs, 5, batched=False, uniforms=u)
    assert torch.allclose(q1, q2, atol=1e-6)
    # Q for t < T is the mean of D over the rollouts of that prefix
    done = batched_rollouts(g, seqs, 5, u)
    manual = disc.prob_real(done[2].reshape(-1, 6)).view(5, 7).mean(0)
    assert torch.allclose(q1[:, 2], manual, atol=1e-6)


def test_update_rollout_net_mixes_weights():
    beta, theta = net(seed=0), net(seed=1)
    before = [p.clone() for p in beta.parameters()]
    update_rollout_net(beta, theta, keep=0.8)
    for b0, b1, t in zip(before, beta.parameters(), theta.parameters()):
        assert torch.allclose(b1, 0.8 * b0 + 0.2 * t)


@pytest.mark.parametrize("sizes", [(1, 2, 30), ()])
def test_discriminator_checks_filters(sizes):
    from zoo.errors import UserError

    with pytest.raises(UserError):
        Discriminator(10, 20, filter_sizes=sizes, num_filters=(1,) * len(sizes))


def test_discriminator_lookup_scoring_equals_the_convolutions():
    """prob_real's table lookup (embedding_bag over E W_i^T) == the conv forward to 1e-6 in probability
    (seed 0; measured 6e-8, and 1.2e-7 after the step and at the paper's sizes), and its cached tables
    follow D's weights after an optimiser step."""
    torch.manual_seed(0)
    disc = Discriminator(30, 9, emb_dim=8, filter_sizes=(1, 3, 9), num_filters=(4, 5, 6)).eval()
    seqs = torch.randint(0, 30, (50, 9))
    reference = torch.sigmoid(disc(seqs))
    assert disc.lookup_tables() is not None
    assert torch.allclose(disc.prob_real(seqs, chunk=16), reference, rtol=0, atol=1e-6)
    opt = torch.optim.SGD(disc.parameters(), lr=0.5)
    disc.train()
    torch.nn.functional.binary_cross_entropy_with_logits(disc(seqs), torch.ones(50)).backward()
    opt.step()
    disc.eval()
    moved = torch.sigmoid(disc(seqs))
    assert (moved - reference).abs().max() > 1e-3  # D changed ...
    assert torch.allclose(disc.prob_real(seqs), moved, rtol=0, atol=1e-6)  # ... and the lookup followed it
    assert disc.lookup_tables(max_elements=10) is None  # over budget: the convolutions are used
