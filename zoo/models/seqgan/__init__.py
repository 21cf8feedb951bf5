"""SeqGAN (Yu et al. 2017): sequence GAN trained by policy gradient with Monte Carlo rollouts.

nets.py (LSTM LM, CNN discriminator), oracle.py (synthetic oracle, NLL-oracle), rollout.py
(batched rollouts and rewards), schedule.py (phases -> epochs), module.py (the LightningModule),
evaluation.py (metrics, BLEU, predict), data.py (the oracle and text datamodules), plots.py.
"""
