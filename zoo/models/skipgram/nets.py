"""Skip-gram with NCE / negative sampling / full softmax: two embedding tables and their
hand-written sparse SGD updates (plain torch, no Lightning).

Notation (Xu's softmax lecture notes, "Noise Contrastive Estimation"): a pair is (c, w): c the conditioning
word, w the predicted word, score s(w, c) = u_w . v_c with v = ``centre`` (the exported word vectors, word2vec's
syn0) and u = ``context`` (output vectors, syn1neg). Objectives for one pair and k noise words w'~q:
- ``nce``:               -log sig(s(w,c) - log k q(w)) - sum_w' log(1 - sig(s(w',c) - log k q(w')))
- ``negative_sampling``: the same without the log k q terms (word2vec);
- ``full_softmax``:      -log softmax_w(s(., c)), exact and O(V) per pair.

How pairs are visited (word2vec.c's loop order): for a window centre at position i, every
word j of its reduced window is a conditioning word and the word at i is predicted, so one
window is a small (S contexts) x (1 + k outputs) block: v (B, S, D) against u (B, 1+k, D). With
``share_negatives`` the k noise words are drawn once per window and used by all its S pairs
(Ji et al. 2016, "Parallelizing Word2Vec in Shared and Distributed Memory"; also BlazingText):
every pair still gets k negatives, with 1/S of the sampling and gathering. Without it every pair
draws its own k (exactly word2vec.c) and the block is (1) x (1 + k).

Updates are written by hand (the gradient of the logistic loss wrt a score is sig(s) - y):
gather rows with ``F.embedding``, two ``bmm``s, scatter with ``index_add_``. Autograd and a
sparse optimizer would build the same (B, S, 1+k) graph plus sparse-gradient coalescing that
costs more than the arithmetic. ``loss`` is the same objective with autograd, which the tests
use to check the hand-written gradients.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo.models.skipgram.config import CAP_METHODS, OBJECTIVES
from zoo.models.skipgram.sampling import AliasSampler, noise_distribution

NEWTON_ITERATIONS = 2  # conjugate-gradient iterations of the damped Newton step (1 to 4
# compared in studies/2026-11-27-skipgram-vs-gensim.md)


def path_curvature(residual: torch.Tensor) -> torch.Tensor:
    """The logistic curvature sig'(s) = r (1 - r) that a gradient step meets on its way, from the
    residuals r = |y - sig(s)| (masked terms have r = 0 and get 0). A score on the right side
    (r <= 1/2) moves away from the boundary, where sig' only falls: its own sig'(s) bounds it. A
    score on the wrong side (r > 1/2) moves towards s = 0 and crosses it, where sig' peaks at 1/4:
    sig'(s) there would be near 0 for a saturated wrong score whose gradient is at full size, and
    thousands of such coherent terms on one row (a tiny vocabulary without subsampling) overshoot.
    For softmax outputs p, p (1 - p) = r (1 - r) with r = |onehot - p| alike."""
    r = residual.abs().clamp_(max=0.5)
    return r.mul_(1 - r)


class SkipGram(nn.Module):
    def __init__(self, counts: list[int] | torch.Tensor, dim: int = 100, objective: str = "negative_sampling",
                 negative: int = 5, noise_power: float = 0.75, step_cap: bool = True, init_range: float = 0.5,
                 cap_method: str = "newton"):
        super().__init__()
        self.step_cap = step_cap
        if cap_method not in CAP_METHODS:
            raise ValueError(f"cap_method must be one of {CAP_METHODS}, got {cap_method!r}")
        self.cap_method = cap_method
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        counts = torch.as_tensor(counts, dtype=torch.float64)
        vocab = len(counts)
        self.objective, self.negative = objective, negative
        # v ~ U(-r/D, r/D) (word2vec.c: r = 0.5; gensim 4: r = 1), u = 0
        # (requires_grad only so that DDP accepts the module; updates never go through autograd)
        self.centre = nn.Parameter(torch.empty(vocab, dim).uniform_(-init_range / dim, init_range / dim))
        self.context = nn.Parameter(torch.zeros(vocab, dim))
        q = noise_distribution(counts, noise_power)
        self.register_buffer("log_kq", (max(negative, 1) * q).log().float(), persistent=False)  # (V,)
        self.sampler = AliasSampler(q)
        self.hogwild_threads = 1  # threads running minibatches on these tables at once (loop.py)
        self.replicas = 1  # DDP ranks whose chunk updates are summed (loop.py, from module.py)
        self.sync_free_rows = False  # ``rows`` by a sort, without torch.unique's host sync (see ``rows``)

    # ---- the objective with autograd (reference and diagnostics) ------------------------------
    def logits(self, v: torch.Tensor, u: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """v: (B, S, D) conditioning vectors, u: (B, K1, D) output vectors of ids ``out`` (B, K1)
        -> scores (B, S, K1), with NCE's -log k q(w) correction."""
        s = torch.bmm(v, u.transpose(1, 2))
        if self.objective == "nce":
            s = s - self.log_kq[out][:, None, :]
        return s

    def loss(self, centre: torch.Tensor, context: torch.Tensor, cond: torch.Tensor, valid: torch.Tensor,
             out: torch.Tensor) -> torch.Tensor:
        """Summed loss of windows. cond (B, S) conditioning ids, valid (B, S), out (B, K1): the
        predicted word then k noise words (a noise word equal to the predicted one is skipped, as
        in word2vec). ``centre``/``context`` are the tables (pass leaf copies to differentiate)."""
        if self.objective == "full_softmax":
            scores = F.embedding(cond, centre) @ context.T  # (B, S, V)
            targets = out[:, :1].expand_as(cond).flatten()
            nll = F.cross_entropy(scores.flatten(0, 1), targets, reduction="none")
            return (nll * valid.flatten()).sum()
        s = self.logits(F.embedding(cond, centre), F.embedding(out, context), out)  # (B, S, K1)
        w = self._weights(valid, out)
        ll = torch.cat([F.logsigmoid(s[..., :1]), F.logsigmoid(-s[..., 1:])], -1)
        return -(ll * w).sum()

    @staticmethod
    def _weights(valid: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """(B, S, K1) bool: pair mask x skip-noise-equal-to-target mask (multiplying by a bool mask
        is multiplying by 1 or 0, without a float copy: on a GPU each operation is a launch)."""
        keep = out != out[:, :1]  # (B, K1)
        keep[:, 0] = True  # the target itself
        return valid[:, :, None] & keep[:, None, :]

    # ---- hand-written sparse SGD ---------------------------------------------------------------
    @torch.no_grad()
    def sgd_windows(self, cond: torch.Tensor, valid: torch.Tensor, target: torch.Tensor, lr: float,
                    generator: torch.Generator | None = None, share_negatives: bool = True,
                    with_loss: bool = False, dense: bool | None = None) -> tuple:
        """One simultaneous SGD step on windows. cond (B, S) conditioning ids, valid (B, S),
        target (B,) the predicted words. ``dense``: use ``_sgd_dense`` (None: when it is cheaper,
        i.e. V^2 <= the number of (pair, output) terms). Returns (summed loss or 0, number of pairs),
        each a 0-dim tensor to be read once a chunk: reading one holds the host until a GPU's queue drains."""
        if self.objective == "full_softmax":
            return self.sgd_softmax(cond[valid], target[:, None].expand_as(cond)[valid], lr, with_loss)
        k = self.negative
        if not share_negatives:  # one row per pair: word2vec.c exactly
            target = target[:, None].expand_as(cond)[valid]
            cond, valid = cond[valid][:, None], valid.new_ones(int(valid.sum()), 1)
        noise = self.sampler.sample((len(target), k), generator, target.device)  # (B, k)
        out = torch.cat([target[:, None], noise], 1)  # (B, K1)
        if dense if dense is not None else self.centre.shape[0] ** 2 <= 4 * cond.numel() * out.shape[1]:
            return self._sgd_dense(cond, valid, out, lr, with_loss)
        v = F.embedding(cond, self.centre)  # (B, S, D)
        u = F.embedding(out, self.context)  # (B, K1, D)
        g, curvature, loss = self._coefficients(self.logits(v, u, out), valid, out, with_loss)  # (B, S, K1)
        grad_v = torch.bmm(g, u)  # (B, S, D): -dloss/dv of each conditioning slot
        grad_u = torch.bmm(g.transpose(1, 2), v)  # (B, K1, D): -dloss/du of each output slot
        if not self.step_cap:
            self.centre.index_add_(0, cond.flatten(), grad_v.flatten(0, 1), alpha=lr)
            self.context.index_add_(0, out.flatten(), grad_u.flatten(0, 1), alpha=lr)
            return loss, valid.sum()
        # per-row damped steps (``_capped_step``), both from the tables before either update (v, u are
        # gathered copies); a row's Hessian-vector product sums h (x . p) x over its terms. Both tables' rows
        # form one (R + R', D) system, each row its own block: one kernel launch per solver operation on a GPU
        rows_v, inv_v = self.rows(cond)  # (R,), (B, S)
        rows_u, inv_u = self.rows(out)  # (R',), (B, K1)
        R = len(rows_v)

        def hvp(P: torch.Tensor) -> torch.Tensor:  # (R + R', D) -> (R + R', D)
            HP = torch.zeros_like(P)
            a = torch.bmm(F.embedding(inv_v, P[:R]), u.transpose(1, 2)).mul_(curvature)  # (B, S, K1)
            self._add_rows(HP[:R], inv_v, torch.bmm(a, u))
            a = torch.bmm(v, F.embedding(inv_u, P[R:]).transpose(1, 2)).mul_(curvature)  # (B, S, K1)
            self._add_rows(HP[R:], inv_u, torch.bmm(a.transpose(1, 2), v))
            return HP

        grad = grad_v.new_zeros(R + len(rows_u), grad_v.shape[-1])  # (R + R', D): each row's summed gradient
        self._add_rows(grad[:R], inv_v, grad_v)
        self._add_rows(grad[R:], inv_u, grad_u)
        step = self._capped_step(grad, hvp, lr)
        self.centre.index_add_(0, rows_v, step[:R])
        self.context.index_add_(0, rows_u, step[R:])
        return loss, valid.sum()

    def rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The table rows that ``ids`` touch and each id's index among them: ``torch.unique(ids,
        return_inverse=True)``, whose size the host must read back (on a GPU a sync that holds the host
        until the queue drains: 20 a 5,120-window minibatch with the step cap, benchmarks/skipgram_ops.py).
        With ``sync_free_rows`` the rows come from a sort instead, padded to ids.numel() with id 0: a
        padding row gets no terms, so a zero step. Same rows, order and sums as unique's for the real
        rows (tested), but 14 operations for unique's one: which is faster on a GPU, where each
        operation is a launch, is unmeasured (skipgram_ops.py --device cuda --rows sort|unique), so it
        is off."""
        if not self.sync_free_rows:
            return torch.unique(ids, return_inverse=True)
        flat = ids.flatten()
        ordered, order = flat.sort()  # (N,)
        first = torch.ones_like(ordered, dtype=torch.bool)
        first[1:] = ordered[1:] != ordered[:-1]
        segment = first.cumsum(0) - 1  # (N,) the row of each sorted id
        rows = torch.zeros_like(flat).scatter_(0, segment, ordered)  # (N,) the distinct ids, then zeros
        inverse = torch.empty_like(segment).scatter_(0, order, segment)
        return rows, inverse.view_as(ids)

    @staticmethod
    def _add_rows(out: torch.Tensor, inverse: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """values (*inverse.shape, *rest) added into the rows of ``out`` (n, *rest) by ``inverse``; out."""
        return out.index_add_(0, inverse.flatten(), values.flatten(0, inverse.dim() - 1))

    @classmethod
    def _sum_rows(cls, inverse: torch.Tensor, n: int, values: torch.Tensor) -> torch.Tensor:
        """values (*inverse.shape, *rest) summed into n rows by ``inverse`` -> (n, *rest)."""
        return cls._add_rows(values.new_zeros(n, *values.shape[inverse.dim():]), inverse, values)

    def _sgd_dense(self, cond: torch.Tensor, valid: torch.Tensor, out: torch.Tensor, lr: float,
                   with_loss: bool) -> tuple[torch.Tensor | float, torch.Tensor]:
        """The same simultaneous step for a small vocabulary V, where a minibatch has more (pair,
        output) terms than there are word pairs: the scores of all V x V pairs come from one GEMM,
        a term's score is a lookup, and its coefficient is summed into a (V, V) matrix G, so the
        updates are the GEMMs G @ U and G^T @ V instead of per-term gathers, bmms and scatters.
        Equal to the sparse path up to float summation order (tested)."""
        V = self.centre.shape[0]
        pair = (cond[:, :, None] * V + out[:, None, :]).flatten()  # (B*S*K1,) index of (c, w)
        s = (self.centre @ self.context.T).flatten()[pair].view(*cond.shape, out.shape[1])  # (B, S, K1)
        if self.objective == "nce":
            s = s - self.log_kq[out][:, None, :]
        g, curvature, loss = self._coefficients(s, valid, out, with_loss)
        G = g.new_zeros(V * V).index_add_(0, pair, g.flatten()).view(V, V)  # (c, w): summed y - sig(s)
        grad_v = G @ self.context  # (V, D)
        grad_u = G.T @ self.centre  # (V, D), from the tables before either update
        if self.step_cap:  # ``_capped_step``; H (c, w): the summed curvature of the pair's terms
            H = g.new_zeros(V * V).index_add_(0, pair, curvature.flatten()).view(V, V)
            centre, context = self.centre.detach(), self.context.detach()
            grad_v = self._capped_step(grad_v, lambda P: ((P @ context.T) * H) @ context, lr)
            grad_u = self._capped_step(grad_u, lambda P: ((centre @ P.T) * H).T @ centre, lr)
        else:
            grad_v.mul_(lr)
            grad_u.mul_(lr)
        self.centre.add_(grad_v)
        self.context.add_(grad_u)
        return loss, valid.sum()

    def _coefficients(self, s: torch.Tensor, valid: torch.Tensor, out: torch.Tensor, with_loss: bool
                      ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | float]:
        """From scores s (B, S, K1): the masked y - sig(s) = -dloss/ds, the masked curvature
        bound ``path_curvature`` when the step cap needs it (else None), and the summed loss when
        asked (a 0-dim tensor, read by the caller once a chunk; else 0)."""
        w = self._weights(valid, out)
        loss = 0.0
        if with_loss:
            ll = torch.cat([F.logsigmoid(s[..., :1]), F.logsigmoid(-s[..., 1:])], -1)
            loss = -(ll * w).sum()
        sig = torch.sigmoid(s)
        g = sig.neg()
        g[..., 0].add_(1.0)  # in place on the view (``+=`` would copy it back onto itself)
        g.mul_(w)
        curvature = path_curvature(g) if self.step_cap else None
        return g, curvature, loss

    def _capped_step(self, grad: torch.Tensor, hvp, lr: float) -> torch.Tensor:
        """The update of each row from its summed gradient ``grad`` (R, D) (minus the loss's), given
        ``hvp``: P (R, D) -> H P, each row's Hessian-vector product with the curvature bound h
        (``path_curvature``) of the terms touching it. Sequential SGD (word2vec) never overshoots,
        because each update sees the previous one; a simultaneous step that piles n coherent terms
        on one row (a frequent word, a tiny vocabulary) would. c, the steps piled on the same rows
        at once, multiplies H: DDP ranks, whose chunk updates are summed, and for ``line`` Hogwild
        threads too. The Newton step does better without counting the threads (Wikipedia, 2
        threads, 5,120 windows, seed 0: agreement with gensim 0.540 counting 1, 0.514 counting 2,
        0.418 counting 4; one thread: 0.546).
        - ``newton``: NEWTON_ITERATIONS conjugate-gradient iterations on (c H + I / lr) d = grad,
          the step that minimises the minibatch's quadratic model plus |d|^2 / (2 lr): lr grad for
          a lightly loaded row, the Newton step for an overloaded one, and in between the damping
          sequential SGD gives itself.
        - ``line``: the step along grad only, min(lr, t*) grad with t* = |grad|^2 / grad^T c H grad,
          the minimum of the model along it (one Hessian-vector product instead of two).
        The cap is not lr / max(1, lr sum h |x|^2), as if all of a row's terms pulled one way: that cuts a
        frequent row whose terms pull apart (its noise words) far below its useful step, and
        65,536-window steps leave vectors half gensim's length (docs/skipgram.md)."""
        c = self.replicas * (self.hogwild_threads if self.cap_method == "line" else 1)
        if self.cap_method == "line":
            t = grad.square().sum(1).div_((grad * hvp(grad)).sum(1).mul_(c))  # (R,) t*; 0/0 (no terms) is nan
            return grad * t.nan_to_num_(nan=lr, posinf=lr).clamp_(max=lr)[:, None]
        # conjugate gradients from 0, every row at once; the last iteration's residual and direction
        # would go unused, so they are not computed (each operation is a kernel launch on a GPU)
        residual = direction = grad
        rr = residual.square().sum(1, keepdim=True)  # (R, 1)
        step = None
        for iteration in range(NEWTON_ITERATIONS):
            a_dir = hvp(direction)
            if c != 1:
                a_dir.mul_(c)
            a_dir.add_(direction, alpha=1.0 / lr)  # (c H + I / lr) direction
            alpha = rr / (direction * a_dir).sum(1, keepdim=True).clamp_(min=1e-30)  # 0 where grad is 0
            step = direction * alpha if step is None else step.addcmul_(alpha, direction)
            if iteration == NEWTON_ITERATIONS - 1:
                break
            residual = torch.addcmul(residual, alpha, a_dir, value=-1.0)
            rr, rr_old = residual.square().sum(1, keepdim=True), rr
            direction = torch.addcmul(residual, rr / rr_old.clamp(min=1e-30), direction)
        return step

    @torch.no_grad()
    def sgd_softmax(self, cond: torch.Tensor, target: torch.Tensor, lr: float, with_loss: bool = False,
                    max_elements: int = 1 << 22) -> tuple[float, int]:
        """Exact softmax SGD on pairs cond (P,) -> target (P,): every output vector moves. Pairs go
        in slices whose (P, V) score matrix has at most ``max_elements`` entries."""
        step = max(1, max_elements // self.context.shape[0])
        loss = sum(self._softmax_step(cond[i:i + step], target[i:i + step], lr, with_loss)
                   for i in range(0, len(cond), step))
        return float(loss), len(cond)

    def _softmax_step(self, c: torch.Tensor, t: torch.Tensor, lr: float, with_loss: bool) -> float:
        """One simultaneous step on the pairs c (P,) -> t (P,); the summed loss when asked, else 0."""
        v = self.centre[c]  # (P, D)
        context = self.context.detach()
        scores = v @ context.T  # (P, V)
        loss = float(F.cross_entropy(scores, t, reduction="sum")) if with_loss else 0.0
        g = torch.softmax(scores, 1).neg_()
        g[torch.arange(len(t), device=t.device), t] += 1.0  # (P, V) = -dloss/dscores
        grad_v = g @ context  # (P, D)
        grad_u = g.T @ v  # (V, D): every output row moves
        rows = c
        if self.step_cap:  # ``_capped_step``, with the diagonal of the softmax Hessian p (1 - p)
            curvature = path_curvature(g)  # (P, V)
            rows, inverse = self.rows(c)
            grad_v = self._capped_step(
                self._sum_rows(inverse, len(rows), grad_v),
                lambda P: self._sum_rows(inverse, len(rows), ((P[inverse] @ context.T) * curvature) @ context), lr)
            grad_u = self._capped_step(grad_u, lambda P: ((v @ P.T) * curvature).T @ v, lr)
        else:
            grad_v.mul_(lr)
            grad_u.mul_(lr)
        self.context.add_(grad_u)
        self.centre.index_add_(0, rows, grad_v)
        return loss
