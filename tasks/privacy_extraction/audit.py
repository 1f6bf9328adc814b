"""privacy_extraction's one-run privacy audit, reported from its records: each canary's score, the audit's
metrics after an epoch of one fine-tuning seed (Steinke et al.'s bound, the conditional Gaussian f-DP figure,
the canaries' AUC and loss) with the evidence that makes them (every score, the guesses, the corrected
confidence, the ceiling), and the bounds recomputed from that evidence (`recompute_audit`). The metrics
themselves: `harness.metrics.privacy_audit`; the canaries: `data.audit_canaries` (text) and
`harness.training.gradient_canaries` (white-box). Definitions: README.md beside this file."""

from __future__ import annotations

import numpy as np

from harness.core.results import Metric
from harness.metrics import memorization as m
from harness.metrics.privacy_audit import BonferroniGrid, privacy_audit
from tasks.privacy_extraction.data import CANARIES, Secret

TIE_BREAK_SEED = 0  # the audit's random order among tied canary scores (`privacy_audit.score_order`)

# the `bound` tags: Steinke et al.'s (any (epsilon, delta)-DP mechanism) and Mahloujifar et al.'s Gaussian f-DP one,
# conditional: it refutes mu-GDP, an (epsilon, delta) statement only for a mechanism with a Gaussian trade-off curve
AUDIT_BOUNDS = ("steinke", "gaussian-fdp-conditional")
# figures reported as the largest over the fine-tuning seeds (each seed's audit corrected for their number), not
# their mean: a mean of lower bounds is no bound at the stated confidence
LARGEST_OVER_SEEDS = frozenset({"audited_epsilon"})
AUDIT_BOUND_MEANINGS = {
    AUDIT_BOUNDS[0]: "Steinke et al. 2023: a lower bound on epsilon for any (epsilon, delta)-DP mechanism: the headline",
    AUDIT_BOUNDS[1]: "Mahloujifar et al. 2025: refutes mu-GDP and converts the refuted mu to epsilon at delta; "
                     "conditional: an (epsilon, delta) bound only for a mechanism whose trade-off curve is Gaussian "
                     "(fine-tuning without DP is not; Poisson-subsampled DP-SGD only approximately)"}
# the `group` tag of the white-box canaries' audit (`harness.training.gradient_canaries`)
GRADIENT_CANARIES = "gradient-canary"


def inclusion(canary: Secret) -> str:
    """A canary's `included` tag: "yes" when it was drawn into the fine-tuning (`times` 1), else "no"."""
    return "yes" if canary.times == 1 else "no"


def canary_scores(before: list[np.ndarray], after: list[np.ndarray]) -> np.ndarray:
    """Each canary's audit score: its loss drop per token, the mean over the target's tokens of
    log p_after(y_t | x, y_<t) - log p_before(y_t | x, y_<t) (higher = more likely trained on). The checkpoint's
    term calibrates each canary's difficulty (Watson et al. 2022, *On the importance of difficulty calibration in
    membership inference attacks*); the mean, not the sum, because fine-tuning on random strings makes every
    such string likelier per token, and a sum would rank the canaries by their length."""
    return np.array([float(np.mean(a) - np.mean(b)) if len(a) else 0.0 for a, b in zip(after, before, strict=True)])


def audit_metrics(included: np.ndarray, scores: np.ndarray, epoch: int, delta: float, confidence: float,
                  family: int = 1, group: str = CANARIES, score: str = "loss drop") -> tuple[list[Metric], dict]:
    """The one-run audit after `epoch` epochs (`harness.metrics.privacy_audit`, its default guess rule) of one
    fine-tuning seed of `family` (the seeds whose largest bound the task reports: each cell is tested at
    (1 - confidence) / (8 family)): the audited epsilon lower bounds at the run's `delta`, Steinke et al.'s and
    Mahloujifar et al.'s conditional Gaussian f-DP one, each with its ceiling; and the audit's record: the
    guesses that made each bound (k+, k-, r, v), the confidence per cell after the correction, the ceilings
    and every canary's score at full precision (the audit's info holds the inclusion bits), from which
    `recompute_audit` gives the same bounds. `group`: the canaries' tag (the text canaries, `CANARIES`, or the
    white-box gradient canaries, `GRADIENT_CANARIES`); `score`: the AUC's score tag."""
    m_canaries = len(included)
    tags = {"epoch": str(epoch), "group": group, "confidence": f"{confidence:g}"}
    auc_tags = {"epoch": str(epoch), "group": group, "score": score}
    broken = int((~np.isfinite(scores)).sum())
    if broken:  # a fine-tuning that diverged (NaN) or a target it made impossible (-inf): no bound to state
        return ([Metric(name="audited_epsilon", value=None, n=m_canaries, tags={**tags, "bound": bound})
                 for bound in AUDIT_BOUNDS] + [Metric(name="auc", value=None, n=m_canaries, tags=auc_tags)],
                {"epoch": epoch, "not_computed": f"{broken} of {m_canaries} canary scores are not finite (the "
                                                 "fine-tuned model's log-probabilities or parameters: NaN or inf)"})
    steinke, fdp = (privacy_audit(scores, included, delta, confidence, select_by=rule, seed=TIE_BREAK_SEED,
                                  family=family) for rule in ("steinke", "fdp"))
    metrics = [Metric(name="audited_epsilon", value=steinke.epsilon_steinke, n=m_canaries,
                      ceiling=steinke.ceiling_steinke, tags={**tags, "bound": AUDIT_BOUNDS[0]}),
               Metric(name="audited_epsilon", value=fdp.epsilon_fdp, n=m_canaries, ceiling=fdp.ceiling_fdp,
                      tags={**tags, "bound": AUDIT_BOUNDS[1]})]
    guesses = {name: {"k_plus": a.k_plus, "k_minus": a.k_minus, "r": a.r, "v": a.v}
               for name, a in zip(AUDIT_BOUNDS, (steinke, fdp))}
    guesses[AUDIT_BOUNDS[1]]["mu"] = fdp.mu_fdp
    separable = 0 < included.sum() < len(included)
    metrics.append(Metric(name="auc", value=m.roc_auc(included, scores) if separable else None, n=m_canaries,
                          tags=auc_tags))
    return metrics, {"epoch": epoch, "guesses": guesses, "family": family, "cells": steinke.cells,
                     "confidence_per_cell": steinke.confidence_per_cell,
                     "ceiling": {AUDIT_BOUNDS[0]: steinke.ceiling_steinke, AUDIT_BOUNDS[1]: fdp.ceiling_fdp},
                     "at_ceiling": [bound for bound, audit, rule in zip(AUDIT_BOUNDS, (steinke, fdp), ("steinke", "fdp"))
                                    if audit.at_ceiling(rule)],
                     "scores": [float(x) for x in scores]}


def reported_rule(seeds: int, confidence: float) -> str:
    """How an audit's `audited_epsilon` is reported, in words for the results file's info."""
    return (f"audited_epsilon after each epoch: the largest of the {seeds} fine-tuning seeds' audits, each cell "
            f"tested at (1 - {confidence:g}) / (8 x {seeds}), so it holds at {confidence:g}; per_seed: each seed's "
            "bound; each epoch is a figure of its own (the largest over E epochs holds at 1 - E (1 - confidence)); a "
            "value at its ceiling (the most these canaries can show) reads '>=' on the boards")


def audit_record(inclusion_bits: str, delta: float, confidence: float, seeds: int, runs: list[dict]) -> dict:
    """What every audit's info holds besides its design: the inclusion bits (each run's `scores` are in their
    order; with them and `tie_break_seed` a run's bounds follow, `recompute_audit`), δ, the confidence, what each
    bound means, the guess rule, how the figure over seeds is reported, and the runs' records (`audit_metrics`)."""
    return {"inclusion": inclusion_bits, "tie_break_seed": TIE_BREAK_SEED, "delta": delta, "confidence": confidence,
            "bounds": AUDIT_BOUND_MEANINGS, "guess_rule": BonferroniGrid().describe(),
            "reported": reported_rule(seeds, confidence), "runs": runs}


def recompute_audit(audit_info: dict, run: dict) -> dict[str, float]:
    """The bounds of one recorded audit (`info.audit` and one of its `runs`) computed again from its stored
    canary scores and inclusion bits: {bound tag: epsilon}. What `audit_metrics` reported for that run."""
    included = np.array([bit == "1" for bit in audit_info["inclusion"]])
    return {tag: getattr(privacy_audit(run["scores"], included, audit_info["delta"], audit_info["confidence"],
                                       select_by=rule, seed=audit_info["tie_break_seed"], family=run["family"]),
                         field)
            for tag, rule, field in zip(AUDIT_BOUNDS, ("steinke", "fdp"), ("epsilon_steinke", "epsilon_fdp"))}


def canary_losses(canaries: list[Secret], after: list[np.ndarray], epoch: int) -> list[Metric]:
    """The canaries' mean loss per target token after fine-tuning, those trained on and those left out: the
    left-out ones' is the utility beside a DP run's epsilon (how well it learned strings it never saw)."""
    out = []
    for included in ("yes", "no"):
        chosen = [-float(np.mean(x)) for c, x in zip(canaries, after) if inclusion(c) == included and len(x)]
        out.append(Metric(name="target_loss", value=float(np.mean(chosen)) if chosen else None, n=len(chosen),
                          tags={"epoch": str(epoch), "group": CANARIES, "included": included}))
    return out
