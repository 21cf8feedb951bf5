"""The joint mode's options for the classifier's KL term: a replay of G's past samples (zoo/models/ood/replay.py,
``model.replay_size``, for D's step too with ``model.replay_d``) and an EMA of G making its samples
(``model.g_ema``); the R1 penalty on D (``model.r1_gamma``). Exact resume with a replay for the classifier and D
is tests/test_recipe_resume.py's case ``ood_digits_joint:replay``."""

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
    seen, images = r.seen, r.images.clone()
    drawn = r.replace(batch(200, 8))  # D's draw (model.replay_d): the same share, the reservoir unchanged
    assert (drawn[:2, 0, 0, 0] < 108).all() and torch.equal(drawn[2:], batch(200, 8)[2:])
    assert r.seen == seen and torch.equal(r.images, images)


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


class Inputs(torch.nn.Module):
    """A stand-in for D that records its inputs and answers one logit an image: the sum of its pixels."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(1.0))
        self.seen = []

    def forward(self, x):
        self.seen.append(x.detach().clone())
        return self.w * x.flatten(1).sum(1)


def test_replay_d_gives_d_a_share_of_past_samples_only_when_set(digits_info):
    """model.replay_d: D's batch of G's samples has its first round(fraction * B) rows from the buffer (here
    images of 7s), the rest G's (images of 0s), and D's step offers nothing to the buffer; off: G's batch alone."""
    from zoo.models.ood.module import OODClassifier

    torch.manual_seed(0)
    x, fake = torch.rand(4, 1, 8, 8), torch.zeros(4, 1, 8, 8)
    for replay_d, replayed in ((True, 2), (False, 0)):
        model = OODClassifier({"mode": "joint", "replay_size": 8, "replay_d": replay_d}, digits_info)
        model.discriminator = Inputs()
        model.replay.offer(torch.full((3, 1, 8, 8), 7.0))
        model.discriminator_loss(x, fake)
        real_in, fake_in = model.discriminator.seen
        assert torch.equal(real_in, x) and model.replay.seen == 3
        assert (fake_in[:replayed] == 7).all() and (fake_in[replayed:] == 0).all()


def test_r1_adds_half_gamma_times_the_squared_input_gradient_of_d_on_real_inputs(digits_info):
    """With D(x) = w * sum(x) over 64 pixels, grad_x D = w everywhere: E||grad_x D(x)||^2 = 64 w^2, so the loss
    rises by gamma / 2 * 64 w^2 and its gradient in w by gamma * 64 w (the penalty trains D)."""
    from zoo.models.ood.module import OODClassifier

    torch.manual_seed(0)
    x, fake = torch.rand(4, 1, 8, 8), torch.rand(4, 1, 8, 8)
    losses, grads = {}, {}
    for gamma in (0.0, 10.0):
        model = OODClassifier({"mode": "joint", "r1_gamma": gamma}, digits_info)
        model.discriminator = Inputs()
        with torch.no_grad():
            model.discriminator.w.fill_(0.1)
        loss, _, _, r1 = model.discriminator_loss(x, fake)
        assert (r1 is None) == (gamma == 0)
        (grads[gamma],) = torch.autograd.grad(loss, model.discriminator.w)
        losses[gamma] = loss.item()
        assert not x.requires_grad  # the caller's batch is left alone
    assert losses[10.0] - losses[0.0] == pytest.approx(5.0 * 64 * 0.01, rel=1e-5)
    assert (grads[10.0] - grads[0.0]).item() == pytest.approx(10.0 * 64 * 0.1, rel=1e-5)


@pytest.mark.parametrize("value, bound", [(-1.0, ">= 0"), (1001.0, "<= 1000")])
def test_r1_gamma_is_range_checked(value, bound):
    with pytest.raises(UserError, match=f"'r1_gamma' in t must be {bound}"):
        validate(OODConfig, {"r1_gamma": value}, "t")


def test_replay_d_needs_a_replay():
    with pytest.raises(UserError, match="set replay_size > 0"):
        validate(OODConfig, {"replay_d": True}, "t")
    assert validate(OODConfig, {"replay_d": True, "replay_size": 64, "r1_gamma": 10.0}, "t")["replay_d"] is True
