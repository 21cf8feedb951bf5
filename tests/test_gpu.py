"""Every recipe on CUDA: one training + validation batch (``trainer.fast_dev_run``) on tiny files
in the real formats (as tests/test_recipes.py), in full precision and in ``bf16-mixed``.

    python -m pytest -m gpu -q        # on a machine with a CUDA GPU

Marked ``gpu`` and skipped where ``torch.cuda.is_available()`` is false. The recipes come from
``all_recipes()``, so recipes added later (maml_*, ood_*) are picked up by themselves; a new
recipe for a real dataset adds its tiny-file writer to its model's tests/<folder>/<folder>_cases.py, as for
the CPU smoke test. A model lists the precisions it runs under in its spec's ``precisions`` (the class's
``precisions``); the others must be refused with one message (skip-gram: no ``16-mixed``,
whose GradScaler asserts on an optimizer without gradients; every model: no ``16-true`` /
``bf16-true``). The CPU halves (``bf16-mixed``, ``64-true``) run in tests/test_recipes.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from zoo.config import load_config
from zoo.estimators import ESTIMATORS
from zoo.recipe_files import all_recipes
from zoo.registry import MODELS
from zoo.train import train

RECIPES = sorted(all_recipes())
PRECISIONS = ["32-true", "bf16-mixed", "16-mixed"]

try:
    from recipe_data import REAL_DATA  # tests/recipe_data.py
except ImportError:  # pragma: no cover
    REAL_DATA = {}

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (pytest -m gpu)")]


def model_precisions(name: str) -> tuple[str, ...]:
    """The precisions the recipe's model supports (``precisions`` on its class)."""
    model_name = load_config(name)["model"]["name"]
    return tuple(getattr(MODELS.get(model_name), "precisions", PRECISIONS))


def smoke(name: str, precision: str, accelerator: str, tmp_path: Path):
    """One fast_dev_run of recipe ``name``; returns the zoo's run result."""
    overrides = REAL_DATA[name](tmp_path) if name in REAL_DATA else []
    return train([f"recipe={name}", f"run_dir={tmp_path}/runs", "trainer.fast_dev_run=true",
                  f"trainer.accelerator={accelerator}", "trainer.devices=1", f"trainer.precision={precision}",
                  "trainer.enable_progress_bar=false", *overrides])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("name", RECIPES)
def test_recipe_on_cuda(name: str, precision: str, tmp_path: Path):
    if precision not in model_precisions(name):  # skip-gram and 16-mixed: refused before anything runs
        from zoo.errors import UserError

        with pytest.raises(UserError, match="is not supported by"):
            smoke(name, precision, "gpu", tmp_path)
        return
    result = smoke(name, precision, "gpu", tmp_path)
    assert result is not None and result.run_dir.is_dir()
    params = list(result.model.parameters())
    assert params, "a model with parameters"
    # Lightning moves the model back to the CPU at teardown; the run trained on the GPU
    assert result.model.trainer.strategy.root_device.type == "cuda"
    assert all(torch.isfinite(p).all() for p in params), "non-finite weights after one step"


def test_skipgram_learns_on_cuda(tmp_path: Path):
    """On a GPU skip-gram takes the minibatch path by default (updates=auto) and still
    learns the planted groups: 2 epochs, seed 0; the CPU reaches ~0.94 in 5."""
    result = train(["recipe=skipgram_synthetic", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/data",
                    "trainer.accelerator=gpu", "trainer.devices=1", "trainer.max_epochs=2",
                    "trainer.enable_progress_bar=false"])
    assert result.model.trainer.strategy.root_device.type == "cuda"
    assert result.test_metrics["test/planted_spearman"] > 0.85


def test_skipgram_sequential_updates_learn_on_cuda(tmp_path: Path):
    """model.updates=sequential on a GPU: word2vec's per-pair updates in the Triton kernel, Hogwild over
    warps (at most V / 4 at once: 45 on this 180-word vocabulary), learn the planted groups as the CPU
    kernel does (~0.94 in 5 epochs): 2 epochs, seed 0."""
    result = train(["recipe=skipgram_synthetic", f"run_dir={tmp_path}/runs", f"data.root={tmp_path}/data",
                    "trainer.accelerator=gpu", "trainer.devices=1", "trainer.max_epochs=2",
                    "model.updates=sequential", "trainer.enable_progress_bar=false"])
    assert result.model.trainer.strategy.root_device.type == "cuda"
    assert result.test_metrics["test/planted_spearman"] > 0.85


def test_skipgram_gpu_kernel_on_cuda_gives_the_cpu_kernels_tables_with_one_job():
    """One job on the GPU is the CPU kernel's one thread: the same seeds, noise words and sigmoid table
    give the same tables within 2e-4 (float32, the dot product summed across lanes), whether its tokens come in
    one part or in stripes of 16, with noise words drawn for every pair or once a window. With 64 jobs at once
    (Hogwild), contiguous or striped, the pairs are the same ones, and the tables finite.
    Seed 0, 3,000 tokens, V 500, D 100."""
    import numpy as np
    from skipgram_chunks import random_chunk

    from zoo.models.skipgram import gpu_kernel, kernel

    c = random_chunk(500, 100, 3000, sentence_length=50, max_half=5, count_max=1000, context_scale=0.1)
    keep, alias, tokens, sentence, reduced, centre, context = (c[k] for k in (
        "keep", "alias", "tokens", "sentence", "reduced", "centre", "context"))
    N = len(tokens)
    noise = (torch.from_numpy(keep).cuda(), torch.from_numpy(alias).cuda())
    on_gpu = [t.cuda() for t in (tokens, sentence, reduced)]
    for share in (1, 0):  # noise words drawn for every pair, and once a window (model.share_negatives)
        a, b = centre.clone(), context.clone()
        _, cpu_pairs = kernel._train_chunk(tokens.numpy(), sentence.numpy(), reduced.numpy(), np.array([0, N]), 1,
                                           a.numpy(), b.numpy(), *kernel.compact_noise(keep, alias),
                                           np.empty(0, np.float32), 5, 0.025, 0.02, 7, True,
                                           kernel.TABLE_SCALE["exact"], kernel.pairs_per_draw(share, reduced))
        for jobs, stripe in ((1, 0), (1, 16), (64, 0), (64, 16)):
            x, y = centre.cuda(), context.cuda()
            stats = gpu_kernel.train_chunk(x, y, *on_gpu, noise, None, 5, 0.025, 0.02, 7, jobs=jobs,
                                           skip_saturated=True, stripe=stripe, share_noise=share)
            assert int(stats["pairs"]) == cpu_pairs
            assert torch.isfinite(x).all() and torch.isfinite(y).all()
            if jobs == 1:
                torch.testing.assert_close(x.cpu(), a, rtol=0, atol=2e-4)
                torch.testing.assert_close(y.cpu(), b, rtol=0, atol=2e-4)
                assert (a - centre).abs().max() > 1e-2  # the tables did move


@pytest.mark.parametrize("method", ["newton", "line"])
def test_skipgram_sparse_capped_step_on_cuda_matches_the_cpu(method):
    """The sparse minibatch step with the step cap (a vocabulary too large for the dense path; the
    recipe above has 180 words) on CUDA, its rows by sort (no host sync) and by
    torch.unique: the tables after three steps match the CPU's to float tolerance (the GPU's
    index_add_ sums in another order). The noise words are drawn on the CPU and reused."""
    from zoo.models.skipgram.nets import SkipGram

    torch.manual_seed(0)
    counts = torch.randint(1, 100, (3000,))
    cond, target = torch.randint(0, 3000, (2000, 4)), torch.randint(0, 3000, (2000,))
    valid = torch.rand(2000, 4) > 0.2
    tables = {}
    for where, sync_free in (("cpu", False), ("cuda", True), ("cuda", False)):
        net = SkipGram(counts, dim=16, step_cap=True, cap_method=method)
        with torch.no_grad():
            net.centre.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(1))
            net.context.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(2))
        net = net.to(where)
        net.sync_free_rows = sync_free
        noise, draw = torch.Generator().manual_seed(3), net.sampler.sample  # the same draws everywhere
        net.sampler.sample = lambda shape, generator=None, device=None, draw=draw, noise=noise: \
            draw(shape, noise).to(device)
        with torch.no_grad():
            for _ in range(3):
                net.sgd_windows(cond.to(where), valid.to(where), target.to(where), 0.05, None, dense=False)
        tables[where, sync_free] = net.centre.detach().cpu(), net.context.detach().cpu()
    reference = tables["cpu", False]
    for key in (("cuda", True), ("cuda", False)):
        for got, want in zip(tables[key], reference):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_maml_conv_meta_gradient_on_cuda_in_full_float32():
    """The Omniglot conv net's batched meta-gradient equals the per-task loop's on CUDA once
    ``matmul_precision=highest`` turns cuDNN's TF32 off (with it on, the H100 gave a 2.3e-3
    difference: benchmarks/results/gpu_h100_2026-11-25.json). 5-way 1-shot, 8 tasks, float32."""
    import torch.nn.functional as F

    from zoo.models.maml import meta
    from zoo.models.maml.nets import ConvNet
    from zoo.tracking import float32_precision

    g = torch.Generator().manual_seed(0)
    xs, xq = torch.rand(8, 5, 1, 28, 28, generator=g).cuda(), torch.rand(8, 15, 1, 28, 28, generator=g).cuda()
    ys, yq = torch.arange(5, device="cuda").expand(8, -1), torch.arange(5, device="cuda").repeat(3).expand(8, -1)
    torch.manual_seed(0)
    net = ConvNet(5).cuda()
    params = dict(net.named_parameters())
    with float32_precision("highest"):
        grads = {path: torch.autograd.grad(meta.META_LOSSES[path](net, params, 0.4, (xs, ys, xq, yq), F.cross_entropy,
                                                                  1, False), list(params.values()))
                 for path in ("batched", "loop")}
    scale = max(float(t.abs().max()) for t in grads["loop"])
    diff = max(float((a - b).abs().max()) for a, b in zip(grads["batched"], grads["loop"]))
    assert diff <= 1e-4 * max(scale, 1.0), (diff, scale)


def test_rng_state_restores_cuda_generators():
    """A resumed GPU run draws the same CUDA random numbers as the uninterrupted one (RNGState)."""
    from zoo.callbacks.checkpoints import RNGState

    torch.cuda.manual_seed_all(0)
    torch.rand(1, device="cuda")  # CUDA in use, as in a run
    cb = RNGState()
    state = cb.state_dict()
    assert len(state["cuda"]) == torch.cuda.device_count()
    expected = torch.rand(5, device="cuda")
    torch.rand(100, device="cuda")
    cb.load_state_dict(state)
    assert torch.equal(torch.rand(5, device="cuda"), expected)


def test_relax_with_rebar_estimates_on_cuda():
    """REBAR's term evaluates the cost at relaxed samples and differentiates the estimate once more: on CUDA
    tensors, eta on the GPU and trained, a finite gradient to the logits."""
    from zoo.estimators import get_estimator

    torch.manual_seed(0)
    est = get_estimator("relax", rebar=True).cuda()
    values = torch.arange(4.0, device="cuda")
    logits = torch.tensor([0.3, -0.2, 1.0, -1.0], device="cuda").expand(64, -1).clone().requires_grad_()
    s = est.sample(logits)
    loss = est.loss(s, 5.0 + (s.value @ values - 1.2) ** 2, cost_fn=lambda v: 5.0 + (v @ values - 1.2) ** 2)
    loss.backward()
    assert est.control.eta.device.type == "cuda" and est.control.eta.grad.abs() > 0
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0


@pytest.mark.parametrize("name", ESTIMATORS.list())
def test_every_estimator_estimates_on_cuda(name: str):
    """Each registered estimator on CUDA tensors: its state on the GPU, a finite gradient there (relax
    differentiates its estimate once more, through the control variate)."""
    from torch.distributions import Normal

    from zoo.estimators import get_estimator
    from zoo.estimators.seam import default_requirements

    torch.manual_seed(0)
    est = get_estimator(name).cuda()
    caps = default_requirements(type(est))
    n = max(caps.min_samples, 1)
    if caps.distributions == "continuous":
        theta = torch.full((64,), 0.5, device="cuda", requires_grad=True)
        s = est.sample(Normal(2 * theta + 3, 1.0), n)
        loss = est.loss(s, s.value**2)
    else:
        k = min(4, caps.max_categories or 4)  # binary-only estimators (arm, disarm): 2 categories
        theta = torch.tensor([0.3, -0.2, 1.0, -1.0][:k], device="cuda").expand(64, -1).clone().requires_grad_()
        s = est.sample(theta, n)
        loss = est.loss(s, 5.0 + (s.value @ torch.arange(float(k), device="cuda") - 1.2) ** 2)
    loss.backward()
    assert loss.device.type == "cuda" and theta.grad.device.type == "cuda"
    assert torch.isfinite(theta.grad).all() and theta.grad.abs().sum() > 0
    assert all(t.device.type == "cuda" for t in [*est.parameters(), *est.buffers()])


@pytest.mark.parametrize("spec", ["expectation", {"name": "unordered_set", "n": 4}])
def test_one_latent_dvae_takes_the_per_variable_estimators_on_cuda(spec, dvae_exact_loss):
    """The discrete VAE with one latent hands the per-variable estimators its cost as (n, B, 1) on the
    GPU: the exact sum over the 10 classes and the set estimator (its set probabilities in float64 there)
    give a finite loss and gradients to encoder and decoder; expectation's loss is the exact one."""
    from zoo.models.vae.dvae import DiscreteVAE

    torch.manual_seed(0)
    info = {"dataset": "digits", "image_shape": [1, 8, 8], "binarize": "static", "threshold": 0.5}
    model = DiscreteVAE({"n_latents": 1, "estimator": spec}, info).cuda()
    x = (torch.rand(16, 1, 8, 8, device="cuda") > 0.5).float()
    loss, rec, kl = model.losses(x)
    loss.backward()
    assert torch.isfinite(loss) and rec.shape == (1, 16) and rec.device.type == "cuda"
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.encoder.parameters())
    assert any(p.grad.abs().sum() > 0 for p in model.decoder.parameters())
    if spec == "expectation":
        with torch.no_grad():
            exact = dvae_exact_loss(model, x)
        torch.testing.assert_close(loss.detach(), exact, rtol=1e-5, atol=1e-4)
