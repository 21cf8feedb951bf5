"""What the shared recipe tests need of the captioning recipes (collected by tests/recipe_data.py)."""

from pathlib import Path


def tiny_karpathy(dataset: str):
    def write(tmp_path: Path) -> list[str]:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from tiny_karpathy import karpathy_overrides

        return karpathy_overrides(tmp_path, dataset)

    return write


REAL_DATA = {"sat_flickr8k": tiny_karpathy("flickr8k"), "sat_coco": tiny_karpathy("coco")}

SHAPES = ["data.n_train=32", "data.n_val=8", "data.n_test=8", "data.batch_size=8", "data.max_len=8",
          "model.embed_dim=16", "model.hidden_dim=16", "model.att_dim=16", "model.n_figure=1"]
SMALL_CNN = ["model.feat_dim=16", "model.cnn_width=4"]  # not with encoder_from: the released encoder's sizes
RESUME = {
    "sat_shapes_soft": [*SHAPES, *SMALL_CNN],  # soft attention, EMA weights (Lightning's EMAWeightAveraging)
    "sat_shapes_hard": SHAPES,  # sampled attention, moving-average baseline, the released encoder frozen
    "sat_shapes_hard_scratch": [*SHAPES, *SMALL_CNN],
}
# the cases make test resumes (the most stateful loops); the rest run in make test-slow
RESUME_FAST = ("sat_shapes_hard",)
REPRESENTED = "the same model and training loop as {}, on data read from files (their reader has its own tests)"
NOT_RESUMED = {"sat_flickr8k": REPRESENTED.format("sat_shapes_soft") + " and a torchvision encoder",
               "sat_coco": REPRESENTED.format("sat_shapes_soft") + " and a torchvision encoder"}
ESTIMATOR_HOSTS = {"sat": ["sat_shapes_hard"]}
