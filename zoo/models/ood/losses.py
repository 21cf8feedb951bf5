"""The losses of the confidence-calibrated classifier (Lee et al., ICLR 2018; Xu's softmax lecture notes,
"Use GAN to help!").

Confidence loss, for a classifier p(y|x) with K classes:

    E_in[-log p(y|x)] + beta * E_out[KL(U(y) || p(y|x))]

    KL(U || p) = sum_k (1/K) log((1/K) / p_k) = -log K - (1/K) sum_k log p_k   >= 0, = 0 iff p = U

It pushes the prediction on out-of-distribution inputs towards uniform, so max_k p_k is low there.
The joint confidence loss takes the out-of-distribution inputs from a GAN's generator G, which is
trained to fool the discriminator D (so its samples stay close to the data) while also having
a near-uniform prediction (so they leave the data): they land on the data's boundary.

    D step:  max_D  log D(x) + log(1 - D(G(z)))
    G step:  min_G  log(1 - D(G(z))) + beta * KL(U || p(y|G(z)))
    classifier step: min  CE(x, y) + beta * KL(U || p(y|G(z)))

The G step uses the usual non-saturating form -log D(G(z)) of the GAN term (same fixed point, usable
gradients while D wins; Goodfellow et al. 2014, and the paper's code) unless ``saturating``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def kl_uniform(logits: Tensor) -> Tensor:
    """KL(U(y) || softmax(logits)) per row: (B, K) -> (B,)."""
    K = logits.shape[-1]
    return -math.log(K) - F.log_softmax(logits, dim=-1).mean(-1)


def confidence_loss(logits_in: Tensor, y: Tensor, logits_out: Tensor | None, beta: float) -> Tensor:
    """CE on in-distribution + beta * mean KL(U || p) on out-of-distribution inputs (a scalar)."""
    loss = F.cross_entropy(logits_in, y)
    if logits_out is not None and beta > 0:
        loss = loss + beta * kl_uniform(logits_out).mean()
    return loss


def discriminator_loss(d_real: Tensor, d_fake: Tensor) -> Tensor:
    """-[log D(x) + log(1 - D(G(z)))] with D = sigmoid(logit), averaged: the D step's loss."""
    return (F.binary_cross_entropy_with_logits(d_real, d_real.new_ones(d_real.shape))
            + F.binary_cross_entropy_with_logits(d_fake, d_fake.new_zeros(d_fake.shape)))


def generator_gan_loss(d_fake: Tensor, saturating: bool = False) -> Tensor:
    """The GAN part of the G step: log(1 - D(G(z))) (saturating) or -log D(G(z)) (non-saturating)."""
    if saturating:
        return -F.binary_cross_entropy_with_logits(d_fake, d_fake.new_zeros(d_fake.shape))
    return F.binary_cross_entropy_with_logits(d_fake, d_fake.new_ones(d_fake.shape))


def r1_penalty(d_real: Tensor, x: Tensor) -> Tensor:
    """E ||grad_x D(x)||^2 over real inputs x (B, ...) that require grad, D's logits d_real (B,) on them: the
    R1 penalty of "Which Training Methods for GANs do actually Converge?" (weighted gamma / 2 by the caller),
    differentiable in D's weights."""
    (grad,) = torch.autograd.grad(d_real.sum(), x, create_graph=True)
    return grad.pow(2).flatten(1).sum(1).mean()
