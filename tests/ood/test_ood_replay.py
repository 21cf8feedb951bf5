"""The joint mode's options for the classifier's KL term: a replay of G's past samples (zoo/models/ood/replay.py,
``model.replay_size``) and an EMA of G making its samples (``model.g_ema``). Exact resume with a replay is
tests/test_recipe_resume.py's case ``ood_digits_joint:replay``."""

import pytest
import torch

from zoo.errors import UserError
from zoo.models.ood.config import OODConfig
from zoo.models.ood.data import OODDigits
from zoo.models.ood.replay import Replay
from zoo.schema import validate


@pytest.fixture(scope="module")
def digits_info():
    return OODDigits({}).info()


def batch(start: int, n: int, dtype=torch.float32) -> torch.Tensor:
    """n images (n, 1, 2, 2), image i filled with the number start + i: each one recognisable in the buffer."""
    return torch.arange(start, start + n, dtype=dtype).view(n, 1, 1, 1).expand(n, 1, 2, 2).clone()


def test_the_reservoir_fills_in_order_then_keeps_only_samples_it_was_offered():
    torch.manual_seed(0)
    r = Replay(size=6, fraction=0.5)
    r.offer(batch(0, 4))
    assert r.seen == 4 and r.images[:, 0, 0, 0].tolist() == [0, 1, 2, 3]
    r.offer(batch(4, 4))  # two fill the last slots, two may replace
    assert r.seen == 8 and len(r.images) == 6 and r.images[4:, 0, 0, 0].tolist() == [4, 5]
    for _ in range(20):
        r.offer(batch(r.seen, 4))
    ids = r.images[:, 0, 0, 0]
    assert len(r.images) == 6 and ids.unique().numel() == 6 and ((ids >= 0) & (ids < r.seen)).all()
    assert torch.equal(r.images, batch(0, 88)[ids.long()])  # whole images, not pixels of several


def test_every_sample_offered_stays_with_the_same_probability():
    """Reservoir sampling over 20 batches of 25: each of the 500 samples ends in a buffer of 50 with probability
    0.1, the first batch (G's early, noise-like samples) as the last. 120 trials, seed 0: each batch's rate has
    s.e. sqrt(0.1 * 0.9 / 3000) ~ 0.0055; the tolerance 0.03 is over 5 s.e."""
    torch.manual_seed(0)
    kept = torch.zeros(500)
    for _ in range(120):
        r = Replay(size=50, fraction=0.5)
        for b in range(20):
            r.offer(batch(25 * b, 25))
        kept[r.images[:, 0, 0, 0].long()] += 1
    rate = kept.view(20, 25).sum(1) / (120 * 25)  # (20,) per batch
    assert rate.sub(0.1).abs().max() < 0.03, rate


def test_mix_replaces_the_first_share_of_the_batch_with_past_samples():
    torch.manual_seed(0)
    r = Replay(size=16, fraction=0.25)
    first = batch(0, 8)
    assert torch.equal(r.mix(first), first)  # nothing to replay yet
    fresh = batch(100, 8)
    mixed = r.mix(fresh)
    assert mixed.shape == fresh.shape and torch.equal(mixed[2:], fresh[2:])
    assert (mixed[:2, 0, 0, 0] < 8).all()  # past samples, none of this batch
    assert r.seen == 16 and torch.equal(r.images[8:], fresh)  # then the batch is offered
    assert torch.equal(Replay(16, 0.0).mix(fresh), fresh)


def test_the_buffer_follows_the_samples_dtype_and_survives_a_checkpoint():
    torch.manual_seed(0)
    r = Replay(size=4, fraction=0.5)
    r.offer(batch(0, 6, torch.float64))
    assert r.images.dtype == torch.float64
    state = r.state()
    again = Replay(size=4, fraction=0.5)
    again.load(state)
    assert again.seen == 6 and torch.equal(again.images, r.images)
    out = again.mix(batch(10, 4, torch.float32))
    assert out.dtype == torch.float32 and again.images.dtype == torch.float32


def test_the_joint_model_saves_its_replay_in_the_checkpoint(digits_info):
    from zoo.models.ood.module import OODClassifier

    torch.manual_seed(0)
    model = OODClassifier({"mode": "joint", "replay_size": 8}, digits_info)
    model.replay.offer(torch.rand(5, 1, 8, 8))
    checkpoint = {}
    model.on_save_checkpoint(checkpoint)
    resumed = OODClassifier({"mode": "joint", "replay_size": 8}, digits_info)
    resumed.on_load_checkpoint(checkpoint)
    assert resumed.replay.seen == 5 and torch.equal(resumed.replay.images, model.replay.images)
    assert OODClassifier({"mode": "joint"}, digits_info).replay is None  # off by default
    assert OODClassifier({"mode": "ce", "replay_size": 8}, digits_info).replay is None  # ce has no G


def test_the_generator_average_moves_by_one_minus_its_decay_and_copies_batchnorm(digits_info):
    from zoo.models.ood.module import OODClassifier

    torch.manual_seed(0)
    model = OODClassifier({"mode": "joint", "g_ema": 0.9}, digits_info)
    assert not hasattr(OODClassifier({"mode": "joint"}, digits_info), "generator_ema")  # off by default
    before = [p.clone() for p in model.generator_ema.parameters()]
    with torch.no_grad():
        for p in model.generator.parameters():
            p.add_(1.0)
        model.generator(torch.randn(4, 32))  # train mode: G's BatchNorm statistics move
    model._update_generator_ema()
    for avg, old, p in zip(model.generator_ema.parameters(), before, model.generator.parameters()):
        assert torch.allclose(avg, 0.9 * old + 0.1 * p)
        assert not avg.requires_grad
    for avg, b in zip(model.generator_ema.buffers(), model.generator.buffers()):
        assert torch.equal(avg, b)


@pytest.mark.parametrize("key, value", [("replay_size", -1), ("replay_fraction", 1.5), ("g_ema", 1.0),
                                        ("g_ema", -0.1)])
def test_the_options_are_range_checked(key, value):
    with pytest.raises(UserError, match=f"'{key}' in t"):
        validate(OODConfig, {key: value}, "t")
    assert validate(OODConfig, {"replay_size": 2048, "replay_fraction": 1.0, "g_ema": 0.99}, "t")["g_ema"] == 0.99
