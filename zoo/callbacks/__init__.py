"""Shared Lightning callbacks: safe checkpoints, signals, non-finite loss, RNG state, and the
estimator gradient-variance probe (`grad_variance`). Recipes name them under `callbacks:`."""
