"""One source for every number of README.md, docs/choosing.md and docs/results.md: their tables equal what
tools/doc_tables.py makes from lab/, and no measured number is written by hand elsewhere in them; every
file of docs/ and lab/ is named by a page, a tool or the Makefile."""
import csv
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md", os.path.join("docs", "choosing.md"), os.path.join("docs", "results.md")]
# a number with the unit of a measurement (a time, a ratio, a size, an accuracy), or a decimal of three or
# more digits after the point
MEASURED = re.compile(r"(?<![\w.])(\d[\d,]*(\.\d+)?\s*(x|%|ms|s|min|minutes|hours|MB|KB|GB|GB/s|points|tests)\b"
                      r"|\d+\.\d{3,})")
# numbers that are designs or arithmetic, not measurements
ALLOWED = ["4 bits\ninstead of 32 bound the ratio at 8x"]


def prose(text):
    """The page without its generated tables, code (fenced and inline) and link targets."""
    text = re.sub(r"<!-- doc_tables:(\w+):begin -->.*?<!-- doc_tables:\1:end -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"^    .*$", "", text, flags=re.M)  # (indented code: commands)
    text = re.sub(r"`[^`\n]*`", "", text)
    for phrase in ALLOWED:
        text = text.replace(phrase, "")
    return re.sub(r"\]\([^)]*\)", "]", text)


def test_tables_equal_their_data():
    proc = subprocess.run([sys.executable, "-m", "tools.doc_tables", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_measured_number_is_written_by_hand():
    found = []
    for page in PAGES:
        with open(os.path.join(ROOT, page)) as f:
            text = prose(f.read())
        found += ["%s: %r in %r" % (page, m.group(0), text[max(0, m.start() - 50):m.end() + 20])
                  for m in MEASURED.finditer(text)]
    assert not found, "\n".join(found)


def test_the_pattern_catches_measurements():
    """(The rule itself: measurements are caught, versions are not; the table holds the data's value.)"""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert MEASURED.search("a step 7.9x shorter") and MEASURED.search("0.9021") and not MEASURED.search("mxnet==1.9.1")
    with open(os.path.join(ROOT, "lab", "bench_emulated", "cnn.csv")) as f:
        row = next(r for r in csv.DictReader(f) if (r["mode"], r["workers"], r["rate"]) == ("gc-none", "2", "100mbit"))
    assert "| %.0f |" % float(row["step_ms"]) in text  # (the uncompressed step time, from its data)


def test_every_file_of_docs_and_the_lab_is_named_somewhere():
    texts = []
    lab = [os.path.relpath(d, ROOT) for d, _, _ in os.walk(os.path.join(ROOT, "lab"))]
    for folder in ["", "docs", "tools", "tests", os.path.join("tools", "netbench")] + lab:
        for name in os.listdir(os.path.join(ROOT, folder)):
            if name.endswith((".md", ".py", ".rst")) or name == "Makefile":
                with open(os.path.join(ROOT, folder, name)) as f:
                    texts.append((os.path.join(folder, name), f.read()))
    unnamed = []
    for folder in ["docs"] + lab:
        for name in os.listdir(os.path.join(ROOT, folder)):
            path = os.path.join(folder, name)
            if os.path.isfile(os.path.join(ROOT, path)) and not any(name in t for p, t in texts if p != path):
                unnamed.append(path)
    assert not unnamed, unnamed


def test_studies_tell_their_configurations_apart():
    """Each configuration of the 10-seed study is read on its own runs: 5-bit pulls are not taken for 4-bit
    ones (their seeds would replace the 4-bit runs' in the table)."""
    sys.path.insert(0, ROOT)
    from tools import doc_tables
    study = doc_tables.seeds_study()
    four, five = study.configs["4bit, per-layer groups, compressed pull"], \
        study.configs["4bit, per-layer groups, compressed pull, 5 bits"]
    assert len(four) == 10 and five  # (none of the ten 4-bit runs replaced)
    assert not any(log["args"].get("pull_bits") for log in four.values())
    assert all(log["args"]["pull_bits"] == 5 for log in five.values())


def test_a_table_names_its_data_and_says_when_its_rows_ran_different_code():
    """Each generated table ends with the commit(s) and dates of the rows it read; rows of more than one
    version of the code (code hashes, or commits where rows record none) are said to be so."""
    sys.path.insert(0, ROOT)
    from tools import doc_tables, provenance
    one = {"commit": "aaa", "code": "c1", "date": "2026-12-06 10:00 UTC"}
    assert provenance.data_note({"f.json": [one, dict(one, commit="bbb")]}) == \
        "Data: f.json, 2 rows: commit aaa, 2026-12-06."  # (two commits, one code: one version)
    mixed = provenance.data_note({"f.json": [one, dict(one, code="c2", date="2026-12-07 09:00 UTC")]})
    assert "2 rows of 2 versions of the code" in mixed and "2026-12-06 to 2026-12-07" in mixed and \
        "ran different code" in mixed
    early = provenance.data_note({"f.csv": [{"commit": "aaa", "date": "2026-12-01", "recorded": "backfilled"},
                                            {"commit": "bbb", "date": "2026-12-02", "recorded": "backfilled"}]})
    assert "2 commits that first held them" in early and "may have run different code" in early
    for name in doc_tables.TABLES:
        text = doc_tables.made(name)
        note = text.splitlines()[-1]
        assert note == provenance.data_note(doc_tables.READ) and note.startswith("Data: lab/"), name
        for source, provs in doc_tables.READ.items():
            if len({p.get("code") or p.get("commit") for p in provs}) > 1:
                assert "different code" in note.split(source, 1)[1].split("; lab/")[0], (name, source)


def test_every_stored_result_row_has_provenance():
    """Every row of every result file under lab/ names the commit, date, machine and command that made it."""
    import json
    sys.path.insert(0, ROOT)
    from tools import study_runs
    missing = []
    for folder, _, names in os.walk(os.path.join(ROOT, "lab")):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".csv"):
                with open(path) as f:
                    rows = list(csv.DictReader(f))
            elif name.endswith(".jsonl"):
                rows = [run["provenance"] for run in study_runs.read(path)]
            elif name.endswith(".json"):
                with open(path) as f:
                    data = json.load(f)
                rows = [data["provenance"]] if "provenance" in data else \
                    [report.get("provenance") or {} for report in data.values()]  # (reports by name)
            else:
                continue
            missing += ["%s row %d" % (os.path.relpath(path, ROOT), i) for i, row in enumerate(rows)
                        if not all(row.get(k) for k in ("commit", "date", "machine", "command"))]
    assert not missing, missing[:20]


def test_every_study_stores_one_run_per_row_in_the_one_format():
    """Every study's runs under lab/ load with pandas as they are: one row per run, the same columns."""
    import pandas
    sys.path.insert(0, ROOT)
    from tools import study_runs
    files = [os.path.join(d, n) for d, _, names in os.walk(os.path.join(ROOT, "lab")) for n in names
             if n.endswith(".jsonl")]
    assert len(files) >= 13
    for path in files:
        frame = pandas.read_json(path, lines=True)
        with open(path) as f:
            assert len(frame) == sum(1 for line in f if line.strip()), path
        assert list(frame.columns) == list(study_runs.ROW + study_runs.PROVENANCE) + ["key", "log"], path
        assert frame["accuracy"].between(0, 1).all() and (frame["epochs"] >= 1).all(), path
        assert frame["commit"].notna().all() and frame["seed"].notna().all(), path


def test_the_module_index_is_the_modules_own_words():
    """docs/usage.md's module index is made from the modules' docstrings (python -m tools.module_index), and
    every module of the library has one."""
    sys.path.insert(0, ROOT)
    from tools import module_index
    assert module_index.main(["--check"]) == 0, "run python -m tools.module_index"
    assert all(text for _, text in module_index.modules())
