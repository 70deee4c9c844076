"""Reward terms as the RewardModels callback leaves them for fit: set up, on the CPU."""

import torch


def ready(term):
    term.setup(torch.device("cpu"))
    return term
