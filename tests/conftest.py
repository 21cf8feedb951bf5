import os
import signal
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = ROOT / "tests" / "platform"
sys.path.insert(0, str(PLATFORM))  # the toy model used by the platform tests, by dotted path
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
# No test reaches the network: a dataset fetch (zoo/core/downloads.py) or torchvision's weights refuse every
# address outside 127.0.0.1, so a "missing data" test fails in an instant instead of downloading
os.environ["ZOO_OFFLINE"] = "1"
os.environ.pop("ZOO_DATA_MIRROR", None)
# The tests train small models: one intra-op thread each is faster than two fighting over 2 cores
# (the DDP test runs two processes), and results do not depend on the machine's core count.
torch.set_num_threads(1)
# The tests that press Ctrl-C on a run they started expect the run to take it. A shell starts a background job
# (`.ci/stress ... &`, `nohup`) with SIGINT ignored, and the runs would inherit that (an ignored signal stays
# ignored across exec, and Python then installs no KeyboardInterrupt handler): a Ctrl-C while testing would be lost
# and the run would hold on. The default handler here is what every process these tests start inherits.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

TOY_RECIPE = """\
description: toy regression for platform tests
model: {name: "toymodel:Toy"}
data: {name: "toymodel:ToyData"}
trainer: {max_epochs: 3, accelerator: cpu, enable_progress_bar: false, enable_model_summary: false,
          log_every_n_steps: 1, num_sanity_val_steps: 0}
"""


@pytest.fixture(autouse=True)
def long_user_errors_lead_with_one_short_line(monkeypatch):
    """Every UserError a test provokes in its own process (every test: autouse) reads as zoo.errors asks: a
    message longer than LONG_MESSAGE characters says what is wrong and the fix in a first line of at most
    FIRST_LINE, its details (files, sizes, checksums, addresses) on the lines below."""
    from zoo.errors import FIRST_LINE, LONG_MESSAGE, UserError, reads_well

    made = []
    init = UserError.__init__

    def recorded(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(UserError, "__init__", recorded)
    yield
    long = [str(err) for err in made if not reads_well(err)]
    assert not long, (f"a UserError over {LONG_MESSAGE} characters whose first line is over {FIRST_LINE} "
                      f"(give it details=[...]): {long[0]!r}")


@pytest.fixture
def toy_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_RECIPE)
    return path


def _dvae_exact_loss(model, x: torch.Tensor) -> torch.Tensor:
    """A one-latent discrete VAE's E_q[-log p(x|z)] + KL by enumerating the K values of its latent,
    batch mean, on ``x``'s device."""
    import torch.nn.functional as F

    q = model.posterior(x)  # batch (B, 1)
    K = model.cfg.n_classes
    z = F.one_hot(torch.arange(K, device=x.device), K).float().view(K, 1, 1, K).expand(K, x.shape[0], 1, K)
    rec = -model.log_lik(x, model.decode(z))  # (K, B)
    return (q.probs[:, 0, :].T * rec).sum(0).mean() + model.kl(q).mean()


@pytest.fixture
def dvae_exact_loss():
    return _dvae_exact_loss
