"""Skip-gram word embeddings with NCE / negative sampling / full softmax (MISSION.md section 5)."""
