r"""Scan and Snap: SGD on the Y/Z model over the synthetic classes, with the exact anchors.

Every (seed stream, :math:`\eta_Z/\eta_Y`) pair trains its own ``Y, Z`` (stacked into one batch
of parameters, so one autograd pass serves them all) by plain SGD on the next-token
cross-entropy with separate rates :math:`\eta_Y, \eta_Z`, zero initialisation,
``normalize=True``, ``residual=False``. The ``seeds`` data streams are independent: their
generators are seeded from ``numpy.random.SeedSequence(seed).spawn(seeds)``, so the runs of
two seeds share no stream. The attention is read off in the long-sequence limit
(:func:`constructions.scan_snap.long_sequence_limit`, an exact function of ``Z``), whose value
at the zero initialisation is exactly :math:`P(\text{distinct}\mid n) = 0.5`: the anchor the
"distinct up, common down" trend is measured from. The order among a class's distinct tokens
is read on ``Z`` itself: the attention relative to its initial value is
:math:`a_l(t)/a_l(0) \propto e^{Z[m, l]}`, and at the zero initialisation every ``Z`` is tied
(``z_order_gap_min``: the smallest gap between consecutive distinct tokens ranked by
:math:`P(l\mid n)`, positive iff ``Z`` orders them strictly as :math:`P(l\mid n)` does).
Recorded, not asserted: the per-step update norm :math:`\lVert\Delta Z\rVert` (its fall from
the peak and the step it first falls ``SNAP_FALL`` below it), and ``z_doubling_ratio``, the
change of the row-centred ``Z`` over the last doubling of training time over its largest
change over an earlier doubling: a snap that leaves the token combination almost fixed makes
it small, steady :math:`\log t` scanning keeps it near 1.

Measured full-config cost (one thread of this project's 2-core CPU machine, 2026-12-01, under
load from other jobs; CPU seconds do not count waiting):

* ``scan-snap``: 1108 CPU-s spent on three seeds over 3 runs (a per-run CPU limit restarted a
  partly run seed, so a seed costs under a third of it); published with three seeds.
* its scaling study (:mod:`empirics.scan_snap_scaling`, ``scan-snap-scaling``, 2500 to 20000
  steps at eta_Z/eta_Y = 0.05): at most about 53 CPU-s a seed; the snap ratio falls slowly.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from constructions.scan_snap import long_sequence_limit, synthetic_classes
from empirics.experiment import Experiment, Result, metric_key
from empirics.plots import pyplot

SMOKE = {"steps": 1500, "batch": 64, "length": 128, "lr_y": 1.0, "lr_z_ratios": [0.01, 0.05,
                                                                              0.2],
         "main_ratio": 0.05, "seeds": 2, "record_every": 50, "dtype": "float32"}
FULL = {"steps": 20_000, "batch": 128, "length": 128, "lr_y": 1.0,
        "lr_z_ratios": [0.01, 0.02, 0.05, 0.1, 0.2], "main_ratio": 0.05, "seeds": 5,
        "record_every": 100, "dtype": "float32"}
SNAP_FALL = 10.0   # the catalogue's snap: the update norm falls by >= 10x from its peak


def run(config: dict, device: torch.device, seed: int, *, lr_z_scale: float = 1.0,
        reverse_distinct: bool = False, winner_drift: float = 0.0) -> Result:
    """``lr_z_scale`` (a mutant when 0) multiplies every attention learning rate;
    ``reverse_distinct`` (a mutant) reverses, in each class's query row, the order of Z's
    gradient over the class's distinct tokens, so that the update ranks them backwards;
    ``winner_drift`` (a mutant when positive) is subtracted from Z's gradient on each class's
    most probable distinct token at every step, so that token runs away with the attention."""
    classes = synthetic_classes()
    M = classes.vocab_size
    dtype = {"float32": torch.float32, "float64": torch.float64}[config["dtype"]]
    ratios = list(config["lr_z_ratios"])
    seeds = list(range(config["seeds"]))     # stream labels; the streams are spawned below
    runs = [(s, r) for s in seeds for r in ratios]
    R, B, T = len(runs), config["batch"], config["length"]
    Y = torch.zeros(R, M, M, dtype=dtype, device=device, requires_grad=True)
    Z = torch.zeros(R, M, M, dtype=dtype, device=device, requires_grad=True)
    lr_z = torch.tensor([config["lr_y"] * r * lr_z_scale for _, r in runs], dtype=dtype,
                        device=device)[:, None, None]
    generators = [torch.Generator().manual_seed(int(child.generate_state(1, np.uint64)[0]))
                  for child in np.random.SeedSequence(seed).spawn(config["seeds"])]
    every = config["record_every"]
    steps_seen, update_norms, attn_hist, z_hist = [], [], [], []

    for step in range(config["steps"] + 1):
        if step % every == 0 or step == config["steps"]:
            steps_seen.append(step)
            z_hist.append(Z.detach().double().cpu())
            attn_hist.append(_limit_attention(z_hist[-1], classes))
        if step == config["steps"]:
            break
        batches = [classes.sample(B, T, g) for g in generators]
        tokens = torch.stack([batches[seeds.index(s)][0] for s, _ in runs])
        targets = torch.stack([batches[seeds.index(s)][1] for s, _ in runs]).to(device)
        # The query's output depends on the context only through its token counts
        # (training-dynamics.scan-snap-long-sequence-limit, checked on YZModel), so the step
        # works on counts: softmax over keys = c * e^{Z[m]} / sum, O(B M) instead of O(B T).
        counts = torch.zeros(R, B, M, dtype=dtype).scatter_add_(
            2, tokens[:, :, :-1], torch.ones(R, B, T - 1, dtype=dtype)).to(device)
        query = tokens[:, :, -1].to(device)                             # (R, B)
        z = Z[torch.arange(R, device=device)[:, None], query]           # (R, B, M): Z[m, :]
        weights = counts * torch.exp(z - z.max(-1, keepdim=True).values)
        combined = weights / weights.norm(dim=-1, keepdim=True)         # attn X, normalised
        logits = combined @ Y.transpose(1, 2)                           # (R, B, M)
        loss = torch.nn.functional.cross_entropy(logits.reshape(R * B, M),
                                                 targets.reshape(-1), reduction="sum") / B
        gY, gZ = torch.autograd.grad(loss, (Y, Z))
        if reverse_distinct:
            for n, m in enumerate(classes.query_of):
                cols = list(classes.distinct[n])
                gZ[:, m, cols] = gZ[:, m, cols[::-1]]
        if winner_drift:
            for n, m in enumerate(classes.query_of):
                gZ[:, m, classes.distinct[n][0]] -= winner_drift / lr_z[:, 0, 0]
        with torch.no_grad():
            Y -= config["lr_y"] * gY
            step_z = lr_z * gZ
            Z -= step_z
            update_norms.append(torch.linalg.norm(step_z, dim=(1, 2)).double().cpu())

    return _result(config, device, seed, classes, runs, ratios, seeds,
                   np.array(steps_seen), torch.stack(update_norms).numpy(),
                   np.stack(attn_hist), torch.stack(z_hist).numpy())


def _limit_attention(Z: torch.Tensor, classes) -> np.ndarray:
    """``(R, K, M)``: each run's attention of class n's query over tokens, T -> infinity."""
    out = np.zeros((Z.shape[0], len(classes.next_tokens), classes.vocab_size))
    for r in range(Z.shape[0]):
        for n, m in enumerate(classes.query_of):
            # the limit's attention mass on l is P(l) e^{Z[m,l]} / sum, and the limit output
            # f is that vector over its l2 norm (no residual): rescale f to sum to one
            f = long_sequence_limit(Z[r], m, classes.probs[n])
            out[r, n] = (f / f.sum()).numpy()
    return out


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation for untied values: Pearson's of the ranks (scipy's
    ``spearmanr`` agrees; it is not used because importing scipy.stats costs seconds)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _snap_step(norms: np.ndarray) -> tuple[float, float]:
    """(step where the smoothed update norm first falls SNAP_FALL below its peak, the
    peak / final ratio); the step is inf when it never falls that far."""
    window = max(1, len(norms) // 50)
    smooth = np.convolve(norms, np.ones(window) / window, mode="valid")
    peak = int(np.argmax(smooth))
    after = np.flatnonzero(smooth[peak:] <= smooth[peak] / SNAP_FALL)
    ratio = float(smooth[peak] / max(smooth[-1], 1e-300))
    return (float(peak + after[0] + window // 2) if after.size else math.inf), ratio


def _z_order_gap(Z: np.ndarray, classes, n: int) -> float:
    """The smallest ``Z[m, d_k] - Z[m, d_{k+1}]`` over n's distinct tokens ``d`` (listed in
    decreasing P(l|n)): positive iff Z orders them strictly as P(l|n) does; 0 when tied."""
    z = Z[classes.query_of[n], list(classes.distinct[n])]
    return float(np.min(z[:-1] - z[1:]))


def _doubling_ratio(steps: np.ndarray, Z: np.ndarray, classes) -> float:
    """Change of the row-centred query rows of ``Z`` over the last doubling of training time
    ``[T/2, T]``, over the largest change over an earlier one ``[T/2^(k+1), T/2^k]`` (each
    time read at the first recorded step at or after it; doublings down to the first
    recorded step after 0)."""
    rows = sorted(set(classes.query_of))
    centred = Z[:, rows] - Z[:, rows].mean(-1, keepdims=True)        # (S, rows, M): the gauge
    marks = sorted({int(np.searchsorted(steps, steps[-1] / 2 ** k))
                    for k in range(64) if steps[-1] / 2 ** k >= steps[1]})
    changes = [float(np.linalg.norm(centred[b] - centred[a]))
               for a, b in itertools.pairwise(marks)]
    earlier = max(changes[:-1], default=0.0)
    return changes[-1] / earlier if earlier > 0 else math.nan     # nan: Z never moved


def _result(config, device, seed, classes, runs, ratios, seeds, steps, norms, attn, zs
            ) -> Result:
    result = Result("scan-snap", config, seed, str(device))
    K = len(classes.next_tokens)
    distinct = [list(d) for d in classes.distinct]
    common = list(classes.common)
    start_distinct = float(classes.probs[0, distinct[0]].sum())   # exactly 0.5 at zero init
    head = max(1, len(steps) // 20)                               # the first and last 5%
    rows = []
    for ratio in ratios:
        idx = [r for r, (_, q) in enumerate(runs) if q == ratio]
        d_start = np.array([[attn[:head, r, n, distinct[n]].sum(-1).mean() for n in range(K)]
                            for r in idx])
        d_end = np.array([[attn[-head:, r, n, distinct[n]].sum(-1).mean() for n in range(K)]
                          for r in idx])
        c_end = np.array([[attn[-head:, r, n, common].sum(-1).mean() for n in range(K)]
                          for r in idx])
        spearman = np.array([[_spearman(attn[-1, r, n, distinct[n]],
                                        classes.probs[n, distinct[n]].numpy())
                              for n in range(K)] for r in idx])
        z_gap = np.array([[_z_order_gap(zs[-1, r], classes, n) for n in range(K)] for r in idx])
        doubling = [_doubling_ratio(steps, zs[:, r], classes) for r in idx]
        top = np.array([attn[-1, r].max() for r in idx])
        snaps = [_snap_step(norms[:, r]) for r in idx]
        key = metric_key(("ratio", ratio))
        metrics = {"distinct_start": d_start.mean(), "distinct_end_min": d_end.min(),
                   "distinct_end": d_end.mean(), "common_end_max": c_end.max(),
                   "spearman_min": spearman.min(), "top_token_max": top.max(),
                   "snap_step": np.mean([s for s, _ in snaps]),
                   "snap_fall_min": min(f for _, f in snaps),
                   "z_order_gap_min": z_gap.min(), "z_doubling_ratio_max": max(doubling)}
        for name, value in metrics.items():
            result.metrics[metric_key(key, name)] = float(value)
        result.metrics[metric_key(key, "distinct_end_std")] = float(d_end.mean(-1).std())
        rows.append([f"{ratio:g}", f"{start_distinct:.4f}", f"{d_start.mean():.4f}",
                     f"{d_end.mean():.4f} ± {d_end.mean(-1).std():.2g}",
                     f"{1 - start_distinct:.4f}", f"{c_end.mean():.4f}",
                     f"{spearman.min():.2f}", f"{z_gap.min():.3g}", f"{top.max():.3f}",
                     " / ".join(f"{s:g}" for s, _ in snaps),
                     f"{min(f for _, f in snaps):.3g}", f"{max(doubling):.3g}"])
    result.metrics["exact_distinct_start"] = start_distinct
    result.metrics["seeds"] = float(len(seeds))
    result.table("exact anchors against measured", [
        "eta_Z/eta_Y", "distinct mass at init (exact)", "first 5% (measured)",
        "last 5% (mean ± std over streams)", "common mass at init (exact)", "common, last 5%",
        "min Spearman of the mass vs P(l|n)", "min Z order gap (> 0: Z ranks as P(l|n))",
        "max single-token mass", "update-norm snap step per stream", "min peak/final update norm",
        "max Z change, last doubling / largest earlier"], rows)
    result.figures["attention"] = _figure(steps, norms, attn, runs, ratios, classes)
    return result


def _figure(steps, norms, attn, runs, ratios, classes):
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for k, ratio in enumerate(ratios):
        r = next(i for i, (_, q) in enumerate(runs) if q == ratio)
        for n in range(len(classes.next_tokens)):
            label = f"eta_Z/eta_Y={ratio:g}" if n == 0 else None
            axes[0].plot(steps, attn[:, r, n, list(classes.distinct[n])].sum(-1), color=f"C{k}",
                         lw=1, label=label)
            axes[0].plot(steps, attn[:, r, n, list(classes.common)].sum(-1), "--",
                         color=f"C{k}", lw=1)
        # the first step moves only Y (Z's gradient is 0 while Y = 0): start from step 2
        axes[1].semilogy(np.arange(2, len(norms) + 1), norms[1:, r], color=f"C{k}",
                         lw=0.6, label=f"{ratio:g}")
    axes[0].axhline(0.5, color="black", lw=0.8)
    axes[0].set_title("attention mass (T→∞): distinct —, common --; exact start 0.5",
                      fontsize=8)
    axes[0].legend(fontsize=6)
    axes[1].set_title("‖ΔZ‖ per step (the snap)", fontsize=8)
    axes[1].set_xlabel("step")
    fig.tight_layout()
    return fig


EXPERIMENT = Experiment(
    name="scan-snap",
    description="Scan and snap: SGD on the Y/Z model over synthetic classes (Tian et al. 2023)",
    configs={"smoke": SMOKE, "full": FULL},
    run=run,
    claims=("training-dynamics.scan-snap-dynamics",),
    code=("constructions.scan_snap",),
)
