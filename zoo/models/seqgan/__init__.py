"""SeqGAN (Yu et al. 2017): sequence GAN trained by policy gradient with Monte Carlo rollouts.

config.py (options, no torch), nets.py (LSTM LM, CNN discriminator), oracle.py (synthetic oracle,
NLL-oracle), rollout.py (batched rollouts and rewards), draws.py (G's tokens through the estimator),
schedule.py (phases -> epochs), module.py (the LightningModule), evaluation.py (metrics, BLEU),
predict.py (inference API, ``python -m zoo.predict``), data.py (the oracle and text datamodules), plots.py.
"""
