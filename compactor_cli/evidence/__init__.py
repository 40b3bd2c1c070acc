"""What an agent cannot continue without and cannot cheaply re-derive, read from a transcript.

``harness``: the task (the first real user request) and the text a harness repeats, which is
never the user's own word. ``extract``: the evidence of a run — files created, modified, deleted
and read, commands with their outcome, error lines met, tests and their results, IDs that
state-changing tools acted on — as plain data, deterministic, for the summary's evidence
section. ``probes``: the items a compaction should keep, taken mechanically from the part it
replaces, and how many of them survive in what a model is sent (the retention benchmark and
``eval``). Plain dicts in, plain data out; no I/O."""

from __future__ import annotations

from .extract import Evidence, evidence_of
from .harness import harness_keys, is_injected, task_index
from .probes import Probe, probes_of, retention, sent_text
from .section import render_evidence

__all__ = ["Evidence", "Probe", "evidence_of", "harness_keys", "is_injected", "probes_of", "render_evidence",
           "retention", "sent_text", "task_index"]
