"""Confidence-calibrated OOD classifier trained with a GAN (Lee et al. 2018): model `ood`,
datamodules `ood_digits`, `ood_toy2d` (embedded) and `ood_images` (local MNIST, Fashion-MNIST,
CIFAR-10, SVHN files and OOD image folders)."""
