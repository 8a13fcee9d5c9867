"""Commands of this group are added by the issue that builds them."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    return None
