"""Deterministic benchmark data: text for a word count, CSV for a group-by aggregate.

    .venv/bin/python benchmarks/gen_text.py DIR --size 200m --files 200 [--seed 42]

writes, under DIR,

    text/part-00000.txt ...  lines of 4-20 words from a Zipf-like vocabulary of 50,000
                             random words (exponent 1.1: a few short words are very
                             frequent, most words rare), split by single spaces
    csv/part-00000.csv ...   category,region,amount  (1,000 categories, 20 regions,
                             amount in [0, 100000) with two decimals), with a header
    _GENERATED.json          the parameters and sizes, for idempotence

`--size` is the size of each data set (text and CSV), spread evenly over `--files`
files each. A second call with the same parameters finds the marker and the files
at their recorded sizes and writes nothing; any other parameters regenerate.

Text lines are drawn from a pool of 2^19 lines (~30 MB) itself drawn word by word
(see TextGenerator), CSV rows are built digit by digit in numpy arrays: together
well over 50 MB/s on one core. The same seed gives the same bytes everywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

VOCABULARY_SIZE = 50_000
ZIPF_EXPONENT = 1.1
WORDS_PER_LINE = (4, 20)  # inclusive range
POOL_LINES = 1 << 19
CATEGORIES = 1_000
REGIONS = 20
MARKER = "_GENERATED.json"
FORMAT_VERSION = 1
CSV_HEADER = b"category,region,amount\n"
# One CSV row: "cNNNN,rNN,DDDDD.DD\n" before the leading zeros of the amount are dropped.
_CSV_ROW = 19

_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str | int) -> int:
    """Bytes from "200m", "1g", "512k" or a plain number (binary units)."""
    if isinstance(text, int):
        return text
    value = text.strip().lower().removesuffix("ib").removesuffix("b")
    unit = value[-1] if value and value[-1] in _UNITS else ""
    return int(float(value[: len(value) - len(unit)]) * _UNITS[unit])


# -- vocabulary --------------------------------------------------------------------------------


def vocabulary(rng: np.random.Generator) -> list[bytes]:
    """50,000 distinct lower-case words of 2-12 letters, shorter words more frequent."""
    words: list[bytes] = []
    seen: set[bytes] = set()
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    while len(words) < VOCABULARY_SIZE:
        lengths = np.clip(rng.poisson(5.0, VOCABULARY_SIZE) + 2, 2, 12)
        codes = letters[rng.integers(0, 26, size=(VOCABULARY_SIZE, 12))]
        for row, length in zip(codes, lengths, strict=True):
            word = row[:length].tobytes()
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == VOCABULARY_SIZE:
                    break
    # Rank 1 is the most frequent word: shorter words tend to rank higher, as in English.
    rank_key = np.array([len(word) for word in words]) + rng.uniform(0, 6, len(words))
    return [words[i] for i in np.argsort(rank_key, kind="stable")]


class TextGenerator:
    """Lines of Zipf-distributed words, fast.

    Drawing every word of a gigabyte one by one costs ~150 ns a word in numpy, about
    25 MB/s. So a pool of POOL_LINES lines (~30 MB) is drawn word by word once, and
    the files are made of lines drawn at random from the pool: the word frequencies
    stay Zipf-like, and a file costs one list join.
    """

    def __init__(self, words: list[bytes], rng: np.random.Generator) -> None:
        weights = 1.0 / np.arange(1, len(words) + 1, dtype=np.float64) ** ZIPF_EXPONENT
        cdf = np.cumsum(weights / weights.sum())
        # Inverse CDF as a lookup table: a rank per 1/2^22 of probability (the rarest word
        # still gets a few entries), so drawing a rank is one gather instead of a search.
        counts = np.diff(np.round(cdf * (1 << 22)).astype(np.int64), prepend=0)
        inverse = np.repeat(np.arange(len(words), dtype=np.int32), counts)
        width = max(len(w) for w in words) + 1  # + the separator
        table = np.zeros((len(words), width), dtype=np.uint8)
        lengths = np.array([len(w) for w in words], dtype=np.int64)
        for index, word in enumerate(words):
            table[index, : len(word)] = np.frombuffer(word, dtype=np.uint8)

        low, high = WORDS_PER_LINE
        line_words = rng.integers(low, high + 1, size=POOL_LINES)
        ends = np.cumsum(line_words)
        tokens = int(ends[-1])
        ranks = inverse[rng.integers(0, len(inverse), size=tokens)]
        rows = table[ranks]
        token_lengths = lengths[ranks]
        rows[np.arange(tokens), token_lengths] = ord(" ")
        rows[ends - 1, token_lengths[ends - 1]] = ord("\n")
        data = rows[np.arange(width)[None, :] <= token_lengths[:, None]].tobytes()
        self.lines = np.array([line + b"\n" for line in data.split(b"\n")[:-1]], dtype=object)
        self.mean_line_bytes = len(data) / POOL_LINES

    def text(self, rng: np.random.Generator, target_bytes: int) -> bytes:
        """Whole lines, at most `target_bytes` long (and at most one line shorter)."""
        count = int(target_bytes / self.mean_line_bytes * 1.05) + 16
        chosen = self.lines[rng.integers(0, len(self.lines), size=count)].tolist()
        lengths = np.cumsum([len(line) for line in chosen])
        keep = max(1, int(np.searchsorted(lengths, target_bytes, side="right")))
        return b"".join(chosen[:keep])


def csv_rows(rng: np.random.Generator, target_bytes: int) -> bytes:
    """category,region,amount rows (no header), about `target_bytes` long."""
    rows = int(target_bytes / 16.5) + 16
    # Categories skewed (a few big ones), regions uniform, amounts log-uniform-ish.
    category = np.minimum((rng.pareto(1.2, rows) * 40).astype(np.int64), CATEGORIES - 1)
    region = rng.integers(0, REGIONS, rows)
    cents = np.minimum((np.exp(rng.uniform(0, np.log(1e7), rows))).astype(np.int64), 9_999_999)
    out = np.empty((rows, _CSV_ROW), dtype=np.uint8)
    zero = ord("0")
    out[:, 0] = ord("c")
    for position, divisor in enumerate((1000, 100, 10, 1), start=1):
        out[:, position] = zero + (category // divisor) % 10
    out[:, 5] = ord(",")
    out[:, 6] = ord("r")
    out[:, 7] = zero + region // 10
    out[:, 8] = zero + region % 10
    out[:, 9] = ord(",")
    for position, divisor in zip((10, 11, 12, 13, 14, 16, 17), (10**6, 10**5, 10**4, 10**3, 100, 10, 1), strict=True):
        out[:, position] = zero + (cents // divisor) % 10
    out[:, 15] = ord(".")
    out[:, 18] = ord("\n")
    # Drop the amount's leading zeros (keep one digit before the point).
    keep = np.ones((rows, _CSV_ROW), dtype=bool)
    for position, limit in zip((10, 11, 12, 13), (10**6, 10**5, 10**4, 10**3), strict=True):
        keep[:, position] = cents >= limit
    data = out[keep]
    row_lengths = keep.sum(axis=1)
    ends = np.cumsum(row_lengths)
    count = max(1, int(np.searchsorted(ends, target_bytes, side="right")))
    return data[: ends[count - 1]].tobytes()


# -- the data set ----------------------------------------------------------------------------


def _expected(total_bytes: int, files: int, seed: int) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "total_bytes": total_bytes,
        "files": files,
        "seed": seed,
        "vocabulary": VOCABULARY_SIZE,
        "zipf_exponent": ZIPF_EXPONENT,
        "categories": CATEGORIES,
        "regions": REGIONS,
    }


def _complete(root: Path, expected: dict) -> bool:
    marker = root / MARKER
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    if {key: recorded.get(key) for key in expected} != expected:
        return False
    for kind in ("text", "csv"):
        sizes = recorded.get(f"{kind}_sizes", {})
        if len(sizes) != expected["files"]:
            return False
        for name, size in sizes.items():
            path = root / kind / name
            if not path.is_file() or path.stat().st_size != size:
                return False
    return True


def generate(directory: str | os.PathLike[str], total_bytes: int | str, files: int = 200, seed: int = 42) -> dict:
    """Write the text and CSV data sets (each about `total_bytes`) unless already there.

    Returns the marker's content: parameters, per-file sizes, and `generated` (False
    when the data was already complete).
    """
    total_bytes = parse_size(total_bytes)
    if files < 1 or total_bytes < files * 1024:
        raise ValueError(f"need files >= 1 and at least 1 KiB per file, got {total_bytes} bytes in {files} files")
    root = Path(directory)
    expected = _expected(total_bytes, files, seed)
    if _complete(root, expected):
        recorded = json.loads((root / MARKER).read_text())
        return {**recorded, "generated": False}
    started = time.perf_counter()
    (root / MARKER).unlink(missing_ok=True)
    for kind in ("text", "csv"):
        shutil.rmtree(root / kind, ignore_errors=True)
        (root / kind).mkdir(parents=True)
    words = TextGenerator(vocabulary(np.random.default_rng([seed, 0])), np.random.default_rng([seed, 3]))
    per_file = total_bytes // files
    text_sizes: dict[str, int] = {}
    csv_sizes: dict[str, int] = {}
    for index in range(files):
        # One generator per file and kind: a file's bytes do not depend on the others.
        text = words.text(np.random.default_rng([seed, 1, index]), per_file)
        name = f"part-{index:05d}.txt"
        (root / "text" / name).write_bytes(text)
        text_sizes[name] = len(text)
        rows = CSV_HEADER + csv_rows(np.random.default_rng([seed, 2, index]), per_file - len(CSV_HEADER))
        name = f"part-{index:05d}.csv"
        (root / "csv" / name).write_bytes(rows)
        csv_sizes[name] = len(rows)
    elapsed = time.perf_counter() - started
    recorded = {
        **expected,
        "text_bytes": sum(text_sizes.values()),
        "csv_bytes": sum(csv_sizes.values()),
        "seconds": round(elapsed, 2),
        "text_sizes": text_sizes,
        "csv_sizes": csv_sizes,
    }
    staging = root / f".{MARKER}.tmp"
    staging.write_text(json.dumps(recorded, indent=1))
    os.replace(staging, root / MARKER)
    return {**recorded, "generated": True}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory")
    parser.add_argument("--size", default="200m", help="bytes of text and of CSV each, e.g. 200m, 1g (default 200m)")
    parser.add_argument("--files", type=int, default=200, help="files per data set (default 200)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    result = generate(args.directory, args.size, files=args.files, seed=args.seed)
    total = result["text_bytes"] + result["csv_bytes"]
    if result["generated"]:
        rate = total / 2**20 / max(result["seconds"], 1e-9)
        print(f"{args.directory}: wrote {total / 2**20:,.0f} MiB in {result['seconds']:.1f} s ({rate:,.0f} MiB/s)")
    else:
        print(f"{args.directory}: already complete ({total / 2**20:,.0f} MiB), nothing written")


if __name__ == "__main__":
    sys.exit(main())
