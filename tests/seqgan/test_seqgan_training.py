"""SeqGAN's phases on a tiny oracle: the schedule, MLE lowers NLL-oracle, D learns to separate,
the adversarial step goes through the estimator and changes G, and resuming continues exactly."""

import pytest
import torch
from seqgan_testlib import fit, tiny_data, tiny_model

from zoo.errors import UserError
from zoo.models.seqgan.oracle import nll_oracle
from zoo.models.seqgan.schedule import Schedule


def test_schedule_maps_epochs_to_phases():
    s = Schedule(
        mle_epochs=2,
        d_pretrain_rounds=2,
        d_pretrain_epochs=3,
        adv_iterations=2,
        adv_d_rounds=2,
        adv_d_epochs=1,
    )
    assert s.total == 2 + 6 + 4
    kinds = [s.phase(e).kind for e in range(s.total + 1)]
    assert kinds == ["mle"] * 2 + ["d_pretrain"] * 6 + ["adversarial"] * 4 + ["done"]
    # negatives are redrawn at the start of each D round (the pool key is the round's first epoch)
    assert [s.phase(e).round_start for e in range(2, 8)] == [2, 2, 2, 5, 5, 5]
    assert [s.phase(e).g_step for e in range(8, 12)] == [True, False, True, False]
    assert [s.phase(e).index for e in range(8, 12)] == [0, 0, 1, 1]
    assert [s.phase(e).round_start for e in range(8, 12)] == [8, 9, 10, 11]
    no_d = Schedule(0, 0, 1, 3, 0, 3)  # G steps only: one epoch per iteration, no D training
    assert no_d.total == 3 and all(no_d.phase(e).g_step and not no_d.phase(e).train_d for e in range(3))
    with pytest.raises(UserError):
        tiny_model(tiny_data(), mle_epochs=-1)


def test_mle_pretraining_lowers_nll_oracle():
    dm = tiny_data()
    model = tiny_model(dm, mle_epochs=4)
    before = nll_oracle(dm.oracle, model.gen, 1000, 8, seed=0)
    fit(model, dm)
    after = nll_oracle(dm.oracle, model.gen, 1000, 8, seed=0)
    floor = nll_oracle(dm.oracle, dm.oracle, 1000, 8, seed=0)
    assert after < before - 0.3, (before, after)
    assert after > floor - 0.1  # cannot beat the oracle on its own samples by more than noise
    assert [h[1] for h in model.history] == ["mle"] * 4  # one val/nll_oracle point per epoch
    assert model.history[-1][2] < model.history[0][2]


def test_discriminator_learns_to_separate():
    """An untrained G's samples vs the oracle's: D pre-training takes held-out accuracy well above chance."""
    import lightning as L

    dm = tiny_data()
    model = tiny_model(dm, d_pretrain_rounds=3, d_pretrain_epochs=2)
    trainer = L.Trainer(
        accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False
    )
    chance = trainer.validate(model, datamodule=dm, verbose=False)[0]["val/d_acc"]
    g0 = [p.clone() for p in model.gen.parameters()]
    fit(model, dm)
    acc = trainer.validate(model, datamodule=dm, verbose=False)[0]["val/d_acc"]
    assert chance < 0.7 and acc > 0.85, (chance, acc)
    assert all(torch.equal(a, b) for a, b in zip(g0, model.gen.parameters()))  # D phases leave G alone


def test_adversarial_step_uses_estimator_and_changes_g():
    dm = tiny_data()
    model = tiny_model(
        dm, adv_iterations=1, adv_d_rounds=0, estimator={"name": "reinforce", "baseline": "ema"}
    )
    calls = []
    real_loss = model.estimator.loss

    def spy(s, cost, context=None):
        calls.append((s.log_prob.shape, cost.detach().clone(), s.index.clone()))
        return real_loss(s, cost, context)

    model.estimator.loss = spy
    g0 = [p.detach().clone() for p in model.gen.parameters()]
    d0 = [p.detach().clone() for p in model.dis.parameters()]
    fit(model, dm)
    assert len(calls) == 1  # one G step in one adversarial iteration
    shape, cost, index = calls[0]
    assert shape == cost.shape == index.shape == (1, 32, 8)  # cost per sampled token, (n, B, T)
    assert ((cost <= 0) & (cost >= -1)).all()  # cost = -Q, Q = D's probability of "real"
    assert int(model.estimator.baseline.count) == 1  # the EMA baseline saw the costs
    assert any(not torch.equal(a, b) for a, b in zip(g0, model.gen.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(d0, model.dis.parameters()))
    # the rollout network started from G and moved 20% of the way to the updated G
    for b, a0, a1 in zip(model.rollout.parameters(), g0, model.gen.parameters()):
        assert torch.allclose(b, 0.8 * a0 + 0.2 * a1.detach(), atol=1e-6)


def test_estimator_loss_for_the_variance_probe():
    """A fresh estimate of G's adversarial surrogate, with gradient to G only, that leaves the
    adversarial state alone (the probe may run during MLE pre-training)."""
    dm = tiny_data()
    model = tiny_model(dm)
    loss_a, loss_b = model.estimator_loss(None), model.estimator_loss(None)
    assert loss_a.dim() == 0 and loss_a.item() != loss_b.item()  # new samples each call
    grads = torch.autograd.grad(loss_a, model.estimator_parameters(), allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    assert int(model.rollout_ready) == 0


def test_the_refusals_that_remain_name_their_reason():
    """rloo needs a group (an option away); the others are the math of the node: categorical tokens of V = 30
    categories whose one cost (D's score) couples the whole sequence."""
    dm = tiny_data()
    with pytest.raises(UserError, match="(?s)n >= 2 samples per input, and this model draws one.*model.group_size=4"):
        tiny_model(dm, estimator="rloo")
    with pytest.raises(UserError, match="at most 2 categories, and this node's have 30"):
        tiny_model(dm, estimator="disarm", group_size=2)
    with pytest.raises(UserError, match="couples its variables"):
        tiny_model(dm, estimator="expectation")
    with pytest.raises(UserError, match="continuous distribution with rsample"):
        tiny_model(dm, estimator="reparam")
    assert tiny_model(dm, estimator="rloo", group_size=2).estimator.name == "rloo"


def test_resume_continues_in_the_right_phase(tmp_path):
    """Stopping after 3 epochs (inside D pre-training) and resuming gives exactly (torch.equal) the G and D
    of one uninterrupted run over all phases."""
    from zoo.train import train

    recipe = tmp_path / "tiny_seqgan.yaml"
    recipe.write_text(
        "description: tiny seqgan\n"
        "model: {name: seqgan, gen_emb_dim: 8, gen_hidden_dim: 8, dis_emb_dim: 8,\n"
        "        dis_filter_sizes: [1, 2],\n"
        "        dis_num_filters: [4, 4], mle_epochs: 2, d_pretrain_rounds: 2, d_pretrain_epochs: 1,\n"
        "        adv_iterations: 2, adv_d_rounds: 1, adv_d_epochs: 1, rollouts: 2, adv_batch_size: 8,\n"
        "        eval_samples: 64, test_samples: 64}\n"
        "data: {name: seqgan_oracle, vocab_size: 20, emb_dim: 4, hidden_dim: 4, seq_len: 6, num_train: 64,\n"
        f"       num_val: 16, num_test: 16, batch_size: 16, root: '{tmp_path}/data'}}\n"
        "trainer: {max_epochs: -1, accelerator: cpu, enable_progress_bar: false,\n"
        "          enable_model_summary: false, num_sanity_val_steps: 0}\n"
        "test_after_fit: false\n"
    )
    common = [f"recipe={recipe}", "trainer.enable_progress_bar=false"]
    whole = train(common + [f"run_dir={tmp_path}/a"])
    first = train(common + [f"run_dir={tmp_path}/b", "trainer.max_epochs=3"])
    assert first.model.current_epoch == 3 and first.model.schedule.phase(3).kind == "d_pretrain"
    resumed = train(common + [f"run_dir={tmp_path}/b", "ckpt_path=last"])
    assert whole.model.current_epoch == resumed.model.current_epoch == 6
    for name, a in whole.model.state_dict().items():
        assert torch.equal(a, resumed.model.state_dict()[name]), name  # exactly
    assert [h[1] for h in resumed.model.history] == ["mle", "mle", "adversarial", "adversarial"]


def test_fresh_reals_for_d_come_from_the_oracle_and_d_still_learns():
    """model.d_fresh_reals: D's real half of every step is a new oracle draw, none of them a training
    sequence but by chance (the small recipe's D learnt its 5,000 by heart); D still separates G from the
    oracle.
    Refused where there is no oracle to draw from."""
    import lightning as L
    from seqgan_testlib import TINY_MODEL

    from zoo.models.seqgan.module import SeqGAN

    dm = tiny_data()
    model = tiny_model(dm, d_pretrain_rounds=3, d_pretrain_epochs=2, d_fresh_reals=True)
    seen = []
    model.dis.register_forward_hook(lambda m, inp, out: seen.append(inp[0].clone()) if m.training else None)
    fit(model, dm)
    reals = torch.cat([x[: len(x) // 2] for x in seen])  # (steps x B, T): the real halves D trained on
    train = dm.train_set.seqs
    in_train = (reals[:, None, :] == train[None]).all(-1).any(-1).float().mean()  # 1.0 from the training batches
    assert len(reals) > len(train) and in_train < 0.01, in_train  # chance: 0.13 % of oracle draws here, seed 0
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    assert trainer.validate(model, datamodule=dm, verbose=False)[0]["val/d_acc"] > 0.85
    info = {k: v for k, v in dm.info().items() if k != "oracle"}
    with pytest.raises(UserError, match="d_fresh_reals=true draws D's real examples from the oracle"):
        SeqGAN({**TINY_MODEL, "d_fresh_reals": True}, info)
