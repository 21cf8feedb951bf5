"""What the shared recipe tests need of MAML's recipes (collected by tests/recipe_data.py)."""

from pathlib import Path


def tiny_omniglot(tmp_path: Path) -> list[str]:
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_omniglot import omniglot_overrides

    return omniglot_overrides(tmp_path)


REAL_DATA = {"maml_omniglot_5w1s": tiny_omniglot, "maml_omniglot_20w1s": tiny_omniglot}

SINUSOID = ["data.meta_batch=4", "data.val_tasks=4", "data.eval_batch_tasks=4", "data.eval_query=10",
            "model.eval_inner_steps=1", "model.hidden=8"]
# the MAML cases check EpochSampler (were its order read when Lightning makes the iterator, before set_epoch, a run
# resumed from an epoch-end checkpoint would train its first epoch on epoch 0's tasks)
RESUME = {
    "maml_sinusoid": SINUSOID,  # second order
    "maml_sinusoid_fo": SINUSOID,  # first order
    "maml_sinusoid_pretrain": SINUSOID,  # no inner step
    "maml_omniglot_5w1s": ["model.eval_inner_steps=1"],  # the conv net, the per-task loop; tiny files
    "maml_nav2d": ["data.meta_batch=2", "data.val_tasks=2", "model.trajectories=2", "model.horizon=5",
                   "model.eval_steps=1", "model.hidden=8"],  # MAML-RL: sampled trajectories
}
# the cases make test resumes (the most stateful loops); the rest run in make test-slow
RESUME_FAST = ("maml_sinusoid", "maml_nav2d")
NOT_RESUMED = {"maml_omniglot_20w1s": "maml_omniglot_5w1s with 20 classes a task: the same loop"}
ESTIMATOR_HOSTS = {"maml_rl": ["maml_nav2d"]}
