"""The losses of the confidence-calibrated classifier, checked against exact values."""

import math

import torch
import torch.nn.functional as F

from zoo.models.ood.losses import confidence_loss, discriminator_loss, generator_gan_loss, kl_uniform


def test_kl_to_uniform_is_exact_on_known_cases():
    # p = (1/2, 1/4, 1/4): KL(U || p) = (1/3) [log((1/3)/(1/2)) + 2 log((1/3)/(1/4))]
    p = torch.tensor([[0.5, 0.25, 0.25]])
    expected = (math.log((1 / 3) / 0.5) + 2 * math.log((1 / 3) / 0.25)) / 3
    assert torch.allclose(kl_uniform(p.log()), torch.tensor([expected]), atol=1e-6)
    # uniform prediction: 0 (also for shifted logits: softmax is shift-invariant)
    assert torch.allclose(kl_uniform(torch.full((2, 10), 3.7)), torch.zeros(2), atol=1e-6)
    # against torch.distributions on random logits
    logits = torch.randn(5, 7, generator=torch.Generator().manual_seed(0))
    u = torch.distributions.Categorical(probs=torch.full((5, 7), 1 / 7))
    ref = torch.distributions.kl_divergence(u, torch.distributions.Categorical(logits=logits))
    assert torch.allclose(kl_uniform(logits), ref, atol=1e-5)


def test_kl_gradient_flattens_the_prediction():
    logits = torch.tensor([[4.0, 0.0, -2.0]], requires_grad=True)
    kl_uniform(logits).sum().backward()
    # descending the KL lowers the largest logit and raises the smallest
    assert logits.grad[0, 0] > 0 and logits.grad[0, 2] < 0


def test_confidence_loss_is_ce_plus_beta_kl():
    g = torch.Generator().manual_seed(1)
    logits, out, y = torch.randn(8, 10, generator=g), torch.randn(8, 10, generator=g), torch.arange(8) % 10
    ce = F.cross_entropy(logits, y)
    assert torch.allclose(confidence_loss(logits, y, None, 1.0), ce)
    assert torch.allclose(confidence_loss(logits, y, out, 0.0), ce)
    assert torch.allclose(confidence_loss(logits, y, out, 0.5), ce + 0.5 * kl_uniform(out).mean())


def test_gan_losses_at_known_points():
    zero = torch.zeros(4)
    # D(x) = D(G(z)) = 1/2: -[log 1/2 + log 1/2] = 2 log 2
    assert torch.allclose(discriminator_loss(zero, zero), torch.tensor(2 * math.log(2)))
    # non-saturating -log D(G(z)) and saturating log(1 - D(G(z))) at D = sigmoid(1)
    one = torch.ones(3)
    assert torch.allclose(generator_gan_loss(one), -F.logsigmoid(one).mean())
    assert torch.allclose(generator_gan_loss(one, saturating=True), torch.log1p(-torch.sigmoid(one)).mean())
