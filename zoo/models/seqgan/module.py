"""SeqGAN (Yu, Zhang, Wang & Yu, AAAI 2017) as a LightningModule with manual optimisation.

G (LSTM) is pre-trained by maximum likelihood, D (CNN) is pre-trained on real vs fresh generated
sequences, then they alternate: G takes a policy-gradient step whose per-token reward is the
rollout estimate Q(Y_{1:t-1}, y_t) (``rollout.py``), D trains on fresh negatives. The phase of
every Lightning epoch comes from ``schedule.py``. G's gradient goes through the estimator
registry: ``est.loss(sample, cost)`` with cost = -Q of shape (1, B, T), one cost per sampled token
(Q is already the return from t on, so no reward-to-go sum is needed).

Beyond the paper (``draws.py``): ``group_size`` n >= 2 draws n sequences per start, laid out (n, B, T)
for estimators that need a group (the leave-one-out baseline of rloo); ``rollouts=0`` rewards every
token with the sequence's final D score; and estimators that draw the samples themselves
(gumbel_softmax and straight_through, which backpropagate through D's score, and relax, which keeps the
Gumbel noise of its draws) draw G's tokens one by one, G and D reading them as one-hot rows through
their embeddings (``onehot @ E``), so a relaxed token reaches D differentiably (Kusner &
Hernandez-Lobato 2016, "GANs for sequences of discrete elements with the Gumbel-softmax distribution").
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch.distributions import Categorical

from zoo.core.module import ZooModule
from zoo.errors import UserError
from zoo.estimators import StochasticSample
from zoo.models.seqgan.config import ORACLE_MONITOR, SEQGAN_SPEC, TEXT_MONITOR
from zoo.models.seqgan.draws import draw_with_estimator, estimator_draws, group_layout, sequence_rewards
from zoo.models.seqgan.evaluation import SeqGANEvaluation
from zoo.models.seqgan.nets import LSTMLM, Discriminator
from zoo.models.seqgan.predict import SeqGANAPI, predict_cli
from zoo.models.seqgan.rollout import update_rollout_net
from zoo.models.seqgan.schedule import Schedule


def _brief(value: Any) -> str:
    return f"{len(value)} words" if isinstance(value, list) else repr(value)


class SeqGAN(SeqGANAPI, SeqGANEvaluation, ZooModule):
    """SeqGAN: an LSTM generator trained by policy gradient (MC rollouts) against a CNN discriminator."""

    spec = SEQGAN_SPEC  # its options, node (seqgan_node), monitor by the data and the check of its schedule
    ddp_find_unused_parameters = True  # G steps leave D without gradients and D steps leave G

    def __init__(self, cfg: dict, data_info: dict | None = None):
        super().__init__(cfg, data_info)
        self.automatic_optimization = False
        c, d = self.cfg, self.data_info
        self.check_data(d)
        V, self.seq_len = int(d["vocab_size"]), int(d["seq_len"])
        try:
            self.schedule = Schedule(
                c.mle_epochs,
                c.d_pretrain_rounds,
                c.d_pretrain_epochs,
                c.adv_iterations,
                c.adv_d_rounds,
                c.adv_d_epochs,
            )
        except ValueError as err:
            raise UserError(f"seqgan schedule: {err}") from None
        self.gen = LSTMLM(V, c.gen_emb_dim, c.gen_hidden_dim, int(d["start_token"]))
        self.gen.init_normal(c.gen_init_std)
        # beta, the delayed copy of G that completes the rollouts (set to G when adversarial training starts)
        self.rollout = copy.deepcopy(self.gen).requires_grad_(False)
        # G as it was when adversarial training started (the MLE-pre-trained G), for the test report
        self.gen_mle = copy.deepcopy(self.gen).requires_grad_(False)
        self.dis = Discriminator(
            V, self.seq_len, c.dis_emb_dim, tuple(c.dis_filter_sizes), tuple(c.dis_num_filters), c.dis_dropout
        )
        self.estimator = self.build_estimator()
        self.est_draws = estimator_draws(self.estimator)  # the estimator draws G's tokens (draws.py)
        self.oracle = None
        if d.get("oracle"):
            o = d["oracle"]
            self.oracle = LSTMLM(o["vocab_size"], o["emb_dim"], o["hidden_dim"], 0).requires_grad_(False)
        self.text = "vocab" in d
        if c.d_fresh_reals and self.oracle is None:
            raise UserError("model.d_fresh_reals=true draws D's real examples from the oracle: it needs oracle data "
                            "(recipe seqgan_oracle*), not text")
        # the oracle's NLL of G's samples; without an oracle, BLEU-3 on text data, else G's NLL of held-out data
        self.monitor, self.monitor_mode = ORACLE_MONITOR if self.oracle else TEXT_MONITOR if self.text else (
            "val/nll", "min")
        # flags and the seed of G steps / negatives live in buffers, so they survive checkpoints
        self.register_buffer("oracle_ready", torch.zeros((), dtype=torch.long))  # 1 once the oracle is set
        self.register_buffer("rollout_ready", torch.zeros((), dtype=torch.long))  # 1 once beta was set to G
        self.register_buffer("rng_seed", torch.randint(0, 2**31 - 1, ()))
        self.history: list = []  # [(epoch, phase, val metric)] recorded when G changed
        self._negatives, self._neg_key = None, None
        self.g_version, self._eval_cache = 0, {}

    # ---- optimisers and set-up ------------------------------------------------------------
    def configure_optimizers(self):
        c = self.cfg
        adv_params = list(self.gen.parameters()) + list(self.estimator.parameters())
        return [
            torch.optim.Adam(self.gen.parameters(), lr=c.gen_lr),
            torch.optim.Adam(adv_params, lr=c.adv_lr),
            torch.optim.Adam(self.dis.parameters(), lr=c.dis_lr),
        ]

    def check_data(self, info: dict) -> None:
        """A sequence datamodule, with the vocabulary and length G and D were built for."""
        missing = [k for k in ("vocab_size", "seq_len", "start_token") if k not in info]
        if missing:
            raise UserError(
                f"seqgan needs a sequence datamodule (seqgan_oracle, seqgan_text); data info lacks {missing}: "
                "use data.name=seqgan_oracle or data.name=seqgan_text"
            )
        for key in ("vocab_size", "seq_len", "vocab"):  # "vocab": seqgan_text's words (the oracle has none)
            theirs, mine = info.get(key), self.data_info.get(key)
            if theirs != mine:
                raise UserError(
                    f"the data's {key} ({_brief(theirs)}) is not the model's ({_brief(mine)}): use the data "
                    "(and data options) it was trained with"
                )

    def setup(self, stage: str) -> None:
        super().setup(stage)
        dm = self.attached_datamodule()
        if self.oracle is not None and not int(self.oracle_ready) and getattr(dm, "oracle", None) is not None:
            self.oracle.load_state_dict(dm.oracle.state_dict())
            self.oracle_ready.fill_(1)

    def on_fit_start(self) -> None:
        max_epochs = self.trainer.max_epochs
        if max_epochs is not None and 0 <= max_epochs < self.schedule.total and self.trainer.is_global_zero:
            print(
                f"seqgan: trainer.max_epochs={max_epochs} stops before the end of the schedule "
                f"({self.schedule.total} epochs); set trainer.max_epochs=-1 to run it all"
            )
        if self.trainer.is_global_zero:
            print(f"seqgan schedule: {self.schedule.describe()}")

    def _seed(self, *parts: int) -> torch.Generator:
        s = int(self.rng_seed)
        for p in parts:
            s = (s * 1_000_003 + int(p) + 1) % (2**62)
        return torch.Generator(device=self.device).manual_seed(s)

    # ---- training ---------------------------------------------------------------------------
    def training_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        phase = self.schedule.phase(self.current_epoch)
        if phase.kind == "mle":
            self._mle_step(batch)
        if phase.g_step and batch_idx == 0:
            self.start_adversarial()
            for k in range(self.cfg.adv_g_steps):
                self._adversarial_step(phase.index, k)
            update_rollout_net(self.rollout, self.gen, self.cfg.rollout_keep)
        if phase.train_d:
            self._d_step(batch, batch_idx, phase.round_start)

    def on_train_epoch_end(self) -> None:
        if self.current_epoch + 1 >= self.schedule.total:
            self.trainer.should_stop = True

    def _g_update(self, opt: Any, loss: torch.Tensor) -> None:
        opt.zero_grad()
        self.manual_backward(loss)
        self.clip_gradients(opt, gradient_clip_val=self.cfg.grad_clip, gradient_clip_algorithm="norm")
        opt.step()
        self.g_version += 1

    def _mle_step(self, batch: torch.Tensor) -> None:
        loss = -self.gen.log_prob(batch).mean()  # per-token NLL of the real sequences
        self._g_update(self.optimizers()[0], loss)
        self.log_train({"train/g_mle_nll": loss}, prog_bar=("train/g_mle_nll",))

    def pg_loss(self, seqs: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """Estimator surrogate for the sampled sequences (R, T) and their rewards Q (R, T), R = n x B
        group-major: (n, B, T) for an estimator that needs a group per start, else (1, R, T)."""
        h, _ = self.gen.lstm(self.gen.embed(self.gen.inputs(seqs)))  # (R, T, H)
        n = group_layout(self.estimator, self.cfg.group_size)
        shape = (n, seqs.shape[0] // n, seqs.shape[1])
        dist = Categorical(logits=self.gen.head(h).view(*shape, -1))  # batch shape (n, B, T)
        index = seqs.view(shape)  # (n, B, T)
        value = F.one_hot(index, self.gen.vocab_size).to(dist.logits.dtype)  # (n, B, T, V)
        s = StochasticSample(value=value, log_prob=dist.log_prob(index), dist=dist, index=index)
        # a learned baseline's features: h_t per (B, T), which only one sample per start has
        context = h.detach().view(*shape, -1)[0] if n == 1 else None
        return self.estimator.loss(s, -q.view(shape), context=context)  # cost = -Q per token

    def start_adversarial(self) -> None:
        """At the first G step: beta <- theta, and keep G's pre-trained weights for the test report."""
        if not int(self.rollout_ready):
            self.rollout.load_state_dict(self.gen.state_dict())
            self.gen_mle.load_state_dict(self.gen.state_dict())
            self.rollout_ready.fill_(1)

    def rewards(self, seqs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Q (R, T) of sequences (R, T): rollouts of the delayed copy beta (of G itself while adversarial
        training has not started), or with ``rollouts=0`` the final D score for every token."""
        rollout = self.rollout if int(self.rollout_ready) else self.gen
        c = self.cfg
        return sequence_rewards(rollout, self.dis, seqs, c.rollouts, c.batched_rollouts, generator, c.d_chunk)

    def sample_and_reward(self, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Y ~ G (group_size x adv_batch_size, T), group-major, and Q (same shape)."""
        seqs = self.gen.sample(self.cfg.group_size * self.cfg.adv_batch_size, self.seq_len, generator=generator)
        return seqs, self.rewards(seqs, generator)

    def g_loss(self, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """G's surrogate loss and the rewards Q (R, T) of its sequences (for logging)."""
        if self.est_draws:
            return draw_with_estimator(self, generator)
        seqs, q = self.sample_and_reward(generator)
        return self.pg_loss(seqs, q), q

    def _adversarial_step(self, iteration: int, k: int) -> None:
        self.start_adversarial()
        world, rank = self.world()
        loss, q = self.g_loss(self._seed(1, iteration, k, *([rank] if world > 1 else [])))
        self._g_update(self.optimizers()[1], loss)
        # temperature schedules (relaxed estimators) count adversarial G steps
        self.estimator.set_step(iteration * self.cfg.adv_g_steps + k + 1)
        self.log_train({"train/g_pg_loss": loss, "train/reward": q.mean(), "train/d_on_samples": q[:, -1].mean()})

    def estimator_loss(self, batch: Any) -> torch.Tensor:
        """A fresh stochastic estimate of G's adversarial loss (for GradientVarianceCallback)."""
        seed = int(torch.randint(0, 2**31 - 1, ()))  # cpu: a seed drawn from the global generator
        return self.g_loss(torch.Generator(device=self.device).manual_seed(seed))[0]

    def estimator_parameters(self) -> list:
        return list(self.gen.parameters())

    def negatives(self, round_start: int) -> torch.Tensor:
        """The D round's pool of fresh G samples, drawn once per round from a seed that depends only on
        the round, so a run resumed mid-round draws the same pool (G has not changed since)."""
        if self._neg_key != round_start:
            n = self.cfg.num_negatives or int(self.data_info.get("num_train", 10000))
            g = self._seed(2, round_start)
            self._negatives = torch.cat(
                [self.gen.sample(min(1000, n - i), self.seq_len, generator=g) for i in range(0, n, 1000)]
            )
            self._neg_key = round_start
        return self._negatives

    def _d_step(self, batch: torch.Tensor, batch_idx: int, round_start: int) -> None:
        pool = self.negatives(round_start)
        B = batch.shape[0]
        order = torch.randperm(len(pool), generator=self._seed(3, self.current_epoch), device=pool.device)
        world, rank = self.world()
        slot = batch_idx * world + rank  # ranks take disjoint negatives
        fake = pool[order[(slot * B + torch.arange(B, device=order.device)) % len(pool)]]  # each negative once
        # per epoch
        if self.cfg.d_fresh_reals:  # (checked at start: oracle data only) a new draw a step, keyed for resuming
            batch = self.oracle.sample(B, self.seq_len, generator=self._seed(4, self.current_epoch, batch_idx, rank))
        x = torch.cat([batch, fake])  # (2B, T)
        y = torch.cat([torch.ones(B, device=x.device), torch.zeros(B, device=x.device)])  # (2B,)
        logits = self.dis(x)  # (2B,)
        out = self.dis.out
        loss = F.binary_cross_entropy_with_logits(logits, y)
        loss = loss + self.cfg.dis_l2 * 0.5 * (out.weight.pow(2).sum() + out.bias.pow(2).sum())
        opt = self.optimizers()[2]
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.log_train({"train/d_loss": loss, "train/d_acc": ((logits > 0).float() == y).float().mean()})

    # ---- evaluation (SeqGANEvaluation, evaluation.py) ------------------------------------------------------
    def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self.eval_step(batch, batch_idx, "val")

    def on_validation_epoch_start(self) -> None:
        self._refs = []

    def on_validation_epoch_end(self) -> None:
        if not self.trainer.sanity_checking:
            self.log_val_metrics()

    def test_step(self, batch: torch.Tensor, batch_idx: int) -> None:
        self.eval_step(batch, batch_idx, "test")

    def on_test_epoch_start(self) -> None:
        self._refs = []

    def on_test_epoch_end(self) -> None:
        self.log_test_metrics()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """The learning curve and the last G evaluation travel with the checkpoint (plain lists)."""
        checkpoint["seqgan_history"] = [list(h) for h in self.history]
        cached = self._eval_cache.get(self.g_version)
        checkpoint["seqgan_eval"] = [self.g_version] + ([cached] if cached is not None else [])

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.history = [tuple(h) for h in checkpoint.get("seqgan_history", [])]
        saved = checkpoint.get("seqgan_eval", [0])
        self.g_version = int(saved[0])
        self._eval_cache = {self.g_version: saved[1]} if len(saved) > 1 else {}

    def predict_cli(self, inputs: list[str], options: dict) -> None:
        predict_cli(self, inputs, options)
