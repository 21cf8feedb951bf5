"""Show, Attend and Tell's inference API (captioning/predict.py) on the released sat-shapes models: the
captions zoo.predict prints, attention maps, seeded stochastic beam search, and clear errors."""

import numpy as np
import pytest
import torch
from PIL import Image

import zoo
from zoo.errors import UserError
from zoo.models.captioning import shapes as S
from zoo.predict import main as predict


@pytest.fixture(scope="module")
def soft():
    return zoo.load("sat-shapes-soft")


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scenes")
    split = S.generate_split(2, seed=5, split="test")
    paths = [folder / f"scene{i}.png" for i in range(2)]
    for image, path in zip(split.images, paths):
        Image.fromarray(image.transpose(1, 2, 0)).save(path)
    return [str(p) for p in paths]


def test_captions_are_what_predict_prints(soft, scenes, capsys):
    captions = soft.caption(scenes, beam=3)
    assert isinstance(captions, list) and len(captions) == 2 and all(isinstance(c, str) and c for c in captions)
    assert predict(["sat-shapes-soft", *scenes, "beam=3"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{p}: {c}" for p, c in zip(scenes, captions)]


def test_files_pil_numpy_and_tensors_caption_alike(soft, scenes):
    image = Image.open(scenes[0])
    x = soft.preprocess(scenes[0])
    assert x.shape == (1, 3, 64, 64) and x.device == soft.device
    assert torch.equal(x, soft.preprocess(image)) and torch.equal(x, soft.preprocess(np.asarray(image)))
    assert soft.caption(x) == soft.caption(image) == soft.caption([np.asarray(image)]) == soft.caption(scenes[0])


def test_attention_maps(soft, scenes):
    r = soft.caption(scenes, return_attention=True)
    B, T = r.tokens.shape
    assert B == 2 and r.attention.shape == (2, T, 8, 8) and r.log_probs.shape == (2,)
    assert r.text == soft.caption(scenes) and (r.log_probs < 0).all()
    words = len(r.text[0].split())
    assert torch.allclose(r.attention[0, :words].sum((-1, -2)), torch.ones(words))  # soft: a distribution a word


def test_sampled_captions_are_distinct_seeded_and_ranked(scenes):
    hard = zoo.load("sat-shapes-hard")
    samples = hard.caption(scenes[:1], sample=4, seed=0)
    assert len(samples) == 1 and len(samples[0]) == 4 and len(set(samples[0])) == 4
    assert samples == hard.caption(scenes[:1], sample=4, seed=0)
    r = hard.caption(scenes[:1], sample=4, seed=0, return_attention=True)
    assert r.text == samples and r.attention is None and r.tokens.shape[:2] == (1, 4)
    assert (r.log_probs[0, :-1] >= r.log_probs[0, 1:]).all()  # most probable first, as predict prints them


@pytest.mark.parametrize("call, expected", [
    (lambda m: m.caption(torch.zeros(1, 3, 32, 32)), r"shape \(B, 3, 64, 64\), got \(1, 3, 32, 32\) \(wrong size\)"),
    (lambda m: m.caption(torch.zeros(1, 1, 64, 64)), r"\(wrong channels\)"),
    (lambda m: m.caption(torch.zeros(1, 3, 64, 64), beam=0), "beam must be an integer >= 1"),
    (lambda m: m.caption(torch.zeros(1, 3, 64, 64), sample=1000), "sample must be at most 25"),
    (lambda m: m.caption(torch.zeros(1, 3, 64, 64), max_len=0), "max_len must be an integer >= 1"),
    (lambda m: m.caption("no/such/scene.png"), "not found"),
    (lambda m: m.caption(42), "give images as a tensor"),
])
def test_bad_input_is_one_clear_error(soft, call, expected):
    with pytest.raises(UserError, match=expected):
        call(soft)
