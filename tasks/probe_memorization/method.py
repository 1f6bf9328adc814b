"""The seen/unseen method of Rosa, Musil & Mareček 2020 and the control task of Hewitt & Liang 2019,
on integer arrays: word types and tags as ids, sentences as token index ranges. No model, no probe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.metrics.memorization import mean_and_std


@dataclass(frozen=True)
class Split:
    """One repetition's draw: the seen and unseen halves (pool sentence indices)."""

    seen: np.ndarray
    unseen: np.ndarray


def draw_split(n_pool: int, size: int, seed: int, repetition: int) -> Split:
    """`size` pool sentences drawn at random, cut into two halves of ⌊size/2⌋ (seen first).

    The draw depends only on (seed, size, repetition), so every representation and probe of a
    repetition sees the same split.
    """
    rng = np.random.default_rng([seed, size, repetition])
    chosen = rng.permutation(n_pool)[:size]
    half = size // 2
    return Split(np.sort(chosen[:half]), np.sort(chosen[half:2 * half]))


def sentence_tokens(offsets: np.ndarray, sentences: np.ndarray) -> np.ndarray:
    """Token indices of the given sentences; sentence i holds tokens offsets[i]:offsets[i+1]."""
    if len(sentences) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(offsets[i], offsets[i + 1]) for i in sentences])


def seen_unseen_types(seen_types: np.ndarray, unseen_types: np.ndarray, n_types: int,
                      excluded: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks over word types: seen = in the seen half and not the unseen half; unseen =
    in the unseen half and not the seen half. Types in both halves or in neither are in neither mask,
    and so are the types of `excluded` (word type ids: the tuning set's words, which Rosa et al.'s
    footnote 2 removes: "We also need to remove words that are part of the development set if one is
    used for training the probing classifier")."""
    in_seen = np.zeros(n_types, dtype=bool)
    in_unseen = np.zeros(n_types, dtype=bool)
    in_seen[seen_types] = True
    in_unseen[unseen_types] = True
    allowed = np.ones(n_types, dtype=bool)
    if excluded is not None:
        allowed[excluded] = False
    return in_seen & ~in_unseen & allowed, in_unseen & ~in_seen & allowed


def control_labels(pool_tags: np.ndarray, n_types: int, n_tags: int, seed: int) -> np.ndarray:
    """Hewitt & Liang's control task: one label per word type (fixed for the run), drawn
    independently from the empirical tag distribution of the pool's tokens."""
    counts = np.bincount(pool_tags, minlength=n_tags).astype(float)
    rng = np.random.default_rng([seed, 0xC0])
    return rng.choice(n_tags, size=n_types, p=counts / counts.sum())


@dataclass
class Tally:
    """Correct / total token counts of one (representation, probe, training size), per repetition."""

    seen: list[tuple[int, int]] = field(default_factory=list)
    unseen: list[tuple[int, int]] = field(default_factory=list)
    overall: list[tuple[int, int]] = field(default_factory=list)
    control: list[tuple[int, int]] = field(default_factory=list)

    def add(self, correct: np.ndarray, seen: np.ndarray, unseen: np.ndarray,
            control_correct: np.ndarray | None) -> None:
        self.seen.append((int(correct[seen].sum()), int(seen.sum())))
        self.unseen.append((int(correct[unseen].sum()), int(unseen.sum())))
        self.overall.append((int(correct.sum()), len(correct)))
        if control_correct is not None:
            self.control.append((int(control_correct.sum()), len(control_correct)))


def micro_accuracy(counts: list[tuple[int, int]]) -> float | None:
    """Σ correct / Σ total over repetitions (tokens pooled); None when there are no tokens."""
    total = sum(n for _, n in counts)
    return sum(c for c, _ in counts) / total if total else None


def per_repetition(counts: list[tuple[int, int]]) -> np.ndarray:
    """Each repetition's accuracy (NaN where it had no tokens)."""
    return np.array([c / n if n else np.nan for c, n in counts], dtype=float)


def sample_std(values: np.ndarray) -> float | None:
    """Standard deviation (ddof = 1) of the finite values; None with fewer than two."""
    finite = values[np.isfinite(values)]
    return mean_and_std(list(finite))[1] if len(finite) else None


def difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


@dataclass(frozen=True)
class Summary:
    """Micro-averaged accuracies, their differences, and standard deviations over repetitions."""

    accuracy: float | None
    seen: float | None
    unseen: float | None
    effect: float | None  # seen - unseen
    control: float | None
    selectivity: float | None  # accuracy - control
    accuracy_std: float | None
    seen_std: float | None
    unseen_std: float | None
    effect_std: float | None
    control_std: float | None
    selectivity_std: float | None
    n_seen: int
    n_unseen: int
    n_eval: int
    repetitions: int


def summarize(tally: Tally) -> Summary:
    """Micro-averaged accuracies over the repetitions and the sample std (ddof = 1) of each one's
    per-repetition value (for a difference: of the per-repetition differences)."""
    seen, unseen = micro_accuracy(tally.seen), micro_accuracy(tally.unseen)
    accuracy, control = micro_accuracy(tally.overall), micro_accuracy(tally.control)
    per_seen, per_unseen = per_repetition(tally.seen), per_repetition(tally.unseen)
    per_overall, per_control = per_repetition(tally.overall), per_repetition(tally.control)
    return Summary(
        accuracy=accuracy, seen=seen, unseen=unseen, effect=difference(seen, unseen), control=control,
        selectivity=difference(accuracy, control), accuracy_std=sample_std(per_overall),
        seen_std=sample_std(per_seen), unseen_std=sample_std(per_unseen),
        effect_std=sample_std(per_seen - per_unseen),
        control_std=sample_std(per_control) if tally.control else None,
        selectivity_std=sample_std(per_overall - per_control) if tally.control else None,
        n_seen=sum(n for _, n in tally.seen),
        n_unseen=sum(n for _, n in tally.unseen), n_eval=sum(n for _, n in tally.overall),
        repetitions=len(tally.overall))
