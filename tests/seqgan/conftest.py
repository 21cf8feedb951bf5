import pytest
import torch


@pytest.fixture(autouse=True)
def one_torch_thread():
    """These tests run many small ops; on a busy 2-core machine a second intra-op thread makes them
    several times slower (threads wait on each other), so they run single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
