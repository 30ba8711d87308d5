#!/usr/bin/env python
"""docs/usage.md's index of the library's modules, made from the modules' own docstrings (each module says what it
is once, in its first sentence; the index repeats none of it by hand).

    python -m tools.module_index           # rewrites the table between the page's module_index markers
    python -m tools.module_index --check   # exits 1 where the page differs from the modules
"""
import argparse
import ast
import os
import sys

from tools.jobfiles import read_section_page, write_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "usage.md")
SECTION = "module_index"
FOLDERS = ("mxnet_gc", "mxnet_gc/codecs", "mxnet_gc/kvstore", "mxnet_gc/lgc")
LONG = 160  # a longer first sentence is cut at its first ': ' or '; ' (what follows is detail)


def summary(path):
    """The first sentence of a module's docstring (None without one)."""
    with open(path) as f:
        doc = ast.get_docstring(ast.parse(f.read()))
    if not doc:
        return None
    first = " ".join(doc.split("\n\n")[0].split())
    end = first.find(". ")
    first = first if end < 0 else first[:end + 1]
    if len(first) > LONG:
        cuts = [i for i in (first.find(": ", 40), first.find("; ", 40)) if i > 0]
        if cuts:
            first = first[:min(cuts)] + "."
    return first


def modules():
    """(path, summary) of every module of FOLDERS, each folder's package first."""
    found = []
    for folder in FOLDERS:
        names = sorted(n for n in os.listdir(os.path.join(ROOT, folder)) if n.endswith(".py"))
        names.sort(key=lambda n: n != "__init__.py")
        found += [("%s/%s" % (folder, n), summary(os.path.join(ROOT, folder, n))) for n in names]
    return found


def table():
    lines = ["Made by `python -m tools.module_index` from each module's docstring.", "",
             "| module | what it is |", "|---|---|"]
    lines += ["| `%s` | %s |" % (path, (text or "").replace("|", "\\|")) for path, text in modules()]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 where the page differs from the modules")
    args = parser.parse_args(argv)
    if args.check:
        if table() not in read_section_page(PAGE, SECTION):
            print("%s: the module index differs from the modules; run python -m tools.module_index" % PAGE)
            return 1
        return 0
    write_section(PAGE, SECTION, table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
