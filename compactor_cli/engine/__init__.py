"""Runs records through a command: the options of a run, the per-record step, the executors,
the report, and the drivers over them (local files, the batch function, Ray).

Imports ``tiers`` and everything below; nothing here imports ``cli``."""
