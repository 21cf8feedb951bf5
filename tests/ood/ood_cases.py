"""What the shared recipe tests need of the OOD classifier's recipes (collected by tests/recipe_data.py)."""

from pathlib import Path


def tiny_ood(dataset: str):
    def write(tmp_path: Path) -> list[str]:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from tiny_ood_files import paper_overrides

        return paper_overrides(dataset)(tmp_path)

    return write


REAL_DATA = {f"ood_{d}_{m}": tiny_ood(d) for d in ("svhn", "cifar10") for m in ("ce", "joint")}

DIGITS = ["model.width=8", "model.gan_width=16", "data.batch_size=16", "data.eval_batch_size=64"]
TOY = ["model.width=8", "model.gan_width=8", "data.batch_size=16", "data.n_train=128"]
RESUME = {
    "ood_digits_ce": DIGITS,
    "ood_digits_confidence": DIGITS,  # an explicit OOD training set
    "ood_digits_joint": DIGITS,  # joint: classifier, G and D (three optimizers); the zoo's EMA callback
    # joint with a replay of G's samples for the classifier and D (full after 3 batches, then replacing): the
    # buffer is in the checkpoint
    "ood_digits_joint:replay": [*DIGITS, "model.replay_size=40", "model.replay_d=true"],
    "ood_toy2d": TOY,
    "ood_toy2d_boundary": [*TOY, "model.classifier_epochs=1"],  # boundary_gan: classifier alone, then the GAN
}
# the cases make test resumes (the most stateful loops); the rest run in make test-slow
RESUME_FAST = ("ood_digits_joint", "ood_digits_joint:replay")
RESUME_STEPS = {
    "ood_digits_joint": (12, 18, 21, 24),  # classifier, D and G: 3 steps a batch
    "ood_digits_joint:replay": (12, 18, 21, 24),
    "ood_toy2d": (12, 18, 21, 24),
    "ood_toy2d_boundary": (4, 8, 10, 12),  # epoch 0 the classifier alone; then D and G
}
REPRESENTED = "the same model and training loop as {}, on data read from files (their reader has its own tests)"
NOT_RESUMED = {
    "ood_svhn_ce": REPRESENTED.format("ood_digits_ce"),
    "ood_svhn_joint": REPRESENTED.format("ood_digits_joint"),
    "ood_cifar10_ce": REPRESENTED.format("ood_digits_ce"),
    "ood_cifar10_joint": REPRESENTED.format("ood_digits_joint"),
}
ESTIMATOR_HOSTS = {"ood": ["ood_toy2d"]}
