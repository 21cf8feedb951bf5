"""What SeqGAN measures and prints: validation / test metrics and ``python -m zoo.predict``.

- ``{val,test}/nll``: G's per-token NLL of held-out real sequences (teacher forcing).
- ``{val,test}/d_acc``: D's accuracy on held-out real sequences vs as many fresh G samples.
- oracle data: ``{val,test}/nll_oracle`` (NLL-oracle of ``eval_samples`` / ``test_samples`` G samples,
  a fixed seed); the test also reports ``test/nll_oracle_floor`` (the oracle's own samples) and
  ``test/nll_oracle_random`` (an untrained generator initialised like G) and, after adversarial
  training, ``test/nll_oracle_mle`` (G as it was when adversarial training started).
- text data: ``val/bleu3``; ``test/bleu{2,3,4}`` against the held-out sentences and
  ``test/self_bleu{2,3,4}`` (0-1 scale); after adversarial training also ``..._mle`` for G as it
  was before it.
Validation metrics of G are computed once per G version (they are cached while only D trains).
"""

from __future__ import annotations

from typing import Any

import torch

from zoo.core.module import check_options
from zoo.errors import UserError
from zoo.models.seqgan.metrics import bleu, self_bleu
from zoo.models.seqgan.nets import LSTMLM
from zoo.models.seqgan.oracle import nll_oracle
from zoo.models.seqgan.plots import nll_curve_figure
from zoo.models.seqgan.text import decode


def eval_step(model: Any, batch: torch.Tensor, batch_idx: int, split: str) -> None:
    B = batch.shape[0]
    nll = -model.gen.log_prob(batch).mean()
    g = torch.Generator(device=batch.device).manual_seed(model.cfg.eval_seed * 7 + batch_idx)
    fake = model.gen.sample(B, model.seq_len, generator=g)
    logits = model.dis(torch.cat([batch, fake]))
    acc = torch.cat([logits[:B] > 0, logits[B:] <= 0]).float().mean()
    model.log_dict({f"{split}/nll": nll, f"{split}/d_acc": acc}, batch_size=B, sync_dist=True)
    if model.text:
        model._refs.extend(sentences(model, batch))


def sentences(model: Any, seqs: torch.Tensor) -> list[str]:
    d = model.data_info
    return [" ".join(w) for w in decode(seqs.cpu(), d["vocab"], (d["eos_token"], d["pad_token"]))]


def generate(model: Any, n: int, seed: int, gen: Any = None) -> torch.Tensor:
    """n samples of G (or of ``gen``) from a fixed seed."""
    gen = gen or model.gen
    g = torch.Generator(device=gen.head.weight.device).manual_seed(seed)
    return torch.cat([gen.sample(min(1000, n - i), model.seq_len, generator=g) for i in range(0, n, 1000)])


def _n(model: Any, n: int) -> int:
    """Fewer evaluation samples under ``trainer.fast_dev_run`` (a smoke test, not a measurement)."""
    return min(n, 200) if model._trainer is not None and model.trainer.fast_dev_run else n


def val_epoch_end(model: Any) -> None:
    c = model.cfg
    key = model.g_version
    if key not in model._eval_cache:
        if model.oracle is not None:
            value = nll_oracle(model.oracle, model.gen, _n(model, c.eval_samples), model.seq_len, c.eval_seed)
        elif model.text:
            samples = sentences(model, generate(model, c.bleu_samples, c.eval_seed))
            value = bleu(samples, model._refs[: c.bleu_refs], (3,))[3]
        else:
            value = None
        model._eval_cache = {key: value}
        if value is not None:
            phase = model.schedule.phase(model.current_epoch).kind
            model.history.append((int(model.current_epoch), phase, float(value)))
    value = model._eval_cache[key]
    if value is not None:
        model.log("val/nll_oracle" if model.oracle is not None else "val/bleu3", value, prog_bar=True)


def test_epoch_end(model: Any) -> None:
    c = model.cfg
    metrics, floor = {}, None
    if model.oracle is not None:
        metrics["test/nll_oracle"] = nll_oracle(
            model.oracle, model.gen, c.test_samples, model.seq_len, c.eval_seed + 1
        )
        floor = nll_oracle(model.oracle, model.oracle, c.test_samples, model.seq_len, c.eval_seed + 2)
        g = torch.Generator(device=model.device).manual_seed(c.eval_seed + 3)
        random_g = LSTMLM(model.gen.vocab_size, c.gen_emb_dim, c.gen_hidden_dim, model.gen.start_token)
        random_g = random_g.init_normal(c.gen_init_std, g).to(model.device)
        metrics["test/nll_oracle_floor"] = floor
        if int(model.rollout_ready):  # adversarial training happened: also score G as it was before it
            metrics["test/nll_oracle_mle"] = nll_oracle(
                model.oracle, model.gen_mle, c.test_samples, model.seq_len, c.eval_seed + 1
            )
        metrics["test/nll_oracle_random"] = nll_oracle(
            model.oracle, random_g, c.test_samples, model.seq_len, c.eval_seed + 4
        )
    if model.text:
        samples = sentences(model, generate(model, c.test_bleu_samples, c.eval_seed + 1))
        for k, v in bleu(samples, model._refs[: c.bleu_refs]).items():
            metrics[f"test/bleu{k}"] = v
        for k, v in self_bleu(samples).items():
            metrics[f"test/self_bleu{k}"] = v
        if int(model.rollout_ready):  # the same for G as it was before adversarial training
            before = sentences(model, generate(model, c.test_bleu_samples, c.eval_seed + 1, model.gen_mle))
            metrics.update(
                {f"test/bleu{k}_mle": v for k, v in bleu(before, model._refs[: c.bleu_refs]).items()}
            )
            metrics.update({f"test/self_bleu{k}_mle": v for k, v in self_bleu(before).items()})
        if model._trainer is None or model.trainer.is_global_zero:
            (model._plots_dir() / "test_samples.txt").write_text("\n".join(samples) + "\n")
    model.log_dict(metrics, sync_dist=True)
    if model.history:
        model.save_figure(
            "nll_oracle" if model.oracle is not None else "val_bleu3",
            nll_curve_figure(model.history, model.schedule, floor),
        )


def predict_cli(model: Any, inputs: list[str], options: dict) -> None:
    """Print generated sequences: ``n=10`` ancestral samples, or ``method=sbs k=5`` distinct ones by
    stochastic beam search (with their log-probabilities). ``seed=0``."""
    from zoo.estimators import stochastic_beam_search

    opts = check_options(options, {"n": 10, "method": "sample", "k": 5, "seed": 0}, "seqgan (zoo.predict)")
    if inputs:
        raise UserError(
            f"seqgan generates from nothing: drop the inputs {inputs} (options: n=, method=, k=, seed=)"
        )
    if opts["method"] not in ("sample", "sbs"):
        raise UserError(
            f"method must be 'sample' (ancestral) or 'sbs' (stochastic beam search), got {opts['method']!r}"
        )
    for key in ("n", "k"):
        if not isinstance(opts[key], int) or opts[key] < 1:
            raise UserError(f"{key} must be a positive integer, got {opts[key]!r}")
    gen = model.gen
    if opts["method"] == "sample":
        seqs, scores = generate(model, opts["n"], opts["seed"]), None
    else:
        d = model.data_info

        def step_fn(prefixes: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
            state = gen.start(prefixes.shape[0]) if state is None else gen.step(prefixes[:, -1], state)
            return gen.head(state[0]), state

        res = stochastic_beam_search(
            step_fn,
            1,
            opts["k"],
            model.seq_len,
            gen.start_token,
            end_token=d.get("eos_token"),
            pad_token=d.get("pad_token"),
            generator=torch.Generator(device=gen.head.weight.device).manual_seed(opts["seed"]),
        )
        seqs, scores = res.sequences[0], res.log_probs[0].tolist()
    lines = sentences(model, seqs) if model.text else [" ".join(map(str, row)) for row in seqs.tolist()]
    for i, line in enumerate(lines):
        print(line if scores is None else f"{scores[i]:9.3f}  {line}")
