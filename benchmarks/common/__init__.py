"""Helpers of the scripts under benchmarks/ and studies/, importable by the tests (from the checkout: this
folder is not in the wheel): the ``--device`` option (``devices``), re-training a recipe over seeds
(``seeds``), the captioning estimator table (``sat_table``), SeqGAN's over-seeds oracle report
(``seqgan_merge``), skip-gram's corpora and quality measures (``skipgram_measures``) and a CPU model of
the GPU kernel's jobs (``skipgram_lockstep``). Nothing here is imported by ``zoo.train``."""
