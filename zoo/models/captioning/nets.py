"""Show, Attend and Tell networks (Xu et al. 2015): CNN encoders and the attention LSTM decoder.

Plain nn.Modules; the soft/hard attention choice and its training loss live in `module.py`.

Encoder: image (B, 3, H, W) -> annotation vectors a (B, L, D), L = h x w grid cells.
Decoder, one step t (paper section 3.1.2; equation numbers of the paper):
    e_ti   = w^T tanh(W_a a_i + W_h h_{t-1} + b)          attention logits f_att    (4)
    alpha_t = softmax(e_t)                                                          (5)
    z_t    = beta_t * sum_i w_ti a_i,  beta_t = sigmoid(W_b h_{t-1})  gated context (6, 4.2.1)
             w_t = alpha_t (soft) or one-hot(s_t), s_t ~ Multinoulli(alpha_t) (hard)
    h_t, c_t = LSTM([E y_{t-1}; z_t], (h_{t-1}, c_{t-1}))                             (1-3)
    p(y_t) = softmax(L_o tanh(E y_{t-1} + L_h h_t + L_z z_t))   deep output layer    (7)
    h_0, c_0 = MLP_h(mean_i a_i), MLP_c(mean_i a_i)
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import torch
import torch.nn.functional as F
import torchvision.models as tvm
from torch import Tensor, nn

from zoo.core.downloads import CONNECT_TIMEOUT, LOCAL_HOSTS, offline
from zoo.errors import UserError

from .config import TORCHVISION


class ShapesCNN(nn.Module):
    """Small conv net for shapes scenes: 3 stride-2 stages, so a 64-px canvas gives an 8 x 8 grid.

    Two coordinate channels (x, y in [-1, 1]) are appended to the input (CoordConv): relation
    words ("left of") need to know *where* the attended object is, and the context vector only
    carries what the features at that cell encode.
    """

    def __init__(self, feat_dim: int = 128, width: int = 32, stages: int = 3):
        super().__init__()

        def conv(c_in: int, c_out: int, stride: int = 1) -> list[nn.Module]:
            return [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1), nn.BatchNorm2d(c_out),
                    nn.ReLU(inplace=True)]

        w = width  # stage widths w, 2w, 4w; the first stage is a single conv (cheap at full resolution)
        layers = [*conv(5, w, 2), *conv(w, 2 * w, 2), *conv(2 * w, 2 * w)]
        for _ in range(stages - 2):  # every further stage halves the grid: 64 px -> 8x8 (3), 4x4 (4)
            layers += [*conv(2 * w if _ == 0 else 4 * w, 4 * w, 2), *conv(4 * w, 4 * w)]
        self.net = nn.Sequential(*layers, nn.Conv2d(4 * w, feat_dim, 1), nn.ReLU(inplace=True))
        self.feat_dim = feat_dim

    def forward(self, x: Tensor) -> Tensor:
        B, _, H, W = x.shape
        ys = torch.linspace(-1, 1, H, device=x.device, dtype=x.dtype).view(1, 1, H, 1).expand(B, 1, H, W)
        xs = torch.linspace(-1, 1, W, device=x.device, dtype=x.dtype).view(1, 1, 1, W).expand(B, 1, H, W)
        return self.net(torch.cat([x, xs, ys], dim=1))  # (B, D, h, w)


def imagenet_weights_path(name: str) -> tuple[Path, str]:
    """Where torch hub caches the ImageNet weights of `name`, and their URL."""
    url = getattr(tvm, TORCHVISION[name][1]).IMAGENET1K_V1.url
    return Path(torch.hub.get_dir()) / "checkpoints" / url.rsplit("/", 1)[-1], url


def fetch_weights(name: str, path: Path, url: str) -> None:
    """torchvision's ImageNet weights into torch hub's cache (checked against the hash in their file
    name); with ZOO_OFFLINE=1, or when the download fails, a UserError saying where to put them."""
    missing = (f"ImageNet weights for {name} not found: copy the file below to the place below, or train the "
               "encoder from scratch with model.pretrained_encoder=false")
    where = [f"the file: {url}", f"its place: {path}"]
    if offline() and urlsplit(url).hostname not in LOCAL_HOSTS:
        raise UserError(f"{missing} (ZOO_OFFLINE=1: not fetched)", details=where)
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(CONNECT_TIMEOUT * 6)  # torch hub's urllib has none: no network would hang
    try:
        torch.hub.load_state_dict_from_url(url, model_dir=str(path.parent), map_location="cpu", check_hash=True,
                                           weights_only=True)
    except (OSError, RuntimeError, ValueError) as err:  # URLError is an OSError; a wrong hash a RuntimeError
        raise UserError(missing, details=[*where, f"fetching it failed: {' '.join(str(err).split())[:200]}"]) from None
    finally:
        socket.setdefaulttimeout(old)


class TorchvisionEncoder(nn.Module):
    """VGG (conv5_4 / conv5_3 before the last max-pool: 14x14x512 for 224 px, as in the paper) or
    ResNet (layer4 with its stride replaced by dilation: 14x14x2048 for 224 px, same weights).

    ImageNet weights come from the torch hub cache, fetched into it when missing (``fetch_weights``).
    """

    def __init__(self, name: str, pretrained: bool = True, grid: int = 14):
        super().__init__()

        if name not in TORCHVISION:
            raise UserError(f"unknown encoder '{name}'; choose cnn or one of {', '.join(TORCHVISION)}")
        builder, _, self.feat_dim = TORCHVISION[name]
        kw = {"replace_stride_with_dilation": [False, False, True]} if name.startswith("resnet") else {}
        path, url = imagenet_weights_path(name)
        if pretrained and not path.is_file():  # checked before building: VGG's init alone takes seconds
            fetch_weights(name, path, url)
        net = getattr(tvm, builder)(weights=None, **kw)
        if pretrained:
            net.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        self.body = net.features[:-1] if name.startswith("vgg") else nn.Sequential(*list(net.children())[:-2])
        self.pool = nn.AdaptiveAvgPool2d(grid) if grid > 0 else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(self.body(x))  # (B, D, grid, grid)


def build_encoder(name: str, feat_dim: int, width: int, pretrained: bool, grid: int,
                  stages: int = 3) -> nn.Module:
    if name == "cnn":
        return ShapesCNN(feat_dim, width, stages)
    return TorchvisionEncoder(name, pretrained, grid)


Choose = Callable[[int, Tensor], Tensor]  # (step t, attention logits (N, L)) -> weights (N, L)


class AttentionDecoder(nn.Module):
    """LSTM decoder with additive attention, gating scalar and deep output layer."""

    def __init__(self, vocab_size: int, feat_dim: int, embed_dim: int, hidden_dim: int, att_dim: int,
                 dropout: float = 0.5, gate: bool = True, deep_output: bool = True, init_state: str = "mean"):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim)
        if init_state == "mean":  # the paper: h_0, c_0 from the mean annotation vector
            self.init_mlp = nn.Sequential(nn.Linear(feat_dim, feat_dim), nn.ReLU(), nn.Dropout(dropout))
            self.init_h, self.init_c = nn.Linear(feat_dim, hidden_dim), nn.Linear(feat_dim, hidden_dim)
        else:  # "learned": one learned (h_0, c_0) for all images; every word must come through attention
            self.h0, self.c0 = nn.Parameter(torch.zeros(hidden_dim)), nn.Parameter(torch.zeros(hidden_dim))
        self.init_state_kind = init_state
        self.att_feat = nn.Linear(feat_dim, att_dim)  # W_a (+ b)
        self.att_hid = nn.Linear(hidden_dim, att_dim, bias=False)  # W_h
        self.att_out = nn.Linear(att_dim, 1)  # w
        self.gate = nn.Linear(hidden_dim, 1) if gate else None  # beta = sigmoid(W_b h)
        self.lstm = nn.LSTMCell(embed_dim + feat_dim, hidden_dim)
        self.out_h = nn.Linear(hidden_dim, embed_dim)  # L_h
        self.out_z = nn.Linear(feat_dim, embed_dim) if deep_output else None  # L_z
        self.out = nn.Linear(embed_dim, vocab_size)  # L_o
        self.drop = nn.Dropout(dropout)
        self.deep_output = deep_output

    def attention_params(self) -> list[nn.Parameter]:
        """Parameters of f_att: the only ones whose gradient comes through the estimator in hard mode."""
        return [*self.att_feat.parameters(), *self.att_hid.parameters(), *self.att_out.parameters()]

    def init_state(self, feats: Tensor) -> tuple[Tensor, Tensor]:
        if self.init_state_kind != "mean":
            N = feats.shape[0]
            return self.h0.expand(N, -1), self.c0.expand(N, -1)  # (N, H) each
        m = self.init_mlp(feats.mean(1))  # (N, D)
        return torch.tanh(self.init_h(m)), torch.tanh(self.init_c(m))  # (N, H) each

    def project(self, feats: Tensor) -> Tensor:
        return self.att_feat(feats)  # (N, L, A), computed once per image

    def attend(self, pfeats: Tensor, h: Tensor) -> Tensor:
        """Attention logits e_t (N, L) from projected features and h_{t-1}."""
        return self.att_out(torch.tanh(pfeats + self.att_hid(h).unsqueeze(1))).squeeze(-1)

    def advance(self, feats: Tensor, weights: Tensor, prev: Tensor, state: tuple[Tensor, Tensor]):
        """One LSTM step given attention weights (N, L) over feats (N, L, D) and previous words (N,).
        Returns word logits (N, V) and the new (h, c)."""
        h, c = state
        z = torch.bmm(weights.unsqueeze(1), feats).squeeze(1)  # (N, D) context
        if self.gate is not None:
            z = torch.sigmoid(self.gate(h)) * z
        emb = self.embed(prev)  # (N, E)
        h, c = self.lstm(torch.cat([emb, z], dim=-1), (h, c))
        out = self.out_h(self.drop(h))
        if self.deep_output:
            out = out + emb + self.out_z(z)
        return self.out(self.drop(torch.tanh(out))), (h, c)

    def unroll(self, feats: Tensor, tokens: Tensor, choose: Choose) -> tuple[Tensor, Tensor, Tensor]:
        """Teacher forcing: feed tokens (N, T) (<start> w_1 .. w_{T-1}); ``choose`` turns attention
        logits into the weights the context uses (soft: softmax; hard: a sample).
        Returns word logits (N, T, V), attention logits (N, T, L), weights used (N, T, L)."""
        pfeats, state = self.project(feats), self.init_state(feats)
        logits, att, used = [], [], []
        for t in range(tokens.shape[1]):
            e = self.attend(pfeats, state[0])  # (N, L)
            w = choose(t, e)  # (N, L)
            out, state = self.advance(feats, w, tokens[:, t], state)
            logits.append(out), att.append(e), used.append(w)
        return torch.stack(logits, 1), torch.stack(att, 1), torch.stack(used, 1)


def doubly_stochastic(alpha: Tensor, valid: Tensor) -> Tensor:
    """Per caption  sum_i (1 - sum_t alpha_ti)^2  over the caption's own steps: (N, T, L), (N, T) -> (N,).

    Paper section 4.2.1: encourages every location to receive, summed over the caption, about one
    unit of attention, so the model looks at every part of the image at some point."""
    return (1.0 - (alpha * valid.unsqueeze(-1).to(alpha.dtype)).sum(1)).pow(2).sum(-1)


def token_nll(logits: Tensor, target: Tensor, valid: Tensor) -> Tensor:
    """-log p(y_t) per token (N, T), zero at padding."""
    return F.cross_entropy(logits.transpose(1, 2), target, reduction="none") * valid
