"""The synthetic oracle of SeqGAN's first experiment and the NLL-oracle metric.

The oracle is an LSTM language model with parameters ~ N(0, 1) (vocab 5,000, embedding 32,
hidden 32). Its parameters travel as a ``.npz`` with the keys of the paper's reference code
(``save/target_params.pkl`` converted to arrays), row-vector convention:

    embedding (V, E); W_i, W_f, W_o, W_c (E, H) on the input; U_i, U_f, U_o, U_c (H, H) on the
    previous hidden state; b_i, b_f, b_o, b_c (H,); W_out (H, V); b_out (V,).
    gate = x @ W + h @ U + b; i, f, o = sigmoid; c~ = tanh; c = f*c + i*c~; h = o*tanh(c);
    logits = h @ W_out + b_out; h0 = c0 = 0; the first input is the embedding of token 0.

NLL-oracle = mean per-token negative log-likelihood, under the oracle, of samples from G: lower
means G's samples are more typical of the oracle (it rewards precision, not coverage).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from zoo.errors import UserError
from zoo.models.seqgan.nets import LSTMLM

GATES = ("i", "f", "o", "c")
TORCH_ORDER = ("i", "f", "c", "o")  # nn.LSTM stacks its gates as input, forget, cell (g), output


def oracle_keys() -> list[str]:
    return ["embedding", *(f"{m}_{g}" for g in GATES for m in ("W", "U", "b")), "W_out", "b_out"]


def random_oracle_params(
    seed: int, vocab_size: int = 5000, emb_dim: int = 32, hidden_dim: int = 32
) -> dict[str, np.ndarray]:
    """A fresh oracle: every array ~ N(0, 1), from a seeded generator (same seed, same oracle)."""
    g = torch.Generator().manual_seed(seed)  # cpu: the oracle's numbers must not depend on the device
    shapes = expected_shapes(vocab_size, emb_dim, hidden_dim)
    return {k: torch.randn(shapes[k], generator=g).numpy() for k in oracle_keys()}  # cpu: numpy arrays


def expected_shapes(V: int, E: int, H: int) -> dict[str, tuple]:
    shapes = {"embedding": (V, E), "W_out": (H, V), "b_out": (V,)}
    for g in GATES:
        shapes.update({f"W_{g}": (E, H), f"U_{g}": (H, H), f"b_{g}": (H,)})
    return shapes


def load_oracle_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Read and check an oracle ``.npz``; any problem is a UserError naming the file and the keys."""
    path = Path(path)
    keys = f"keys: {', '.join(oracle_keys())} (zoo/models/seqgan/oracle.py)"
    if not path.is_file():
        raise UserError("oracle parameters not found: give data.oracle_params a .npz with the keys below, or leave "
                        "it unset for a seeded oracle", details=[f"file: {path}", keys])
    fix = "give a .npz (numpy.savez) with the keys below, or leave data.oracle_params unset for a seeded oracle"
    with open(path, "rb") as f:
        is_zip = f.read(2) == b"PK"
    if not is_zip:  # np.load would read it as a pickle or a .npy and blame allow_pickle
        raise UserError(f"the oracle file is not a valid .npz of oracle parameters (not a zip archive); {fix}",
                        details=[f"file: {path}", keys])
    try:
        with np.load(path, allow_pickle=False) as f, np.errstate(over="ignore"):  # overflow: refused below
            arrays = {k: np.asarray(f[k], dtype=np.float32) for k in f.files}
    except (ValueError, OSError, zipfile.BadZipFile) as err:
        raise UserError(f"the oracle file is not a valid .npz of oracle parameters; {fix}",
                        details=[f"file: {path}", f"numpy: {err}", keys]) from None
    missing = [k for k in oracle_keys() if k not in arrays]
    extra = [k for k in arrays if k not in oracle_keys()]
    if missing or extra:
        raise UserError("the oracle file has the wrong keys: give it exactly the keys below",
                        details=[f"file: {path}", f"missing {missing}, unexpected {extra}", keys])
    V, E = arrays["embedding"].shape if arrays["embedding"].ndim == 2 else (0, 0)
    H = arrays["U_i"].shape[0] if arrays["U_i"].ndim == 2 else 0
    for key, shape in expected_shapes(V, E, H).items():
        if arrays[key].shape != shape:
            raise UserError(
                f"the oracle file's '{key}' has shape {arrays[key].shape}, expected {shape} (vocab {V}, embedding "
                f"{E}, hidden {H} read from 'embedding' and 'U_i'): fix or regenerate the file",
                details=[f"file: {path}"])
    for key in oracle_keys():  # NaN / inf would be trained on without a word
        bad = int(arrays[key].size - np.isfinite(arrays[key]).sum())
        if bad:
            raise UserError(
                f"the oracle file's '{key}' holds {bad} non-finite value(s) (NaN, inf or beyond float32): the oracle's "
                "parameters must be finite numbers; fix or regenerate it, or leave data.oracle_params unset",
                details=[f"file: {path}"])
    return arrays


def save_oracle_npz(params: dict[str, np.ndarray], path: str | Path) -> None:
    np.savez(path, **{k: np.asarray(params[k], dtype=np.float32) for k in oracle_keys()})


def lm_from_params(params: dict[str, np.ndarray], start_token: int = 0) -> LSTMLM:
    """Map the row-vector gate matrices onto nn.LSTM's (4H, E) stacked weights (one bias, b_hh = 0)."""
    V, E = params["embedding"].shape
    H = params["U_i"].shape[0]
    lm = LSTMLM(V, E, H, start_token)
    t = {k: torch.as_tensor(np.asarray(v, dtype=np.float32)) for k, v in params.items()}
    with torch.no_grad():
        lm.embed.weight.copy_(t["embedding"])
        lm.lstm.weight_ih_l0.copy_(torch.cat([t[f"W_{g}"] for g in TORCH_ORDER], dim=1).T)  # (4H, E)
        lm.lstm.weight_hh_l0.copy_(torch.cat([t[f"U_{g}"] for g in TORCH_ORDER], dim=1).T)  # (4H, H)
        lm.lstm.bias_ih_l0.copy_(torch.cat([t[f"b_{g}"] for g in TORCH_ORDER]))
        lm.lstm.bias_hh_l0.zero_()
        lm.head.weight.copy_(t["W_out"].T)  # (V, H)
        lm.head.bias.copy_(t["b_out"])
    return lm


def params_from_lm(lm: LSTMLM) -> dict[str, np.ndarray]:
    """Inverse of ``lm_from_params`` (the two LSTM biases are summed)."""
    H = lm.hidden_dim
    w_ih, w_hh = lm.lstm.weight_ih_l0.detach().cpu(), lm.lstm.weight_hh_l0.detach().cpu()
    bias = (lm.lstm.bias_ih_l0 + lm.lstm.bias_hh_l0).detach().cpu()
    out = {
        "embedding": lm.embed.weight.detach().cpu().numpy(),
        "W_out": lm.head.weight.detach().cpu().T.numpy(),
        "b_out": lm.head.bias.detach().cpu().numpy(),
    }
    for j, g in enumerate(TORCH_ORDER):
        rows = slice(j * H, (j + 1) * H)
        out[f"W_{g}"], out[f"U_{g}"], out[f"b_{g}"] = (
            w_ih[rows].T.numpy(),
            w_hh[rows].T.numpy(),
            bias[rows].numpy(),
        )
    return out


@torch.no_grad()
def nll_under(oracle: LSTMLM, seqs: torch.Tensor, batch_size: int = 250) -> float:
    """Mean per-token NLL of ``seqs`` (N, T) under ``oracle``."""
    total = 0.0
    for part in seqs.split(batch_size):
        total += -oracle.log_prob(part.to(oracle.head.weight.device)).double().sum().item()
    return total / seqs.numel()


@torch.no_grad()
def nll_oracle(
    oracle: LSTMLM, generator: LSTMLM, n: int, seq_len: int, seed: int, batch_size: int = 250
) -> float:
    """NLL-oracle of ``generator``: mean per-token NLL under ``oracle`` of n samples of it (seeded)."""
    # the noise is drawn on the CPU and moved, so NLL-oracle is the same number on every device
    g = torch.Generator().manual_seed(seed)  # cpu: device-independent metric (see above)
    total = 0.0
    for start in range(0, n, batch_size):
        rows = min(batch_size, n - start)
        u = torch.rand(rows, seq_len, generator=g)  # cpu: see above; sample() moves it
        seqs = generator.sample(rows, seq_len, uniforms=u)
        total += -oracle.log_prob(seqs.to(oracle.head.weight.device)).double().sum().item()
    return total / (n * seq_len)
