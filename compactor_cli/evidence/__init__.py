"""What an agent cannot continue without and cannot cheaply re-derive, read from a transcript.

``harness``: the task (the first real user request) and the text a harness repeats, which is
never the user's own word. ``extract``: the evidence of a run — files created, modified, deleted
and read, commands with their outcome, error lines met, tests and their results, IDs that
state-changing tools acted on — as plain data, deterministic, for the summary's evidence
section. ``probes``: the items a compaction should keep, taken mechanically from the part it
replaces, and how many of them survive in what a model is sent (the retention benchmark and
``eval``). Plain dicts in, plain data out; no I/O.

Nothing is imported here: tier 1 reads ``harness`` on every run, and needs none of the rest
(each caller imports the module it uses)."""
