import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The VAE tests train tiny nets: one intra-op thread is faster, and on a busy 2-core machine
    two threads spinning against other processes made a run ~7x slower."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
