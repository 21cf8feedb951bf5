"""Skip-gram word embeddings with NCE / negative sampling / full softmax (MISSION.md section 5)."""

MODULES = ("data", "module")  # registers "skipgram", "skipgram_text", "skipgram_synthetic" (zoo.models.import_all)
