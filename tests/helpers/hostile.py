"""Transforms that attack the process preparing the plan (tests.helpers.hostile:...).

The JobManager's planner calls each transform on an empty DataFrame to resolve the
plan; these must fail that submission without touching the JobManager."""

from __future__ import annotations

import ctypes
import os
import sys


def exits(df):
    sys.exit(3)


def exits_hard(df):
    os._exit(7)


def loops_for_ever(df):
    while True:
        pass


def segfaults(df):
    ctypes.string_at(0)


def prints(df):
    print("HOSTILE-PRINT from a transform")
    return df


def allocates_3_gib(df):
    # Touched, not only reserved: a zero-filled bytearray is written through.
    blob = bytearray(3 << 30)
    return df if blob else df
