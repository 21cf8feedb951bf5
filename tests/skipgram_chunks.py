"""A random chunk for the tests of skip-gram's update kernels (kernel.py, gpu_kernel.py and the CPU model of the
GPU's jobs, benchmarks/common/skipgram_lockstep.py): every kernel trains the same chunk from the same tables."""

import torch


def random_chunk(vocab: int, dim: int, tokens: int, sentence_length: int, max_half: int, count_max: int = 100,
                 context_scale: float = 0.3, seed: int = 0) -> dict:
    """Seeded: counts U{1..count_max}, the kernels' noise table of them, tokens drawn by count, sentences of
    ``sentence_length``, reduced half-widths U{1..max_half}, centre U(-0.5/D, 0.5/D), context N(0, scale^2)."""
    from zoo.models.skipgram import kernel
    from zoo.models.skipgram.sampling import AliasSampler, noise_distribution

    torch.manual_seed(seed)
    counts = torch.randint(1, count_max, (vocab,))
    keep, alias = kernel.noise_table(AliasSampler(noise_distribution(counts)))
    return {"counts": counts, "keep": keep, "alias": alias,
            "tokens": torch.multinomial(counts.float(), tokens, replacement=True),
            "sentence": torch.arange(tokens) // sentence_length,
            "reduced": torch.randint(1, max_half + 1, (tokens,)),
            "centre": (torch.rand(vocab, dim) - 0.5) / dim, "context": torch.randn(vocab, dim) * context_scale}
