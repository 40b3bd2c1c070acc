"""A report's checkpointed totals: the fallbacks count (added on 2026-12-03) reads as 0 from the
checkpoint of a run an earlier version journaled, when the run resumes and when a file of it
starts afresh; any other count missing from a checkpoint is still an error, never a silent 0."""

from __future__ import annotations

import pytest

from compactor_cli.engine.report import Report


def _item(fallback: bool) -> dict:
    item = {"source": "a.jsonl", "line": 1, "status": "SUMMARIZED"}
    if fallback:
        item["fallback"] = "extractive"
    return item


def test_a_checkpoint_without_the_fallbacks_count_reads_as_none_yet() -> None:
    report = Report("summarize", {})
    report.add(_item(False))  # type: ignore[arg-type]
    old = report.checkpoint()
    del old["fallbacks"]  # as an earlier version wrote it
    resumed = Report("summarize", {}, resume_state=old)
    assert resumed.fallbacks == 0 and resumed.conversations == 1
    resumed.add(_item(True))  # type: ignore[arg-type]
    assert resumed.fallbacks == 1 and resumed.totals()["fallbacks"] == 1
    assert "1 with the offline sections" in resumed.summary()
    resumed.rollback(old)  # the file starts afresh from the old checkpoint
    assert resumed.fallbacks == 0 and resumed.conversations == 1


def test_a_round_of_compact_that_fell_back_counts_once() -> None:
    report = Report("compact", {})
    report.add({"source": "a", "line": 1, "status": "SUMMARIZED",  # type: ignore[typeddict-unknown-key]
                "rounds": [{"tier": 1}, {"tier": 2, "fallback": "extractive"}, {"tier": 2, "fallback": "extractive"}]})
    report.add({"source": "a", "line": 2, "status": "SUMMARIZE_FAILED",  # type: ignore[typeddict-unknown-key]
                "rounds": [{"tier": 1, "fallback": "the summary failed: every tool output cleared"}]})
    assert report.fallbacks == 1 and report.totals()["fallbacks"] == 1
    assert "fallbacks" not in Report("toolcall", {}).totals()


def test_a_checkpoint_missing_any_other_count_is_an_error() -> None:
    report = Report("summarize", {})
    state = report.checkpoint()
    del state["warnings"]
    with pytest.raises(KeyError):
        report.rollback(state)
