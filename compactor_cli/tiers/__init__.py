"""The tiers as pure functions: dicts in, ``(dump, Status, details)`` out, no I/O, no run options.

``toolcall`` (tier 1), ``cut`` + ``summarize`` (tier 2), ``compact`` (the policy), ``restore``
(their inverse). Imports ``model``, ``backends`` and ``formats.rules``."""
