"""Resuming from the middle of an epoch (a SIGTERM save, ``checkpoint.every_n_train_steps``) is exact,
and checkpoints of a run with weight averaging keep the live weights apart from the average."""

import torch
from torch.utils.data import SequentialSampler

from zoo.core.data import EpochSampler, ResumableLoader
from zoo.train import train

COMMON = ["trainer.deterministic=true", "test_after_fit=false"]
SIGNAL_AT_11 = "{name: 'toymodel:SignalAt', step: 11}"  # 8 steps an epoch: the 4th batch of epoch 1


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_sigterm_mid_epoch_then_resume_matches_uninterrupted_run(toy_recipe, tmp_path):
    """The signal's save is the last word: else Lightning closes the epoch and the final save
    overwrites last.ckpt with "epoch 1 done", so the resumed run skips batches 4-7 of epoch 1."""
    straight = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/straight", "trainer.max_epochs=3", *COMMON])
    cut = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/cut", "trainer.max_epochs=3", *COMMON,
                 f"callbacks=[{SIGNAL_AT_11}]"])
    assert cut.interrupted
    saved = load(cut.run_dir / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == 11
    assert saved["loops"]["fit_loop"]["epoch_progress"]["current"]["processed"] == 1  # epoch 1 not done
    assert saved["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"epoch": 1, "batches": 3}]
    resumed = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/cut", "trainer.max_epochs=3", *COMMON,
                     "ckpt_path=last"])
    a, b = (load(r.run_dir / "checkpoints" / "last.ckpt") for r in (straight, resumed))
    assert a["global_step"] == b["global_step"] == 24
    assert_same(a["state_dict"], b["state_dict"])


def test_a_lazy_layer_of_the_users_own_resumes_from_the_saved_shapes(toy_recipe, tmp_path):
    """A layer sized at its first batch (nn.LazyLinear) has no shape when a resumed run builds the model: the
    checkpoint's check skips it and loading the checkpoint gives it the saved one; the run ends as the straight one."""
    opts = [f"recipe={toy_recipe}", "trainer.max_epochs=3", *COMMON, "model.lazy=true"]
    straight = train([*opts, f"run_dir={tmp_path}/straight"])
    cut = train([*opts, f"run_dir={tmp_path}/cut", f"callbacks=[{SIGNAL_AT_11}]"])
    assert cut.interrupted
    resumed = train([*opts, f"run_dir={tmp_path}/cut", "ckpt_path=last"])
    a, b = (load(r.run_dir / "checkpoints" / "last.ckpt") for r in (straight, resumed))
    assert a["global_step"] == b["global_step"] == 24
    assert a["state_dict"]["net.0.weight"].shape == (16, 8)
    assert_same(a["state_dict"], b["state_dict"])


def test_ema_checkpoints_hold_the_live_weights_and_resume_exactly(toy_recipe, tmp_path):
    """With an averaging callback, last.ckpt's live weights are the trained ones, not the average the
    callback copies into the model at the end, and a resumed run goes on from them."""
    ema = "{name: ema, decay: 0.9}"
    opts = [*COMMON, "checkpoint.every_n_epochs=4"]  # no scheduled save before the end: the final one writes
    straight = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/straight", "trainer.max_epochs=4", *opts,
                      f"callbacks=[{ema}]"])
    first = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/parts", "trainer.max_epochs=3", *opts,
                   f"callbacks=[{ema}, {SIGNAL_AT_11}]"])
    assert first.interrupted
    saved = load(first.run_dir / "checkpoints" / "last.ckpt")
    assert saved["global_step"] == 11
    live, average = saved["current_model_state"], saved["state_dict"]
    assert any(not torch.equal(live[k], average[k]) for k in live), "the live weights were saved as the average"
    again = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/parts", "trainer.max_epochs=3", *opts,
                   f"callbacks=[{ema}]", "ckpt_path=last"])
    saved = load(again.run_dir / "checkpoints" / "last.ckpt")  # by the final save (epoch 3 of every 4)
    assert saved["global_step"] == 24
    assert any(not torch.equal(saved["current_model_state"][k], saved["state_dict"][k]) for k in live)
    done = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/parts", "trainer.max_epochs=4", *opts,
                  f"callbacks=[{ema}]", "ckpt_path=last"])
    a, b = (load(r.run_dir / "checkpoints" / "last.ckpt") for r in (straight, done))
    assert a["global_step"] == b["global_step"] == 32
    assert_same(a["state_dict"], b["state_dict"])
    assert_same(a["current_model_state"], b["current_model_state"])


def _batches(loader) -> list[list[int]]:
    return [batch.tolist() for batch in loader]


def test_resumable_loader_skips_the_trained_batches_of_its_epoch_only():
    data = torch.arange(20)
    loader = ResumableLoader(data, batch_size=4, sampler=EpochSampler(20, seed=3))
    loader.sampler.set_epoch(2)
    whole = _batches(loader)
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    assert state == {"epoch": 2, "batches": 2}
    again = ResumableLoader(data, batch_size=4, sampler=EpochSampler(20, seed=3))
    again.load_state_dict(state)
    again.sampler.set_epoch(2)
    assert _batches(again) == whole[2:]  # the rest of epoch 2, in its order
    assert _batches(again) == whole  # once only
    later = ResumableLoader(data, batch_size=4, sampler=EpochSampler(20, seed=3))
    later.load_state_dict(state)
    later.sampler.set_epoch(3)  # an epoch-end checkpoint: the next epoch is whole
    assert len(_batches(later)) == 5
    wrapped = ResumableLoader(data, batch_size=4, sampler=SequentialSampler(data))  # as under DDP's wrapper
    wrapped.load_state_dict({"epoch": 0, "batches": 3})
    assert _batches(wrapped) == [[12, 13, 14, 15], [16, 17, 18, 19]]
    assert wrapped.state_dict() == {"epoch": 0, "batches": 5}


def test_a_stop_on_an_epochs_last_batch_keeps_the_validation_after_it(toy_recipe, tmp_path):
    """A save at the end of an epoch's last batch comes before that epoch's validation, which Lightning
    does not run again on resume: the validation's RNG draws (here its loader's seed) would be lost and the
    resumed run drift (the OOD recipe by up to 0.065). The signal's save, and a step save
    (checkpoint.every_n_train_steps) falling there, are made after the validation."""
    from platform_testlib import run_forked, subprocess_env

    opts = ["trainer.max_epochs=3", *COMMON, "model.val_draws=true"]
    straight = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/straight", *opts])
    want = load(straight.run_dir / "checkpoints" / "last.ckpt")["state_dict"]
    cut = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/signal", *opts,
                 "callbacks=[{name: 'toymodel:SignalAt', step: 8}]"])  # epoch 0's last batch
    assert cut.interrupted
    resumed = train([f"recipe={toy_recipe}", f"run_dir={tmp_path}/signal", *opts, "ckpt_path=last"])
    assert_same(want, load(resumed.run_dir / "checkpoints" / "last.ckpt")["state_dict"])
    steps = [f"recipe={toy_recipe}", *opts, "checkpoint.every_n_train_steps=8"]
    kill = "callbacks=[{name: 'toymodel:KillAt', step: 10}]"
    p = run_forked("zoo.train", [*steps, f"run_dir={tmp_path}/killed", kill], subprocess_env(), tmp_path)
    assert p.returncode == -9, p.stdout[-3000:]
    resumed = train([*steps, f"run_dir={tmp_path}/killed", "ckpt_path=last"])
    assert_same(want, load(resumed.run_dir / "checkpoints" / "last.ckpt")["state_dict"])


def test_an_unbatched_loaders_order_is_read_after_set_epoch():
    """Lightning makes a run's first training iterator before it calls set_epoch; with batch_size=None
    (MAML's loaders: each item a meta-batch) the DataLoader read the sampler at once, so a run resumed
    from an epoch-end checkpoint trained its first epoch on epoch 0's meta-batches."""
    data = [f"item{i}" for i in range(4)]

    class Keyed(torch.utils.data.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, key):
            i, epoch = key
            return (data[i], epoch)

    for sampler in (EpochSampler(4, seed=1, shuffle=False, tag_epoch=True), EpochSampler(4, seed=1, tag_epoch=True)):
        loader = ResumableLoader(Keyed(), batch_size=None, sampler=sampler)
        it = iter(loader)  # as Lightning's setup_data, at epoch 0
        loader.sampler.set_epoch(2)  # then the fit loop's set_epoch, before the first batch
        got = list(it)
        assert {epoch for _, epoch in got} == {2}
        assert got == list(loader)  # epoch 2's order
