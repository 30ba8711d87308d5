#!/usr/bin/env python
"""docs/codecs.md's table of every codec's parameters and the stores' options, made from the code.

Each row comes from the table its error messages list (mxnet_gc.codecs.registry.options: a codec's
constructor defaults and its ``values``; mxnet_gc.kvstore.compression.STORE_OPTIONS).

    python -m tools.option_tables           # rewrites the table between the page's option_tables markers
    python -m tools.option_tables --check   # exits 1 where the page differs from the code
"""
import argparse
import os
import sys

from mxnet_gc import codecs
from mxnet_gc.codecs.registry import options
from mxnet_gc.kvstore.compression import STORE_OPTIONS
from tools.jobfiles import read_section_page, write_section

PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "codecs.md")
SECTION = "option_tables"


def _default(value):
    """A default as code, or as it is when it is a sentence (the store's 'compressed_pull' depends)."""
    if value is None:
        return "(none)"
    return value if isinstance(value, str) and " " in value else "`%r`" % (value,)


def table():
    """The markdown table: one row per parameter of every registered codec, then the stores' options."""
    lines = ["Made by `python -m tools.option_tables` from the code (the tables the error messages list).", "",
             "| codec | parameter | default | accepts |", "|---|---|---|---|"]
    for kind in codecs.available():
        rows = options(codecs.registry.codec_class(kind))
        if not rows:
            lines.append("| `%s` | (none) | | |" % kind)
        for name, default, values in rows:
            lines.append("| `%s` | `%s` | %s | %s |" % (kind, name, _default(default), values))
    for name, default, values in STORE_OPTIONS:
        lines.append("| a store's, with any of them | `%s` | %s | %s |" % (name, _default(default), values))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where the page differs from the code")
    args = parser.parse_args()
    text = table()
    if args.check:
        page = read_section_page(PAGE, SECTION)
        if text not in page:
            print("%s: the option table differs from the code; run python -m tools.option_tables" % PAGE)
            return 1
        return 0
    write_section(PAGE, SECTION, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
