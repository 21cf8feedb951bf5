"""Shared Lightning callbacks: safe checkpoints, signals, non-finite loss, RNG state, what a run prints (`runlog`)
and its loss curves (`curves`), and the estimator gradient-variance probe (`grad_variance`). Recipes name some of
them under `callbacks:`."""
