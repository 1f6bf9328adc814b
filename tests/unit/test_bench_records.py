"""Every figure the docs and task cards take from a bench is its committed record's: the record
(`bench/results/<bench>.json`, or `<bench>--<label>.json` for one of several runs of a bench; written by
the bench's `--output`, `bench/record.py`) holds the numbers with the date, machine and command that
measured them, and each citing section names the record, its date and its machine. A figure
re-measured, or reworded, without its record fails here."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.helpers.committed import flat, same

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
FIGURE = r"(-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?)"


@dataclass(frozen=True)
class Citation:
    """`pattern` (a page's sentence, its figures written `{}`) states `values(record's report)` in order;
    `bench` names the record (its file's stem)."""

    page: str
    bench: str
    pattern: str
    values: Callable[[dict], list[float]]


def seconds(report: dict, section: str, *names: str) -> list[float]:
    return [report[section]["seconds"][name] for name in names]


def one_value(values: list[float]) -> list[float]:
    """[v] when every value is v (a page that says "p = v each"), else [] (the page no longer holds)."""
    return values[:1] if len(set(values)) == 1 else []


def direction_power(r: dict) -> list[float]:
    """bench_di_direction's texts a side for half the subsamples to reject, as docs/dataset-inference.md states
    them: the reference copy after 1 epoch (never, either way), after 2 either way, the real models' after 1 and 2
    either way, xsum-gpt2-e01 with "seen" and two-sided (64 and 128 words alike), ja-gpt2-e01 at 128 either way and
    at 64 with "seen" (two-sided: never); [] where a stated "never", "either way" or "alike" no longer holds."""
    power = {pool: {d: row[d]["smallest_n"] for d in ("seen", "any")} for pool, row in r["power"].items()}
    same = [power[f"finetune {model} members@{epoch}"] for model in ("SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m")
            for epoch in (1, 2)] + [power["finetune xsum-gpt2-outside-e05 members@2"], power["mink ja-gpt2-e01 128"]]
    if (set(power["finetune xsum-gpt2-outside-e05 members@1"].values()) != {None}
            or any(p["seen"] != p["any"] for p in same) or power["mink ja-gpt2-e01 64"]["any"] is not None
            or power["mink xsum-gpt2-e01 64"] != power["mink xsum-gpt2-e01 128"]):
        return []
    return [same[4]["seen"], *(p["seen"] for p in same[:4]), power["mink xsum-gpt2-e01 64"]["seen"],
            power["mink xsum-gpt2-e01 64"]["any"], same[5]["seen"], power["mink ja-gpt2-e01 64"]["seen"]]


def stereoset_row(label: str, row: str, same_to: bool) -> Citation:
    """A row of the stereoset card's agreement table: examples, the largest relative difference, the
    decisions that differ, the official LMS / SS / ICAT, and membench's (or "the same to 1e-12")."""
    metrics = ("lms", "ss", "icat")

    def values(r: dict) -> list[float]:
        if same_to and any(abs(r["official"][k] - r["membench"][k]) > 1e-12 for k in metrics):
            return []
        return [r["examples"], r["max_relative_difference"], r["decisions_differing"], r["decisions"],
                *(r["official"][k] for k in metrics), *([] if same_to else (r["membench"][k] for k in metrics))]

    membench = "the same to 1e-12" if same_to else "{} / {} / {}"
    return Citation("tasks/stereoset/README.md", f"stereoset_official--{label}",
                    f"| {row} | {{}} | {{}} | {{}} of {{}} | {{}} / {{}} / {{}} | {membench} |", values)


def duplication_row(size: str, label: str, epoch: str) -> Citation:
    """A row of the paywall card's duplication table (bench_duplication): Min-K% AUCs at 128 words, and
    the members' and non-members' eidetic and approximate means."""
    def values(r: dict) -> list[float]:
        found = r["sizes"][size]["checkpoints"][epoch]
        groups = [found["paywall"][g][k] for g in ("members", "non_members") for k in ("eidetic_mean", "approximate_mean")]
        return [found["min_k_10_auc"]["128"], found["min_k_20_auc"]["128"], *groups]

    return Citation("tasks/paywall_memorization/README.md", "bench_duplication",
                    f"| {label} | {epoch} | {{}} | {{}} | {{}} / {{}} | {{}} / {{}} |", values)


SPARSITY_ROWS = {"dense": "`dense` (`t5-ref`)", "dense-again": "`dense-again`", "sparse-30": "`sparse-30`",
                 "sparse-50": "`sparse-50`", "sparse-70": "`sparse-70` (`t5-ref-sparse70`)", "sparse-90": "`sparse-90`",
                 "small-dense": "`small-dense` (64 wide)"}


def sparsity_row(name: str, label: str) -> Citation:
    """A row of the privacy card's sparse-against-dense table (bench_sparsity): parameters, non-zero ones, the last
    pre-training loss (— for `t5-ref`, not pre-trained again), the memorization-45 subset score after 4 and 8
    epochs (mean ± std), exact match and epsilon after 8."""
    def values(r: dict) -> list[float]:
        m = r["models"][name]
        loss = [] if m["last_pretraining_loss"] is None else [m["last_pretraining_loss"]]
        return [m["parameters"], m["nonzero_parameters"], *loss, m["subset_score_4"]["mean"],
                m["subset_score_8"]["mean"], m["subset_score_8"]["std"], m["exact_match_8"]["mean"],
                m["epsilon_8"]["mean"]]

    loss = "—" if name == "dense" else "{}"
    return Citation("tasks/privacy_extraction/README.md", "bench_sparsity",
                    f"| {label} | {{}} | {{}} | {loss} | {{}} | {{}} ± {{}} | {{}} | {{}} |", values)


def sparsity_reading(r: dict) -> list[float]:
    """The privacy card's reading of bench_sparsity: the seeds, and each comparison's difference (the card writes its
    minus sign) and standard error; [] unless `small-dense` has the lower loss, as the card says."""
    comparisons = r["comparisons"]
    labels = ("matched size (sparse-70 - dense)", "matched training (sparse-70 - dense-again)",
              "matched parameter count (sparse-70 - small-dense)")
    found = [v for label in labels for v in (-comparisons[label]["subset_score_8"]["difference"],
                                             comparisons[label]["subset_score_8"]["se"])]
    models = r["models"]
    if models["small-dense"]["last_pretraining_loss"] >= models["sparse-70"]["last_pretraining_loss"]:
        return []
    return [r["finetune_seeds"], r["finetune_seeds"], *found]


def matched_loss(r: dict) -> list[float]:
    """The privacy card's comparison at matched loss (bench_sparsity): `sparse-30`'s and `dense-again`'s last
    pre-training loss and 8-epoch memorization-45 subset score, the difference (its minus sign written by the card),
    its standard error sqrt(s_a^2 / n + s_b^2 / n) over the n seeds of each side, and n twice."""
    sparse, dense = r["models"]["sparse-30"], r["models"]["dense-again"]
    n = r["finetune_seeds"]
    a, b = sparse["subset_score_8"], dense["subset_score_8"]
    return [sparse["last_pretraining_loss"], dense["last_pretraining_loss"], a["mean"], b["mean"], b["mean"] - a["mean"],
            (a["std"] ** 2 / n + b["std"] ** 2 / n) ** 0.5, n, n]


PRIVACY_MODES = {"default": "default", "separate": "`--finetunes separate`", "paper": "`--preset paper`"}


def presets_privacy_row(model: str, mode: str) -> Citation:
    """A row of the privacy card's table of the paper mode on the reference T5s (bench_paper_presets--privacy): each
    fine-tuning's rows per epoch and steps, the memorization-45 subset score at epochs 0, 4 and 8 and its exact match
    at 8, the unique strings' subset score at 8, leakage epsilon at 4 and 8, the gender field's exact match above the
    held-out persons' at 8, and the task's seconds."""
    runs = 1 if mode == "default" else 3
    rows = " / ".join(["{}"] * runs)

    def values(r: dict) -> list[float]:
        found = r["privacy_extraction"][model][mode]
        fine = list(found["finetunings"].values())
        if len(fine) != runs:
            return []
        subset = found["memorization_45_subset_score"]
        return [*(f["rows_per_epoch"] for f in fine), *(f["steps"] for f in fine),
                *(subset[e] for e in ("0", "4", "8")), found["memorization_45_exact_match"]["8"],
                found["unique_subset_score"]["8"], found["epsilon"]["4"], found["epsilon"]["8"],
                found["exact_match_above_chance_8"]["gender"], found["wall_time_s"]]

    return Citation("tasks/privacy_extraction/README.md", "bench_paper_presets--privacy",
                    f"| `{model}` | {PRIVACY_MODES[mode]} | {rows} ({rows}) | {{}} / {{}} / {{}} | {{}} | {{}} | {{}} / {{}} "
                    f"| {{}} | {{}} |", values)


ISHIHARA = "bench_paper_presets--ishihara"  # the paywall and mink cards' record of what --preset paper changes


def presets_paywall_row(name: str) -> Citation:
    """A row of the paywall card's table of what --preset paper changes (bench_paper_presets--ishihara)."""
    def values(r: dict) -> list[float]:
        runs = r["paywall_memorization"][name]
        counts = runs["paper"]["counts"]
        return [runs[p][f"approximate_mean_{g}"] for g in ("members", "non_members") for p in ("default", "paper")] + [
            counts["generations_without_sentence_end"], counts["members"] + counts["non_members"]]

    return Citation("tasks/paywall_memorization/README.md", ISHIHARA,
                    f"| `{name}` | {{}} → {{}} | {{}} → {{}} | {{}} of {{}} |", values)


MINK_PAPER_LENGTHS = {"en": ["32", "64", "128"], "ja": ["32", "64", "128", "256", "512"]}


def presets_mink_row(name: str) -> Citation:
    """A row of the mink card's table of what --preset paper changes (bench_paper_presets--ishihara): Min-K% AUC / TPR
    at 10% FPR of the default's headline (k = 20, 128 words), then the paper mode's k = 10 at each length: English
    at 32, 64 and 128 words ("not run" at 256 and 512), Japanese at all five ("no text" at 512, where no text is
    kept); [] where the paper mode ran other lengths or its AUC at a length is not the default's (the card: "Each
    mode's AUC at a length is the same number")."""
    language = "ja" if name.startswith("ja-") else "en"

    def values(r: dict) -> list[float]:
        default, paper = (r["mink_membership"][name][mode] for mode in ("default", "paper"))
        found = paper["by_length"]
        if (list(found) != MINK_PAPER_LENGTHS[language]
                or any(found[length] != default["by_length"][length] for length in found)):
            return []
        run = [length for length in found if found[length]["auc_min_k_10"] is not None]
        if language == "ja" and (run != MINK_PAPER_LENGTHS["ja"][:4] or found["512"]["members"] != 0):
            return []
        head = default["by_length"]["128"]
        return [head["auc_min_k_20"], head["tpr@0.1fpr_min_k_20"],
                *(v for length in run for v in (found[length]["auc_min_k_10"], found[length]["tpr@0.1fpr_min_k_10"]))]

    tail = "not run | not run" if language == "en" else "{} / {} | no text"
    return Citation("tasks/mink_membership/README.md", ISHIHARA,
                    f"| `{name}` | {{}} / {{}} | {{}} / {{}} | {{}} / {{}} | {{}} / {{}} | {tail} |", values)


def presets_mink_reading(r: dict) -> list[float]:
    """The mink card's reading of its table: the Japanese texts that reach 256 words (members, non-members), when at
    128 words k = 10 reads higher than k = 20 on xsum-gpt2-e01 and lower on both Japanese models, the paper mode's
    AUC rises with the length on every model below 1.0 and neither Japanese model is above 0.5 at 32 words."""
    runs = {name: r["mink_membership"][name] for name in ("xsum-gpt2-e01", "xsum-gpt2-e30", "ja-gpt2-e01", "ja-gpt2-e30")}
    aucs = {name: [v["auc_min_k_10"] for v in run["paper"]["by_length"].values() if v["auc_min_k_10"] is not None]
            for name, run in runs.items()}
    higher = {name: run["default"]["auc_min_k_10_128"] > run["default"]["auc_min_k_20_128"] for name, run in runs.items()}
    rising = all(a == sorted(a) and len(set(a)) == len(a) for a in aucs.values() if min(a) < 1.0)
    if not (higher["xsum-gpt2-e01"] and not higher["ja-gpt2-e01"] and not higher["ja-gpt2-e30"] and rising
            and max(aucs["ja-gpt2-e01"][0], aucs["ja-gpt2-e30"][0]) <= 0.5):
        return []
    reach = {runs[name]["paper"]["by_length"]["256"]["members"] for name in ("ja-gpt2-e01", "ja-gpt2-e30")}
    beyond = {runs[name]["paper"]["by_length"]["256"]["nonmembers"] for name in ("ja-gpt2-e01", "ja-gpt2-e30")}
    return [*reach, *beyond] if len(reach) == len(beyond) == 1 else []


def presets_probe_row(rep: str, probe: str) -> Citation:
    """A row of the probe card's table of what --preset paper changes (bench_paper_presets--probe)."""
    def values(r: dict) -> list[float]:
        runs = r["probe_memorization"]["all-MiniLM-L6-v2"]
        return [runs[mode][f"{rep}/{probe}/{size}"]["memorization_effect"]
                for size in ("100", "1000", "all") for mode in ("default", "paper")]

    return Citation("tasks/probe_memorization/README.md", "bench_paper_presets--probe",
                    f"| {rep} | {probe} | {{}} → {{}} | {{}} → {{}} | {{}} → {{}} |", values)


WEAT_PAPER_ROWS = {"t5-ref": "`t5-ref`", "t5-ref-sparse70": "`t5-ref-sparse70`",
                   "all-MiniLM-L6-v2": "all-MiniLM-L6-v2"}
WEAT_PAPER_TESTS = ("weat1", "weat2", "weat3", "weat4", "weat6", "weat7", "weat8")


def presets_weat_row(model: str, measure: str) -> Citation:
    """A row of the weat card's --preset paper table (bench_paper_presets--weat): |d| or |s| of the seed's seven
    tests (static), and for |d| the mean |d| over the race tests, the gender tests and all seven."""
    def values(r: dict) -> list[float]:
        run = r["weat"][model]["paper"]
        assert run["representation"] == "static" and tuple(run["tests"]) == WEAT_PAPER_TESTS
        found = [abs(run["tests"][t][measure]) for t in WEAT_PAPER_TESTS]
        if measure == "d":
            found += [run["mean_abs_d_race"], run["mean_abs_d_gender"], run["mean_abs_d_static"]]
        return found

    cells = " | ".join(["{}"] * 10) + " |" if measure == "d" else " | ".join(["{}"] * 7) + " | | | |"
    return Citation("tasks/weat/README.md", "bench_paper_presets--weat",
                    f"| {WEAT_PAPER_ROWS[model]} \\|{measure}\\| | {cells}", values)


def presets_probe_facts(r: dict) -> list[float]:
    runs = r["probe_memorization"]["all-MiniLM-L6-v2"]
    counts, tuned = runs["paper"]["counts"], runs["paper"]["tuning"]
    return [counts["eval_tokens"], counts["eval_tokens"] + counts["multi_subword_eval_tokens"],
            counts["multi_subword_eval_tokens"], counts["tuning_sentences"],
            counts["pool_sentences"] - counts["tuning_sentences"], counts["pool_sentences"],
            *(tuned[key]["chosen"] for key in ("static/linear", "contextual/linear", "static/mlp", "contextual/mlp"))]


def presets_probe_excluded(r: dict) -> list[float]:
    """The probe card's paper-mode tuning-set words (neither seen nor unseen) and the seen and unseen evaluation
    tokens left at 100 sentences and the whole pool, against the default run's; [] where the splits' token counts
    differ between representations or probes (they share each split)."""
    runs = r["probe_memorization"]["all-MiniLM-L6-v2"]
    counts = runs["paper"]["counts"]

    def tokens(mode: str, size: str) -> list[int]:
        found = {(runs[mode][f"{rep}/{probe}/{size}"]["seen_tokens"], runs[mode][f"{rep}/{probe}/{size}"]["unseen_tokens"])
                 for rep in ("static", "contextual") for probe in ("linear", "mlp")}
        return list(found.pop()) if len(found) == 1 else []

    return [counts["tuning_word_types"], counts["tuning_eval_tokens"], counts["repetitions"],
            *tokens("paper", "100"), *tokens("default", "100"), *tokens("paper", "all"), *tokens("default", "all")]


def presets_probe_against_table_1(r: dict) -> list[float]:
    """The probe card's "Against Table 1", in points: static > contextual with the whole pool (both probes) and for
    the linear probe at 1,000 sentences; reversed at 100 (both) and for the MLP at 1,000; the largest contextual
    gap, about four times Table 1's largest (4.4 points, checked against the paper in test_probe_card.py); and the
    static MLP's gap growing from 1,000 sentences to the whole pool, as three of the four do. [] where one no longer holds."""
    paper = r["probe_memorization"]["all-MiniLM-L6-v2"]["paper"]

    def gap(rep: str, probe: str, size: str) -> float:
        return 100 * paper[f"{rep}/{probe}/{size}"]["memorization_effect"]

    pairs = [("linear", "all"), ("mlp", "all"), ("linear", "1000"), ("linear", "100"), ("mlp", "100"), ("mlp", "1000")]
    found = [(gap("static", probe, size), gap("contextual", probe, size)) for probe, size in pairs]
    largest = max(gap("contextual", probe, size) for probe in ("linear", "mlp") for size in ("100", "1000", "all"))
    growing = [(rep, probe) for rep in ("static", "contextual") for probe in ("linear", "mlp")
               if gap(rep, probe, "all") > gap(rep, probe, "1000")]
    if (not all(s > c for s, c in found[:3]) or not all(s < c for s, c in found[3:]) or not 4 <= largest / 4.4 < 5
            or len(growing) != 3 or ("static", "mlp") not in growing):
        return []
    return [v for pair in found for v in pair] + [largest, gap("static", "mlp", "1000"), gap("static", "mlp", "all")]


def duplication_trends(r: dict) -> list[float]:
    """The paywall card's reading of bench_duplication: size (eidetic at 30 and 60 epochs, Min-K% at 5),
    prompt length (the members' approximate mean per public-words bin) and Min-K% by prefix length."""
    small, large = (r["sizes"][size]["checkpoints"] for size in ("1x64", "2x128"))
    bins = large["30"]["members_approximate_by_public_words"]
    return [large["30"]["paywall"]["members"]["eidetic_mean"], small["30"]["paywall"]["members"]["eidetic_mean"],
            large["60"]["paywall"]["members"]["eidetic_mean"], small["60"]["paywall"]["members"]["eidetic_mean"],
            small["5"]["min_k_10_auc"]["128"], large["5"]["min_k_10_auc"]["128"],
            *(bins[words] for words in ("21-69", "69-121", "122-169", "171-200", "200-200")),
            *(large["5"]["min_k_10_auc"][length] for length in ("32", "128", "512"))]


H200 = "gpu_check--smollm2-1.7b--h200"
DP_MODELS = {"t5": "T5", "gpt2": "GPT-2", "smollm2": "SmolLM2"}


def dp_first(run: dict, epoch: str | None = None) -> list[float]:
    """A bench_dp_audit run's first seed's audited epsilon of each bound (Steinke, Gaussian f-DP) after `epoch`,
    by default its last: one audit, at its own 95% (the largest over seeds and epochs would not hold at 95%)."""
    found = run["epochs"][epoch or max(run["epochs"], key=int)]
    return [found[f"audited_{bound}"][0] for bound in ("steinke", "gaussian-fdp")]


def gradient_first(run: dict, epoch: str | None = None) -> list[float]:
    """`dp_first` of the run's white-box gradient canaries (`--gradient-canaries`)."""
    found = run["epochs"][epoch or max(run["epochs"], key=int)]
    return [found[f"gradient_audited_{bound}"][0] for bound in ("steinke", "gaussian-fdp")]


def gradient_row(label: str) -> Citation:
    """A row of docs/dp.md's gradient canaries' table: the claim, σ, the gradient canaries' two figures and AUC, and
    the text canaries' Steinke bound, the first seed's after the last epoch."""
    model, method, rest = label.split("-", 2)
    claim = {"broken1": "1 (no noise)"}.get(rest, rest.removeprefix("dp"))

    def values(report: dict) -> list[float]:
        run = report["runs"][label]
        last = run["epochs"][max(run["epochs"], key=int)]
        return [run["dp"][0]["noise_multiplier"], *gradient_first(run), last["gradient_auc"][0], dp_first(run)[0]]

    return Citation("docs/dp.md", "bench_dp_audit--gradient",
                    f"| {DP_MODELS[model]} {method} | {claim} | {{}} | {{}} / {{}} | {{}} | {{}} |", values)


def audit_cost(plain: dict, audited: dict) -> list[float]:
    """docs/dp.md's cost: the task's seconds without and with the audit, the audit's share in %, rows an epoch."""
    return [plain["wall_time_s"], audited["wall_time_s"], 100 * (1 - plain["wall_time_s"] / audited["wall_time_s"]),
            plain["rows_per_epoch"], audited["rows_per_epoch"]]


def dp_training_seconds(run: dict) -> float:
    """A bench_dp_audit run's training seconds per seed, the evaluations between epochs left out (the seeds' mean)."""
    evaluations = run["evaluation_seconds"]
    training = [seconds - sum(evaluations[epoch][i] for epoch in evaluations if epoch != "0")
                for i, seconds in enumerate(run["train_seconds"])]
    return sum(training) / len(training)


def unextracted_leakage(run: dict) -> list[float]:
    """A bench_dp_audit run's Steinke bound and its canaries' loss per token (trained on, left out) after its
    last epoch, where no canary came out greedily or (100, 0.5)-extractable; else nothing (the sentence is false)."""
    last = run["epochs"][max(run["epochs"], key=int)]
    found = [last[f"{kind}_included_{side}"] for kind in ("exact", "extractable_100") for side in ("yes", "no")]
    if any(found):
        return []
    return [dp_first(run)[0], last["loss_included_yes"][0], last["loss_included_no"][0]]


def dp_slower(runs: dict, label: str) -> bool:
    """A DP run of bench_dp_audit trains slower than its fine-tuning without DP, on the same steps."""
    run, plain = runs[label], runs[label.rsplit("-", 1)[0] + "-none"]
    return dp_training_seconds(run) > dp_training_seconds(plain) and run["steps"] == plain["steps"]


def dp_utility_holds(runs: dict) -> bool:
    """docs/dp.md's utility bullet: without DP, full fine-tuning's left-out canaries' loss after 8 epochs is above
    its trained-on ones' (both models) and above every GPT-2 DP run's; with DP the two losses differ by < 0.05."""
    def loss(label: str, included: str) -> float:
        values = runs[label]["epochs"]["8"][f"loss_included_{included}"]
        return sum(values) / len(values)

    dp = [label for label in runs if "-dp" in label]
    return (all(loss(f"{m}-full-none", "no") > loss(f"{m}-full-none", "yes") for m in ("t5", "gpt2"))
            and all(loss("gpt2-full-none", "no") > loss(label, "no") for label in dp if label.startswith("gpt2"))
            and all(abs(loss(label, "no") - loss(label, "yes")) < 0.05 for label in dp))


def dp_audit_row(label: str, bench: str = "bench_dp_audit") -> Citation:
    """A row of docs/dp.md's table: the run's noise multiplier, its first seed's audited epsilon of each bound
    after its last epoch (`dp_first`), and at its last epoch the canaries' AUC and loss per token (trained on, left
    out), and its training seconds per seed, the evaluations between epochs left out (means over the seeds)."""
    model, method, rest = label.split("-", 2)
    claim = {"none": "∞", "broken1": "1 (no noise)"}.get(rest, rest.removeprefix("dp"))

    def values(report: dict) -> list[float]:
        run = report["runs"][label]
        last = run["epochs"][max(run["epochs"], key=int)]
        audited = dp_first(run)
        sigma = run["dp"][0]["noise_multiplier"] if "dp" in run else 0.0
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        return [sigma, *audited, mean(last["auc"]), mean(last["loss_included_yes"]), mean(last["loss_included_no"]),
                dp_training_seconds(run)]

    return Citation("docs/dp.md", bench, f"| {DP_MODELS[model]} {method} | {claim} | {{}} | {{}} / {{}} | {{}} | "
                    "{} / {} | {} |", values)


def gpu_task(report: dict, name: str) -> dict:
    """A task's row of a gpu_check record."""
    return next(t for t in report["tasks"] if t["task"] == name)


CITATIONS = [
    # docs/scaling.md: data parallel on CPU
    Citation("docs/scaling.md", "bench_parallel",
             "`mink_membership` on the {} reference texts and the 30-epoch reference GPT-2, best of {} rounds, the whole "
             "command): 2 processes × 1 thread {} s, 1 process × 1 thread {} s, 1 process × 2 threads {} s; the two "
             "1-thread settings give identical numbers. On a few cores, data parallel gains little over one process "
             "using them all ({}×)",
             # 400: the reference corpus's texts, which the report does not restate
             lambda r: [400, r["repeats"], r["wall_seconds"]["c_2procs_1thread"], r["wall_seconds"]["b_1proc_1thread"],
                        r["wall_seconds"]["a_1proc_2threads"], r["speedup_c_over_a"]]
             if r["c_identical_to_b"] and r["model"] == "xsum-gpt2-e30" else []),
    # docs/scaling.md: the memory the process keeps
    Citation("docs/scaling.md", "bench_heap",
             "took {} s against {} s ({} million minor page faults against {} million), identical results, "
             "peak resident size {} GB against {} GB",
             lambda r: [r["seconds"]["kept"], r["seconds"]["returned"], r["minor_faults"]["kept"] / 1e6,
                        r["minor_faults"]["returned"] / 1e6, r["max_rss_bytes"]["kept"] / 1e9,
                        r["max_rss_bytes"]["returned"] / 1e9] if r["identical"] else []),
    # docs/scaling.md: speed at real size, the table's rows
    Citation("docs/scaling.md", "bench_real_model",
             "| LOSS / Min-K%, {} XSum texts × {} words, batch {} | {} s | per-text loop {} s; lm-eval "
             "`loglikelihood_rolling` {} s; the forward pass alone {} s | {}x; {}x; {} (the ceiling) | "
             "per token within {} of the loop |",
             lambda r: [r["scoring"]["texts"], r["scoring"]["length_words"], r["scoring"]["batch_size"],
                        *seconds(r, "scoring", "membench", "per_text_loop", "lm_eval_rolling", "raw_forward"),
                        r["scoring"]["per_text_loop_over_membench"], r["scoring"]["lm_eval_rolling_over_membench"],
                        r["scoring"]["raw_forward_over_membench"],
                        r["scoring"]["max_abs_difference_per_token_vs_per_text_loop"]]),
    Citation("docs/scaling.md", "bench_real_model",
             "| StereoSet, {} examples | {} s | the official loop {} s | {}x | within {} |",
             lambda r: [r["stereoset"]["examples"], *seconds(r, "stereoset", "membench", "official_loop"),
                        r["stereoset"]["official_loop_over_membench"], r["stereoset"]["max_abs_difference"]]),
    Citation("docs/scaling.md", "bench_real_model",
             "| WEAT 1-{} contextual, {} words × {} templates | {} s | a per-test loop {} s | {}x | within {} |",
             lambda r: [r["weat"]["tests"], r["weat"]["distinct_words"], r["weat"]["templates"],
                        *seconds(r, "weat", "membench", "per_test_loop"), r["weat"]["per_test_loop_over_membench"],
                        r["weat"]["max_abs_difference"]]),
    Citation("docs/scaling.md", "bench_real_model",
             "| paywall generation, {} articles | {} s | one `generate` per article {} s | {}x | identical |",
             lambda r: [r["paywall"]["examples"], *seconds(r, "paywall", "membench", "per_article"),
                        r["paywall"]["per_article_over_membench"]] if r["paywall"]["outputs_identical"] else []),
    # docs/scaling.md: in-process against a vLLM server on this CPU (bench_served)
    Citation("docs/scaling.md", "bench_served",
             "best of {} rounds. Scoring {} reference texts × {} words ({} tokens): in-process {} tokens/s, vLLM {} "
             "tokens/s ({}× in-process)",
             lambda r: [r["repeats"], r["scoring"]["texts"], r["scoring"]["length_words"], r["scoring"]["scored_tokens"],
                        r["in_process"]["scoring_tokens_per_s"], r["vllm"]["scoring_tokens_per_s"],
                        r["vllm_over_in_process"]["scoring"]]),
    Citation("docs/scaling.md", "bench_served",
             "Greedy generation of {} paywall examples ({} new tokens): in-process {} tokens/s, vLLM {} tokens/s ({}×)",
             lambda r: [r["generation"]["examples"], r["generation"]["new_tokens"],
                        r["in_process"]["generation_tokens_per_s"], r["vllm"]["generation_tokens_per_s"],
                        r["vllm_over_in_process"]["generation"]]),
    Citation("docs/scaling.md", "bench_served",
             "against in-process at one thread the ratios are {}× and {}×",
             # the page says vLLM bound its engine to one core and kept the other
             lambda r: [r["vllm_over_in_process_1_thread"]["scoring"], r["vllm_over_in_process_1_thread"]["generation"]]
             if [len(c) for c in r["vllm"]["thread_binding"]["engine_core_ids"]] == [1]
             and len(r["vllm"]["thread_binding"]["reserved_cpus"] or []) == 1 else []),
    Citation("docs/scaling.md", "bench_served",
             "the largest log-prob difference is {}, and {} of {} greedy continuations are identical",
             lambda r: [r["agreement"]["max_abs_logprob_difference"], r["agreement"]["identical_continuations"],
                        r["agreement"]["continuations"]]),
    Citation("docs/scaling.md", "bench_served",
             "Here membench's client sent one request at a time (`--num-concurrent 1`), {} prompts a request, and for "
             "generation one request per room of budgets rounded up to 8 ({} requests here)",
             lambda r: [r["batch_size"], r["generation"]["vllm_requests"]]),
    # tasks/mink_membership/README.md: the attacks against MIMIR's per-text loops
    Citation("tasks/mink_membership/README.md", "bench_attacks",
             "the 30-epoch reference GPT-2, {} reference texts cut to {} words, batch {}, best of 3 runs): against "
             "per-text loops as MIMIR runs them, ref {}×, ReCaLL {}× (P runs once; its key/value cache serves every "
             "text), ne {}× (25 neighbours; neighbour making and scoring), gradnorm {}×, DC-PDD {}× with its own "
             "forward pass and {}× as the task runs it",
             lambda r: [r["texts"], r["length_words"], r["batch_size"]]
             + [r["loop_over_membench"][name] for name in ("ref", "recall", "ne", "gradnorm", "dc_pdd", "dc_pdd_in_task")]),
    Citation("tasks/mink_membership/README.md", "bench_attacks",
             "The per-text scores agree within {} (ref), {} (ReCaLL), {} (DC-PDD) and {} (gradnorm).",
             lambda r: [r["max_abs_difference"][name] for name in ("ref", "recall", "dc_pdd", "gradnorm")]),
    # tasks/ner_prompt_memorization/README.md: scoring against the transformers pipeline
    Citation("tasks/ner_prompt_memorization/README.md", "bench_ner",
             "batch {}, best of 2 rounds) against `pipeline(\"token-classification\")` called sentence by sentence on "
             "the same sentences: {} vs {} sentences/s on the reference model ({}×); {} vs {} sentences/s on a "
             "BERT-base-sized classifier ({}×:",
             lambda r: [r["batch_size"]]
             + [r["reference_ner"][k] for k in ("membench_sentences_per_s", "pipeline_sentences_per_s", "speedup")]
             + [r["bert_base_sized"][k] for k in ("membench_sentences_per_s", "pipeline_sentences_per_s", "speedup")]),
    Citation("tasks/ner_prompt_memorization/README.md", "bench_ner",
             "= {} sentences, PTE aside) would take about {} hours on this machine for a BERT-base model ({} hours "
             "with the pipeline)",
             lambda r: [r["paper_job_bert_base_hours"][k] for k in ("sentences", "membench", "pipeline")]),
    Citation("tasks/ner_prompt_memorization/README.md", "bench_ner_names",
             "the trained `ner-bert-e06` ranks its names far above: best-prompt test M-MEM {}, EPT mean {}. With "
             "out-train names made of the trained names' own words (`--names reference:shared`, `--preset paper`) it "
             "is {} and {}, against {} and {} for the untrained `ner-bert-e00` ({} and {} with the default names): "
             "about one null standard error ({}) above chance.",
             lambda r: [r["checkpoints"][c][n]["m_mem"][s] for c, n in (("ner-bert-e06", "reference"),
                                                                        ("ner-bert-e06", "reference:shared"),
                                                                        ("ner-bert-e00", "reference:shared"),
                                                                        ("ner-bert-e00", "reference"))
                        for s in ("opt_best", "ept_mean")]
             + [r["checkpoints"]["ner-bert-e06"]["reference:shared"]["null_standard_error"]]),
    # tasks/paywall_memorization/README.md: the seed's comparisons on bench-built checkpoints
    *(duplication_row(size, label, epoch) for size, label in (("1x64", "1 × 64"), ("2x128", "2 × 128"))
      for epoch in ("0", "1", "5", "15", "30", "60")),
    Citation("tasks/paywall_memorization/README.md", "bench_duplication",
             "the larger model reproduces far more (eidetic {} against {} at 30 epochs, {} against {} at 60); "
             "Min-K% saturates at 15 epochs for both, and at 5 epochs the smaller model's AUC is the higher ({} "
             "against {}). - **Prompt length**: the members' approximate mean falls with the "
             "public part's length (2 × 128, 30 epochs: {} for 21-69 words, {} for 69-121, {} for 122-169, {} for "
             "171-200, {} at 200): the public part is min(200, n/2) words, so a short prompt is a short article, "
             "whose continuation the recipe's first 250 words cover whole. Min-K% by prefix length (2 × 128, 5 "
             "epochs) rises from {} at 32 words to {} at 128 and falls to {} at 512 words",
             duplication_trends),
    # tasks/privacy_extraction/README.md: sparse against dense (issue 62)
    *(sparsity_row(name, label) for name, label in SPARSITY_ROWS.items()),
    Citation("tasks/privacy_extraction/README.md", "bench_sparsity",
             "`sparse-70` minus the other (standard error over {} + {} seeds), is −{} ({}) against `dense` and −{} ({}) "
             "against `dense-again` at matched size, and −{} ({}) against `small-dense` at matched parameter count, a "
             "model with the lower loss.",
             sparsity_reading),
    Citation("tasks/privacy_extraction/README.md", "bench_sparsity",
             "`sparse-30` pre-trains back to the loss of the dense model given the same 125 extra steps ({} against "
             "`dense-again`'s {}), yet after 8 epochs its memorization-45 subset score is {} against {}: −{}, standard "
             "error {} over {} + {} seeds.",
             matched_loss),
    # tasks/privacy_extraction/README.md: the paper mode on the reference T5s (issue 79)
    *(presets_privacy_row(model, mode) for model in ("t5-ref", "t5-ref-sparse70") for mode in PRIVACY_MODES),
    Citation("tasks/privacy_extraction/README.md", "bench_paper_presets--privacy",
             "`--finetunes separate` alone lowers the memorization-45 subset score after 8 epochs by {},",
             lambda r: [r["privacy_extraction"]["t5-ref"]["default"]["memorization_45_subset_score"]["8"]
                        - r["privacy_extraction"]["t5-ref"]["separate"]["memorization_45_subset_score"]["8"]]),
    Citation("tasks/privacy_extraction/README.md", "bench_paper_presets--privacy",
             "at batch {} memorization-45's fine-tuning takes {} steps an epoch",
             lambda r: [r["privacy_extraction"]["t5-ref"]["paper"]["settings"]["finetune_batch_size"],
                        *one_value([r["privacy_extraction"][m]["paper"]["finetunings"]["memorization-45"]["steps"] / 8
                                    for m in ("t5-ref", "t5-ref-sparse70")])]),
    Citation("tasks/privacy_extraction/README.md", "bench_paper_presets--privacy",
             "No run reproduces a whole person (PII exact match {} at every epoch of every run)",
             lambda r: one_value([v for runs in r["privacy_extraction"].values() for run in runs.values()
                                  for v in run["pii_exact_match"].values()])),
    Citation("tasks/privacy_extraction/README.md", "bench_paper_presets--privacy",
             "no field's exact match is above the held-out persons' by {} or more",
             lambda r: [0.1] if max(v for runs in r["privacy_extraction"].values() for run in runs.values()
                                    for v in run["exact_match_above_chance_8"].values()) < 0.1 else []),
    # tasks/paywall_memorization/README.md and tasks/weat/README.md: what --preset paper changes
    *(presets_paywall_row(name) for name in ("xsum-gpt2-e01", "xsum-gpt2-e30", "ja-gpt2-e01", "ja-gpt2-e30")),
    Citation("tasks/paywall_memorization/README.md", ISHIHARA,
             "narrows in both languages (English {} → {}, Japanese {} → {})",
             lambda r: [r["paywall_memorization"][m][p]["approximate_mean_members"]
                        - r["paywall_memorization"][m][p]["approximate_mean_non_members"]
                        for m in ("xsum-gpt2-e30", "ja-gpt2-e30") for p in ("default", "paper")]),
    *(presets_mink_row(name) for name in ("xsum-gpt2-e01", "xsum-gpt2-e30", "ja-gpt2-e01", "ja-gpt2-e30")),
    Citation("tasks/mink_membership/README.md", ISHIHARA,
             "At 128 words the paper's k reads higher than k = 20 on the English model after 1 epoch and lower on "
             "both Japanese ones. In paper mode the AUC rises with the prefix length on every model that is not "
             "saturated (the seed's \"tended to increase\", §5.2); at 32 words neither Japanese model is above chance. "
             "The Japanese paper mode scores 256 words ({} members and {} non-members reach them)",
             presets_mink_reading),
    *(presets_probe_row(rep, probe) for rep in ("static", "contextual") for probe in ("linear", "mlp")),
    Citation("tasks/probe_memorization/README.md", "bench_paper_presets--probe",
             "In the paper mode {} of the {} evaluation tokens are words MiniLM keeps whole ({} left out), {} pool "
             "sentences tune the probes (so \"all\" is {} sentences, against {}), and the tuning chose C = {} "
             "(static) and {} (contextual) for the linear probe, {} (static) and {} (contextual) epochs for the MLP.",
             presets_probe_facts),
    Citation("tasks/probe_memorization/README.md", "bench_paper_presets--probe",
             "The tuning sentences hold {} word types, and the {} evaluation tokens of those types count as neither "
             "seen nor unseen. That leaves few tokens to compare: over the {} repetitions, {} seen and {} unseen at "
             "100 sentences ({} and {} by default), {} and {} with the whole pool ({} and {}).",
             presets_probe_excluded),
    Citation("tasks/probe_memorization/README.md", "bench_paper_presets--probe",
             "Static > contextual holds with the whole pool for both probes (linear {} vs {}, MLP {} vs {}) and for "
             "the linear probe at 1,000 sentences ({} vs {}). The order is reversed at 100 sentences for both probes "
             "(linear {} vs {}, MLP {} vs {}) and at 1,000 for the MLP ({} vs {}). The contextual gaps reach {} "
             "points, four times Table 1's largest. From 1,000 sentences to the whole pool three of the four gaps "
             "grow (static MLP {} → {})", presets_probe_against_table_1),
    *(presets_weat_row(model, measure) for model in WEAT_PAPER_ROWS for measure in ("d", "s")),
    Citation("tasks/weat/README.md", "bench_paper_presets--weat",
             "their contextual vectors order them the other way (mean |d| {} for `t5-ref`, {} for `t5-ref-sparse70`)",
             lambda r: [r["weat"][m]["paper"]["mean_abs_d_contextual"] for m in ("t5-ref", "t5-ref-sparse70")]
             if r["weat"]["t5-ref"]["paper"]["mean_abs_d_contextual"]
             > r["weat"]["t5-ref-sparse70"]["paper"]["mean_abs_d_contextual"] else []),
    Citation("tasks/weat/README.md", "bench_paper_presets--weat",
             "the largest difference of a test's d between them is {}.",
             lambda r: [max(abs(r["weat"]["t5-ref"]["paper"]["tests"][t]["d"]
                                - r["weat"]["t5-ref-sparse70"]["paper"]["tests"][t]["d"]) for t in WEAT_PAPER_TESTS)]),
    # tasks/probe_memorization/README.md: extraction, probe fits and the cached design
    Citation("tasks/probe_memorization/README.md", "bench_probe",
             "the CoNLL sample: {} distinct sentences, {} subword tokens; torch {} threads for extraction",
             lambda r: [r["distinct_sentences"], r["subword_tokens"], r["torch_threads"]]),
    Citation("tasks/probe_memorization/README.md", "bench_probe",
             "contextual {} tokens/s batched (batch {}) against {} tokens/s sentence by sentence ({}×); static {} "
             "tokens/s",
             lambda r: [r["extraction"]["contextual_per_sentence_vs_batched"]["batched_tokens_per_s"], r["batch_size"],
                        r["extraction"]["contextual_per_sentence_vs_batched"]["unbatched_tokens_per_s"],
                        r["extraction"]["contextual_per_sentence_vs_batched"]["speedup"],
                        r["extraction"]["static"]["tokens_per_s"]]),
    Citation("tasks/probe_memorization/README.md", "bench_probe",
             "linear {} s at ~{} training tokens, {} s at ~{}; MLP ({} epochs) {} s and {} s",
             lambda r: [r["probe_training"]["linear"]["50"]["seconds_per_fit"],
                        r["probe_training"]["linear"]["50"]["train_tokens_mean"],
                        r["probe_training"]["linear"]["151"]["seconds_per_fit"],
                        r["probe_training"]["linear"]["151"]["train_tokens_mean"], 20,  # the bench's --mlp-epochs
                        r["probe_training"]["mlp"]["50"]["seconds_per_fit"],
                        r["probe_training"]["mlp"]["151"]["seconds_per_fit"]]),
    Citation("tasks/probe_memorization/README.md", "bench_probe",
             "(R = {}, sizes {}, {}, all, both probes): {} s vs {} s ({}×; extraction alone {}×)",
             lambda r: [r["design"]["repetitions"], *r["design"]["sizes"][:2], r["design"]["cached_s"],
                        r["design"]["recompute_s"], r["design"]["ratio_recompute_over_cached"],
                        r["design"]["extraction_ratio"]]
             if r["design"]["probes"] == ["linear", "mlp"] and r["design"]["sizes"][-1] == r["pool_sentences"] else []),
    # tasks/privacy_extraction/README.md: the memory fine-tuning adds on CPU, against its estimate
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "SmolLM2-135M-Instruct in float32, {} M parameters, `membench evaluate --model "
             "pretrained:smollm2-135m-instruct --tasks privacy_extraction --epochs 1 --finetune-seeds 1 --limit {} "
             "--no-cache`",  # the bench's settings but --limit
             lambda r: [r["task"]["full"]["estimate_bytes"]["parameters"] / 1e6, r["limit"]]
             if r["model"] == "pretrained:smollm2-135m-instruct" else []),
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "| full | {} GB ({} copy + {} gradients + {} moments + {} activations + {} logits) | {} GB | {} GB | {} GB "
             "| {} s |",
             lambda r: [r["task"]["full"]["estimate_bytes"][k] / 1e9 for k in
                        ("needed", "copy", "gradients", "optimizer_moments", "activations", "logits")]
             + [r["task"]["full"][k] / 1e9 for k in ("task_start_rss_bytes", "peak_rss_bytes", "added_bytes")]
             + [r["task"]["full"]["task_seconds"]]),
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "| LoRA (T = {}) | {} GB ({} adapter state + {} + {}) | {} GB | {} GB | {} GB | {} s |",
             lambda r: [(e := r["task"]["lora"]["estimate_bytes"])["trainable_parameters"], e["needed"] / 1e9,
                        (e["copy"] + e["gradients"] + e["optimizer_moments"]) / 1e9, e["activations"] / 1e9,
                        e["logits"] / 1e9]
             + [r["task"]["lora"][k] / 1e9 for k in ("task_start_rss_bytes", "peak_rss_bytes", "added_bytes")]
             + [r["task"]["lora"]["task_seconds"]]),
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "{} AdamW steps on batches of {} × {} random tokens) added {} GB (full) and {} GB (LoRA), against the "
             "estimate at S = {} of {} and {} GB. Its forward pass kept {} (full) and {} (LoRA) float32 values per "
             "token, layer and hidden unit",
             lambda r: [r["steps"], r["batch"], r["tokens"], r["loop"]["full"]["added_bytes"] / 1e9,
                        r["loop"]["lora"]["added_bytes"] / 1e9, r["tokens"],
                        r["loop"]["full"]["estimate_bytes"]["needed"] / 1e9,
                        r["loop"]["lora"]["estimate_bytes"]["needed"] / 1e9,
                        r["loop"]["full"]["saved_values_per_token_layer_hidden"],
                        r["loop"]["lora"]["saved_values_per_token_layer_hidden"]]),
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "input of its layer for its gradient ({} with them frozen)",
             lambda r: [r["loop"]["full"]["saved_values_per_token_layer_hidden_norms_frozen"]]),
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "undercounts LoRA's by {} to {} GB",
             lambda r: sorted((r[kind]["lora"]["added_bytes"] - r[kind]["lora"]["estimate_bytes"]["needed"]) / 1e9
                              for kind in ("task", "loop"))),
    Citation("tasks/privacy_extraction/README.md", "bench_finetune_memory",
             "After 1 epoch at 1e-4 the memorization-45 subset score was {} with full fine-tuning and {} with LoRA "
             "({} before), on these {} secrets",
             lambda r: [r["task"]["full"]["headline_by_epoch"]["1"], r["task"]["lora"]["headline_by_epoch"]["1"],
                        r["task"]["full"]["headline_by_epoch"]["0"], r["limit"]]
             if r["task"]["full"]["headline_by_epoch"]["0"] == r["task"]["lora"]["headline_by_epoch"]["0"] else []),
    # tasks/finetune_memorization/README.md: the LoRA recipe's sweep (its table: test_finetune_card.py)
    Citation("tasks/finetune_memorization/README.md", "bench_lora_recipe--reference",
             "on the reference GPT-2 the Min-K% 20% AUC moved {} → {} in 4 epochs where full fine-tuning reached {}",
             lambda r: [*(run["min_k_20_auc"][e] for run in r["runs"] if run["recipe"] == {
                 "finetune_method": "lora", "learning_rate": 1e-4, "lora_rank": 8, "lora_alpha": 8,
                 "lora_target_modules": "all-linear"} for e in ("0", "4")),
                        *(run["min_k_20_auc"]["4"] for run in r["runs"] if run["recipe"]["finetune_method"] == "full")]),
    Citation("tasks/finetune_memorization/README.md", "bench_lora_recipe--smollm2",
             "the memorization-45 subset score of SmolLM2 went from {} to {} with full fine-tuning and to {} with LoRA",
             lambda r: [r["privacy"][0]["memorization_45_subset_score"]["0"],
                        r["privacy"][0]["memorization_45_subset_score"]["1"],
                        r["privacy"][1]["memorization_45_subset_score"]["1"]]
             if r["privacy"][1]["recipe"]["finetune_method"] == "lora" else []),
    # docs/scaling.md: the default job and the tests before and after a change (bench_job.py)
    Citation("docs/scaling.md", "bench_job",
             "| the job's 18 evaluations | {} s | {} s | {} ({} less the near-verbatim bound issue 61 adds, {} s) |",
             lambda r: [r["before"]["job"]["evaluations_s"], r["after"]["job"]["evaluations_s"],
                        r["ratios"]["evaluations"], r["ratios"]["evaluations_less_added"], r["ratios"]["added_stages_s"]]
             if len(r["after"]["job"]["evaluations"]) == 18 and r["after"]["job"]["controls_ok"] else []),
    Citation("docs/scaling.md", "bench_job", "| pytest | {} s | {} s | {} |",
             lambda r: [r["before"]["pytest"]["pytest_s"], r["after"]["pytest"]["pytest_s"], r["ratios"]["pytest"]]),
    Citation("docs/scaling.md", "bench_job",
             "the scoring primitives' batches {} s, the fine-tuning engine {} s with the evaluations between epochs "
             "(`privacy_extraction`'s runs {} s in all), `ner_prompt_memorization` {} s, `mink_membership` {} s (its neighbour texts {} s)",
             lambda r: [(h := r["after"]["job"]["hot_inclusive_s"])["harness/scoring/distributed.py:run_batches"],
                        h["harness/training/finetune.py:finetune"], h["tasks/privacy_extraction/task.py:run"],
                        h["tasks/ner_prompt_memorization/task.py:run"], h["tasks/mink_membership/task.py:run"],
                        h["tasks/mink_membership/neighbours.py:neighbour_texts"]]),
    # docs/dataset-inference.md: dataset inference's error rates on known truth
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "{}% of the {} p-values fell at or below 0.05 (95% interval {}% to {}%), their mean {}, and a "
             "Kolmogorov–Smirnov test against uniform gives p = {}: calibrated",
             lambda r: [100 * r["nulls_pooled"]["fpr@0.05"], r["nulls_pooled"]["count"],
                        *(100 * v for v in r["nulls_pooled"]["fpr_ci95"]), r["nulls_pooled"]["mean_p"],
                        r["nulls_pooled"]["ks_uniform_p"]]
             if len(r["nulls"]) == 7 and r["nulls_pooled"]["ks_uniform_p"] > 0.01
             and all(low <= 0.05 <= high for pool in r["nulls"].values() for low, high in [pool["fpr_ci95"]])
             and r["nulls_pooled"]["fpr_ci95"][0] <= 0.05 <= r["nulls_pooled"]["fpr_ci95"][1] else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "Twice the median of the same splits' p-values gave {}% with KS p far below 0.01",
             lambda r: [100 * r["nulls_pooled_twice_median"]["fpr@0.05"]]
             if r["nulls_pooled_twice_median"]["ks_uniform_p"] < 1e-6 else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "One split alone (unpenalised, as `linear_di.py` fits it) gave {}% on the untrained model's pool "
             "(95% interval {}% to {}%), KS p = {}; `linear_di.py`'s clipping on the same halvings: {}%",
             lambda r: [100 * r["e00"]["single_split_nulls"]["train"]["fpr@0.05"],
                        *(100 * v for v in r["e00"]["single_split_nulls"]["train"]["fpr_ci95"]),
                        r["e00"]["single_split_nulls"]["train"]["ks_uniform_p"],
                        100 * r["e00"]["single_split_nulls"]["linear_di"]["fpr@0.05"]]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "On {} relabelings of the untrained model's pool the statistic's skewness is {} and its 99th percentile "
             "lies {} standard deviations above the mean where a normal's lies 2.326: the tail that tiny p-values "
             "come from is heavier than a fitted normal says (at 0.05 such a fit rejected {}% of 1,000 relabelings)",
             lambda r: [r["e00"]["null_shape"]["relabelings"], r["e00"]["null_shape"]["skewness"],
                        r["e00"]["null_shape"]["q99_standardised"], 100 * r["e00"]["null_shape"]["normal_fit_fpr@0.05"]]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "{} suspect and {} validation texts: the 30-epoch reference GPT-2 p = {} at {} null standard deviations "
             "({} texts a side suffice); after 1 epoch p = {} at {}, where the best single score's AUC is only {}, "
             "and half the seeded subsamples reject from {} texts a side",
             lambda r: [*r["mink"]["xsum-gpt2-e30"]["texts_per_side"], r["mink"]["xsum-gpt2-e30"]["p_value"],
                        r["mink"]["xsum-gpt2-e30"]["null_sds"], r["mink"]["xsum-gpt2-e30"]["smallest_n"],
                        r["mink"]["xsum-gpt2-e01"]["p_value"], r["mink"]["xsum-gpt2-e01"]["null_sds"],
                        r["mink"]["xsum-gpt2-e01"]["best_auc"], r["mink"]["xsum-gpt2-e01"]["smallest_n"]]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "SmolLM2 after 1, 2 and 4 epochs p = {} each ({}, {} and {} null standard deviations; half the "
             "subsamples reject from {}, {} and {} texts a side); gemma-3-270m after 1 epoch p = {} ({}); the "
             "reference GPT-2's copy, which learns little (best single AUC {} after 4 epochs), p = {} after 4 "
             "epochs ({}), half the subsamples rejecting from {} texts a side, and {} after 2. At epoch 0, where no "
             "side was trained: {} (SmolLM2), {} (gemma), {} (the reference GPT-2)",
             lambda r: [*one_value([r["finetune"]["smollm2-135m"][f"members@{e}"]["p_value"] for e in (1, 2, 4)]),
                        *(r["finetune"]["smollm2-135m"][f"members@{e}"]["null_sds"] for e in (1, 2, 4)),
                        *(r["finetune"]["smollm2-135m"][f"members@{e}"]["smallest_n"] for e in (1, 2, 4)),
                        r["finetune"]["gemma-3-270m"]["members@1"]["p_value"],
                        r["finetune"]["gemma-3-270m"]["members@1"]["null_sds"],
                        r["finetune"]["reference-gpt2"]["members@4"]["best_auc"],
                        r["finetune"]["reference-gpt2"]["members@4"]["p_value"],
                        r["finetune"]["reference-gpt2"]["members@4"]["null_sds"],
                        r["finetune"]["reference-gpt2"]["members@4"]["smallest_n"],
                        r["finetune"]["reference-gpt2"]["members@2"]["p_value"],
                        *(r["finetune"][m]["members@0"]["p_value"] for m in ("smollm2-135m", "gemma-3-270m",
                                                                              "reference-gpt2"))]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "p = {} on the reference split, {} on the shifted control (XSum against StereoSet sentences) and {} on "
             "the era control",
             lambda r: [r["guard"]["reference"], r["guard"]["reference:shifted"], r["guard"]["reference:era"]]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "mink_membership's early stop decided none of the {} halvings of its 4 pools otherwise and fitted a "
             "mean of {} of its 39 relabelings on the untrained model's halvings ({} on SmolLM2's)",
             lambda r: [sum(r["relabelings"] for pool in r["nulls"] if pool.startswith("mink ")),
                        r["nulls"]["mink xsum-gpt2-e00"]["stop_early"]["relabelings_mean"],
                        r["nulls"]["mink smollm2-135m"]["stop_early"]["relabelings_mean"]]
             if all(r["nulls"][pool]["stop_early"]["decisions_differing"] == 0 for pool in r["nulls"]
                    if pool.startswith("mink ")) else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "{}% to {}% of the job's 7 mink_membership runs of the reference GPT-2s (at most {} s of a {} s run), "
             "{}% and {}% of its finetune_memorization runs of the reference GPT-2 (full and LoRA), {}% of "
             "SmolLM2's mink_membership run and {}% of gemma-3-270m's",
             lambda r: recorded_shares(r["recorded_costs"])),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "one split's fit takes {} ms stacked against {} ms with scikit-learn one at a time): {}% of the "
             "untrained reference GPT-2's 128-word run with only those 16 scores ({} s beside {} s: the test {} s, "
             "the IID guard {} s), {}% after 1 epoch and {}% after 30, where the test fits every relabeling",
             lambda r: [r["e00"]["fit_speed"]["stacked_ms_per_split"], r["e00"]["fit_speed"]["sklearn_ms_per_split"],
                        100 * r["cost"]["mink xsum-gpt2-e00"]["share"],
                        *(r["cost"]["mink xsum-gpt2-e00"][k] for k in ("dataset_inference_seconds", "task_seconds_without",
                                                                      "test_seconds", "guard_seconds")),
                        100 * r["cost"]["mink xsum-gpt2-e01"]["share"], 100 * r["cost"]["mink xsum-gpt2-e30"]["share"]]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "the reversed control (`xsum-gpt2-nonmembers-e30`, {}%,",
             lambda r: [100 * r["recorded_costs"]["mink_membership membench-ref/xsum-gpt2-nonmembers-e30"]["share"]]
             if max(v["share"] for v in r["recorded_costs"].values()) == r["recorded_costs"][
                 "mink_membership membench-ref/xsum-gpt2-nonmembers-e30"]["share"] else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "On the weakly trained pools the ridge penalty 0.1 needs {} texts a side on the reference GPT-2 after 1 "
             "epoch (mink_membership) where the unpenalised fit needs {}, and {} on SmolLM2 after 1 epoch "
             "(finetune_memorization) where it needs {}; gemma after 1 epoch needs {} with either",
             lambda r: [*smallest(r, "mink xsum-gpt2-e01"), *smallest(r, "finetune smollm2-135m epoch 1"),
                        *one_value(smallest(r, "finetune gemma-3-270m epoch 1"))]
             if di_penalty() == r["statistics"]["ridge 0.1"]["penalty"] else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "neither reaches half on the reference GPT-2's copy after 1 epoch (best single AUC {}). After 2 and 4 "
             "epochs of that copy the penalty needs {} and {} texts a side where the unpenalised fit needs more than "
             "{} and {}",
             lambda r: [r["finetune"]["reference-gpt2"]["members@1"]["best_auc"],
                        *(r["statistics"]["ridge 0.1"]["trained"][f"finetune reference-gpt2 epoch {e}"]["smallest_n"]
                          for e in (2, 4)), 50, r["statistics"]["unpenalised"]["trained"]["finetune reference-gpt2 epoch 4"]["smallest_n"]]
             if smallest(r, "finetune reference-gpt2 epoch 1") == [None, None]
             and r["statistics"]["unpenalised"]["trained"]["finetune reference-gpt2 epoch 2"]["smallest_n"] is None
             else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "Their false positives over the same {} null halvings: {}% with the penalty 0.1 (95% interval {}% to "
             "{}%), {}% unpenalised ({}% to {}%)",
             lambda r: [r["statistics"]["ridge 0.1"]["nulls_pooled"]["count"],
                        *fpr_figures(r["statistics"]["ridge 0.1"]), *fpr_figures(r["statistics"]["unpenalised"])]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "It held the true share in every one of the {} draws (coverage 1.0 in each of the {} pool and share cells",
             lambda r: [sum(int(cell["coverage"] * 40) for pool in r["share"].values() for cell in pool.values()),
                        sum(len(pool) for pool in r["share"].values())]
             if all(cell["coverage"] == 1.0 and cell["coverage_when_rejected"] in (None, 1.0)
                    for pool in r["share"].values() for cell in pool.values()) else []),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "at 100% the 30-epoch reference GPT-2 ({} texts a side) averages {} and at 50% {} ({} at 25%); SmolLM2 "
             "after 4 epochs and gemma after 1, {} texts a side, average {} and {} at 100%",
             lambda r: [(e30 := r["share"]["mink xsum-gpt2-e30"])["1.0"]["texts_per_side"], e30["1.0"]["mean_bound"],
                        e30["0.5"]["mean_bound"], e30["0.25"]["mean_bound"],
                        r["share"]["finetune smollm2-135m epoch 4"]["1.0"]["texts_per_side"],
                        r["share"]["finetune smollm2-135m epoch 4"]["1.0"]["mean_bound"],
                        r["share"]["finetune gemma-3-270m epoch 1"]["1.0"]["mean_bound"]]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "where the scores barely separate the sides the two p-values lie {} to {} decades apart",
             lambda r: [min(weak := [v["decades_apart"] for k, v in r["adam_against_mle"].items() if k in (
                 "mink xsum-gpt2-e00", "mink xsum-gpt2-e01", "mink smollm2-135m", "mink gemma-3-270m",
                 *(f"finetune reference-gpt2 epoch {e}" for e in (0, 1, 2)))]), max(weak)]),
    Citation("docs/dataset-inference.md", "bench_dataset_inference",
             "where they separate well they lie up to {} decades apart (gemma after 2 epochs)",
             lambda r: [max(v["decades_apart"] for v in r["adam_against_mle"].values())]
             if max(r["adam_against_mle"].items(), key=lambda kv: kv[1]["decades_apart"])[0]
             == "finetune gemma-3-270m epoch 2" else []),
    # tasks/paywall_memorization/README.md: extraction risk's exactness and speed
    Citation("tasks/paywall_memorization/README.md", "bench_extraction",
             "{} seeded draws of `generate` ({} tokens after one member's prompt; the prompt runs once, each chunk of "
             "draws samples from a copy of its key/value cache) gave {} distinct continuations, every one with p_z > 0, "
             "their p_z summing to {}. Four targets chosen among a pilot's draws under another seed, with p_z {}, {}, "
             "{} and {}, came out {}, {}, {} and {} times: each count's Clopper–Pearson 99% interval holds its p_z",
             lambda r: [r["monte_carlo"]["draws"], r["monte_carlo"]["tokens"], r["monte_carlo"]["distinct_draws"],
                        r["monte_carlo"]["sum_pz_of_distinct_draws"],
                        *(t["p_z"] for t in r["monte_carlo"]["targets"]),
                        *(t["count"] for t in r["monte_carlo"]["targets"])]
             if r["monte_carlo"]["every_draw_has_positive_pz"] and all(t["inside"] for t in r["monte_carlo"]["targets"])
             else []),
    Citation("tasks/paywall_memorization/README.md", "bench_extraction",
             "(B = {}) at threshold {}, where \" 47,\" is near \" 45,\": {}, {}, {} and {} against Monte Carlo "
             "frequencies of {}, {}, {} and {}. Every bound is at least p_z and under the upper end of its frequency's "
             "99% interval; the third lies below its interval",
             lambda r: [r["monte_carlo"]["beam_width"], r["monte_carlo"]["threshold"],
                        *(t["near_verbatim_bound"] for t in r["monte_carlo"]["targets"]),
                        *(t["near_verbatim_frequency"] for t in r["monte_carlo"]["targets"])]
             if all(t["bound_between_pz_and_interval"] for t in r["monte_carlo"]["targets"])
             and [t["near_verbatim_interval_99"][0] <= t["near_verbatim_bound"] for t in r["monte_carlo"]["targets"]]
             == [True, True, False, True] else []),
    Citation("tasks/paywall_memorization/README.md", "bench_extraction",
             "the fastest of {} interleaved rounds: p_z of {} targets ({}-word prompts, {}-word targets) took {} s "
             "against {} s for scoring the same texts ({}x; target ≤ 1.1x); the near-verbatim bound on {} of them took "
             "{} s against {} s for `generate` drawing {} continuations of each ({}x; target ≤ 1x). The median of the "
             "rounds' own ratios is {}x and {}x, and every round's near-verbatim ratio is under 1x (at most {}x)",
             lambda r: [r["repeats"], r["pairs"], r["prompt_words"], r["target_words"],
                        r["seconds"]["extraction_logprobs"], r["seconds"]["causal_token_logprobs"],
                        r["extraction_over_scoring"], r["near_pairs"], r["seconds"]["near_verbatim_bounds"],
                        r["seconds"]["sampled_continuations"], r["beam_width"], r["near_verbatim_over_sampling"],
                        r["paired_median"]["extraction_over_scoring"], r["paired_median"]["near_verbatim_over_sampling"],
                        max(round_ratios(r))] if max(round_ratios(r)) < 1 else []),
    # tasks/stereoset/README.md: agreement with the official code, a row per record
    stereoset_row("xsum-gpt2-e30", "reference GPT-2 (`xsum-gpt2-e30`), `--causal-context official`", same_to=True),
    stereoset_row("xsum-gpt2-e30-bos", "the same, `--causal-context bos` (v1)", same_to=False),
    stereoset_row("tiny-bert", "random tiny BERT (`--make-tiny-bert`), masked", same_to=True),
    # docs/dp.md: the one-run audit on known truth
    *[dp_audit_row(f"{model}-{method}-{run}") for model, method, runs in (
        ("t5", "full", ("none",)), ("t5", "lora", ("none", "dp1", "dp4", "dp8", "broken1")),
        ("gpt2", "full", ("none", "dp1", "dp4", "dp8", "broken1")), ("gpt2", "lora", ("none", "dp8", "broken1")))
      for run in runs],
    dp_audit_row("smollm2-lora-none", "bench_dp_audit--smollm2"),
    dp_audit_row("smollm2-full-none", "bench_dp_audit--smollm2-full"),
    dp_audit_row("smollm2-lora-dp8", "bench_dp_audit--smollm2-dp8"),
    # docs/dp.md: what each setting can detect (a broken claim below the no-noise run's audit is caught)
    *[Citation("docs/dp.md", "bench_dp_audit", f"| {DP_MODELS[model]} {method}, 8 epochs | {{}} | below {{}} |",
               lambda r, label=label: [dp_first(r["runs"][label])[0]] * 2)
      for model, method, label in (("gpt2", "full", "gpt2-full-broken1"),)],
    Citation("docs/dp.md", "bench_dp_audit", "| T5 full, 8 epochs | {} (no DP; opacus cannot train the T5 full under "
             "DP) | below {} |", lambda r: [dp_first(r["runs"]["t5-full-none"])[0]] * 2),
    *[Citation("docs/dp.md", "bench_dp_audit", f"| {DP_MODELS[model]} lora, 8 epochs | {{}} | none |",
               lambda r, label=f"{model}-lora-broken1": [0.0] if dp_first(r["runs"][label])[0] == 0 else [])
      for model in ("t5", "gpt2")],
    Citation("docs/dp.md", "bench_dp_audit--smollm2-full", "| SmolLM2 full, 4 epochs | ≥ {} (no DP; the ceiling of "
             "1,000 canaries) | below {} |", lambda r: [dp_first(r["runs"]["smollm2-full-none"])[0]] * 2),
    Citation("docs/dp.md", "bench_dp_audit--smollm2", "| SmolLM2 lora, 4 epochs | {} (no DP) | none |",
             lambda r: [0.0] if dp_first(r["runs"]["smollm2-lora-none"])[0] == 0 else []),
    # docs/dataset-inference.md: the tokenizer's own leak (issue 77, item 3)
    *[Citation("docs/dataset-inference.md", "bench_tokenizer_leak",
               f"| {row} | {{}} ({{}}) | {{}} (+{{}}) | {{}} | {{}} ({{}} / {{}}) |",
               lambda r, label=label: [r["models"][label]["token_count_auc"], r["models"][label]["token_count_null_sds"],
                                       r["models"][label]["auc"]["dc_pdd"], r["models"][label]["null_sds"]["dc_pdd"],
                                       r["models"][label]["auc"]["min_k_20"],
                                       *(r["models"][label]["dataset_inference"][key]
                                         for key in ("p_value", "n_suspect", "n_validation"))])
      for label, row in (("members-tokenizer", "fitted on the members"),
                         ("outside-tokenizer", "fitted outside the split"))],
    Citation("docs/dataset-inference.md", "bench_tokenizer_leak", "DC-PDD's +{} lies inside the band of {} that "
             "Bonferroni gives the {} scores at 128 words",
             lambda r: [r["models"]["members-tokenizer"]["null_sds"]["dc_pdd"],
                        r["models"]["members-tokenizer"]["band_null_sds"], len(r["models"]["members-tokenizer"]["auc"])]
             if not r["models"]["members-tokenizer"]["outside_band"] else []),
    Citation("docs/dataset-inference.md", "bench_tokenizer_leak", "for seeds 1 to 6 the reading farthest from 1/2 lies "
             "{} to {} null sds out, inside the band of {}; seed 0 read Min-K%++ 40% AUC {} at 64 words, +{} null sds, "
             "{} of its 48 readings beyond the band, and dataset inference rejected at all three lengths (p {})",
             lambda r: [min(abs(r["draws"][d]["null_sds"]) for d in "123456"),
                        max(abs(r["draws"][d]["null_sds"]) for d in "123456"),
                        *one_value([r["draws"][d]["band_null_sds"] for d in "0123456"]),
                        r["draws"]["0"]["auc"], r["draws"]["0"]["null_sds"], r["draws"]["0"]["outside_band"],
                        *one_value(list(r["draws"]["0"]["di_p_value"].values()))]
             if (r["draws"]["0"]["farthest"] == "min_k_pp_40 at 64 words"
                 and not any(r["draws"][d]["outside_band"] for d in "123456")) else []),
    Citation("docs/dataset-inference.md", "bench_tokenizer_leak", "Seeds 2 and 4 give dataset inference p = {} at one "
             "length each",
             lambda r: one_value([p for d in "24" for p in r["draws"][d]["di_p_value"].values() if p <= 0.05])
             if [d for d in "123456" if sum(p <= 0.05 for p in r["draws"][d]["di_p_value"].values()) == 1] == ["2", "4"]
             and not any(sum(p <= 0.05 for p in r["draws"][d]["di_p_value"].values()) > 1 for d in "123456") else []),
    # docs/dataset-inference.md: dataset inference only in the direction of "seen" (issue 77, items 4 to 6)
    *[Citation("docs/dataset-inference.md", "bench_di_direction", f"| {row} | {{}}, {{}} | {{}}, {{}} |",
               lambda r, pool=pool: [r["pools"][pool][d][key] for d in ("any", "seen")
                                     for key in ("p_value", "share_lower")])
      for pool, row in (("mink xsum-gpt2-nonmembers-e30 128", "`xsum-gpt2-nonmembers-e30` (trained on the validation "
                                                              "side), 128 words"),
                        ("mink xsum-gpt2-nonmembers-e30 64", "the same at 64 words"),
                        ("finetune SmolLM2-135M-Instruct.Q4_1 non_members@1",
                         "SmolLM2's copy trained on the non-members, 1 epoch"),
                        ("finetune gemma-3-270m-q4_k_m non_members@1",
                         "gemma-3-270m's copy trained on the non-members, 1 epoch"),
                        ("finetune xsum-gpt2-outside-e05 non_members@1",
                         "the reference GPT-2's copy trained on the non-members, 1 epoch"))],
    Citation("docs/dataset-inference.md", "bench_di_direction", "the reference GPT-2's copy after 1 epoch never "
             "within 50 either way; after 2 epochs {} either way; SmolLM2 after 1 and 2 epochs {} and {} either way, "
             "gemma-3-270m {} and {}. mink_membership: xsum-gpt2-e01 {} texts a side with \"seen\" against {} "
             "two-sided, at 64 and at 128 words alike; ja-gpt2-e01 {} either way at 128 words, and at 64 words {} with "
             "\"seen\" where the two-sided fit never gets there within 150",
             direction_power),
    Citation("docs/dataset-inference.md", "bench_di_direction", "On xsum-gpt2-e01 at 128 words both rules give p = {} "
             "on the whole pool, but leaving ReCaLL out keeps all {} texts where dropping keeps {}, and half the "
             "subsamples reject from {} texts a side, where the dropped pool needs {}. On the untrained twin the two "
             "give {} and {}; on the model trained on the non-members {} and {}",
             lambda r: [*one_value([r["missing"]["mink xsum-gpt2-e01 128"][rule]["p_value"]
                                    for rule in ("leave_out_score", "drop_texts")]),
                        *(r["missing"]["mink xsum-gpt2-e01 128"][rule]["texts"]
                          for rule in ("leave_out_score", "drop_texts")),
                        *(r["missing"]["mink xsum-gpt2-e01 128"][rule]["smallest_n"]
                          for rule in ("leave_out_score", "drop_texts")),
                        *(r["missing"][f"mink {model} 128"][rule]["p_value"]
                          for model in ("xsum-gpt2-e00", "xsum-gpt2-nonmembers-e30")
                          for rule in ("leave_out_score", "drop_texts"))]),
    Citation("docs/dataset-inference.md", "bench_di_direction", "context: on the reference GPT-2s (512 tokens) {} of {} "
             "texts have no ReCaLL score at 128 words",
             lambda r: [r["missing"]["mink xsum-gpt2-e01 128"]["drop_texts"]["dropped_texts"],
                        r["missing"]["mink xsum-gpt2-e01 128"]["leave_out_score"]["texts"]]),
    Citation("docs/dataset-inference.md", "bench_di_direction", "a halving put a score outside its band {}% to {}% of "
             "the time per pool (the highest upper 95% bound {}%), at or below the 1% it is built for, and the median "
             "halving's farthest score lay {} to {} null sds out, against bands of {} and {}",
             lambda r: (lambda bands: [round(100 * min(b["outside_rate"] for b in bands), 2),
                                       round(100 * max(b["outside_rate"] for b in bands), 2),
                                       round(100 * max(b["ci95"][1] for b in bands), 2),
                                       min(b["median_largest_null_sds"] for b in bands),
                                       max(b["median_largest_null_sds"] for b in bands),
                                       *sorted({b["band_z"] for b in bands})])(
                 [v["null_band"] for k, v in r["size"].items() if k != "pooled"])
             if all(v["null_band"]["outside_rate"] <= 0.01 for k, v in r["size"].items() if k != "pooled") else []),
    Citation("docs/dataset-inference.md", "bench_di_direction", "xsum-gpt2-e00 {}% ({}% to {}%) at 64 words and {}% "
             "({}% to {}%) at 128; ja-gpt2-e00 {}% ({}% to {}%) and {}% ({}% to {}%); two trained pools, whose random "
             "halvings are nulls however well the model learnt, ja-gpt2-e01 at 64 words {}% ({}% to {}%) and "
             "xsum-gpt2-e01 at 128 words {}% ({}% to {}%). Pooled over the 12,000: {}% ({}% to {}%) at 0.05 and {}% "
             "({}% to {}%) at 0.025",
             lambda r: [round(100 * v, 2) for pool in ("mink xsum-gpt2-e00 64", "mink xsum-gpt2-e00 128",
                                                      "mink ja-gpt2-e00 64", "mink ja-gpt2-e00 128",
                                                      "mink ja-gpt2-e01 64", "mink xsum-gpt2-e01 128", "pooled")
                        for v in (r["size"][pool]["at_0.05"]["rate"], *r["size"][pool]["at_0.05"]["ci95"])]
             + [round(100 * v, 2) for v in (r["size"]["pooled"]["at_0.025"]["rate"],
                                            *r["size"]["pooled"]["at_0.025"]["ci95"])]
             if r["relabelings"] * 6 == 12_000 else []),
    # docs/dp.md: the white-box gradient canaries' table
    *[gradient_row(label) for label in ("gpt2-lora-broken1", "gpt2-lora-dp1", "gpt2-lora-dp8", "t5-lora-broken1",
                                        "t5-lora-dp1", "gpt2-full-broken1", "gpt2-full-dp1")],
    Citation("docs/dp.md", "bench_dp_audit--gradient", "The LoRA runs that claim ε = 1 without noise audit {} with "
             "text canaries and {} with gradient canaries: caught, on both models",
             lambda r: [*one_value([dp_first(r["runs"][f"{m}-lora-broken1"])[0] for m in ("gpt2", "t5")]),
                        *one_value([round(gradient_first(r["runs"][f"{m}-lora-broken1"])[0], 6) for m in ("gpt2", "t5")])]
             if all(gradient_first(r["runs"][f"{m}-lora-broken1"])[0] > 1 for m in ("gpt2", "t5")) else []),
    Citation("docs/dp.md", "bench_dp_audit--gradient", "Every run with its noise stays within its claim by both figures",
             lambda r: [] if all(max(gradient_first(run) + dp_first(run)) <= run["dp"][0]["claimed_epsilon"]
                                 for label, run in r["runs"].items() if "-dp" in label) else [1.0]),
    Citation("docs/dp.md", "bench_dp_audit--gradient", "With full fine-tuning the text canaries show more ({} against "
             "{})", lambda r: [dp_first(r["runs"]["gpt2-full-broken1"])[0],
                               gradient_first(r["runs"]["gpt2-full-broken1"])[0]]),
    Citation("docs/dp.md", "bench_dp_audit--smollm2-dp8", "With DP at ε = {} the LoRA run audits {}, within its claim",
             lambda r: [r["runs"]["smollm2-lora-dp8"]["dp"][0]["claimed_epsilon"],
                        *one_value(dp_first(r["runs"]["smollm2-lora-dp8"]))]
             if max(dp_first(r["runs"]["smollm2-lora-dp8"])) <= r["runs"]["smollm2-lora-dp8"]["dp"][0][
                 "claimed_epsilon"] else []),
    Citation("docs/dp.md", "bench_dp_audit--smollm2-full", "Four epochs of full fine-tuning prove leakage of ε ≥ {} at "
             "95% (Steinke et al.'s bound: every one of the 800 guesses right, the ceiling of 1,000 canaries, so the "
             "audit's limit and not the model's leakage; 10,000 canaries would show up to 5.85) while greedy decoding reproduced none of the canaries, trained on or not, "
             "and none is (100, 0.5)-extractable: each canary was seen once an epoch, and those it trained on ended at "
             "half the loss of those it never saw ({} against {} per token)",
             lambda r: unextracted_leakage(r["runs"]["smollm2-full-none"])),
    Citation("docs/dp.md", "bench_dp_audit", "with 1,000 canaries ({} trained on) and small task sets (10 unique "
             "strings, 10 persons: {} rows per epoch)",
             lambda r: one_value([run["audit"]["included"] for run in r["runs"].values()])
             + one_value([run["rows_per_epoch"] for run in r["runs"].values()])),
    Citation("docs/dp.md", "bench_dp_audit", "Every run with noise audits 0 under its claim of 1, 4 or 8, at both "
             "epochs and seeds, by both bounds",
             lambda r: [] if all(v == 0 for label, run in r["runs"].items() if "-dp" in label
                                 for epoch in run["epochs"].values() for key, values in epoch.items()
                                 if key.startswith("audited_") for v in values) else [1.0]),
    Citation("docs/dp.md", "bench_dp_audit", "claims ε = 1 but adds no noise audits far above 1 by both bounds",
             lambda r: [] if min(dp_first(r["runs"]["gpt2-full-broken1"])) > 2 else [1.0]),
    Citation("docs/dp.md", "bench_dp_audit", "Full fine-tuning proves leakage, more after 8 epochs than after 4",
             lambda r: [] if all(dp_first(r["runs"][label], "8") > dp_first(r["runs"][label], "4") > [0, 0]
                                 for label in ("t5-full-none", "gpt2-full-none")) else [1.0]),
    Citation("docs/dp.md", "bench_dp_audit", "Without DP the full fine-tuning makes the canaries it never saw less "
             "likely (left-out loss above the trained-on one, and above the DP runs'); with DP both move alike",
             lambda r: [] if dp_utility_holds(r["runs"]) else [1.0]),
    Citation("docs/dp.md", "bench_dp_audit", "the DP runs train slower than the same fine-tuning without DP on "
             "the same steps",
             lambda r: [] if all(dp_slower(r["runs"], label) for label in r["runs"] if "-dp" in label) else [1.0]),
    Citation("docs/dp.md", "bench_dp_audit--cost", "took {} s without the audit and {} s with 1,000 canaries: the "
             "audit was {}% of the task. The canaries more than double the training rows ({} an epoch, {} with them)",
             lambda r: audit_cost(r["runs"]["t5-job-noaudit"], r["runs"]["t5-job-audit"])),
    Citation("docs/dp.md", "bench_dp_audit--cost", "the T5's first seed audited {} (Steinke) and {} (Gaussian f-DP, "
             "conditional) after 8 epochs", lambda r: dp_first(r["runs"]["t5-job-audit"], "8")),
    Citation("docs/dp.md", "bench_dp_audit--job-control", "the task took {} s without DP and {} s with DP at ε = {}, "
             "each with its evaluations after 4 and 8 epochs. After 8 epochs the run without DP audits {} (Steinke) and "
             "{} (Gaussian f-DP, conditional), the run at ε = 8 audits {} and {}",
             lambda r: [r["runs"]["gpt2-full-none"]["wall_time_s"], r["runs"]["gpt2-full-dp8"]["wall_time_s"],
                        r["runs"]["gpt2-full-dp8"]["epochs"]["8"]["claimed"],
                        *dp_first(r["runs"]["gpt2-full-none"], "8"), *dp_first(r["runs"]["gpt2-full-dp8"], "8")]),
    # docs/gpu.md: the H200 section's reading of its gpu_check record (its table is checked in test_gpu_check.py)
    Citation("docs/gpu.md", H200, "peaks measured at {} TFLOP/s and {} GB/s",
             lambda r: [r["peak_tflops"], r["bandwidth_gbs"]]),
    Citation("docs/gpu.md", H200, "**All {} tasks `ok`, none stopped:** the check ran to the end in {} s",
             lambda r: [len(r["tasks"]), r["total_s"]]
             if r["finished"] and all(t["status"] == "ok" for t in r["tasks"]) else []),
    Citation("docs/gpu.md", H200, "**mink_membership: {} s against the 60 s target, still not met.** About 84 s of "
             "it was gradient norms (the log's progress bar: 129 batches in 01:24), in batches of {} texts",
             lambda r: [gpu_task(r, "mink_membership")["wall_s"],
                        gpu_task(r, "mink_membership")["batch_sizes"]["gradient norms"]]
             if gpu_task(r, "mink_membership")["wall_s"] > 60 else []),
    Citation("docs/gpu.md", H200, "({} random texts of {} tokens, before the tasks): `vmap` batches of 3 took {} s, "
             "the per-text loop {} s, `vmap` batches of 1 {} s. A batch of 3's top operators by CUDA time: "
             "`aten::bmm` {} ms, `aten::mm` {} ms, `aten::mul` {} ms, `aten::abs` {} ms, `aten::amax` {} ms",
             lambda r: [r["gradnorm_check"][k] for k in ("texts", "tokens", "vmap_batch_3_s", "loop_s", "vmap_batch_1_s")]
             + [next(op["device_ms"] for op in r["gradnorm_check"]["vmap_batch_3_top_ops"] if op["op"] == name)
                for name in ("aten::bmm", "aten::mm", "aten::mul", "aten::abs", "aten::amax")]),
    Citation("docs/gpu.md", H200, "**probe_memorization: {} s** with the workers mapping .npy files",
             lambda r: [gpu_task(r, "probe_memorization")["wall_s"]]),
    Citation("docs/gpu.md", H200, "**privacy_extraction finished: {} s for {} AdamW steps**",
             lambda r: [gpu_task(r, "privacy_extraction")["wall_s"], gpu_task(r, "privacy_extraction")["optimizer_steps"]]
             if gpu_task(r, "privacy_extraction")["status"] == "ok" else []),
    Citation("docs/gpu.md", H200, "filled for {} tasks (weat and probe_memorization record none). stereoset's {} "
             "forward passes, all of its passes, replayed back to back took {} s of its {} s",
             lambda r: [sum(t["raw_forward"] is not None for t in r["tasks"]),
                        gpu_task(r, "stereoset")["raw_forward"]["passes"], gpu_task(r, "stereoset")["raw_forward"]["seconds"],
                        gpu_task(r, "stereoset")["wall_s"]]
             if all(gpu_task(r, name)["raw_forward"] is None for name in ("weat", "probe_memorization"))
             and gpu_task(r, "stereoset")["raw_forward"]["passes"] == gpu_task(r, "stereoset")["forward_passes"] else []),
    # docs/reproducibility.md: a change to the reporting alone, without a model pass
    Citation("docs/reproducibility.md", "bench_report_only",
             "xsum-gpt2-e00's mink_membership reported again under `--di-penalty 1.0` in {} s from its {} MB sidecar "
             "(read and checked in {} s), against the {} s of the run that scored it ({}× faster); {} of its {} "
             "metrics moved, all `di_p_value`, and the report as the file has it was bit-identical to the file",
             lambda r: [r["seconds"]["report_changed"], r["records_bytes"] / 1e6, r["seconds"]["read_and_check_sidecar"],
                        r["seconds"]["model_pass_in_file"], r["speedup_vs_model_pass"], r["metrics_moved"],
                        r["metrics"]] if r["as_is_identical_to_file"] and r["moved_names"] == ["di_p_value"]
             and r["changed"] == {"di_penalty": "1.0"} else []),
]


def record(bench: str) -> dict:
    return json.loads((RESULTS / f"{bench}.json").read_text())


def recorded_shares(recorded: dict) -> list[float]:
    """bench_dataset_inference's `recorded_costs`: the lowest and highest share of the job's 7 mink_membership runs
    (and the seconds and wall time of the highest), the reference GPT-2's finetune_memorization runs' (full, LoRA),
    and the real models' mink_membership runs' (SmolLM2, gemma); [] when a run is missing."""
    job = [v for k, v in recorded.items() if k.startswith("mink_membership membench-ref/")]
    if len(job) != 7:
        return []
    top = max(job, key=lambda v: v["share"])
    finetune = [recorded[f"finetune_memorization membench-ref/xsum-gpt2-outside-e05{tail}"]["share"] for tail in ("", "-lora")]
    real = [recorded[f"mink_membership {name}"]["share"] for name in ("SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m")]
    return [100 * min(v["share"] for v in job), 100 * top["share"], top["dataset_inference_seconds"], top["wall_time_s"],
            *(100 * share for share in finetune), *(100 * share for share in real)]


def smallest(report: dict, pool: str) -> list[int | None]:
    """bench_dataset_inference's `statistics`: the texts per side at which half the subsamples of `pool` reject,
    with the ridge penalty 0.1 and unpenalised."""
    return [report["statistics"][candidate]["trained"][pool]["smallest_n"] for candidate in ("ridge 0.1", "unpenalised")]


def fpr_figures(candidate: dict) -> list[float]:
    """A candidate's pooled false-positive rate at 0.05 and its 95% interval, in percent."""
    pooled = candidate["nulls_pooled"]
    return [100 * pooled["fpr@0.05"], *(100 * v for v in pooled["fpr_ci95"])]


def di_penalty() -> float:
    """The dataset-inference penalty the tasks use by default."""
    from harness.metrics.dataset_inference import PENALTY

    return PENALTY


def round_ratios(report: dict) -> list[float]:
    """bench_extraction's near-verbatim search over sampling, round by round."""
    rounds = report["all_rounds_seconds"]
    return [a / b for a, b in zip(rounds["near_verbatim_bounds"], rounds["sampled_continuations"], strict=True)]


def check(citation: Citation, page_text: str, report_record: dict) -> None:
    """The page's section that says `citation.pattern` gives the record's figures, names it, its date and machine."""
    pattern = re.escape(citation.pattern).replace(re.escape("{}"), FIGURE)
    sections = [flat(section) for section in re.split(r"\n(?=#)", page_text)]
    found, section = next(((m, text) for text in sections if (m := re.search(pattern, text))), (None, ""))
    assert found, f"{citation.page} no longer says: {citation.pattern}"
    expected = citation.values(report_record["report"])
    assert len(expected) == len(found.groups()), f"{citation.bench}'s record no longer supports: {citation.pattern}"
    for written, value in zip(found.groups(), expected):
        assert same(written, value), f"{citation.page}: {written} is not {value} ({citation.bench}): {found.group(0)}"
    assert f"bench/results/{citation.bench}.json" in section, f"{citation.page}: the section does not name its record"
    assert report_record["date"] in section, f"{citation.page}: the section does not give the record's date"
    machine = report_record["machine"]
    assert machine["cpu"] in section, f"{citation.page}: the section does not name the machine"
    capability = {"AVX512": "AVX-512", "AVX2": "AVX2"}.get(machine["cpu_capability"], machine["cpu_capability"])
    assert capability in section, f"{citation.page}: the section does not give the CPU's kernels ({capability})"


@pytest.mark.parametrize("citation", CITATIONS, ids=lambda c: f"{c.page}:{c.bench}:{c.pattern[:30]}")
def test_every_cited_figure_is_its_record_s(citation):
    check(citation, (ROOT / citation.page).read_text(encoding="utf-8"), record(citation.bench))


def test_every_record_is_cited_and_every_cited_record_is_checked():
    cited = {c.bench for c in CITATIONS}
    # bench/gpu_check.py's records are tables of docs/gpu.md, checked whole in tests/unit/test_gpu_check.py
    tables = {path.stem for path in RESULTS.glob("gpu_check--*.json")}
    assert {path.stem for path in RESULTS.glob("*.json")} == cited | tables
    cited |= tables
    pages = [*ROOT.glob("docs/*.md"), *ROOT.glob("tasks/*/README.md"), ROOT / "README.md"]
    named = {name for page in pages for name in re.findall(r"bench/results/([\w-]+)\.json", page.read_text())}
    assert named <= cited, f"pages name records no test checks: {named - cited}"


def test_a_record_is_complete_and_names_how_to_measure_again():
    for path in RESULTS.glob("*.json"):
        data = json.loads(path.read_text())
        bench = path.stem.split("--")[0]
        assert data["bench"] == f"{bench}.py" and data["command"].startswith(f"python bench/{bench}.py")
        assert path.stem == bench or f"--output bench/results/{path.name}" in data["command"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", data["date"]) and data["machine"]["cpu"] and data["report"]


def test_a_figure_that_is_not_the_record_s_fails(tmp_path):
    citation = CITATIONS[0]
    data = record(citation.bench)
    page = (ROOT / citation.page).read_text(encoding="utf-8")
    check(citation, page, data)
    first = citation.values(data["report"])[2]
    changed = json.loads(json.dumps(data))
    changed["report"]["wall_seconds"]["c_2procs_1thread"] = first + 1
    with pytest.raises(AssertionError, match="is not"):
        check(citation, page, changed)
    with pytest.raises(AssertionError, match="date"):
        check(citation, page, {**data, "date": "1999-01-01"})
