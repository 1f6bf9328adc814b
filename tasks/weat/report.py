"""WEAT's reporting stage: effect sizes, statistics, permutation p-values and mean |d| from the records
(every word's association s(w, A, B) per representation and test), a pure function
(`harness.core.task.Task.report`): no model, no torch.

Records: `{"tests": [{id, group, x, y, a, b}]` (each test's word sets, in the order the tests ran),
`"associations": [{id: "<representation>/<test>", representation, test, x: [s(w, A, B) of each word of
the test's x, in order], y: [... of y]}]`, `"unknown_words": [the words whose tokens include the unknown
token]`, `"facts": {data_source}}`. The permutation test needs only the associations (partitions of
X u Y are compared by their sums), so no word vector is recorded.
"""

from __future__ import annotations

import numpy as np

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list
from harness.core.results import Metric
from harness.core.task import TaskResult
from harness.metrics.bias import weat_effect_size, weat_p_value, weat_statistic
from tasks.weat.data import GROUPS

REPRESENTATIONS = ("static", "contextual")
# s(w, A, B) is a difference of two mean cosines, within [-2, 2] but for rounding (a cosine of unit rows
# may come out 1 + 1e-16); NaN where a word's vector is zero (a cosine of a zero vector)
ASSOCIATION_BOUND = 2.0 + 1e-9


def weat_test_result(s_x: np.ndarray, s_y: np.ndarray, config, seed: int) -> dict:
    """Effect size, statistic and permutation p-value of one test from its words' associations
    (`config`: effect_size_std, max_exact_partitions, permutation_samples)."""
    p, exact, partitions = weat_p_value(s_x, s_y, config.max_exact_partitions, config.permutation_samples, seed)
    ddof = 1 if config.effect_size_std == "sample" else 0
    return {"effect_size": weat_effect_size(s_x, s_y, ddof), "statistic": weat_statistic(s_x, s_y), "p_value": p,
            "exact": exact, "partitions": partitions}


def mean_abs_d(results: dict[str, dict], tests: list[dict], group: str) -> Metric | None:
    chosen = [abs(results[t["id"]]["effect_size"]) for t in tests if group in ("all", t["group"])]
    return None if not chosen else Metric(name="mean_abs_d", value=float(np.mean(chosen)), n=len(chosen))


def checked_tests(records: Records) -> list[dict]:
    """The test records, each checked: a known group and word sets X, Y, A, B (at least two words each,
    none twice in a set), as the data file's tests are."""
    tests = record_list(records, "tests", "test")
    if not tests:
        raise UserError("records: tests is empty; a run scores at least one test")
    for t in tests:
        if t.get("group") not in GROUPS:
            raise UserError(f"records: test {t['id']!r} needs a group of {', '.join(GROUPS)}, not {t.get('group')!r}")
        for key in ("x", "y", "a", "b"):
            words = t.get(key)
            if not (isinstance(words, list) and len(words) >= 2 and all(isinstance(w, str) and w for w in words)
                    and len(set(words)) == len(words)):
                raise UserError(f"records: test {t['id']!r} needs {key}, a list of at least two distinct words")
    return tests


def checked_associations(records: Records, tests: list[dict], representations: tuple[str, ...]) -> dict:
    """(representation, test id) -> (s_x, s_y) as float64 arrays: exactly one association record for
    each representation the config names and each test, with one number per word of the test's x and y."""
    by_id = {t["id"]: t for t in tests}
    found = {}
    for item in record_list(records, "associations", "association"):
        rep, test = item.get("representation"), item.get("test")
        if rep not in representations or test not in by_id:
            raise UserError(f"records: association {item['id']!r} is of representation {rep!r} and test {test!r}; "
                            f"the run scored representations {', '.join(representations)} and the tests recorded")
        if item["id"] != f"{rep}/{test}":
            raise UserError(f"records: association {item['id']!r} of {rep}/{test} must have the id {rep}/{test}")
        values = []
        for key in ("x", "y"):
            words, scores = by_id[test][key], item.get(key)
            if not isinstance(scores, list) or len(scores) != len(words):
                raise UserError(f"records: association {item['id']!r} needs {key}, one number per word of the "
                                f"test's {key} ({len(words)})")
            values.append(np.asarray([number(s, f"association {item['id']!r} {key}[{i}] ({words[i]})",
                                             -ASSOCIATION_BOUND, ASSOCIATION_BOUND, nan=True)
                                      for i, s in enumerate(scores)], dtype=np.float64))
        found[rep, test] = tuple(values)
    for rep in representations:
        for t in tests:
            if (rep, t["id"]) not in found:
                raise UserError(f"records: no association record {rep}/{t['id']}; every test is scored in every "
                                "representation")
    return found


def checked_unknown(records: Records, words: list[str]) -> list[str]:
    unknown = records.get("unknown_words")
    if not (isinstance(unknown, list) and all(isinstance(w, str) for w in unknown)):
        raise UserError("records: unknown_words is missing or not a list of words")
    known = set(words)
    for word in unknown:
        if word not in known:
            raise UserError(f"records: unknown word {word!r} is in no test's word sets")
    if len(set(unknown)) != len(unknown):
        raise UserError("records: a word appears twice in unknown_words")
    return unknown


def report(records: Records, config, seed: int) -> TaskResult:
    """Every metric, count, sample and info field of a run from its records (`config`: a `WeatConfig`)."""
    tests = checked_tests(records)
    scores = checked_associations(records, tests, tuple(config.representations))
    words = list(dict.fromkeys(w for t in tests for w in t["x"] + t["y"] + t["a"] + t["b"]))
    unknown = checked_unknown(records, words)
    metrics, samples, item_scores = [], [], {}
    info = {**facts(records), "p_values": {}}
    for representation in config.representations:
        results = {t["id"]: weat_test_result(*scores[representation, t["id"]], config, seed) for t in tests}
        for t in tests:
            result, (s_x, s_y) = results[t["id"]], scores[representation, t["id"]]
            tags = {"representation": representation, "test": t["id"]}
            metrics += [Metric(name=name, value=result[name], tags=tags) for name in ("effect_size", "statistic")]
            metrics.append(Metric(name="p_value", value=result["p_value"], n=result["partitions"], tags=tags))
            info["p_values"][f"{representation}/{t['id']}"] = (
                f"{'exact' if result['exact'] else 'sampled'} over {result['partitions']} partitions")
            associations = {**dict(zip(t["x"], s_x.tolist())), **dict(zip(t["y"], s_y.tolist()))}
            samples += [{"representation": representation, "test": t["id"], "word": word,
                         "set": "X" if word in t["x"] else "Y", "association": value}
                        for word, value in associations.items()]
        for group in ("all", "race", "gender"):
            summary = mean_abs_d(results, tests, group)
            if summary:
                metrics.append(summary.model_copy(update={"tags": {"representation": representation, "group": group}}))
        item_scores[f"effect_size/{representation}"] = {t: r["effect_size"] for t, r in results.items()}
    counts = {"tests": len(tests), "words": len(words), "words_with_unknown_tokens": len(unknown),
              "templates": len(config.templates)}
    if unknown:
        info["words_with_unknown_tokens"] = unknown
    return TaskResult(metrics=metrics, counts=counts, samples=samples, info=info, item_scores=item_scores)
