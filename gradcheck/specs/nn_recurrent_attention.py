"""Specs of the extension ops: recurrent and attention."""

from __future__ import annotations
