"""The shipped causal builds' tokenizers cannot tell members from non-members (issue 77, item 1): fitted on
documents outside the split, their token counts at 128 words sit inside the null band of one AUC over the
reference split (the job's row, `tokenizer_readings`); a tokenizer fitted on the members, as the builds' were
before, falls outside it (known truth both ways, with no model: the tokenizer alone)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from harness.reference.build import reference_builds
from harness.reference.corpus import reference_corpus
from harness.reference.null_bands import band_z, null_sd, token_count_auc, tokenizer_readings
from harness.reference.train import train_tokenizer
from harness.scoring.text import truncate_words
from tests.helpers.shipped_builds import shipped_checkpoints


def inside_band(auc: float, members: int, non_members: int) -> bool:
    return abs(auc - 0.5) <= band_z(1) * null_sd(members, non_members)


@pytest.mark.parametrize("corpus", ["xsum", "ja"])
def test_the_shipped_untrained_checkpoints_tokenizer_is_a_null(corpus):
    [config] = [c for c in reference_builds() if c.corpus == corpus and c.train_on == "members"]
    assert config.tokenizer_on == "outside"
    untrained = next(iter(shipped_checkpoints(config).values()))
    auc, members, non_members = token_count_auc(AutoTokenizer.from_pretrained(untrained), corpus)
    assert (members, non_members) == (200, 200)
    assert inside_band(auc, members, non_members), auc
    [reading] = tokenizer_readings({untrained.name: str(untrained)})  # the job's row of it
    assert reading.inside and reading.auc == auc and reading.band_sds == pytest.approx(band_z(1))


def test_a_tokenizer_fitted_on_the_members_tells_them_apart():
    config = reference_builds()[0]
    cut = config.train.max_words_per_document
    members = [truncate_words(d.text, cut) or d.text for d in reference_corpus() if d.member]
    auc, n_members, n_non_members = token_count_auc(train_tokenizer(members, config.train.vocab_size))
    assert auc < 0.5 and not inside_band(auc, n_members, n_non_members), auc  # members take fewer tokens
