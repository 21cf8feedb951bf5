"""SeqGAN's inference API (a mixin of ``SeqGAN``) and ``python -m zoo.predict`` for it.

    model = zoo.load("seqgan-oracle-small")
    seqs = model.generate(5, seed=0)      # (5, T) token ids on the model's device (text models: 5 strings)
    model.nll(seqs)                       # (5,) -log p(sequence) under G, nats (per_token=True: per token)

Text models count the words and the [EOS] that ends them, as the training and test NLL do (not the
[PAD]s after it); a word G's vocabulary lacks is [UNK], as the tokenizer read the training text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from zoo.core.inputs import check_count, generator, resolve_seed
from zoo.errors import UserError
from zoo.estimators import stochastic_beam_search
from zoo.schema import between, choice, validate

# predict's bounds on n and sbs's k: the recipes evaluate on 10,000 samples; a beam is a printed line
MAX_SAMPLES = 100_000
MAX_BEAMS = 100


class SeqGANAPI:
    """Needs ``gen``, ``seq_len``, ``text``, ``data_info``, ``sample_sequences`` and ``sentences``."""

    @torch.no_grad()
    def generate(self, n: int, seed: int | None = None) -> Tensor | list[str]:
        """``n`` ancestral samples of the generator G: token ids (n, T) on the model's device, or for a text
        model n sentences (words up to [EOS]). ``seed``: the same samples on every run (None: drawn from torch's
        global RNG)."""
        check_count(n)
        seqs = self.sample_sequences(n, resolve_seed(seed))
        return self.sentences(seqs) if self.text else seqs

    @torch.no_grad()
    def nll(self, sequences: Tensor | list[str], per_token: bool = False) -> Tensor:
        """-log p(sequence) under G of each sequence, in nats: (B,). ``sequences``: token ids (B, T) (T the
        model's length), or for a text model a list of sentences. ``per_token``: divided by the number of
        tokens counted (T; text: the words and [EOS])."""
        seqs = self.token_ids(sequences)
        log_p = self.gen.log_prob(seqs)  # (B, T)
        counted = torch.ones_like(log_p, dtype=torch.bool)
        if self.text:  # the words up to and with [EOS], as the test NLL counts them
            eos = (seqs == self.data_info["eos_token"]).long()
            counted = (torch.cumsum(eos, dim=1) - eos) == 0
        total = -(log_p * counted).sum(1)
        return total / counted.sum(1) if per_token else total

    def token_ids(self, sequences: Tensor | list[str]) -> Tensor:
        """Sequences as G reads them: (B, T) int64 on the model's device (sentences are encoded like the
        training text: words, [EOS], [PAD]s)."""
        T, V = self.seq_len, self.gen.vocab_size
        if isinstance(sequences, str):
            sequences = [sequences]
        if isinstance(sequences, (list, tuple)) and sequences and all(isinstance(s, str) for s in sequences):
            if not self.text:
                raise UserError(f"this SeqGAN models token ids, not text: give a tensor (B, {T}) of ids in [0, {V})")
            return self.encode_sentences(list(sequences))
        if not isinstance(sequences, Tensor) or sequences.dim() != 2 or sequences.shape[1] != T \
                or not len(sequences) or sequences.is_floating_point() or sequences.is_complex():
            got = tuple(sequences.shape) if isinstance(sequences, Tensor) else type(sequences).__name__
            what = "a list of sentences, or " if self.text else ""
            raise UserError(f"sequences must be {what}a tensor of token ids (B, {T}), got {got}")
        if int(sequences.min()) < 0 or int(sequences.max()) >= V:
            raise UserError(f"token ids must be in [0, {V}) (the vocabulary), got {int(sequences.min())}.."
                            f"{int(sequences.max())}")
        return sequences.long().to(self.device)

    def encode_sentences(self, lines: list[str]) -> Tensor:
        d = self.data_info
        index = {w: i for i, w in enumerate(d["vocab"])}
        unk = index.get("[UNK]", d["pad_token"])
        out = torch.full((len(lines), self.seq_len), d["pad_token"], dtype=torch.long)  # cpu: filled, then moved
        for i, line in enumerate(lines):
            ids = [index.get(w, unk) for w in line.split()][: self.seq_len - 1] + [d["eos_token"]]
            out[i, : len(ids)] = torch.tensor(ids)  # cpu: a row of the cpu table, moved below
        return out.to(self.device)

    @torch.no_grad()
    def beam_samples(self, k: int, seed: int | None = None) -> tuple[Tensor, Tensor]:
        """``k`` distinct sequences by stochastic beam search (Kool et al. 2019): (ids (k, T), log p (k,))."""
        gen, d = self.gen, self.data_info
        check_count(k, "k")

        def step_fn(prefixes: Tensor, state: Any) -> tuple[Tensor, Any]:
            state = gen.start(prefixes.shape[0]) if state is None else gen.step(prefixes[:, -1], state)
            return gen.head(state[0]), state

        g = generator(seed, gen.head.weight.device)
        res = stochastic_beam_search(step_fn, 1, k, self.seq_len, gen.start_token, end_token=d.get("eos_token"),
                                     pad_token=d.get("pad_token"), generator=g)
        return res.sequences[0], res.log_probs[0]


@dataclass
class PredictOptions:
    """``python -m zoo.predict seqgan-oracle-small key=value``."""

    n: int = between(10, 1, MAX_SAMPLES, why="the recipes evaluate on 10,000")  # sequences to sample
    method: str = choice("sample", ["sample", "sbs"])  # sample (ancestral) | sbs (distinct ones by stochastic
    # beam search)
    k: int = between(5, 1, MAX_BEAMS, why="a printed line each")  # beams of method=sbs
    seed: int = 0  # seed of the draws


def predict_cli(model: Any, inputs: list[str], options: dict) -> None:
    """Print generated sequences: ``n=10`` ancestral samples, or ``method=sbs k=5`` distinct ones by
    stochastic beam search (with their log-probabilities). ``seed=0``."""
    opts = validate(PredictOptions, options, "seqgan (zoo.predict)", what="option")
    if inputs:
        raise UserError(f"seqgan generates from nothing: drop the inputs {inputs} (options: n=, method=, k=, seed=)")
    if opts["method"] == "sample":
        out = model.generate(opts["n"], opts["seed"])
        for line in out if model.text else (" ".join(map(str, row)) for row in out.tolist()):
            print(line)
        return
    seqs, scores = model.beam_samples(opts["k"], opts["seed"])
    lines = model.sentences(seqs) if model.text else [" ".join(map(str, row)) for row in seqs.tolist()]
    # the beams come in order of their perturbed keys: shown most probable first
    for score, line in sorted(zip(scores.tolist(), lines), key=lambda sl: -sl[0]):
        print(f"{score:9.3f}  {line}")
