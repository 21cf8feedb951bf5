"""Decoding (greedy / beam / stochastic beam search through `zoo.estimators.beam`) and the
attention-localisation metric.

The registry's searches take a step function ``step_fn(prefixes, state) -> (logits, state)`` and
reorder every tensor of ``state`` along dim 0 with the beams, so the LSTM state *and* the image
features ride in the state tuple (h, c, feats, pfeats): row r of each always belongs to beam r.
Beam search there uses integer (floor) division for beam indices, lets finished beams carry on
with <pad> at log-prob 0 and needs no beam to finish (a caption simply ends at max_len).

Attention at decoding time: soft -> alpha_t; hard -> the argmax location (one-hot) or the expected
context alpha_t (`hard_decode`), both deterministic. The per-word attention of a generated caption
is recovered afterwards by teacher forcing it (one batched pass, deterministic in eval mode).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.estimators import BeamResult, beam_search, stochastic_beam_search

from .nets import AttentionDecoder


def decode_weights(e: Tensor, mode: str) -> Tensor:
    """Attention weights used at test time from logits e (N, L): 'soft'/'expected' -> softmax,
    'argmax' -> one-hot of the most probable location."""
    if mode == "argmax":
        return F.one_hot(e.argmax(-1), e.shape[-1]).to(e.dtype)
    return torch.softmax(e, dim=-1)


def make_step_fn(decoder: AttentionDecoder, mode: str):
    def step(prefixes: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        h, c, feats, pfeats = state
        w = decode_weights(decoder.attend(pfeats, h), mode)  # (N, L)
        logits, (h, c) = decoder.advance(feats, w, prefixes[:, -1], (h, c))
        return logits, (h, c, feats, pfeats)

    return step


def generate(decoder: AttentionDecoder, feats: Tensor, mode: str, start: int, end: int, pad: int,
             max_len: int, k: int = 1, length_norm: float = 0.0, stochastic: bool = False,
             generator: torch.Generator | None = None) -> BeamResult:
    """k captions per image (feats (B, L, D)): beam search (k=1: greedy) or stochastic beam search
    (k distinct samples without replacement, with their log-probs)."""
    h, c = decoder.init_state(feats)
    state = (h, c, feats, decoder.project(feats))
    kw = {"batch_size": feats.shape[0], "k": k, "max_len": max_len, "start_token": start, "end_token": end,
          "pad_token": pad, "state": state, "state_dim": 0}
    step = make_step_fn(decoder, mode)
    if stochastic:
        return stochastic_beam_search(step, generator=generator, **kw)
    return beam_search(step, length_penalty=length_norm, **kw)


def caption_mask(seqs: Tensor, end: int) -> Tensor:
    """(N, T) True for the generated words, excluding <end> and everything after it."""
    ended = (seqs == end).long().cumsum(-1) > 0
    return ~ended


@torch.no_grad()
def attention_of(decoder: AttentionDecoder, feats: Tensor, seqs: Tensor, mode: str,
                 start: int) -> tuple[Tensor, Tensor]:
    """Re-run the decoder on generated seqs (N, T) with teacher forcing. Returns the attention
    distributions alpha (N, T, L) and the weights actually used (N, T, L) for each generated token."""
    tokens = torch.cat([torch.full_like(seqs[:, :1], start), seqs[:, :-1]], 1)  # what each step was fed
    _, e, used = decoder.unroll(feats, tokens, lambda t, e: decode_weights(e, mode))
    return torch.softmax(e, -1), used


def grid_masks(obj_masks: Tensor, grid: tuple[int, int]) -> Tensor:
    """Object pixel masks (B, K, H, W) -> (B, K, h*w): 1 where a grid cell overlaps the object."""
    return F.adaptive_max_pool2d(obj_masks.float(), grid).flatten(2)


def localisation(weights: Tensor, seqs: Tensor, valid: Tensor, obj_words: Tensor, obj_masks: Tensor,
                 grid: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """Attention mass on the named object, for every generated colour/shape word whose object is in the scene.

    weights (B, T, L): attention used for each generated word (soft: alpha; hard: one-hot location);
    seqs (B, T) generated tokens; valid (B, T) real words; obj_words (B, K, 2) (colour id, shape id)
    per object, -1 = no object; obj_masks (B, K, H, W).
    A word matching several objects (two red shapes) scores on the union of their masks.
    Returns (hits (n,), chance (n,)) for the n counted words: attention mass on the object(s) and the
    mass a uniform attention would put there (the fraction of grid cells the object(s) cover).
    """
    present = obj_words[:, None, :, 0] >= 0  # (B, 1, K)
    match = (seqs[:, :, None, None] == obj_words[:, None]).any(-1) & present  # (B, T, K)
    cells = grid_masks(obj_masks, grid)  # (B, K, L)
    union = (match.unsqueeze(-1).float() * cells.unsqueeze(1)).amax(2)  # (B, T, L)
    counted = valid & match.any(-1)  # (B, T)
    hits = (weights * union).sum(-1)[counted]
    chance = union.mean(-1)[counted]
    return hits, chance


def attention_stats(alpha: Tensor, used: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Per generated word: entropy of alpha (nats) and whether the attended location (argmax of the
    weights used) moved since the previous word. Returns (entropy (n,), moved (m,))."""
    ent = -(alpha * alpha.clamp_min(1e-12).log()).sum(-1)[valid]
    where = used.argmax(-1)  # (B, T)
    pair = valid[:, 1:] & valid[:, :-1]
    moved = (where[:, 1:] != where[:, :-1])[pair].float()
    return ent, moved
