"""What the shared recipe tests need of SeqGAN's recipes (collected by tests/recipe_data.py)."""

SMALL = ["model.gen_emb_dim=8", "model.gen_hidden_dim=8", "model.dis_emb_dim=8", "model.dis_filter_sizes=[1,2]",
         "model.dis_num_filters=[4,4]", "model.rollouts=2", "model.adv_batch_size=8", "model.eval_samples=16",
         "model.bleu_samples=1", "data.vocab_size=20", "data.emb_dim=4", "data.hidden_dim=4", "data.seq_len=6",
         "data.num_train=64", "data.num_val=16", "data.num_test=16", "data.batch_size=16"]
# SeqGAN's phases, one an epoch: MLE then D pre-training; D pre-training then an adversarial iteration
RESUME = {
    "seqgan_oracle_small:pretrain": [*SMALL, "model.mle_epochs=1", "model.d_pretrain_rounds=1",
                                     "model.d_pretrain_epochs=1", "model.adv_iterations=1"],
    "seqgan_oracle_small:adversarial": [*SMALL, "model.mle_epochs=0", "model.d_pretrain_rounds=1",
                                        "model.d_pretrain_epochs=1", "model.adv_iterations=1",
                                        "model.adv_d_rounds=1", "model.adv_d_epochs=1"],
}
# the cases make test resumes (the most stateful loops); the rest run in make test-slow
RESUME_FAST = ("seqgan_oracle_small:pretrain", "seqgan_oracle_small:adversarial")
RESUME_STEPS = {"seqgan_oracle_small:adversarial": (4, 6, 7, 9)}  # epoch 1 begins with G's policy-gradient step
NOT_RESUMED = {
    "seqgan_oracle": "seqgan_oracle_small at the paper's size (a minute a step)",
    "seqgan_text": "the same model and phases as seqgan_oracle_small, on sentences instead of an oracle's samples",
}
# rloo needs a group of sequences per start
ESTIMATOR_HOSTS = {"seqgan": ["seqgan_oracle_small:adversarial", "seqgan_oracle_small:group"]}
HOST_SETTINGS = {"seqgan_oracle_small:group": ("seqgan_oracle_small:adversarial", ["model.group_size=2"])}
