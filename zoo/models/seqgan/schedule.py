"""SeqGAN's training phases mapped onto Lightning epochs.

Every Lightning epoch is one pass over the real training sequences, and its phase follows from
the epoch number alone (so a run resumed from any checkpoint continues in the right phase):

    MLE pre-training of G     mle_epochs epochs                        (G: teacher forcing)
    pre-training of D         d_pretrain_rounds x d_pretrain_epochs     (fresh negatives per round)
    adversarial training      adv_iterations x adv_d_rounds x adv_d_epochs
                              the first batch of an iteration's first epoch makes adv_g_steps
                              policy-gradient steps of G (and moves the rollout network); then
                              every batch is a D step against negatives drawn after those steps.

A D epoch pairs each real batch with as many negatives from the round's pool of fresh samples.
An adversarial iteration without D training (adv_d_rounds = 0) still takes one epoch, whose
first batch is the G step.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    kind: str  # "mle" | "d_pretrain" | "adversarial" | "done"
    index: int = 0  # MLE epoch, D pre-training round or adversarial iteration
    round: int = 0  # D round within the phase unit (adversarial: within the iteration)
    epoch_in_round: int = 0  # epoch within the D round
    g_step: bool = False  # first epoch of an adversarial iteration: G steps before anything else
    train_d: bool = False  # this epoch trains D
    round_start: int = 0  # global epoch at which the current negatives pool was (or will be) drawn


@dataclass(frozen=True)
class Schedule:
    mle_epochs: int = 120  # MLE pre-training epochs of G
    d_pretrain_rounds: int = 50  # D pre-training rounds, each with fresh negatives
    d_pretrain_epochs: int = 3  # D epochs per pre-training round
    adv_iterations: int = 200  # adversarial iterations
    adv_d_rounds: int = 5  # D rounds (fresh negatives) per adversarial iteration
    adv_d_epochs: int = 3  # D epochs per adversarial round

    def __post_init__(self):
        for name, value in vars(self).items():
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")

    @property
    def d_pretrain_total(self) -> int:
        return self.d_pretrain_rounds * self.d_pretrain_epochs

    @property
    def iteration_epochs(self) -> int:
        return max(1, self.adv_d_rounds * self.adv_d_epochs)

    @property
    def adversarial_start(self) -> int:
        return self.mle_epochs + self.d_pretrain_total

    @property
    def total(self) -> int:
        """Number of epochs of the whole schedule."""
        return self.adversarial_start + self.adv_iterations * self.iteration_epochs

    def phase(self, epoch: int) -> Phase:
        if epoch < self.mle_epochs:
            return Phase("mle", index=epoch)
        e = epoch - self.mle_epochs
        if e < self.d_pretrain_total:
            r, k = divmod(e, self.d_pretrain_epochs)
            return Phase(
                "d_pretrain", index=r, round=r, epoch_in_round=k, train_d=True, round_start=epoch - k
            )
        e = epoch - self.adversarial_start
        if e < self.adv_iterations * self.iteration_epochs:
            it, within = divmod(e, self.iteration_epochs)
            train_d = self.adv_d_rounds * self.adv_d_epochs > 0
            r, k = divmod(within, self.adv_d_epochs) if train_d else (0, 0)
            return Phase(
                "adversarial",
                index=it,
                round=r,
                epoch_in_round=k,
                g_step=within == 0,
                train_d=train_d,
                round_start=epoch - k,
            )
        return Phase("done")

    def describe(self) -> str:
        return (
            f"{self.mle_epochs} MLE epochs, "
            f"D pre-training {self.d_pretrain_rounds} x {self.d_pretrain_epochs} epochs, "
            f"{self.adv_iterations} adversarial iterations of {self.iteration_epochs} epoch(s) "
            f"from epoch {self.adversarial_start}: {self.total} epochs in all"
        )
