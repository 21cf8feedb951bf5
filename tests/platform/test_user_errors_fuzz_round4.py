"""User mistakes a fourth fuzz audit found: weights and spreads no study would choose (OOD's beta 1e38, a toy
class spread of 1e30), SeqGAN counts without an upper bound, images the captioner changed silently, and
the surfaces the earlier audits touched least (recipe files, OmegaConf interpolations, override syntax,
trainer devices and strategies, resuming, checkpoint paths, environment variables). Each mistake is one
message, exit status 2, no traceback, and no run folder left behind."""

import re
from pathlib import Path

import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
from platform_testlib import run_main


def assert_refused(code: int, err: str, expected: str, runs: Path) -> None:
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(expected, lines[0]), err
    assert not runs.exists() or not any(runs.iterdir()), "nothing written for a refused run"


# ---- leftovers of round 3 -----------------------------------------------------------------------------
@pytest.mark.parametrize("recipe, override, expected", [
    # trained to chance, or overflowed the float32 loss into the generic "diverged" message
    ("ood_toy2d", "model.beta=1e38", r"'beta' in recipe .* must be <= 1000.0 \(the KL term would outweigh"),
    ("ood_digits_joint", "model.beta=1001", r"'beta' in recipe .* must be <= 1000.0"),
    # the classes covered (std) or left behind (separation) the OOD test sets, without a word
    ("ood_toy2d", "data.std=1e30", r"'std' in recipe .* must be <= 8.0 \(the OOD test sets lie in the box"),
    ("ood_toy2d", "data.separation=1e30", r"'separation' in recipe .* must be <= 8.0"),
    # ran out of memory at the first adversarial step, after MLE and D pre-training
    ("seqgan_oracle_small", "model.rollouts=100000000", r"'rollouts' in recipe .* must be <= 1000 \(over 60x"),
    # sampled for days (or ran out of memory) at the end of the first epoch
    ("seqgan_oracle_small", "model.eval_samples=2147483647", r"'eval_samples' in recipe .* must be <= 1000000"),
    ("seqgan_oracle", "model.test_samples=1000001", r"'test_samples' in recipe .* must be <= 1000000 \(100x"),
])
def test_values_no_study_would_choose_are_refused_with_the_config(recipe, override, expected, tmp_path, capsys):
    code, err = run_main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", "print_config=true", override], capsys)
    assert_refused(code, err, expected, tmp_path / "runs")


def test_the_new_bounds_keep_the_recipes_and_the_paper_settings():
    from zoo.config import load_config

    for recipe in ("ood_toy2d", "ood_toy2d_boundary", "ood_digits_joint", "ood_cifar10_joint", "seqgan_oracle",
                   "seqgan_oracle_small", "seqgan_text"):
        load_config(recipe, [])
    cfg = load_config("ood_toy2d", ["model.beta=1000", "data.std=8", "data.separation=8"])
    assert cfg["model"]["beta"] == 1000 and cfg["data"]["std"] == 8 and cfg["data"]["separation"] == 8
    assert load_config("ood_cifar10_joint", ["model.beta=0.1"])["model"]["beta"] == 0.1  # the paper's CIFAR-10
    cfg = load_config("seqgan_oracle", ["model.rollouts=1000", "model.eval_samples=1000000"])
    assert cfg["model"]["rollouts"] == 1000 and load_config("seqgan_oracle", [])["model"]["rollouts"] == 16


def test_predict_says_when_it_resizes_or_colours_an_image(tmp_path, capsys):
    """A 10x10 or greyscale image was resized / converted without a word: a one-line note on stderr each."""
    from PIL import Image

    from zoo import predict

    Image.new("L", (10, 10), 128).save(tmp_path / "tiny.png")
    Image.new("RGB", (10, 12), (200, 30, 30)).save(tmp_path / "small.png")
    Image.new("L", (64, 64), 128).save(tmp_path / "grey.png")
    Image.new("RGB", (64, 64), (200, 30, 30)).save(tmp_path / "fine.png")
    Image.new("RGB", (300, 200), (200, 30, 30)).save(tmp_path / "large.png")  # scaled down as the training scenes
    names = ["tiny.png", "small.png", "grey.png", "fine.png", "large.png"]
    assert predict.main(["sat-shapes-soft", *(str(tmp_path / n) for n in names), "beam=1"]) == 0
    out = capsys.readouterr()
    assert len(out.out.strip().splitlines()) == 5, out  # still captions every image
    assert out.err.strip().splitlines() == [
        f"note: {tmp_path / 'tiny.png'} is 10x10 greyscale; resized to 64x64 RGB as the model expects "
        "(it sees no colour)",
        f"note: {tmp_path / 'small.png'} is 10x12; resized to 64x64 as the model expects",
        f"note: {tmp_path / 'grey.png'} is 64x64 greyscale; converted to RGB as the model expects (it sees no colour)",
    ], out.err
