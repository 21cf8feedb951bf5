"""Skip-gram word embeddings with NCE / negative sampling / full softmax (Mikolov et al. 2013, "Distributed
Representations of Words and Phrases and their Compositionality"; Gutmann & Hyvarinen 2010, "Noise-contrastive
estimation: A new estimation principle for unnormalized statistical models"): model `skipgram`, datamodules
`skipgram_synthetic` (a generated corpus with planted structure) and `skipgram_text` (local text files). The
objectives and what they measure: docs/skipgram.md."""
