"""Show, Attend and Tell (Xu et al. 2015) as a LightningModule: soft and hard (sampled) attention.

Where things are:
- the soft loss and the **hard-attention loss** (the "Hard Attention" notes' lower bound L_s and its Monte Carlo
  gradient, through the estimator registry): `soft_loss`, `hard_attention_loss` below;
- the networks: `nets.py`; decoding and the localisation metric: `decode.py`; validation and test
  (BLEU, attention statistics): `evaluation.py`; figures: `plots.py`; the command-line behaviour
  (`python -m zoo.predict`): `predict.py`.
"""

from __future__ import annotations

import sys
import warnings

import torch
from torch import Tensor
from torch.distributions import Categorical

from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.estimators import StochasticSample, reward_to_go
from zoo.loading import load_any, mismatch_line

from . import decode as D
from .config import SAT_SPEC, cnn_side
from .evaluation import CaptionEvaluation
from .nets import AttentionDecoder, build_encoder, doubly_stochastic, token_nll
from .predict import CaptionAPI, predict_cli
from .vocab import Vocab, vocab_difference, vocab_fix


def stack_extras(steps: list[dict], n: int, B: int) -> dict:
    """The per-word samples' extras (each a tensor or tuple of tensors (1, N, ...), N = n * B) stacked along the
    words: (n, B, T, ...); an estimator that keeps the noise behind its samples (relax) finds it per word."""
    def stack(parts: list[Tensor]) -> Tensor:
        return torch.stack([p[0] for p in parts], 1).unflatten(0, (n, B))  # (N, T, ...) -> (n, B, T, ...)

    out = {}
    for key, first in (steps[0] if steps else {}).items():
        if isinstance(first, Tensor):
            out[key] = stack([x[key] for x in steps])
        elif isinstance(first, tuple):
            out[key] = tuple(stack([x[key][i] for x in steps]) for i in range(len(first)))
    return out


class ShowAttendTell(CaptionEvaluation, CaptionAPI, ZooModule):
    """Show, Attend and Tell captioner: CNN grid features, LSTM with soft or hard (sampled) attention."""

    spec = SAT_SPEC  # its options, monitor (val/bleu4, max) and node: hard attention's locations (sat_node)

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, data_info)
        c, info = self.cfg, self.data_info
        self.check_data(info)
        side = cnn_side(info["image_size"], c.cnn_stages)  # the cnn's grid
        if c.encoder == "cnn" and side < 2:  # one location: nothing for the attention to choose
            raise UserError(f"model.cnn_stages={c.cnn_stages} leaves a {side}x{side} grid of a {info['image_size']}-px "
                            f"image: attention needs at least 2x2 locations (cnn_stages <= "
                            f"{max(3, (info['image_size'] - 1).bit_length() - 1)} here)")
        self.vocab = Vocab(info["vocab"])
        self.encoder = build_encoder(c.encoder, c.feat_dim, c.cnn_width, c.pretrained_encoder, c.grid,
                                     c.cnn_stages)
        if c.freeze_encoder:  # eval mode too: Lightning keeps each module's mode and never calls train()
            self.encoder.requires_grad_(False).eval()  # so its eval-mode warning is noise (an error under -W error)
            warnings.filterwarnings("ignore", message=r"Found \d+ module\(s\) in eval mode at the start of training")
        self.decoder = AttentionDecoder(len(self.vocab), self.encoder.feat_dim, c.embed_dim, c.hidden_dim,
                                        c.att_dim, c.dropout, c.gate, c.deep_output, c.init_state)
        self.estimator = self.build_estimator() if c.attention == "hard" else None
        self.decode_mode = "soft" if c.attention == "soft" else c.hard_decode
        self.max_len = c.max_decode_len or int(info.get("max_len", 20)) + 1
        self.baseline_caption = info.get("baseline_caption")
        self.metrics = torch.nn.ModuleDict({s: self._metrics() for s in ("val", "test")})
        self._figure: dict | None = None

    def check_data(self, info: dict) -> None:
        """A captioning datamodule (seqgan_text and the skipgram corpora have a vocabulary too), with
        the vocabulary the model was trained on: its word ids are the embedding's rows."""
        if "vocab" not in info or "image_size" not in info:
            raise UserError("model 'sat' needs a captioning datamodule (shapes or karpathy) that provides "
                            "a vocabulary and images: use data.name=shapes or data.name=karpathy")
        if list(info["vocab"]) != list(self.data_info["vocab"]):
            raise UserError("the data's vocabulary is not the one the model was trained with: use the data options "
                            "it was trained with (how they differ, below)",
                            details=[vocab_difference(list(self.data_info["vocab"]), list(info["vocab"])),
                                     vocab_fix(self.data_info, info)])

    def before_fit(self) -> None:
        c = self.cfg
        if c.encoder_from:
            self.load_encoder(c.encoder_from)
        elif c.freeze_encoder and (c.encoder == "cnn" or not c.pretrained_encoder):
            # allowed (random features are a baseline), but more often a forgotten encoder_from
            print("warning: model.freeze_encoder=true with no model.encoder_from and no ImageNet weights: the "
                  "encoder stays at its random initialisation (give model.encoder_from=<sat checkpoint or "
                  "pretrained name>, or model.freeze_encoder=false)", file=sys.stderr)

    def load_encoder(self, target: str) -> None:
        """The encoder weights of another captioning model (a checkpoint path or a pretrained name)."""
        try:
            source, info = load_any(target)
        except UserError as err:
            raise UserError(f"model.encoder_from: {err.message}", details=err.details) from None
        if not isinstance(source, ShowAttendTell):
            raise UserError(f"model.encoder_from={target} is a '{info['model']}' model, not a captioning "
                            "one ('sat'): give a sat checkpoint or pretrained name (python -m zoo.pretrained)")
        try:
            self.encoder.load_state_dict(source.encoder.state_dict())
        except RuntimeError as err:
            raise UserError(f"the encoder of {target} does not fit this model's (model.encoder, feat_dim, "
                            f"cnn_width and cnn_stages must match it): {mismatch_line(err)}") from None

    def train(self, mode: bool = True):
        super().train(mode)
        if self.cfg.freeze_encoder:
            self.encoder.eval()  # frozen BatchNorm statistics too
        return self

    # ---- forward pieces ------------------------------------------------------------------
    def encode(self, images: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """images (B, 3, H, W) -> annotation vectors (B, L, D) and the grid (h, w)."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.cfg.freeze_encoder):
            f = self.encoder(images)  # (B, D, h, w)
        return f.flatten(2).transpose(1, 2), (f.shape[2], f.shape[3])

    @staticmethod
    def _split(caption: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        inp, tgt = caption[:, :-1], caption[:, 1:]  # (B, T): fed tokens, predicted tokens
        return inp, tgt, tgt != 0

    def soft_loss(self, feats: Tensor, caption: Tensor) -> Tensor:
        """Deterministic soft attention: context = sum_i alpha_ti a_i, plain backprop. Per-token
        (NLL + lambda * doubly stochastic term)."""
        inp, tgt, valid = self._split(caption)
        logits, e, alpha = self.decoder.unroll(feats, inp, lambda t, e: torch.softmax(e, -1))
        nll = token_nll(logits, tgt, valid).sum(-1)  # (B,)
        reg = doubly_stochastic(alpha, valid)  # (B,)
        return (nll.sum() + self.cfg.alpha_c * reg.sum()) / valid.sum()

    def hard_attention_loss(self, feats: Tensor, caption: Tensor) -> Tensor:
        """Hard attention, trained on the lower bound L_s = sum_s p(s|a) log p(y|s,a) (the "Hard Attention" notes).

        s_t ~ Multinoulli(alpha_t) at every word, context = a_{s_t}. With cost f(s) = -log p(y|s,a)
        (per caption, summed over words) the estimator's surrogate has gradient
            d f/dW + (f - b) d log p(s|a)/dW  (- entropy bonus),   log p(s|a) = sum_t log alpha_{t,s_t},
        i.e. minus the notes' Monte Carlo gradient with a baseline b (reinforce: EMA b <- 0.9 b + 0.1 f;
        rloo: the other samples' mean). gumbel_softmax / straight_through instead feed relaxed
        weights (context = w @ a) and backpropagate through them (biased). With
        `expected_context_prob` p, a word uses the expected context with probability p (the
        original code's trick) and then contributes no score term.
        """
        est = self.estimator
        n = int(getattr(est.options, "n", 1))
        B = feats.shape[0]
        inp, tgt, valid = (x.repeat(n, 1) for x in self._split(caption))  # (N, T), N = n * B
        feats = feats.repeat(n, 1, 1)  # (N, L, D): n samples per caption
        p = self.expected_context_prob()
        use_mean = torch.rand(inp.shape, device=inp.device) < p if p > 0 else None  # (N, T)
        samples: list[StochasticSample] = []

        def choose(t: int, e: Tensor) -> Tensor:
            s = est.sample(e, n=1)  # value (1, N, L)
            samples.append(s)
            w = s.value[0]
            return w if use_mean is None else torch.where(use_mean[:, t, None], torch.softmax(e, -1), w)

        logits, e, _ = self.decoder.unroll(feats, inp, choose)  # e: (N, T, L)
        T, L = e.shape[1], e.shape[2]
        nll = token_nll(logits, tgt, valid)  # (N, T) = -log p(y_t | y_<t, s_<=t, a)
        lengths = valid.sum(-1).float()  # (N,)
        scored = valid if use_mean is None else valid & ~use_mean  # words whose sample was used
        log_prob = torch.stack([s.log_prob[0] for s in samples], 1) * scored  # (N, T)
        extras = stack_extras([s.extras for s in samples], n, B)  # relax: each word's Gumbel noise (n, B, T, ...)
        # the logits with a gradient: real words (the entropy bonus); with the estimator's noise (relax), only the
        # words whose sample was used, as the score term (its control variate's correction has a gradient there)
        live = scored if extras else valid
        dist_logits = torch.where(live.unsqueeze(-1), e, e.detach())
        joint = StochasticSample(value=torch.stack([s.value[0] for s in samples], 1).view(n, B, T, L),
                                 log_prob=log_prob.view(n, B, T),
                                 dist=Categorical(logits=dist_logits.view(n, B, T, L)),
                                 index=torch.stack([s.index[0] for s in samples], 1).view(n, B, T), extras=extras)
        sc = self.cfg.score_cost
        if sc in ("sum", "mean"):  # one cost per caption: C = (B,), the T word log-probs are summed
            cost = nll.sum(-1) / (lengths if sc == "mean" else 1.0)
            surrogate = est.loss(joint, cost.view(n, B))  # mean over (n, B)
            surrogate = surrogate if sc == "mean" else surrogate / lengths.mean()  # per word
        else:  # one cost per word: C = (B, T); the estimator averages over (n, B, T) positions
            cost = nll
            if sc == "reward_to_go":  # value: the words' cost from t on; pathwise gradient: nll's own
                cost = reward_to_go(nll.detach(), dim=-1) + nll - nll.detach()
            surrogate = est.loss(joint, cost.view(n, B, T)) * T / lengths.mean()  # per word
        reg = doubly_stochastic(torch.softmax(e, -1), valid)  # (N,)
        reg = (reg / lengths).mean() if sc == "mean" else reg.mean() / lengths.mean()
        loss = surrogate + self.cfg.alpha_c * reg
        value = nll.sum() / lengths.sum() + self.cfg.alpha_c * reg  # what is logged: NLL per word + reg
        return loss + (value - loss).detach()

    def expected_context_prob(self) -> float:
        """Probability that a word uses the expected context instead of a sample (training only)."""
        c = self.cfg
        if not self.training:
            return 0.0
        if c.expected_context_anneal <= 0:
            return c.expected_context_prob
        done = (self.global_step - c.expected_context_hold) / c.expected_context_anneal
        return c.expected_context_prob * min(1.0, max(0.0, 1.0 - done))

    def caption_loss(self, batch: dict) -> Tensor:
        feats, _ = self.encode(batch["image"])
        if self.cfg.attention == "soft":
            return self.soft_loss(feats, batch["caption"])
        return self.hard_attention_loss(feats, batch["caption"])

    # ---- training ------------------------------------------------------------------------------
    def training_step(self, batch: dict, batch_idx: int) -> Tensor:
        if self.estimator is not None:
            self.estimator.set_step(self.global_step)  # temperature schedules
        loss = self.caption_loss(batch)
        metrics = {"train/loss": loss}
        if self.cfg.expected_context_prob > 0:
            metrics["train/expected_context_prob"] = self.expected_context_prob()
        if self.estimator is not None:
            metrics.update({f"train/{k}": v for k, v in getattr(self.estimator, "stats", {}).items()})
        self.log_train(metrics, batch_size=len(batch["refs"]), prog_bar=("train/loss",))
        return loss

    def estimator_loss(self, batch: dict) -> Tensor:
        """A fresh stochastic estimate of the training loss (for the gradient-variance probe)."""
        return self.caption_loss(batch)

    def estimator_parameters(self):
        """f_att's parameters: in hard mode their gradient is the estimator's score term."""
        return self.decoder.attention_params()

    def configure_optimizers(self):
        c = self.cfg
        enc = [p for p in self.encoder.parameters() if p.requires_grad]
        rest = [p for n, p in self.named_parameters() if p.requires_grad and not n.startswith("encoder.")]
        groups = [{"params": rest}]
        if enc:
            groups.append({"params": enc, "lr": c.encoder_lr or c.lr})
        cls = torch.optim.Adam if c.optimizer == "adam" else torch.optim.RMSprop
        opt = cls(groups, lr=c.lr, weight_decay=c.weight_decay)
        if c.lr_schedule == "constant":
            return opt
        steps = max(1, int(self.trainer.estimated_stepping_batches))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # ---- generation (validation and test: evaluation.py) ----------------------------------
    def generate(self, images: Tensor, k: int | None = None, stochastic: bool = False,
                 max_len: int | None = None, generator: torch.Generator | None = None):
        """Captions for images: (BeamResult with sequences (B, k, T), features, grid)."""
        feats, grid = self.encode(images)
        v = self.vocab
        res = D.generate(self.decoder, feats, self.decode_mode, v.start, v.end, v.pad,
                         max_len or self.max_len, k or self.cfg.beam_size, self.cfg.length_norm, stochastic,
                         generator)
        return res, feats, grid

    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)
