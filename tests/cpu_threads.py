"""One intra-op thread for tiny-model tests.

Measured here: with two torch threads on a 2-core box that other test processes share,
sampling 8 x 100 tokens from a tiny Qwen3 took 18 s; with one thread, 0.3 s.
"""

import pytest
import torch


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
