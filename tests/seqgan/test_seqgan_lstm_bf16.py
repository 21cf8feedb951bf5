"""SeqGAN's LSTM under CPU bfloat16 autocast (`trainer.precision=bf16-mixed` on a CPU): it runs whether or not
this CPU's oneDNN has a bfloat16 LSTM (AVX2-only CPUs have none, and nn.LSTM fails there), gives the float32
answer to bfloat16's precision, and leaves oneDNN's global switch as it found it."""

import torch

from zoo.models.seqgan.nets import LSTM


def test_the_lstm_runs_under_cpu_bf16_autocast_and_restores_onednn():
    torch.manual_seed(0)
    lstm = LSTM(8, 16, batch_first=True)
    x = torch.randn(4, 5, 8)  # (B, T, E)
    exact, (h, c) = lstm(x)
    before = torch._C._get_mkldnn_enabled()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, (h_bf, c_bf) = lstm(x)
    assert torch._C._get_mkldnn_enabled() == before
    assert out.shape == exact.shape == (4, 5, 16) and h_bf.shape == h.shape == (1, 4, 16)
    # bfloat16 keeps 8 bits of mantissa: outputs in (-1, 1) agree to ~1e-2 whichever kernel ran
    assert torch.allclose(out.float(), exact, atol=3e-2), (out.float() - exact).abs().max()
    assert torch.allclose(c_bf.float(), c, atol=3e-2)


def test_the_lstm_keeps_nn_lstms_state_dict_keys():
    assert list(LSTM(3, 4).state_dict()) == list(torch.nn.LSTM(3, 4).state_dict())
