"""Bytes in and out: reading records exactly, atomic and special-file-safe outputs, run journals.

Imports ``model`` only (and ``errors``)."""
