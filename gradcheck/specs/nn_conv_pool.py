"""Specs of the extension ops: conv and pool."""

from __future__ import annotations
