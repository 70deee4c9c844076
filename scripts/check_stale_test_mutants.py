"""Mutation check of tests/test_overlap.py::test_stale_learns_no_worse_than_on_policy: does it fail when the
stale path is broken?

The on-policy runs of a seed set are run once; then, for the real code and for each mutant, the stale runs,
and the test function itself judges them (PASS / FAIL with its summary). Each run prints its `sketch_margin`
before the run and after each step, and each step's importance ratio (token mean). The mutants touch stale
batches only, so the on-policy runs serve them all:
  none     the real code
  noratio  the stale batch's old log-probs dropped: ratio 1, as if it were on-policy
  rolled   each row given another row's old log-probs: the wrong old policy
  frozen   the sampler keeps the weights of its first sync (after update 1): a badly stale policy; at
           max_staleness 1 its batches are staler than the real code's only from step 4 on, so a short run
           barely differs (tests/test_sampling.py checks the weights each sync hands the sampler)

    python scripts/check_stale_test_mutants.py --seeds 0 1 2 --cases none:1 none:2 noratio:1 rolled:1 frozen:1
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import test_overlap  # noqa: E402
from tiny_painter import save_tiny_painter  # noqa: E402

from lit_watercolour import module  # noqa: E402
from lit_watercolour.sampling.hf import HFSampler  # noqa: E402

MUTANT = "none"
policy_update, sync_weights = module.policy_update, HFSampler.sync_weights


def mutated_update(*args):
    *args, old_logps = args
    if old_logps is not None and MUTANT == "noratio":
        old_logps = None
    elif old_logps is not None and MUTANT == "rolled":
        old_logps = torch.roll(old_logps, 1, dims=0)
    return policy_update(*args, old_logps)


def mutated_sync(self, model):
    if MUTANT != "frozen":
        return sync_weights(self, model)
    if not hasattr(self, "frozen"):
        self.frozen = copy.deepcopy(model)
    self.model = self.frozen


def described(run: test_overlap.Learning) -> str:
    return f"margins {[round(m, 2) for m in run.margins]} ratios {[round(r, 3) for r in run.ratios]}"


def main() -> None:
    global MUTANT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(test_overlap.SEEDS))
    parser.add_argument("--cases", nargs="+", default=["none:1", "none:2", "noratio:1", "rolled:1", "frozen:1"],
                        help="mutant:max_staleness")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the test runs (tests/cpu_threads.py)
    module.policy_update, HFSampler.sync_weights = mutated_update, mutated_sync
    test_overlap.SEEDS = tuple(args.seeds)
    painter = save_tiny_painter(tempfile.mkdtemp(), steps=300)  # the session fixture's painter
    renders, start = {}, time.monotonic()
    on_policy = {}
    for seed in args.seeds:
        on_policy[seed] = test_overlap.learning_run(painter, seed, 0, renders)
        print(f"on-policy seed {seed}: {described(on_policy[seed])} at {time.monotonic() - start:.0f} s", flush=True)
    for case in args.cases:
        MUTANT, k = case.split(":")[0], int(case.split(":")[1])
        stale = {}
        for seed in args.seeds:
            stale[seed] = test_overlap.learning_run(painter, seed, k, renders)
            print(f"{case} seed {seed}: {described(stale[seed])} at {time.monotonic() - start:.0f} s", flush=True)
        MUTANT = "none"
        try:
            test_overlap.test_stale_learns_no_worse_than_on_policy(lambda s, j: stale[s] if j else on_policy[s], k)
            print(f"RESULT {case} seeds {args.seeds}: PASS", flush=True)
        except AssertionError as e:
            print(f"RESULT {case} seeds {args.seeds}: FAIL {e}", flush=True)


if __name__ == "__main__":
    main()
