"""Every recipe's training step and stochastic loss, with the model and its batch on PyTorch's
``meta`` device (shapes and dtypes, no data): a tensor made on the CPU inside the path meets the
meta tensors and is refused ("Tensor on device cpu is not on the expected device meta"), as it is
next to CUDA tensors (issue 13: skip-gram's window offsets). This runs on every machine, CI's
included; tests/test_gpu.py runs the recipes on a real GPU where there is one, and
test_device_agnostic.py scans the source and runs the models in float64.

What meta does not check, and what covers it instead:
- values. Code that reads a number on the host (``int(buffer)``) cannot run on meta, so a model's
  integer scalar buffers (flags, counters, seeds) keep their values on the CPU here; a CPU scalar
  mixes with CUDA tensors too. Skip-gram's training step reads its chunk's pairs on the host (the
  sparse updates), so for skip-gram only its autograd loss runs here (``estimator_loss``; its
  updates: test_device_agnostic's float64 run and test_gpu).
- a CPU ``torch.Generator`` drawing a meta tensor, and a CPU index into a meta tensor, are accepted
  on meta (a generator is refused on CUDA): the source scan requires ``device=`` on every
  ``torch.Generator``. There are no generators on meta, so one asked for there is made on the CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from recipe_data import NOT_RESUMED, REAL_DATA  # tests/recipe_data.py

from zoo.config import load_config
from zoo.recipe_files import all_recipes
from zoo.train import build

META = torch.device("meta")
HOST_READ_MODELS = {"skipgram"}  # training steps that read their batch's values on the host (see above)


class StubOptimizer:
    """What a manual-optimisation step calls on its optimisers (no trainer here); counts the steps."""

    def __init__(self):
        self.steps = 0

    def zero_grad(self, *args, **kwargs):
        pass

    def step(self, *args, **kwargs):
        self.steps += 1


def to_meta(x):
    if isinstance(x, torch.Tensor):
        return x.to(META)
    if isinstance(x, dict):
        return {k: to_meta(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(to_meta(v) for v in x)
    return x


def model_on_meta(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` on meta, its integer scalar buffers left on the CPU with their values; logging and
    the optimiser plumbing a trainer would provide are stubbed."""
    scalars = {name: b.clone() for name, b in model.named_buffers() if b.dim() == 0 and not b.is_floating_point()}
    model = model.to(META)
    for name, value in scalars.items():
        owner, _, leaf = name.rpartition(".")
        model.get_submodule(owner)._buffers[leaf] = value
    model.log = model.log_dict = lambda *args, **kwargs: None
    model.stub_optimizers = [StubOptimizer() for _ in range(3)]
    model.optimizers = lambda *args, **kwargs: model.stub_optimizers
    model.manual_backward = lambda loss, *args, **kwargs: loss.backward()
    model.clip_gradients = lambda *args, **kwargs: None
    return model


def first_batch(datamodule):
    from lightning.pytorch.utilities import CombinedLoader

    loader = datamodule.train_dataloader()
    batch = next(iter(loader))
    return batch[0] if isinstance(loader, CombinedLoader) else batch  # (batch, batch_idx, dataloader_idx)


@pytest.fixture
def generators_on_meta(monkeypatch):
    real = torch.Generator

    class Generator(real):  # a class, so annotations such as `torch.Generator | None` still evaluate
        def __new__(cls, device=None):
            return real() if device is None or torch.device(device).type == "meta" else real(device=device)

    monkeypatch.setattr(torch, "Generator", Generator)
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", False)  # its checks read values


def has_stochastic_loss(model) -> bool:
    """The models that sample: ``estimator_loss`` is their stochastic loss (the OOD classifier samples
    z only in its GAN modes)."""
    from zoo.models.ood.module import GAN_MODES

    mode = getattr(model.cfg, "mode", None)
    return hasattr(model, "estimator_loss") and (mode is None or mode in GAN_MODES)


def build_recipe(name: str, tmp_path: Path):
    overrides = REAL_DATA[name](tmp_path) if name in REAL_DATA else []
    torch.manual_seed(0)
    config = load_config(name, [*overrides, f"run_dir={tmp_path}/runs"])
    datamodule, model = build(config)
    datamodule.setup("fit")
    return config, first_batch(datamodule), model


def assert_gradients_on_meta(model) -> None:
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads, "no parameter received a gradient"
    assert all(g.device == META for g in grads)


# A recipe that is another of the same model and loop on other data (recipe_data.NOT_RESUMED says which) is
# built on the meta device in make test-slow; make test builds the recipes it stands for.
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow if n in NOT_RESUMED else ())
                                  for n in sorted(all_recipes())])
def test_recipe_runs_on_the_meta_device(name: str, tmp_path: Path, generators_on_meta):
    config, batch, model = build_recipe(name, tmp_path)
    batch = to_meta(batch)
    if config["model"]["name"] not in HOST_READ_MODELS:
        model = model_on_meta(model)
        loss = model.training_step(batch, 0)
        loss = loss["loss"] if isinstance(loss, dict) else loss
        if loss is not None:  # automatic optimisation: Lightning would call backward
            assert loss.device == META
            loss.backward()
        else:  # manual optimisation: the step ran its backward passes and optimiser steps itself
            assert sum(opt.steps for opt in model.stub_optimizers) >= 1
        assert_gradients_on_meta(model)
        model.zero_grad(set_to_none=True)
    if has_stochastic_loss(model) or config["model"]["name"] in HOST_READ_MODELS:
        model = model if next(model.parameters()).device == META else model_on_meta(model)
        loss = model.estimator_loss(batch)
        assert loss.device == META
        loss.backward()
        assert_gradients_on_meta(model)


class Probe(torch.nn.Module):
    """Issue 13's skip-gram bug in small: offsets built on the CPU, added to the batch's tensor."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def training_step(self, batch, batch_idx):
        offsets = torch.arange(2)  # the bug: no device=
        return (self.lin(batch) + offsets).sum()


def test_the_meta_run_catches_a_cpu_tensor():
    model = model_on_meta(Probe())
    with pytest.raises(RuntimeError, match="device"):
        model.training_step(torch.zeros(4, 3, device=META), 0)
    model.training_step = lambda batch, i: (model.lin(batch) + torch.arange(2, device=batch.device)).sum()
    assert model.training_step(torch.zeros(4, 3, device=META), 0).device == META  # device-following: it runs


def test_integer_scalar_buffers_keep_their_values():
    from zoo.estimators import get_estimator

    est = get_estimator("reinforce", baseline="ema")
    est.baseline.count.fill_(3)
    holder = torch.nn.Module()
    holder.est = est
    moved = model_on_meta(holder)
    assert moved.est.baseline.count.device.type == "cpu" and int(moved.est.baseline.count) == 3
    assert moved.est.baseline.value.device == META  # a float buffer follows the module
