"""Specs of the extension ops: normalization."""

from __future__ import annotations
