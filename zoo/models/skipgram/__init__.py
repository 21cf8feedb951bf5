"""Skip-gram word embeddings with NCE / negative sampling / full softmax (MISSION.md section 5)."""

from zoo.models.skipgram import data, module  # noqa: F401  (registers "skipgram", "skipgram_text", "skipgram_synthetic")
