"""What the captioner measures (a mixin of ``ShowAttendTell``): on validation and test it decodes every
image (beam search, never teacher-forced) and reports BLEU-1..4 of the best caption against the
references (torchmetrics' ``BLEUScore``, on the 0-100 scale), the teacher-forced loss, and the
attention's statistics (``decode.py``): its entropy, how often it moves, and on shapes scenes how often
it rests on the object a word names (``att_localisation``, beside chance, ``att_chance``). The first
batch's attention maps are drawn at the end of each epoch (``plots.py``)."""

from __future__ import annotations

import sys

import torch
from torch import Tensor
from torchmetrics import MeanMetric
from torchmetrics.text import BLEUScore

from . import decode as D
from .nets import token_nll
from .plots import attention_figure, displayable


class CaptionEvaluation:
    """Validation and test steps and their metrics; the model keeps ``self.metrics`` (``_metrics()`` a split)."""

    @staticmethod
    def _metrics() -> torch.nn.ModuleDict:
        m = {f"bleu{n}": BLEUScore(n_gram=n) for n in range(1, 5)}
        m["bleu4_baseline"] = BLEUScore(n_gram=4)
        for key in ("loss", "att_localisation", "att_chance", "att_entropy", "att_moves"):
            m[key] = MeanMetric()
        return torch.nn.ModuleDict(m)

    def _eval_step(self, batch: dict, stage: str) -> None:
        m, B = self.metrics[stage], len(batch["refs"])
        res, feats, grid = self.generate(batch["image"])  # never teacher-forced
        inp, tgt, valid = self._split(batch["caption"])
        logits, _, _ = self.decoder.unroll(feats, inp, lambda t, e: D.decode_weights(e, self.decode_mode))
        m["loss"].update(token_nll(logits, tgt, valid).sum() / valid.sum(), valid.sum())
        seqs = res.sequences[:, 0]  # (B, T) the best caption
        preds = [self.vocab.decode(s) for s in seqs.tolist()]
        for n in range(1, 5):
            m[f"bleu{n}"].update(preds, batch["refs"])
        if self.baseline_caption is not None:
            m["bleu4_baseline"].update([self.baseline_caption] * B, batch["refs"])
        alpha, used = D.attention_of(self.decoder, feats, seqs, self.decode_mode, self.vocab.start)
        words = D.caption_mask(seqs, self.vocab.end)
        ent, moved = D.attention_stats(alpha, used, words)
        if ent.numel():
            m["att_entropy"].update(ent)
        if moved.numel():
            m["att_moves"].update(moved)
        if "obj_masks" in batch:
            hits, chance = D.localisation(used, seqs, words, batch["obj_words"], batch["obj_masks"], grid)
            if hits.numel():
                m["att_localisation"].update(hits)
                m["att_chance"].update(chance)
        if self._figure is None:
            k = min(self.cfg.n_figure, B)
            self._figure = {"images": batch["image"][:k], "preds": preds[:k], "weights": used[:k],
                            "grid": grid}

    def _eval_epoch_end(self, stage: str) -> None:
        m = self.metrics[stage]
        keys = ["bleu4", "loss", "att_localisation"] if stage == "val" else list(m)
        for key in keys:
            metric = m[key]
            if key == "bleu4_baseline" and self.baseline_caption is None:
                continue
            if isinstance(metric, MeanMetric) and int(metric.weight) == 0 and key != "loss":
                if key == "att_localisation" and stage == "test" and self.data_info.get("dataset") == "shapes" \
                        and (self._trainer is None or self.trainer.is_global_zero):
                    print("note: test/att_localisation and test/att_chance are not reported: no generated caption "
                          "named a colour or shape to locate (a short run's captions)", file=sys.stderr)
                continue  # nothing counted (e.g. no object words on real images)
            value = metric.compute()
            value = value * 100 if key.startswith("bleu") else value  # BLEU on the 0-100 scale
            self.log(f"{stage}/{key}", value, prog_bar=key == "bleu4")
        for metric in m.values():
            metric.reset()
        fig = self._figure
        self._figure = None
        if fig is not None and not (self._trainer is not None and self.trainer.sanity_checking):
            self.save_attention_figure(f"attention_{stage}", fig["images"], fig["preds"], fig["weights"],
                                       fig["grid"])

    def save_attention_figure(self, name: str, images: Tensor, preds: list[str], weights: Tensor,
                              grid: tuple[int, int]) -> None:
        imgs = displayable(images, self.data_info.get("normalize", "unit"))
        self.save_figure(name, attention_figure(imgs, [p.split() for p in preds], weights, grid))

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")
