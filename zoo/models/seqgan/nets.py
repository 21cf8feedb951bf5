"""SeqGAN's networks as plain nn.Modules (no Lightning): the LSTM language model used for the
generator G, its delayed rollout copy and the synthetic oracle, and the CNN discriminator D.

Token convention (as in the paper's reference code): every sequence has exactly T tokens; the
LSTM's first input is the embedding of ``start_token``; the state after reading the start token
and y_1..y_{s} gives the distribution of y_{s+1}.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from zoo.errors import UserError

State = tuple[Tensor, Tensor]  # (h, c), each (R, H)


@functools.cache
def onednn_has_bf16() -> bool:
    """Whether this CPU's oneDNN runs bfloat16 kernels (AVX-512 BF16 or AMX); AVX2-only CPUs do not."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without the query: assume not
        return False


class LSTM(nn.LSTM):
    """``nn.LSTM`` that also runs under CPU bfloat16 autocast on a CPU whose oneDNN has no bfloat16 LSTM
    ("could not create a primitive descriptor for the LSTM forward propagation primitive"): there it runs
    without oneDNN, in float32, and autocast casts its output for the layers after it. Same parameters and
    state-dict keys as ``nn.LSTM``."""

    def forward(self, x: Tensor, hx: State | None = None):
        if x.device.type != "cpu" or not torch.is_autocast_enabled("cpu") or onednn_has_bf16():
            return super().forward(x, hx)
        enabled = torch._C._get_mkldnn_enabled()  # the flag alone (torch.backends.mkldnn.flags also resets others)
        torch._C._set_mkldnn_enabled(False)
        try:
            return super().forward(x, hx)
        finally:
            torch._C._set_mkldnn_enabled(enabled)


def sample_categorical(logits: Tensor, u: Tensor) -> Tensor:
    """Inverse-CDF sampling: row r gets the first token whose CDF exceeds u_r (u ~ U[0, 1)).

    logits (R, V), u (R,) -> (R,) int64. One uniform per row instead of V Gumbel/exponential draws
    (the sampling cost of rollouts is R x V exps either way, but the noise is R numbers), and it
    lets two implementations that visit rows in different orders use *the same* noise, which is
    how the batched rollouts are tested against the per-time-step loop.
    """
    probs = torch.softmax(logits.float(), dim=-1)  # (R, V)
    cdf = probs.cumsum(-1)  # (R, V)
    target = (u.to(cdf.dtype) * cdf[:, -1]).unsqueeze(-1)  # (R, 1), < cdf[-1]
    idx = torch.searchsorted(cdf, target, right=True).squeeze(-1)  # P(idx = i) = p_i
    return idx.clamp_max(logits.shape[-1] - 1)


def sample_next(head: nn.Module, h: Tensor, u: Tensor, chunk_elems: int = 1 << 20) -> Tensor:
    """Next tokens (R,) from hidden states h (R, H) through the output layer ``head``.

    Rows go through in chunks of about ``chunk_elems`` logits: the (chunk, V) logits / probabilities
    / CDF then stay in cache, which on a CPU is several times faster than one pass over a (R, V)
    matrix of hundreds of MB (256 rows for V = 5,000; 10,000 rows for V = 100)."""
    chunk = max(64, chunk_elems // head.out_features)
    if h.shape[0] <= chunk:
        return sample_categorical(head(h), u)
    return torch.cat([sample_categorical(head(hp), up) for hp, up in zip(h.split(chunk), u.split(chunk))])


class LSTMLM(nn.Module):
    """One-layer LSTM language model: embedding -> LSTM -> linear to vocabulary logits.

    Used for G (emb 32 / hidden 32 on the oracle task), the rollout network (a delayed copy of G)
    and the oracle itself (same architecture with N(0, 1) parameters).
    """

    def __init__(self, vocab_size: int, emb_dim: int, hidden_dim: int, start_token: int = 0):
        super().__init__()
        self.vocab_size, self.emb_dim, self.hidden_dim = vocab_size, emb_dim, hidden_dim
        self.start_token = start_token
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.lstm = LSTM(emb_dim, hidden_dim, batch_first=True)
        self.head = nn.Linear(hidden_dim, vocab_size)

    def init_normal(self, std: float, generator: torch.Generator | None = None) -> LSTMLM:
        """Every parameter ~ N(0, std^2): the paper's generator uses std 0.1."""
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=generator, device=generator.device if generator else p.device)
                        * std)
        return self

    # ---- teacher forcing ------------------------------------------------------------------
    def inputs(self, seqs: Tensor) -> Tensor:
        """(B, T) tokens -> (B, T) inputs: the start token then y_1..y_{T-1}."""
        start = seqs.new_full((seqs.shape[0], 1), self.start_token)
        return torch.cat([start, seqs[:, :-1]], dim=1)

    def forward(self, seqs: Tensor) -> Tensor:
        """Teacher-forced next-token logits (B, T, V): logits[:, t] scores y_{t+1} given y_1..y_t."""
        out, _ = self.lstm(self.embed(self.inputs(seqs)))  # (B, T, H)
        return self.head(out)  # (B, T, V)

    def log_prob(self, seqs: Tensor) -> Tensor:
        """Per-token log-probabilities (B, T) of the given sequences."""
        logits = self(seqs).float()  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1), seqs.flatten(), reduction="none")  # fused log-softmax
        return -nll.view(seqs.shape)

    # ---- step-by-step generation ----------------------------------------------------------
    def zero_state(self, rows: int, device: torch.device | None = None) -> State:
        w = self.head.weight
        z = torch.zeros(rows, self.hidden_dim, device=device or w.device, dtype=w.dtype)
        return z, z.clone()

    def step(self, tokens: Tensor, state: State) -> State:
        """Read one token per row: tokens (R,), state (h, c) each (R, H) -> new state."""
        h, c = state
        _, (h, c) = self.lstm(self.embed(tokens).unsqueeze(1), (h.unsqueeze(0), c.unsqueeze(0)))
        return h.squeeze(0), c.squeeze(0)

    def start(self, rows: int) -> State:
        """State after reading the start token (it gives the distribution of y_1)."""
        device = self.head.weight.device
        tokens = torch.full((rows,), self.start_token, dtype=torch.long, device=device)
        return self.step(tokens, self.zero_state(rows, device))

    @torch.no_grad()
    def sample(
        self, n: int, seq_len: int, generator: torch.Generator | None = None, uniforms: Tensor | None = None
    ) -> Tensor:
        """Ancestral sampling of n sequences (n, seq_len); ``uniforms`` (n, seq_len) fixes the noise."""
        device = self.head.weight.device
        if uniforms is None:
            uniforms = torch.rand(
                n, seq_len, generator=generator, device=generator.device if generator else device
            )
        uniforms = uniforms.to(device)
        state = self.start(n)
        out = torch.empty(n, seq_len, dtype=torch.long, device=device)
        for t in range(seq_len):
            out[:, t] = sample_next(self.head, state[0], uniforms[:, t])
            if t + 1 < seq_len:
                state = self.step(out[:, t], state)
        return out

    def prefix_states(self, seqs: Tensor) -> tuple[Tensor, Tensor]:
        """States after reading start, y_1..y_t for every t = 0..T-1: h, c each (T, B, H).

        nn.LSTM only returns the final cell state, so this steps token by token (B rows, cheap)."""
        B, T = seqs.shape
        state = self.start(B)
        hs, cs = [state[0]], [state[1]]
        for t in range(T - 1):
            state = self.step(seqs[:, t], state)
            hs.append(state[0])
            cs.append(state[1])
        return torch.stack(hs), torch.stack(cs)


class Highway(nn.Module):
    """y = t * relu(W_H x) + (1 - t) * x with transform gate t = sigmoid(W_T x + b_T) (Srivastava 2015)."""

    def __init__(self, dim: int, gate_bias: float = 0.0):
        super().__init__()
        self.transform = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        nn.init.constant_(self.gate.bias, gate_bias)

    def forward(self, x: Tensor) -> Tensor:
        t = torch.sigmoid(self.gate(x))
        return t * F.relu(self.transform(x)) + (1 - t) * x


class Discriminator(nn.Module):
    """CNN text classifier (Kim 2014 with a highway layer, as in SeqGAN): embedding -> one conv per
    filter width (ReLU, max over time) -> concat -> highway -> dropout -> one logit for "real".

    Paper settings: embedding 64, widths 1..10, 15, 20 with 100, 200, 200, 200, 200, 100, 100, 100,
    100, 100, 160, 160 filters, dropout 0.25.
    """

    def __init__(
        self,
        vocab_size: int,
        seq_len: int,
        emb_dim: int = 64,
        filter_sizes: tuple = (1, 2, 3),
        num_filters: tuple = (10, 20, 20),
        dropout: float = 0.25,
        highway_bias: float = 0.0,
    ):
        super().__init__()
        if len(filter_sizes) != len(num_filters) or not filter_sizes:
            raise UserError(
                f"discriminator: filter_sizes {list(filter_sizes)} and num_filters "
                f"{list(num_filters)} must be non-empty lists of the same length"
            )
        if max(filter_sizes) > seq_len:
            kept = [(k, n) for k, n in zip(filter_sizes, num_filters) if k <= seq_len]
            example = (
                f"here: model.dis_filter_sizes=[{','.join(str(k) for k, _ in kept)}] "
                f"model.dis_num_filters=[{','.join(str(n) for _, n in kept)}]" if kept else ""
            )
            raise UserError(
                f"discriminator: filter width {max(filter_sizes)} exceeds the sequence length {seq_len}: drop the "
                f"widths above {seq_len} (below) or use longer sequences (data.seq_len; data.max_len for text)",
                details=["the widths are model.dis_filter_sizes, their counts model.dis_num_filters",
                         *([example] if example else [])],
            )
        self.embed = nn.Embedding(vocab_size, emb_dim)
        self.convs = nn.ModuleList(nn.Conv1d(emb_dim, n, k) for k, n in zip(filter_sizes, num_filters))
        total = sum(num_filters)
        self.highway = Highway(total, highway_bias)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(total, 1)
        self._tables: tuple | None = None  # (key, per-width lookup tables), see lookup_tables

    def forward(self, seqs: Tensor) -> Tensor:
        """(B, T) tokens -> (B,) logits of P(real)."""
        return self._from_embedded(self.embed(seqs))

    def forward_onehot(self, rows: Tensor) -> Tensor:
        """(B, T, V) one-hot or relaxed rows -> (B,) logits, the rows read through the embedding (rows @ E,
        E[y] for a one-hot): differentiable in the rows, so a relaxed sample's gradient reaches G."""
        return self._from_embedded(rows.to(self.embed.weight.dtype) @ self.embed.weight)  # (B, T, E) inside

    def _from_embedded(self, emb: Tensor) -> Tensor:
        x = emb.transpose(1, 2)  # (B, E, T)
        pooled = [F.relu(conv(x)).amax(dim=-1) for conv in self.convs]  # each (B, n_k)
        return self.head(pooled)

    def head(self, pooled: list[Tensor]) -> Tensor:
        h = self.highway(torch.cat(pooled, dim=1))  # (B, sum n_k)
        return self.out(self.dropout(h)).squeeze(-1)  # (B,)

    @torch.no_grad()
    def prob_real(self, seqs: Tensor, chunk: int = 4096) -> Tensor:
        """D(Y) = P(real | Y) for many sequences (R,), in chunks to bound memory. Uses the lookup
        form of the convolutions (``lookup_tables``) when its tables fit the budget."""
        tables = self.lookup_tables()
        if tables is None:
            return torch.cat([torch.sigmoid(self(part)) for part in seqs.split(chunk)])
        return torch.cat([torch.sigmoid(self.head(self._pooled_by_lookup(part, tables))) for part in seqs.split(chunk)])

    def lookup_tables(self, max_elements: int = 1 << 27) -> list[Tensor] | None:
        """Embedding then convolution is linear in the one-hot tokens, so the pre-activation of a
        width-k filter bank at window j is sum_{i<k} P_i[y_{j+i}] with P_i = E W_i^T (V, n): a sum
        of k table rows (``F.embedding_bag``) instead of a (k E)-long dot product per filter.
        Rollout scoring does ~20k sequences per generator update with D fixed, so the tables,
        built in one einsum per width (0.18 s), pay for themselves many times (D scores 2.0x faster at
        the paper's sizes on CPU, benchmarks/results/seqgan_dscore_lookup.json; equal to the
        convolutions to ~1e-6). Cached until D's weights change
        (keyed on their storage and version counters); None when V * sum(k n) > max_elements
        (250 MB at the paper's sizes), where the convolutions are used."""
        vocab = self.embed.num_embeddings
        if vocab * sum(conv.kernel_size[0] * conv.out_channels for conv in self.convs) > max_elements:
            return None
        params = [self.embed.weight, *(p for conv in self.convs for p in (conv.weight, conv.bias))]
        key = tuple((p.data_ptr(), p._version) for p in params)
        if self._tables is not None and self._tables[0] == key:
            return self._tables[1]
        tables = []
        for conv in self.convs:
            P = torch.einsum("ve,nek->kvn", self.embed.weight.detach(), conv.weight.detach()).contiguous()
            P[0] += conv.bias.detach()  # (k, V, n), the bias once per window
            tables.append(P.view(-1, conv.out_channels))  # (k V, n): row i V + y is P_i[y]
        self._tables = (key, tables)
        return tables

    def _pooled_by_lookup(self, seqs: Tensor, tables: list[Tensor]) -> list[Tensor]:
        vocab, T = self.embed.num_embeddings, seqs.shape[1]
        pooled = []
        for conv, table in zip(self.convs, tables):
            k = conv.kernel_size[0]
            rows = seqs.unfold(1, k, 1) + torch.arange(k, device=seqs.device) * vocab  # (B, T-k+1, k)
            pre = F.embedding_bag(rows.reshape(-1, k), table, mode="sum")  # (B (T-k+1), n)
            pooled.append(F.relu(pre.view(len(seqs), T - k + 1, -1)).amax(1))  # (B, n)
        return pooled
