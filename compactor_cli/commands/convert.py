"""``xcompact convert``: one format to another (its own command and per-record step)."""

from __future__ import annotations

from .base import Command


class Convert(Command):
    name = "convert"
    own_step = True  # engine/convert.py
    batch = False
