"""The VAE's objective: closed-form KLs against the formula and Monte Carlo, the ELBO and the
importance-weighted bound against log p(x) computed exactly by enumeration, IWAE >= ELBO."""

import math

import pytest
import torch
from torch.distributions import Categorical

from zoo.errors import UserError
from zoo.models.vae.dvae import DiscreteVAE
from zoo.models.vae.vae import VAE

INFO = {"dataset": "digits", "image_shape": [1, 8, 8], "binarize": "static", "threshold": 0.5}


def test_gaussian_kl_closed_form_vs_formula_and_monte_carlo():
    torch.manual_seed(0)
    model = VAE({"latent_dim": 3}, INFO)
    x = (torch.rand(4, 1, 8, 8) > 0.5).float()
    with torch.no_grad():
        for p in model.encoder.parameters():  # spread the posterior away from the prior
            p.mul_(3.0)
        q = model.posterior(x)
        kl = model.kl(q)  # (4,)
        mu, std = q.base_dist.loc, q.base_dist.scale
        formula = 0.5 * (std**2 + mu**2 - 1 - torch.log(std**2)).sum(-1)  # Xu's softmax notes, Sigma_2 = I, mu_2 = 0
        torch.testing.assert_close(kl, formula, rtol=1e-5, atol=1e-5)
        # Monte Carlo: KL = E_q[log q(z) - log p(z)], 200k draws, seed 0; tolerance 4 standard errors
        z = q.sample((200_000,))
        terms = -model.log_ratio(q, z)  # (S, 4)
        se = terms.std(0) / math.sqrt(len(terms))
        assert torch.all((terms.mean(0) - kl).abs() < 4 * se + 1e-3), (terms.mean(0), kl, se)


def test_categorical_kl_to_uniform():
    torch.manual_seed(1)
    model = DiscreteVAE({"n_latents": 4, "n_classes": 5}, INFO)
    x = (torch.rand(3, 1, 8, 8) > 0.5).float()
    with torch.no_grad():
        q = model.posterior(x)
        kl = model.kl(q)
        formula = (math.log(5) - q.entropy()).sum(-1)  # sum_n log K - H(q_n)
        torch.testing.assert_close(kl, formula)
        z = model.draw(q, 100_000)  # (S, 3, 4, 5) one-hot
        terms = -model.log_ratio(q, z)
        se = terms.std(0) / math.sqrt(len(terms))
        assert torch.all((terms.mean(0) - kl).abs() < 4 * se + 1e-3)


def exact_nll(model: DiscreteVAE, x: torch.Tensor) -> torch.Tensor:
    """-log p(x) = -log sum_z p(x|z) p(z) by enumerating all K^N latent configurations."""
    N, K = model.cfg.n_latents, model.cfg.n_classes
    idx = torch.cartesian_prod(*[torch.arange(K)] * N).view(-1, N)  # (K^N, N)
    z = torch.nn.functional.one_hot(idx, K).float()  # (K^N, N, K)
    log_lik = model.log_lik(x, model.decode(z).unsqueeze(1).expand(-1, len(x), -1, -1, -1))  # (K^N, B)
    return -(torch.logsumexp(log_lik, 0) - N * math.log(K))


def exact_negative_elbo(model: DiscreteVAE, x: torch.Tensor) -> torch.Tensor:
    """-E_q[log p(x|z)] + KL(q || p), the expectation by enumeration."""
    N, K = model.cfg.n_latents, model.cfg.n_classes
    idx = torch.cartesian_prod(*[torch.arange(K)] * N).view(-1, N)
    z = torch.nn.functional.one_hot(idx, K).float()
    q = model.posterior(x)
    log_q = q.log_prob(idx[:, None, :].expand(-1, len(x), -1)).sum(-1)  # (K^N, B)
    log_lik = model.log_lik(x, model.decode(z).unsqueeze(1).expand(-1, len(x), -1, -1, -1))
    return -(log_q.exp() * log_lik).sum(0) + model.kl(q)


def test_elbo_and_iwae_against_exact_likelihood():
    """A tiny discrete VAE (3 latents x 3 classes = 27 configurations) where log p(x) is exact:
    -log p(x) <= IWAE nll (k=1000) <= negative ELBO, and the Monte-Carlo ELBO is unbiased."""
    torch.manual_seed(0)
    model = DiscreteVAE({"n_latents": 3, "n_classes": 3, "hidden": 32}, INFO)
    x = (torch.rand(5, 1, 8, 8) > 0.6).float()
    with torch.no_grad():
        nll = exact_nll(model, x)
        elbo_loss = exact_negative_elbo(model, x)
        assert torch.all(elbo_loss >= nll - 1e-4)  # Jensen
        # the Monte-Carlo estimate used for val/test: mean of 20k one-sample estimates, 4 standard errors
        rec, kl, q = model.eval_terms(x.repeat(20_000, 1, 1, 1))
        mc = (rec + kl).view(20_000, 5)
        se = mc.std(0) / math.sqrt(20_000)
        assert torch.all((mc.mean(0) - elbo_loss).abs() < 4 * se)
        # the importance-weighted estimate with k=1000 is within 0.05 nats of the truth (seed 0)
        iwae = model.iwae_nll(x, model.posterior(x), k=1000)
        assert torch.all(iwae >= nll - 0.05) and torch.all((iwae - nll).abs() < 0.05), (iwae, nll)
        assert torch.all(iwae <= elbo_loss)


@pytest.mark.parametrize("cls,cfg", [(VAE, {"latent_dim": 4}),
                                     (DiscreteVAE, {"n_latents": 6, "n_classes": 4})])
def test_iwae_nll_below_negative_elbo(cls, cfg):
    """IWAE(k) is a tighter bound than the ELBO: mean IWAE nll (k=64) <= mean negative ELBO over a batch
    of 64 binary images (seed 0; the gap is several standard errors for an untrained model)."""
    torch.manual_seed(0)
    model = cls(cfg, INFO)
    x = (torch.rand(64, 1, 8, 8) > 0.5).float()
    with torch.no_grad():
        rec, kl, q = model.eval_terms(x.repeat(16, 1, 1, 1))
        elbo = (rec + kl).view(16, 64).mean(0)  # 16-sample average negative ELBO per image
        iwae = model.iwae_nll(x, model.posterior(x), k=64)
    assert iwae.mean() < elbo.mean()
    assert (iwae <= elbo + 0.5).float().mean() > 0.9  # per image too, up to Monte-Carlo noise


def test_training_loss_is_the_estimators_surrogate():
    """losses(): surrogate = estimator loss of the reconstruction + KL; its value equals the
    negative ELBO estimate for reparam (reinforce's surrogate has the cost as its value too)."""
    torch.manual_seed(0)
    x = (torch.rand(8, 1, 8, 8) > 0.5).float()
    for cls, cfg in [(VAE, {"estimator": "reparam"}), (DiscreteVAE, {"estimator": {"name": "rloo", "n": 3}})]:
        model = cls(cfg, INFO)
        loss, rec, kl = model.losses(x)
        torch.testing.assert_close(loss, rec.mean() + kl.mean())
        assert rec.shape[0] == (1 if cls is VAE else 3)


def test_estimator_choices_are_checked():
    fits = "dr_grpo, grpo, gumbel_softmax, reinforce, reinforce_pp, relax, rloo"
    with pytest.raises(UserError, match=f"(?s)per categorical variable.*fit: {fits}"):
        DiscreteVAE({"estimator": "expectation"}, INFO)
    with pytest.raises(UserError, match="rsample|continuous"):
        DiscreteVAE({"estimator": "reparam"}, INFO)
    with pytest.raises(UserError, match="unknown estimator"):
        VAE({"estimator": "reparm"}, INFO)
    with pytest.raises(UserError, match="binarize"):
        VAE({"likelihood": "bernoulli"}, {**INFO, "binarize": "none"})
    with pytest.raises(UserError, match="divisible by 4"):
        VAE({"arch": "conv"}, {**INFO, "image_shape": [1, 10, 10]})


def test_gaussian_decoder_and_conv_nets():
    torch.manual_seed(0)
    info = {**INFO, "binarize": "none"}
    x = torch.rand(4, 1, 8, 8)
    for cfg in ({"likelihood": "gaussian", "decoder_std": 0.1},
                {"likelihood": "gaussian", "decoder_std": 0.0},
                {"arch": "conv", "channels": 4}):
        model = VAE(cfg, info if cfg.get("likelihood") == "gaussian" else INFO)
        xb = x if cfg.get("likelihood") == "gaussian" else (x > 0.5).float()
        loss, rec, kl = model.losses(xb)
        loss.backward()
        assert torch.isfinite(loss) and all(p.grad is not None for p in model.encoder.parameters())
    # a fixed-std Gaussian decoder's log-likelihood is the Normal log-density summed over pixels
    model = VAE({"likelihood": "gaussian", "decoder_std": 0.5}, info)
    out = torch.zeros(1, 4, 1, 8, 8)
    expected = (-0.5 * (x / 0.5) ** 2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)).flatten(1).sum(-1)
    torch.testing.assert_close(model.log_lik(x, out)[0], expected)


def test_categorical_draws_follow_posterior():
    torch.manual_seed(0)
    model = DiscreteVAE({"n_latents": 2, "n_classes": 4}, INFO)
    with torch.no_grad():
        q = model.posterior((torch.rand(1, 1, 8, 8) > 0.5).float())
        z = model.draw(q, 50_000)  # (S, 1, 2, 4)
    freq = z.mean(0)[0]
    torch.testing.assert_close(freq, q.probs[0], atol=0.01, rtol=0)  # 50k draws: se < 0.0023
    assert isinstance(q, Categorical)


@pytest.mark.parametrize("estimator", [{"name": "reinforce", "baseline": "batch_mean"}, {"name": "rloo"}])
def test_unbiased_estimators_match_the_exact_elbo_gradient(estimator):
    """Through the model's own training loss, the score-function estimators average to the exact
    encoder gradient of the negative ELBO, computed by enumerating all 3^2 latent configurations
    (20k samples per image in one call, seed 0; tolerance: relative error 5%, cosine 0.998). Without a
    baseline the same 20k samples give a cosine of only ~0.6: the ~44-nat cost offset drowns the signal."""
    torch.manual_seed(0)
    model = DiscreteVAE({"n_latents": 2, "n_classes": 3, "hidden": 16, "estimator": estimator,
                         "n_samples": 20_000}, INFO)
    x = (torch.rand(4, 1, 8, 8) > 0.5).float()
    params = model.estimator_parameters()
    exact = torch.autograd.grad(exact_negative_elbo(model, x).mean(), params)
    estimate = torch.autograd.grad(model.losses(x)[0], params)
    exact, estimate = torch.cat([g.flatten() for g in exact]), torch.cat([g.flatten() for g in estimate])
    assert (estimate - exact).norm() < 0.05 * exact.norm(), ((estimate - exact).norm(), exact.norm())
    assert torch.nn.functional.cosine_similarity(estimate, exact, dim=0) > 0.998


def test_learned_baseline_reads_the_image_and_trains():
    """reinforce with a learned baseline: sized from the image (no lazy layer, DDP-safe) and its
    regression loss reaches the baseline network through the model's loss."""
    torch.manual_seed(0)
    model = DiscreteVAE({"estimator": {"name": "reinforce", "baseline": "learned", "hidden": 16}}, INFO)
    first = model.estimator.baseline.net[0]
    assert type(first) is torch.nn.Linear and first.in_features == 64
    model.losses((torch.rand(8, 1, 8, 8) > 0.5).float())[0].backward()
    assert first.weight.grad is not None and first.weight.grad.abs().sum() > 0
