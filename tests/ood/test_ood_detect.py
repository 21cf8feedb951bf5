"""Detection metrics, detectors and temperature scaling on cases with known answers."""

import torch

from zoo.models.ood import detect


def test_metrics_perfect_and_chance():
    g = torch.Generator().manual_seed(0)
    s_in, s_out = torch.rand(200, generator=g) + 1.0, torch.rand(300, generator=g)  # disjoint ranges
    m = detect.detection_metrics(s_in, s_out)
    assert m == {"tnr95": 1.0, "auroc": 1.0, "aupr_in": 1.0, "aupr_out": 1.0, "det_acc": 1.0}
    # same distribution: AUROC ~ 0.5 (5,000 + 5,000 draws, seed 0: s.e. ~0.006, tolerance 0.03);
    # TNR at TPR 95 % ~ 0.05
    a, b = torch.randn(5000, generator=g), torch.randn(5000, generator=g)
    m = detect.detection_metrics(a, b)
    assert abs(m["auroc"] - 0.5) < 0.03 and abs(m["tnr95"] - 0.05) < 0.02 and m["det_acc"] < 0.53


def test_tnr_at_tpr95_by_hand():
    # in-distribution scores 1..100: the threshold keeping 95 % of them is 6; OOD scores 0..9 -> 6, 7, 8, 9
    # are accepted, so 6 of 10 are rejected
    s_in, s_out = torch.arange(1, 101).float(), torch.arange(0, 10).float()
    assert abs(detect.detection_metrics(s_in, s_out)["tnr95"] - 0.6) < 1e-6


def test_metrics_of_scores_far_above_17_are_not_squashed():
    """torchmetrics passes scores outside [0, 1] through a sigmoid, exactly 1.0 in float32 above ~16.6:
    in-distribution 20 + 5U against OOD 17 + 5U would give AUROC 0.5 and TNR@TPR95 0. On ranks the metrics
    are those of the scores themselves: P(in > out) = 1 - 0.4^2 / 2 = 0.92 and, at the in-distribution
    5 % quantile 20.25, TNR = 3.25 / 5 = 0.65 (seed 0, 20,000 + 20,000 draws: s.e. ~0.002 and ~0.004,
    tolerance 0.01), and sklearn's exact AUROC / AP of the same draws (tolerance 1e-6)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    g = torch.Generator().manual_seed(0)
    s_in, s_out = 20 + 5 * torch.rand(20000, generator=g), 17 + 5 * torch.rand(20000, generator=g)
    m = detect.detection_metrics(s_in, s_out)
    assert abs(m["auroc"] - 0.92) < 0.01 and abs(m["tnr95"] - 0.65) < 0.01
    scores, target = torch.cat([s_in, s_out]).double().numpy(), torch.cat([torch.ones(20000), torch.zeros(20000)])
    assert abs(m["auroc"] - roc_auc_score(target, scores)) < 1e-6
    assert abs(m["aupr_in"] - average_precision_score(target, scores)) < 1e-6
    assert abs(m["aupr_out"] - average_precision_score(1 - target, -scores)) < 1e-6
    # the threshold that keeps 95 % of in-distribution, counted by hand
    threshold = s_in.sort().values[int(0.05 * 20000)]
    assert abs(m["tnr95"] - float((s_out < threshold).float().mean())) < 1e-3
    # only the order counts: the same scores shifted by +-1000 (energies, negated Mahalanobis distances)
    for shift in (1000.0, -1000.0):
        assert detect.detection_metrics(s_in.double() + shift, s_out.double() + shift) == m


def test_metrics_keep_ties_and_large_scores_of_every_detector():
    """Ties count half (as in sklearn's AUROC), also among scores far outside [0, 1]; each detector's
    scores at scale (logits x 30: energies mostly 20-170, max softmax 1.0 in float32 for most) give the
    exact AUROC of their own order (seed 4, tolerance 1e-6:
    torchmetrics returns float32)."""
    from sklearn.metrics import roc_auc_score

    s_in, s_out = torch.tensor([50.0, 50.0, 60.0, 70.0]), torch.tensor([50.0, 40.0, 60.0])
    target = [1, 1, 1, 1, 0, 0, 0]
    assert abs(detect.detection_metrics(s_in, s_out)["auroc"]
               - roc_auc_score(target, torch.cat([s_in, s_out]).numpy())) < 1e-6
    g = torch.Generator().manual_seed(4)
    labels = torch.arange(500) % 10
    logits_in = 30 * (torch.randn(500, 10, generator=g) + 3 * torch.nn.functional.one_hot(labels))
    logits_out = 30 * torch.randn(400, 10, generator=g)
    target = torch.cat([torch.ones(500), torch.zeros(400)])
    assert (detect.energy_score(logits_in) > 17).float().mean() > 0.99  # beyond the sigmoid's float32 range
    for score in (detect.msp_score, detect.energy_score):
        s_in, s_out = score(logits_in), score(logits_out)
        exact = roc_auc_score(target, torch.cat([s_in, s_out]).double().numpy())
        assert abs(detect.detection_metrics(s_in, s_out)["auroc"] - exact) < 1e-6, score


def test_metrics_agree_with_pytorch_ood():
    from pytorch_ood.metrics import OODMetrics

    g = torch.Generator().manual_seed(1)
    s_in, s_out = torch.randn(400, generator=g) + 1.0, torch.randn(300, generator=g)
    ours = detect.detection_metrics(s_in, s_out)
    # pytorch-ood: OOD positive (labels < 0), larger scores = more OOD, so negate ours
    lib = OODMetrics().update(-torch.cat([s_in, s_out]), torch.cat([torch.zeros(400), -torch.ones(300)]).long())
    lib = lib.compute()
    assert abs(ours["auroc"] - float(lib["AUROC"])) < 1e-4
    assert abs(ours["aupr_in"] - float(lib["AUPR-IN"])) < 2e-3
    assert abs(ours["aupr_out"] - float(lib["AUPR-OUT"])) < 2e-3


def test_detector_scores_are_in_distribution_scores():
    logits = torch.tensor([[10.0, 0.0, 0.0], [0.1, 0.0, 0.0]])  # confident, then nearly uniform
    assert detect.msp_score(logits)[0] > detect.msp_score(logits)[1]
    assert detect.energy_score(logits)[0] > detect.energy_score(logits)[1]
    assert torch.allclose(detect.energy_score(logits), torch.logsumexp(logits, 1))
    net = torch.nn.Linear(3, 3)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(2))
    # eps = 0 is plain max softmax at temperature T
    assert torch.allclose(detect.odin_score(net, x, 10.0, 0.0), (net(x) / 10).softmax(-1).max(-1).values)
    # the perturbation raises the (temperature-scaled) max softmax of every input
    with torch.inference_mode():  # as under Lightning's test loop
        raised = detect.odin_score(net, x, 10.0, 0.05)
    assert (raised >= detect.odin_score(net, x, 10.0, 0.0) - 1e-6).all()


def test_temperature_scaling_recovers_a_known_temperature():
    # labels drawn from softmax(logits / 2.5): the NLL-optimal temperature is ~2.5
    # (seed 0, 20,000 examples; tolerance 5 %)
    g = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(20000, 10, generator=g)
    labels = torch.multinomial((logits / 2.5).softmax(-1), 1, generator=g)[:, 0]
    T = detect.fit_temperature(logits, labels)
    assert abs(T - 2.5) / 2.5 < 0.05
    before, after = detect.calibration(logits, labels), detect.calibration(logits, labels, T)
    assert after["ece"] < before["ece"] / 3 and after["nll"] < before["nll"]
    assert after["acc"] == before["acc"]  # scaling keeps the argmax


def test_mahalanobis_prefers_points_near_class_means():
    g = torch.Generator().manual_seed(3)
    y = torch.arange(400) % 2
    feats = torch.randn(400, 4, generator=g) + 5 * y[:, None].float()
    scorer = detect.MahalanobisScorer(feats, y)
    near, far = torch.zeros(1, 4), torch.full((1, 4), 20.0)
    assert scorer(near) > scorer(far)


def test_temperature_on_separable_data_has_no_optimum():
    """Every example right: a sharper softmax always lowers the NLL, so the fit ends where its steps
    vanish (at detect.T_MIN for small margins, above it for large ones): the module notes it, as it
    notes a fit that stops at the floor."""
    labels = torch.tensor([0, 1, 0])
    for margin, floor in ((0.3, True), (4.0, False)):
        logits = torch.tensor([[margin, 0.0], [0.0, margin], [1.5 * margin, 0.0]])
        T = detect.fit_temperature(logits, labels)
        assert (abs(T - detect.T_MIN) < 1e-6) == floor and T < 0.5, (margin, T)
