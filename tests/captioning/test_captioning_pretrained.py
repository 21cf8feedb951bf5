"""The released checkpoints: hard attention really localises and moves (not the "same attention at
every step" of public reproductions), soft attention captions well above the baseline, and
`python -m zoo.predict` works on them offline."""

import torch
from PIL import Image
from torchmetrics.text import BLEUScore

import zoo
from zoo.loading import load_any
from zoo.models.captioning import decode as D
from zoo.models.captioning.data import ShapesData

N_TEST = 100  # the first 100 of the card's 500 test scenes (same generator stream)


def _evaluate(name):
    torch.manual_seed(0)
    model, info = load_any(name)
    data = {k: v for k, v in info["data"].items() if k != "name"}
    dm = ShapesData({**data, "n_test": N_TEST, "n_val": 1, "batch_size": 50})
    dm.setup()
    assert dm.vocab.tokens == model.vocab.tokens  # same generator seed -> same vocabulary
    bleu, hits, chance, ent, moved, cells = BLEUScore(n_gram=4), [], [], [], [], []
    with torch.inference_mode():
        for b in dm.test_dataloader():
            res, feats, grid = model.generate(b["image"], k=1)
            seqs = res.sequences[:, 0]
            bleu.update([model.vocab.decode(s) for s in seqs.tolist()], b["refs"])
            alpha, used = D.attention_of(model.decoder, feats, seqs, model.decode_mode, model.vocab.start)
            words = D.caption_mask(seqs, model.vocab.end)
            h, c = D.localisation(used, seqs, words, b["obj_words"], b["obj_masks"], grid)
            e, m = D.attention_stats(alpha, used, words)
            for acc, x in ((hits, h), (chance, c), (ent, e), (moved, m)):
                acc.append(x)
            for i in range(len(seqs)):  # distinct attended cells per caption of a multi-object scene
                if (b["obj_words"][i, :, 0] >= 0).sum() > 1:
                    cells.append(used[i][words[i]].argmax(-1).unique().numel())
    mean = lambda xs: float(torch.cat(xs).mean())  # noqa: E731
    return {"bleu4": 100 * float(bleu.compute()), "loc": mean(hits), "chance": mean(chance),
            "entropy": mean(ent), "moves": mean(moved), "cells": sum(cells) / len(cells)}


def test_hard_attention_localises_and_moves_between_words():
    r = _evaluate("sat-shapes-hard")
    assert r["loc"] > 4 * r["chance"], r  # the chosen cell lies on the named object (chance ~0.12)
    assert r["entropy"] < 2.0, r  # peaked (uniform over 64 cells: 4.16 nats)
    assert r["moves"] > 0.2 and r["cells"] >= 2.0, r  # it looks at different objects in one caption
    assert r["bleu4"] > 30, r  # most frequent caption: 0


def test_soft_attention_captions_well_above_the_baseline():
    r = _evaluate("sat-shapes-soft")
    assert r["bleu4"] > 40 and r["loc"] > 2.5 * r["chance"], r


def test_predict_command_on_the_pretrained_model(tmp_path, capsys):
    from zoo.models.captioning import shapes as S
    from zoo.predict import main

    sp = S.generate_split(1, seed=5, split="test")
    path = tmp_path / "scene.png"
    Image.fromarray(sp.images[0].transpose(1, 2, 0)).save(path)
    assert main(["sat-shapes-soft", str(path), "beam=3"]) == 0
    caption = capsys.readouterr().out.split(": ", 1)[1].strip()
    assert caption.startswith(("a ", "there is")) and any(c in caption for c in S.COLOURS)
    assert main(["sat-shapes-hard", str(path), "sbs=4", f"overlay={tmp_path / 'att.png'}"]) == 0
    out = capsys.readouterr().out
    probs = [float(line.split("p=")[1].split()[0]) for line in out.splitlines() if "p=" in line]
    assert len(probs) == 4 and probs == sorted(probs, reverse=True) and sum(probs) <= 1
    assert (tmp_path / "att.png").is_file()
    assert f"{path} (beam 3, in the overlay): " in out  # the caption the overlay shows
    assert isinstance(zoo.load("sat-shapes-hard").estimator, torch.nn.Module)  # the estimator travels too


def test_unknown_predict_option_is_an_error(capsys):
    from zoo.predict import main

    assert main(["sat-shapes-soft", "x.png", "beams=3"]) == 2
    assert "did you mean: beam" in capsys.readouterr().err
