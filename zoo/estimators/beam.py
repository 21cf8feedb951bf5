"""Beam search and stochastic beam search (Kool, van Hoof & Welling 2019; Xu's softmax lecture notes)
over a step function.

    step_fn(prefixes, state) -> (log_probs, new_state)
        prefixes:  LongTensor (N, t + 1), the start token then the t tokens chosen so far
        state:     None, a tensor, or a (nested) tuple/list of tensors with N along ``state_dim``
                   (e.g. an LSTM's (h, c) with state_dim=1; put encoder features in it too: every
                   tensor is reordered with the beams by index_select, so row r always matches prefix r)
        log_probs: (N, V) next-token log-probs (unnormalised logits are fine: log_softmax is applied)

Rows are grouped by batch element: row r belongs to batch element r // beams (beams = 1 at the first
step, then k). The initial ``state`` has N = batch_size. Everything is batched over batch x beams;
the only Python loop is over time steps.

Finished beams (those that emitted ``end_token``) continue with ``pad_token`` (default: end_token)
at log-prob 0, so their score is frozen and they still compete for a place in the beam.
Neither search needs a beam to finish: without an end token, or when none is emitted, the result
simply has max_len tokens.

Stochastic beam search: every node S of the sequence tree gets a Gumbel G_S ~ Gumbel(phi_S),
phi_S = log p(S), sampled top-down: children's Gumbels are drawn conditionally on their maximum
being the parent's G_S (``shift_gumbel_maximum``). Keeping the k largest keys at every level gives
k sequences *without replacement* from p, exactly as Gumbel-top-k over all complete sequences would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from zoo.estimators.gumbel import sample_gumbel, shift_gumbel_maximum

StepFn = Callable[[Tensor, Any], tuple[Tensor, Any]]
NEG_INF = float("-inf")


@dataclass
class BeamResult:
    sequences: Tensor  # (batch, k, L) tokens after the start token; pad after end; L <= max_len
    log_probs: Tensor  # (batch, k) log p(sequence) (-inf for empty slots when fewer than k exist)
    scores: Tensor  # (batch, k) ranking score, descending: Gumbel keys (stochastic) or normalised log-probs
    lengths: Tensor  # (batch, k) tokens up to and including the end token

    @property
    def keys(self) -> Tensor:
        """Alias of ``scores`` (the perturbed log-probs G_S of stochastic beam search)."""
        return self.scores


def _select(state: Any, rows: Tensor, dim: int) -> Any:
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.index_select(dim, rows.to(state.device))
    if isinstance(state, (tuple, list)):
        return type(state)(_select(s, rows, dim) for s in state)
    raise TypeError(f"beam search state must be tensors in tuples/lists, got {type(state).__name__}")


def _search(step_fn: StepFn, batch_size: int, k: int, max_len: int, start_token: int, end_token: int | None,
            pad_token: int | None, state: Any, state_dim: int, device: Any, stochastic: bool,
            generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    B = batch_size
    prefixes = torch.full((B, 1), start_token, dtype=torch.long, device=device)  # (N, 1)
    phi = torch.zeros(B, 1, device=device)  # (B, beams) log p(prefix)
    G = sample_gumbel(phi, generator) if stochastic else phi  # (B, beams) root keys ~ Gumbel(log p = 0)
    finished = torch.zeros(B, 1, dtype=torch.bool, device=device)  # (B, beams)
    lengths = torch.zeros(B, 1, dtype=torch.long, device=device)  # (B, beams)
    fill = end_token if pad_token is None else pad_token
    beams = 1
    for _ in range(max_len):
        logits, state = step_fn(prefixes, state)
        V = logits.shape[-1]
        logp = torch.log_softmax(logits.float(), dim=-1).view(B, beams, V).to(phi.device)  # (B, beams, V)
        if end_token is not None:  # a finished beam's only continuation is `fill`, at log-prob 0
            frozen = torch.full((V,), NEG_INF, device=phi.device)
            frozen[fill] = 0.0
            logp = torch.where(finished.unsqueeze(-1), frozen, logp)
        child_phi = phi.unsqueeze(-1) + logp  # (B, beams, V)
        if stochastic:
            valid = child_phi > NEG_INF  # (B, beams, V)
            alive = valid.any(-1)  # (B, beams): parents with at least one possible child
            g = child_phi + sample_gumbel(child_phi, generator)  # G_S' ~ Gumbel(phi_S')
            g = torch.where(alive.unsqueeze(-1), g, 0.0)  # dead parents: dummy values, masked below
            shifted = shift_gumbel_maximum(g, torch.where(alive, G, 0.0), dim=-1)  # max_S' = G_S
            scores = torch.where(valid, shifted, NEG_INF)
        else:
            scores = child_phi
        new_beams = min(k, beams * V)
        top, idx = scores.view(B, beams * V).topk(new_beams, dim=-1)  # (B, new_beams), sorted
        parent = torch.div(idx, V, rounding_mode="floor")  # (B, new_beams): each child's parent beam
        token = idx - parent * V  # (B, new_beams)
        phi = child_phi.view(B, beams * V).gather(1, idx)
        G = top if stochastic else phi
        rows = (torch.arange(B, device=idx.device).unsqueeze(1) * beams + parent).view(-1)  # (B * new_beams)
        prefixes = torch.cat([prefixes.index_select(0, rows.to(prefixes.device)),
                              token.view(-1, 1).to(prefixes.device)], dim=1)
        state = _select(state, rows, state_dim)
        was_finished = finished.gather(1, parent)
        lengths = lengths.gather(1, parent) + (~was_finished).long()
        finished = was_finished | (token == end_token) if end_token is not None else was_finished
        beams = new_beams
        if end_token is not None and bool((finished | (phi == NEG_INF)).all()):
            break
    seqs = prefixes[:, 1:].view(B, beams, -1)
    if beams < k:  # fewer than k distinct sequences exist: empty slots with -inf scores
        pad = k - beams
        seqs = torch.cat([seqs, seqs.new_full((B, pad, seqs.shape[-1]), fill if fill is not None else 0)], 1)
        phi = torch.cat([phi, phi.new_full((B, pad), NEG_INF)], 1)
        G = torch.cat([G, G.new_full((B, pad), NEG_INF)], 1)
        lengths = torch.cat([lengths, lengths.new_zeros((B, pad))], 1)
    return seqs, phi, G, lengths


@torch.no_grad()
def stochastic_beam_search(step_fn: StepFn, batch_size: int, k: int, max_len: int, start_token: int,
                           end_token: int | None = None, pad_token: int | None = None, state: Any = None,
                           state_dim: int = 0, device: Any = None,
                           generator: torch.Generator | None = None) -> BeamResult:
    """k distinct sequences per batch element, sampled without replacement from the model.

    ``result.keys`` (= scores) are the Gumbel-perturbed log-probs in descending order; the first
    sequence is an ordinary sample, the set of k is a sample without replacement. For an unbiased
    estimator over the set, run with k + 1 and use the last key as the threshold kappa
    (Kool et al. 2019, priority sampling). Runs without gradient: recompute log-probs with
    gradient by teacher forcing the returned sequences (one batched forward).
    """
    seqs, phi, G, lengths = _search(step_fn, batch_size, k, max_len, start_token, end_token, pad_token,
                                    state, state_dim, _device(state, device), True, generator)
    return BeamResult(seqs, phi, G, lengths)


@torch.no_grad()
def beam_search(step_fn: StepFn, batch_size: int, k: int, max_len: int, start_token: int,
                end_token: int | None = None, pad_token: int | None = None, state: Any = None,
                state_dim: int = 0, device: Any = None, length_penalty: float = 0.0) -> BeamResult:
    """Deterministic beam search keeping the k most probable prefixes (k=1: greedy decoding).

    ``length_penalty`` alpha > 0 re-ranks the final beams by log p / length^alpha (short sequences
    otherwise win because every token multiplies in a probability < 1); scores are descending.
    """
    seqs, phi, _, lengths = _search(step_fn, batch_size, k, max_len, start_token, end_token, pad_token,
                                    state, state_dim, _device(state, device), False, None)
    scores = phi
    if length_penalty:
        scores = phi / lengths.clamp_min(1).float() ** length_penalty
        scores, order = scores.sort(dim=1, descending=True)
        seqs = seqs.gather(1, order.unsqueeze(-1).expand_as(seqs))
        phi, lengths = phi.gather(1, order), lengths.gather(1, order)
    return BeamResult(seqs, phi, scores, lengths)


def _first_tensor(state: Any) -> Tensor | None:
    if isinstance(state, Tensor):
        return state
    if isinstance(state, (tuple, list)):
        for s in state:
            t = _first_tensor(s)
            if t is not None:
                return t
    return None


def _device(state: Any, device: Any) -> Any:
    """The explicit device, else the state's, else the CPU."""
    if device is not None:
        return torch.device(device)
    t = _first_tensor(state)
    return t.device if t is not None else torch.device("cpu")
