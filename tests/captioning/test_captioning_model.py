"""Attention, the doubly stochastic term, hard-attention sampling and its gradient, decoding, metrics."""

import lightning as L
import pytest
import torch
from torchmetrics.text import BLEUScore

from zoo.errors import UserError
from zoo.models.captioning import decode as D
from zoo.models.captioning.data import ShapesData
from zoo.models.captioning.module import ShowAttendTell
from zoo.models.captioning.nets import doubly_stochastic
from zoo.models.captioning.vocab import collate_captions

SMALL = {"feat_dim": 16, "cnn_width": 8, "embed_dim": 16, "hidden_dim": 24, "att_dim": 16, "dropout": 0.0}


@pytest.fixture(scope="module")
def dm():
    d = ShapesData({"n_train": 16, "n_val": 8, "n_test": 8, "batch_size": 8})
    d.setup()
    return d


@pytest.fixture(scope="module")
def batch(dm):
    return collate_captions([dm.sets["test"][i] for i in range(8)])


def model(dm, **cfg):
    torch.manual_seed(0)
    return ShowAttendTell({**SMALL, **cfg}, dm.info())


def sampled_unroll(m, feats, inp):
    """Teacher-forced decoder run with hard samples from the model's estimator; returns
    (word logits, the samples of every step)."""
    samples = []

    def choose(t, e):
        samples.append(m.estimator.sample(e, n=1))
        return samples[-1].value[0]

    logits, _, _ = m.decoder.unroll(feats, inp, choose)
    return logits, samples


def test_soft_attention_weights_sum_to_one(dm, batch):
    m = model(dm)
    feats, grid = m.encode(batch["image"])
    assert grid == (8, 8) and feats.shape == (8, 64, 16)
    inp = batch["caption"][:, :-1]
    logits, e, alpha = m.decoder.unroll(feats, inp, lambda t, e: torch.softmax(e, -1))
    assert logits.shape == (8, inp.shape[1], len(m.vocab)) and alpha.shape == (8, inp.shape[1], 64)
    assert torch.allclose(alpha.sum(-1), torch.ones(8, inp.shape[1]), atol=1e-5) and (alpha >= 0).all()


def test_doubly_stochastic_term_formula():
    alpha = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.9, 0.1, 0.0]]])  # (1, T=3, L=3)
    valid = torch.tensor([[True, True, False]])  # the third step is padding
    # sum_t alpha over real steps = (0.7, 0.8, 0.5) -> (0.3^2 + 0.2^2 + 0.5^2)
    assert torch.allclose(doubly_stochastic(alpha, valid), torch.tensor([0.09 + 0.04 + 0.25]))


def test_hard_attention_really_samples(dm, batch):
    m = model(dm, attention="hard")
    feats, _ = m.encode(batch["image"])
    inp = batch["caption"][:, :-1]
    picks = []
    for seed in range(2):
        torch.manual_seed(seed)
        _, s = sampled_unroll(m, feats, inp)
        idx = torch.stack([x.index[0] for x in s], 1)  # (B, T) sampled locations
        assert ((torch.stack([x.value[0] for x in s], 1).sum(-1) - 1).abs() < 1e-6).all()  # one-hots
        picks.append(idx)
    assert (picks[0] != picks[1]).float().mean() > 0.5  # near-uniform attention over 64 cells at init
    assert picks[0].unique().numel() > 10  # and it visits many locations


def test_hard_reinforce_gradient_reaches_attention_only_through_score_term(dm, batch):
    m = model(dm, attention="hard", alpha_c=0.0, estimator={"name": "reinforce", "baseline": "none"})
    m.train()
    att = m.decoder.attention_params()
    feats, _ = m.encode(batch["image"])
    # The pathwise part alone: cost = -log p(y|s,a) with s sampled; no gradient reaches f_att.
    inp, tgt, valid = m._split(batch["caption"])
    logits, _ = sampled_unroll(m, feats, inp)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")[valid].sum()
    grads = torch.autograd.grad(nll, att, allow_unused=True)
    assert all(g is None or g.abs().max() == 0 for g in grads)
    # The full hard-attention loss: f_att gets a nonzero gradient (the score term f * dlog p(s|a)).
    grads = torch.autograd.grad(m.caption_loss(batch), att, allow_unused=True)
    assert any(g is not None and g.abs().max() > 0 for g in grads)


@pytest.mark.parametrize("spec", [{"name": "rloo", "n": 3}, {"name": "gumbel_softmax", "tau": 0.5},
                                  {"name": "straight_through"},
                                  {"name": "reinforce", "baseline": "ema", "entropy_weight": 0.01}])
def test_every_hard_estimator_trains_attention(dm, batch, spec):
    m = model(dm, attention="hard", alpha_c=0.0, estimator=spec, expected_context_prob=0.3)
    loss = m.estimator_loss(batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    grads = torch.autograd.grad(loss, list(m.estimator_parameters()), allow_unused=True)
    assert any(g is not None and g.abs().max() > 0 for g in grads)


def test_unsuitable_estimator_is_user_error(dm):
    with pytest.raises(UserError, match="attention=soft"):
        model(dm, attention="hard", estimator="expectation")


def test_beam_search_returns_captions_and_survives_no_finished_beam(dm, batch):
    m = model(dm).eval()
    feats, _ = m.encode(batch["image"])
    v = m.vocab
    for k in (1, 3):
        res = D.generate(m.decoder, feats, "soft", v.start, v.end, v.pad, max_len=2, k=k)  # cannot finish
        assert res.sequences.shape == (8, k, 2) and res.sequences.dtype == torch.long
        assert torch.isfinite(res.log_probs).all()
        assert (res.log_probs[:, :-1] >= res.log_probs[:, 1:] - 1e-6).all()  # best first
    res = D.generate(m.decoder, feats, "soft", v.start, v.end, v.pad, 20, k=3, length_norm=0.7)
    assert all(isinstance(v.decode(s), str) for s in res.sequences[:, 0].tolist())
    greedy = D.generate(m.decoder, feats, "soft", v.start, v.end, v.pad, max_len=20, k=1)
    beam = D.generate(m.decoder, feats, "soft", v.start, v.end, v.pad, max_len=20, k=4)
    assert (beam.log_probs[:, 0] >= greedy.log_probs[:, 0] - 1e-4).all()  # beam finds >= likely captions


def test_stochastic_beam_search_gives_distinct_captions(dm, batch):
    m = model(dm).eval()
    feats, _ = m.encode(batch["image"][:2])
    v = m.vocab
    g = torch.Generator().manual_seed(0)
    res = D.generate(m.decoder, feats, "soft", v.start, v.end, v.pad, 6, k=5, stochastic=True, generator=g)
    for b in range(2):
        caps = [tuple(s) for s in res.sequences[b].tolist()]
        assert len(set(caps)) == 5  # without replacement
        assert (res.log_probs[b] <= 0).all() and res.log_probs[b].exp().sum() <= 1 + 1e-5


def test_test_bleu_comes_from_generated_captions(dm, tmp_path):
    m = model(dm)
    m.plots_dir = tmp_path
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    out = trainer.test(m, datamodule=dm, verbose=False)[0]
    m.eval()
    bleu = BLEUScore(n_gram=4)
    for b in dm.test_dataloader():
        res, _, _ = m.generate(b["image"], k=1)
        bleu.update([m.vocab.decode(s) for s in res.sequences[:, 0].tolist()], b["refs"])
    assert out["test/bleu4"] == pytest.approx(100 * float(bleu.compute()), abs=1e-4)
    for key in ("bleu1", "bleu4_baseline", "att_localisation", "att_chance", "att_moves", "att_entropy"):
        assert f"test/{key}" in out
    assert (tmp_path / "attention_test.png").is_file()  # the per-word attention overlay


def test_localisation_metric_on_a_hand_built_scene():
    # vocabulary ids: 5 = "red", 6 = "circle", 7 = "blue", 8 = "square", 9 = "left"
    obj_words = torch.tensor([[[5, 6], [7, 8]]])  # red circle, blue square
    masks = torch.zeros(1, 2, 8, 8)
    masks[0, 0, :4, :4] = 1  # red circle: top-left quarter -> grid cell (0, 0) of a 2x2 grid
    masks[0, 1, 4:, 4:] = 1  # blue square: bottom-right -> cell (1, 1)
    seqs = torch.tensor([[5, 6, 9, 7, 8, 5]])  # red circle left blue square red(padding)
    valid = torch.tensor([[True, True, True, True, True, False]])
    w = torch.zeros(1, 6, 4)
    w[0, 0] = torch.tensor([1.0, 0, 0, 0])  # "red" -> on the circle
    w[0, 1] = torch.tensor([0.5, 0.5, 0, 0])  # "circle" -> half on it
    w[0, 2] = torch.tensor([0, 0, 0, 1.0])  # "left": not an object word, not counted
    w[0, 3] = torch.tensor([1.0, 0, 0, 0])  # "blue" -> wrong object
    w[0, 4] = torch.tensor([0, 0, 0.25, 0.75])  # "square" -> 0.75
    hits, chance = D.localisation(w, seqs, valid, obj_words, masks, (2, 2))
    assert hits.tolist() == pytest.approx([1.0, 0.5, 0.0, 0.75])
    assert chance.tolist() == pytest.approx([0.25] * 4)
    # a word naming an attribute shared by two objects scores on the union; absent objects are ignored
    two_blue = torch.tensor([[[7, 6], [7, 8]]])
    hits, _ = D.localisation(w[:, :1], torch.tensor([[7]]), valid[:, :1], two_blue, masks, (2, 2))
    assert hits.tolist() == [1.0]
    hits, _ = D.localisation(w[:, :1], torch.tensor([[11]]), valid[:, :1], obj_words, masks, (2, 2))
    assert hits.numel() == 0


def _score_cost_gradients(dm, batch: dict) -> tuple[dict, dict]:
    """Per score cost: the gradient of the hard-attention loss to the decoder's output layer L_o (which gets
    only the pathwise gradient d(-log p(y|s,a))/dW: the score term reaches the attention MLP alone) and the
    loss, with the same samples (seed 123); each cost also gives the attention MLP a nonzero gradient."""
    grads, values = {}, {}
    for sc in ("sum", "mean", "reward_to_go", "word"):
        m = model(dm, attention="hard", alpha_c=0.0, score_cost=sc,
                  estimator={"name": "reinforce", "baseline": "batch_mean"})
        torch.manual_seed(123)
        loss = m.caption_loss(batch)
        g_out, *g_att = torch.autograd.grad(loss, [m.decoder.out.weight, *m.decoder.attention_params()],
                                            allow_unused=True)
        assert any(g is not None and g.abs().max() > 0 for g in g_att), sc
        grads[sc], values[sc] = g_out, float(loss)
    return grads, values


def test_score_costs_share_the_pathwise_gradient_and_train_attention(dm, batch):
    """sum, reward_to_go and word weigh every word of the batch alike: the same pathwise gradient (1e-6)
    and the same loss. mean weighs every caption alike (its words by 1 / its length): the same only where
    the captions have one length (here the batch's captions of its most common length, 1e-6); on the
    whole batch (5, 10 and 15 words) it differs from sum (measured: by up to 0.045 where the largest entry
    is 0.153; asked: by more than 0.05 of the largest entry)."""
    grads, values = _score_cost_gradients(dm, batch)
    for sc in ("reward_to_go", "word"):
        assert torch.allclose(grads["sum"], grads[sc], atol=1e-6), sc
    assert values["sum"] == pytest.approx(values["word"]) == pytest.approx(values["reward_to_go"])
    assert (grads["mean"] - grads["sum"]).abs().max() > 0.05 * grads["sum"].abs().max()
    lengths = (batch["caption"][:, 1:] != 0).sum(-1)  # (B,) words per caption
    same = lengths == lengths.mode().values
    assert 2 <= int(same.sum()) < len(lengths)
    equal = {k: v[same] if torch.is_tensor(v) and len(v) == len(lengths) else v for k, v in batch.items()}
    grads, values = _score_cost_gradients(dm, equal)
    for sc in ("mean", "reward_to_go", "word"):
        assert torch.allclose(grads["sum"], grads[sc], atol=1e-6), sc
    assert values["sum"] == pytest.approx(values["mean"])


def test_expected_context_schedule_and_no_score_term_where_it_is_used(dm, batch, monkeypatch):
    m = model(dm, attention="hard", expected_context_prob=1.0, expected_context_hold=10,
              expected_context_anneal=20, alpha_c=0.0, estimator={"name": "reinforce", "baseline": "none"})
    m.train()
    for step, p in ((0, 1.0), (10, 1.0), (20, 0.5), (30, 0.0), (99, 0.0)):
        monkeypatch.setattr(type(m), "global_step", property(lambda self, s=step: s))
        assert m.expected_context_prob() == pytest.approx(p)
    m.eval()
    assert m.expected_context_prob() == 0.0  # evaluation never mixes
    m.train()
    monkeypatch.setattr(type(m), "global_step", property(lambda self: 0))
    # p = 1: every word uses the expected context, so this is exactly the soft loss (no sampling)
    soft = model(dm, attention="soft", alpha_c=0.0)
    soft.load_state_dict(m.state_dict(), strict=False)
    soft.train()
    assert float(m.caption_loss(batch)) == pytest.approx(float(soft.caption_loss(batch)), rel=1e-5)


def test_gradient_variance_probe_measures_the_hard_estimator(dm, batch):
    """The grad_variance callback's contract: estimator_loss gives fresh estimates; REINFORCE's
    attention gradient varies between them (variance > 0), soft attention's does not."""
    from zoo.callbacks.grad_variance import GradientVarianceCallback

    probe = GradientVarianceCallback(every_n_steps=1, repeats=3)
    hard = model(dm, attention="hard").train()
    stats = probe.measure(hard, batch)
    assert stats["grad_var"] > 0 and stats["grad_norm"] > 0
    soft = model(dm, dropout=0.0).train()
    assert probe.measure(soft, batch)["grad_var"] < 1e-12  # deterministic: no estimator noise


def test_attention_overlay_is_brightest_on_the_attended_cell():
    """A word's overlay puts magma's brightest colour where its attention is, over a grey image;
    a figure is one axes per image, with a title per word."""
    from zoo.models.captioning.plots import attention_figure, overlays

    image = torch.full((3, 32, 32), 0.5, dtype=torch.float64)
    weights = torch.zeros(2, 16)
    weights[0, 5] = 1.0  # grid (4, 4): cell (1, 1), pixels 8..15 both ways
    weights[1, 15] = 1.0  # cell (3, 3), pixels 24..31
    out = overlays(image, weights, (4, 4))  # (2, 3, 32, 32)
    assert out.shape == (2, 3, 32, 32) and out.dtype == torch.float32
    brightness = out.sum(1)  # (2, 32, 32)
    assert brightness[0, 8:16, 8:16].mean() > brightness[0].mean() + 0.5
    assert brightness[1, 24:, 24:].mean() > brightness[1, :16, :16].mean() + 0.5
    fig = attention_figure(image[None].expand(2, -1, -1, -1), [["a", "red"], ["b"]], weights[None].expand(2, -1, -1),
                           (4, 4))
    assert len(fig.axes) == 2
    assert [t.get_text() for t in fig.axes[0].texts] == ["image", "a", "red"]
    assert [t.get_text() for t in fig.axes[1].texts] == ["image", "b"]
