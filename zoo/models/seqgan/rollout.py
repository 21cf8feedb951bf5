"""Monte Carlo rollouts and SeqGAN's action values (Xu's softmax lecture notes, "Seq-GAN algorithm"):

    Q(Y_{1:t-1}, y_t) = 1/N sum_n D(Y^n_{1:T}),  Y^n in MC^beta(Y_{1:t}; N)   for t < T
    Q(Y_{1:T-1}, y_T) = D(Y_{1:T})                                           for t = T

where MC^beta completes the prefix Y_{1:t} with the rollout network beta (a delayed copy of G).

``batched_rollouts`` does all (T-1) prefixes x N rollouts x B sequences in one generation: rows
are ordered by prefix length t, so at sampling position p exactly the rows with t <= p are
active and they form a contiguous block ``[:p*N*B]``. The prefix states come from one
teacher-forced pass over the B sequences (not one per rollout), and each position runs one LSTM
step and one output layer over the active block: T-1 large calls instead of N*(T-1)*T small ones,
and exactly the minimal number of sampled tokens, N*B*T*(T-1)/2. D scores every completion in one
(chunked) call. ``looped_rollouts`` is the paper's per-time-step loop (for n, for t: teacher-force
the prefix, sample the rest, call D), kept as the reference the batched one is tested and timed
against: with the same ``uniforms`` both return the same completions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from zoo.models.seqgan.nets import LSTMLM, Discriminator, sample_next


def rollout_uniforms(
    B: int, T: int, n: int, generator: torch.Generator | None = None, device: torch.device | None = None
) -> Tensor:
    """Noise for all rollouts: (T-1, N, B, T); entry [t-1, n, b, p] samples position p of rollout n
    of sequence b from prefix length t (entries p < t are unused)."""
    draw_on = generator.device if generator is not None else device  # a generator draws on its own device
    return torch.rand(T - 1, n, B, T, generator=generator, device=draw_on).to(device or draw_on)


@torch.no_grad()
def batched_rollouts(
    net: LSTMLM,
    seqs: Tensor,
    n: int,
    uniforms: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Complete every prefix Y_{1:t} (t = 1..T-1) of every sequence n times.

    seqs (B, T) -> completions (T-1, N, B, T); completions[t-1, :, :, :t] == seqs[:, :t].
    """
    B, T = seqs.shape
    if uniforms is None:
        uniforms = rollout_uniforms(B, T, n, generator, seqs.device)
    R = (T - 1) * n * B
    h_tf, c_tf = net.prefix_states(seqs)  # (T, B, H): state after reading start, y_1..y_t at index t
    H = h_tf.shape[-1]
    # block t (t = 1..T-1) starts from the prefix state of length t, repeated for its N rollouts
    h = h_tf[1:].unsqueeze(1).expand(T - 1, n, B, H).reshape(R, H).clone()  # (R, H)
    c = c_tf[1:].unsqueeze(1).expand(T - 1, n, B, H).reshape(R, H).clone()
    out = seqs.unsqueeze(0).unsqueeze(0).expand(T - 1, n, B, T).reshape(R, T).clone()  # (R, T)
    u = uniforms.reshape(R, T)
    for p in range(1, T):  # 0-based position to sample; active rows: prefix length t <= p
        m = p * n * B
        tok = sample_next(net.head, h[:m], u[:m, p])  # (m,)
        out[:m, p] = tok
        if p + 1 < T:
            h[:m], c[:m] = net.step(tok, (h[:m], c[:m]))
    return out.view(T - 1, n, B, T)


@torch.no_grad()
def looped_rollouts(
    net: LSTMLM,
    seqs: Tensor,
    n: int,
    uniforms: Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The same completions, one (rollout, prefix length) at a time like the paper's code."""
    B, T = seqs.shape
    if uniforms is None:
        uniforms = rollout_uniforms(B, T, n, generator, seqs.device)
    out = seqs.unsqueeze(0).unsqueeze(0).repeat(T - 1, n, 1, 1)  # (T-1, N, B, T)
    for i in range(n):
        for t in range(1, T):
            # teacher-force start, y_1..y_t in one LSTM call, then sample positions t..T-1
            _, (h, c) = net.lstm(net.embed(torch.cat([net.inputs(seqs)[:, :t], seqs[:, t - 1 : t]], 1)))
            state = (h.squeeze(0), c.squeeze(0))
            for p in range(t, T):
                tok = sample_next(net.head, state[0], uniforms[t - 1, i, :, p])
                out[t - 1, i, :, p] = tok
                if p + 1 < T:
                    state = net.step(tok, state)
    return out


@torch.no_grad()
def rollout_rewards(
    net: LSTMLM,
    disc: Discriminator,
    seqs: Tensor,
    n: int,
    batched: bool = True,
    uniforms: Tensor | None = None,
    generator: torch.Generator | None = None,
    chunk: int = 4096,
) -> Tensor:
    """Q (B, T): mean D over n rollouts of each prefix for t < T, D of the sequence itself at t = T."""
    B, T = seqs.shape
    was_training = disc.training
    disc.eval()  # D scores without dropout
    try:
        if batched:
            done = batched_rollouts(net, seqs, n, uniforms, generator)  # (T-1, N, B, T)
            d = disc.prob_real(done.reshape(-1, T), chunk).view(T - 1, n, B)
        else:
            done = looped_rollouts(net, seqs, n, uniforms, generator)
            # (T-1, N, B): one D call per (prefix, rollout)
            d = torch.stack(
                [torch.stack([disc.prob_real(done[t, i], chunk) for i in range(n)]) for t in range(T - 1)]
            )
        q = d.mean(1).transpose(0, 1)  # (B, T-1)
        return torch.cat([q, disc.prob_real(seqs, chunk).unsqueeze(1)], dim=1)  # (B, T)
    finally:
        disc.train(was_training)


@torch.no_grad()
def update_rollout_net(rollout: LSTMLM, gen: LSTMLM, keep: float) -> None:
    """beta <- keep * beta + (1 - keep) * theta (the paper keeps 0.8 of the old rollout weights)."""
    for pb, pg in zip(rollout.parameters(), gen.parameters()):
        pb.mul_(keep).add_(pg.detach(), alpha=1 - keep)
