#!/usr/bin/env python
"""The option tables of the docs, made from the code's own tables and defaults: docs/codecs.md's every codec's
parameters and the stores' options (the tables the error messages list: mxnet_gc.codecs.registry.options,
a codec's constructor defaults and its ``values``; mxnet_gc.kvstore.compression.STORE_OPTIONS),
docs/lgc.md's options of 'lgc' (mxnet_gc.lgc.options.OPTIONS) and docs/configuration.md's environment
variables (mxnet_gc.config.VARIABLES, whose defaults the parser uses).

    python -m tools.option_tables           # rewrites each table between its page's markers
    python -m tools.option_tables --check   # exits 1 where a page differs from the code
"""
import argparse
import os
import sys

from mxnet_gc import codecs, config
from mxnet_gc.codecs.registry import options
from mxnet_gc.kvstore.compression import STORE_OPTIONS
from mxnet_gc.lgc.options import OPTIONS as LGC_OPTIONS
from tools.jobfiles import read_section_page, write_section

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


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


def lgc_table():
    """'lgc''s options: one row per field of OPTIONS, its default and meaning."""
    lines = ["| option | default | meaning |", "|---|---|---|"]
    lines += ["| `%s` | %s | %s |" % (name, _default(default), meaning)
              for name, (default, meaning) in LGC_OPTIONS.items()]
    return "\n".join(lines)


def environment_table():
    """The environment variables: one row per entry of config.VARIABLES."""
    def shown(default):
        if isinstance(default, config.Phrase):
            return str(default)
        return "`%s`" % default if isinstance(default, str) else "%d" % default if isinstance(default, int) else \
            "%g" % default

    lines = ["| variable | default | meaning |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % (", ".join("`%s`" % n for n in ((names,) if isinstance(names, str) else names)),
                                    shown(default), meaning) for names, default, meaning in config.VARIABLES]
    return "\n".join(lines)


# (page, its markers' name, the table)
TABLES = ((os.path.join(DOCS, "codecs.md"), "option_tables", table),
          (os.path.join(DOCS, "lgc.md"), "option_tables:lgc", lgc_table),
          (os.path.join(DOCS, "configuration.md"), "option_tables:environment", environment_table))


def stale():
    """The pages whose table differs from the code."""
    return [page for page, section, make in TABLES if make() not in read_section_page(page, section)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where a page differs from the code")
    args = parser.parse_args()
    if args.check:
        for page in stale():
            print("%s: the option table differs from the code; run python -m tools.option_tables" % page)
        return 1 if stale() else 0
    for page, section, make in TABLES:
        write_section(page, section, make())
    return 0


if __name__ == "__main__":
    sys.exit(main())
