"""Blind membership baselines: scores that tell members from non-members from the text alone, without
the model (Das, Zhang & Tramèr 2024, *Blind Baselines Beat Membership Inference Attacks for
Foundation Models*, code github.com/ethz-spylab/Blind-MIA). When one separates the two sets, the
sets differ in distribution and an attack's AUC on them is no evidence of memorization (also Duan et
al. 2024, MIMIR; Meeus et al. 2024, *SoK: Membership Inference Attacks on LLMs are Rushing Nowhere*).

Each function returns one score per text, higher = more likely a member, computed out of fold:
a text's score comes from a classifier (or cutoff) fitted on the other folds only, so its AUC is
an honest estimate of what the text distribution alone reveals.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
from sklearn.decomposition import PCA
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer, TfidfVectorizer
from sklearn.model_selection import StratifiedKFold
from sklearn.naive_bayes import GaussianNB, MultinomialNB

from harness.metrics.memorization import rank_auc

# Das et al.'s date detection (date_detection.py): every run of four ASCII digits is a year.
YEAR = re.compile(r"[0-9][0-9][0-9][0-9]")


def stratified_folds(labels: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index pairs of a seeded, shuffled stratified k-fold split (scikit-learn's
    `StratifiedKFold(folds, shuffle=True, random_state=seed)`), with k lowered to the smaller class's
    size when that is below `folds`. Empty when a class has fewer than 2 texts (nothing to fit on)."""
    labels = np.asarray(labels, dtype=int)
    smallest = min(int(labels.sum()), int(len(labels) - labels.sum()))
    if smallest < 2:
        return []
    splitter = StratifiedKFold(n_splits=min(folds, smallest), shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(labels)), labels))


def most_frequent_terms(texts: list[str], max_features: int | None, ngrams: int = 1) -> list[str] | None:
    """The `max_features` n-grams (1 to `ngrams` words, `CountVectorizer`'s defaults) most frequent in
    `texts` (summed counts), ties broken by the n-gram, listed alphabetically as scikit-learn lays out
    its columns; None (every n-gram) when `max_features` is None. scikit-learn's `max_features` takes
    the same set where no tie straddles the cut; at a tie its unstable `argsort` picks by machine (the
    reference split's blind_bow AUC at 32 words: 0.507 on an AVX2 machine, 0.501 on an AVX-512 one).
    A `ValueError` when no text holds an n-gram."""
    if max_features is None:
        return None
    counter = CountVectorizer(ngram_range=(1, ngrams))
    counts = counter.fit_transform(texts)
    terms = counter.get_feature_names_out()
    return list(terms[most_frequent_columns(counts, max_features)])


def most_frequent_columns(counts, max_features: int) -> np.ndarray:
    """`most_frequent_terms`' choice on a fitted `CountVectorizer`'s texts x terms `counts` (its columns are
    the terms in alphabetical order, so a stable sort breaks ties by the term): the column indices of the
    `max_features` highest summed counts, in column order."""
    totals = np.asarray(counts.sum(axis=0)).ravel()
    return np.sort(np.argsort(-totals, kind="stable")[:max_features])


def bag_of_words_fold(train_texts: list[str], train_labels: np.ndarray, test_texts: list[str],
                      max_features: int | None = 34, vectorizer: str = "tfidf", classifier: str = "gaussian_nb",
                      ngrams: int = 1) -> np.ndarray:
    """P(member | text) of each test text under a bag-of-words classifier fitted on the training texts.

    Features: scikit-learn's `TfidfVectorizer` (or `CountVectorizer`) with its defaults (lower-cased
    words of 2+ word characters; TF-IDF x_tw = tf_tw * (ln((1 + N) / (1 + df_w)) + 1), rows L2-normalised),
    n-grams of 1 to `ngrams` words, the `max_features` most frequent in the training texts
    (`most_frequent_terms`: ties at the cut broken by the term, where scikit-learn's own `max_features`
    breaks them by an unstable sort whose order depends on the machine), fitted on the training texts
    only; dense. Classifier: Gaussian naive Bayes (`GaussianNB`) or multinomial
    naive Bayes (`MultinomialNB`). With the defaults (TF-IDF, 34 features, Gaussian NB) this is Das
    et al.'s bag-of-words attack with their WikiMIA setting (`bag_of_words.py`, `train_classifier`).
    Nothing to learn gives 0.5 for every test text: an empty vocabulary (no training text holds a
    word) or features that are the same in every training text (Gaussian NB's variances, smoothed by
    1e-9 times the largest, would all be 0)."""
    make = TfidfVectorizer if vectorizer == "tfidf" else CountVectorizer
    try:
        features = make(vocabulary=most_frequent_terms(train_texts, max_features, ngrams), ngram_range=(1, ngrams))
        x_train = features.fit_transform(train_texts).toarray()
    except ValueError:  # "empty vocabulary": no word in any training text
        return np.full(len(test_texts), 0.5)
    if not x_train.var(axis=0).max() > 0:
        return np.full(len(test_texts), 0.5)
    model = GaussianNB() if classifier == "gaussian_nb" else MultinomialNB()
    model.fit(x_train, np.asarray(train_labels, dtype=int))
    return model.predict_proba(features.transform(test_texts).toarray())[:, 1]


def bag_of_words_scores(texts: list[str], labels: np.ndarray, folds: int = 5, seed: int = 0,
                        max_features: int | None = 34, vectorizer: str = "tfidf", classifier: str = "gaussian_nb",
                        ngrams: int = 1) -> np.ndarray | None:
    """Out-of-fold P(member | text) of every text (`bag_of_words_fold` on each fold of
    `stratified_folds`); None when a class has fewer than 2 texts.

    Das et al. average the AUC of 10 random 80/20 splits; membench scores every text once, out of
    fold (k-fold cross-validation), so that the baseline gets the same per-text metrics, intervals and
    TPR at low FPR as the attacks on exactly their texts."""
    labels = np.asarray(labels, dtype=int)
    split = stratified_folds(labels, folds, seed)
    if not split:
        return None
    scores = np.empty(len(texts))
    for train, test in split:
        scores[test] = bag_of_words_fold([texts[i] for i in train], labels[train], [texts[i] for i in test],
                                         max_features, vectorizer, classifier, ngrams)
    return scores


def latest_year(text: str) -> int | None:
    """The largest four-digit number in the text (every non-overlapping run of four ASCII digits, as
    Das et al.'s `date_detection_basic` reads years), None when there is none."""
    years = [int(y) for y in YEAR.findall(text)]
    return max(years) if years else None


def date_score(year: int | None, cutoff: int) -> float:
    """Das et al.'s date detection: 1.0 (member) when the text's latest year is before `cutoff` (the
    model's training cutoff), 0.0 when it is `cutoff` or later, 0.5 when the text holds no year."""
    if year is None:
        return 0.5
    return 1.0 if year < cutoff else 0.0


def date_scores(years: list[int | None], cutoff: int) -> np.ndarray:
    """`date_score` of every text's latest year."""
    return np.array([date_score(y, cutoff) for y in years])


# The years a training cutoff chosen on the data may be (`best_cutoff`): those of Das et al.'s `is_year`
# (date_detection.py, for arXiv's citation years: 1970 to 2023), to 2030. A four-digit number outside
# them (a count, "4953", or a far future, "2046") is no cutoff a model's training data can have.
CUTOFF_YEARS = (1970, 2030)


def best_cutoff(years: list[int | None], labels: np.ndarray) -> int | None:
    """The cutoff c whose `date_scores(years, c)` has the highest ROC AUC on these (training) texts,
    among c = y + 1 for every year y they hold within `CUTOFF_YEARS` and c = the smallest such year
    (everything after the cutoff); the smallest c among ties. None when no text holds such a year or
    a class is missing. A text's latest year is still its largest four-digit number, as Das et al. read it."""
    first, last = CUTOFF_YEARS
    found = sorted({y for y in years if y is not None and first <= y <= last})
    labels = np.asarray(labels, dtype=int)
    if not found or labels.min() == labels.max():
        return None
    candidates = [found[0], *(y + 1 for y in found)]
    aucs = rank_auc(np.tile(labels, (len(candidates), 1)), np.stack([date_scores(years, c) for c in candidates]))
    return candidates[int(np.nanargmax(aucs))]


def date_scores_cv(years: list[int | None], labels: np.ndarray, folds: int = 5,
                   seed: int = 0) -> tuple[np.ndarray, list[int | None]] | None:
    """Out-of-fold date scores when the training cutoff is unknown: on each fold of `stratified_folds`
    the cutoff is `best_cutoff` of the other folds' texts, then `date_score` of the fold's texts;
    also each fold's cutoff (None: no year in its training texts, so 0.5 for the fold). None when a
    class has fewer than 2 texts."""
    labels = np.asarray(labels, dtype=int)
    split = stratified_folds(labels, folds, seed)
    if not split:
        return None
    scores, cutoffs = np.full(len(years), 0.5), []
    for train, test in split:
        cutoff = best_cutoff([years[i] for i in train], labels[train])
        cutoffs.append(cutoff)
        if cutoff is not None:
            scores[test] = date_scores([years[i] for i in test], cutoff)
    return scores, cutoffs


# The IID guard's label-free features: the TF-IDF of the pool's most frequent words (Das et al.'s 34),
# summarised by its first principal components.
GUARD_TERMS, GUARD_COMPONENTS = 34, 5


def label_free_features(texts: list[str], max_features: int = GUARD_TERMS,
                        components: int = GUARD_COMPONENTS) -> tuple[np.ndarray, list[str]]:
    """Texts x model-free features for dataset inference's IID guard, and their names: `chars` (length),
    `zlib_bytes` (zlib-compressed UTF-8 size), `has_year` and `year` (`latest_year` within `CUTOFF_YEARS`;
    the pool's median year where a text has none) and `bow_pc1..` (the first `components` principal
    components of the TF-IDF of the pool's `max_features` most frequent words, scikit-learn's PCA with a
    full SVD). Every feature is a function of the text and of the pool as a whole, never of the labels:
    the guard's test then stays valid under the null (labels exchangeable), which out-of-fold scores of a
    classifier fitted on the labels (`bag_of_words_scores`) are not (their AUC on a random split of the
    reference pool: 0.43). Constant features are dropped by the test itself."""
    first, last = CUTOFF_YEARS
    years = [latest_year(text) for text in texts]
    years = [y if y is not None and first <= y <= last else None for y in years]
    known = [y for y in years if y is not None]
    fill = float(np.median(known)) if known else 0.0
    columns = {"chars": [len(text) for text in texts],
               "zlib_bytes": [len(zlib.compress(text.encode("utf-8"))) for text in texts],
               "has_year": [float(y is not None) for y in years],
               "year": [float(y) if y is not None else fill for y in years]}
    counter = CountVectorizer()  # tokenised once: the terms are chosen on these counts, then weighted
    try:
        counts = counter.fit_transform(texts)
    except ValueError:  # no word in any text
        tfidf = np.zeros((len(texts), 0))
    else:
        chosen = most_frequent_columns(counts, max_features)
        tfidf = TfidfTransformer().fit_transform(counts[:, chosen]).toarray()  # = TfidfVectorizer on those terms
    kept = min(components, tfidf.shape[1], len(texts) - 1)
    if kept > 0 and tfidf.var(axis=0).max() > 0:
        projected = PCA(n_components=kept, svd_solver="full").fit_transform(tfidf)
        columns |= {f"bow_pc{j + 1}": projected[:, j] for j in range(kept)}
    return np.column_stack([np.asarray(v, dtype=float) for v in columns.values()]), list(columns)
