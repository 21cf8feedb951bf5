"""A callback that plays SLURM's part in tests/platform/test_slurm.py: the requeue signal
(``#SBATCH --signal=SIGUSR1@90``) at one step, then the SIGTERM with which SLURM stops the job."""

import os
import signal

import lightning as L


class SlurmSignals(L.Callback):
    def __init__(self, usr1_at: int = 3, term_at: int = 5):
        self.usr1_at, self.term_at = usr1_at, term_at

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.usr1_at:
            os.kill(os.getpid(), signal.SIGUSR1)  # Lightning saves hpc_ckpt_1.ckpt and calls scontrol requeue
        elif trainer.global_step == self.term_at:
            os.kill(os.getpid(), signal.SIGTERM)  # the zoo saves checkpoints/last.ckpt and stops
