#!/usr/bin/env python
"""How good LGC's estimates are, per setting: rank 0's reports of a real job's lgc phase.

Each setting trains the Fashion-MNIST CNN example for 2 epochs on 2 workers and 1 server (tools/launch.py;
dense 200 steps, ramp 200, train 300, then the lgc phase from step 700, density 1e-3, seed 1).  Every 100
steps of the lgc phase rank 0 logs the relative squared error |applied - values|^2 / |values|^2 of what
was applied on its behalf at the leader's indices (its estimate, exact at its innovation coordinates),
split into the steps it led and the others, and the error with the best scale per step
(mxnet_gc/kvstore/lgc_rounds.py).  Keeps every report in lab/lgc_study/estimates.json and prints
the table (with ``--markdown PAGE``, also between the page's ``<!-- lgc_estimates:begin -->`` and ``:end``).

    .venv/bin/python -m tools.lgc_estimates [--settings NAME ...] [--report] [--markdown lab/lgc_study/findings.md]
"""
import argparse
import json
import os
import re
import sys

from tools import provenance
from tools.jobfiles import write_section
from tools.study_accuracy import ROOT, train

PATH = os.path.join(ROOT, "lab", "lgc_study", "estimates.json")
JOB = ["--compression", "lgc", "--epochs", "2", "--lgc-dense-steps", "200", "--ramp-steps", "200", "--ae-steps", "300",
       "--density", "1e-3", "--seed", "1"]
SETTINGS = {  # name -> the 'lgc' options beside the defaults
    "codes 'leader' (default)": {},
    "codes 'leader', innovation_density 1e-4": {"innovation_density": 1e-4},
    "codes 'leader', error_feedback 'subtract'": {"error_feedback": "subtract"},
    "codes 'own'": {"codes": "own"},
    "codes 'own', latent_channels 8": {"codes": "own", "latent_channels": 8},
    "codes 'own', ae_replay 32": {"codes": "own", "ae_replay": 32},
    "codes 'own', encoder_channels [16, 32, 32, 16]": {"codes": "own", "encoder_channels": [16, 32, 32, 16]},
    "codes 'own', index 'union'": {"codes": "own", "index": "union"},
    "codes 'own', index 'union', density 2e-3, error_feedback 'subtract'": {
        "codes": "own", "index": "union", "density": 2e-3, "error_feedback": "subtract"},
    "codes 'leader', momentum 0.9": {"momentum": 0.9},
    "codes 'own', index 'union', density 2e-3, momentum 0.9": {"codes": "own", "index": "union", "density": 2e-3,
                                                               "momentum": 0.9},
    "codes 'own', index 'union', density 2e-3, momentum 0.9, signs": {"codes": "own", "index": "union",
                                                                      "density": 2e-3, "momentum": 0.9, "signs": True},
    "codes 'own', index 'union', density 2e-3, error_feedback 'subtract', momentum 0.9": {
        "codes": "own", "index": "union", "density": 2e-3, "error_feedback": "subtract", "momentum": 0.9},
}
REPORT = re.compile(r"lgc step (\d+): rank 0's estimates, relative squared error: mean ([\d.]+), median ([\d.]+) "
                    r"\(steps it led, (\d+): mean ([\d.na]+); steps others led: mean ([\d.na]+); with the best scale "
                    r"per step: mean ([\d.]+)\)")


def run(options):
    """Rank 0's reports and the final test accuracy of one job (SGD without momentum where the options
    have DGC's momentum correction, which replaces it)."""
    plain_sgd = ["--momentum", "0"] if options.get("momentum") else []
    log, output = train(JOB + plain_sgd + ["--lgc-options", json.dumps(options)], 2, output=True)
    reports = [dict(zip(("step", "mean", "median", "led_steps", "led_mean", "others_mean", "best_scale_mean"),
                        [int(m[1]), float(m[2]), float(m[3]), int(m[4]), float(m[5]), float(m[6]), float(m[7])]))
               for m in REPORT.finditer(output)]
    if not reports:
        sys.exit("no report of rank 0's estimates in the job's output")
    return {"options": options, "reports": reports, "final_test_accuracy": log["epochs"][-1]["test_accuracy"]}


def _cell(x):
    """A mean of the report; 'n/a' where it had no step (with index 'union' no worker leads the set)."""
    return "n/a" if x != x else "%.3f" % x


def table(saved):
    rows = ["| setting (`lgc` options) | lgc step | mean | median | steps it led: mean | others' steps: mean "
            "| best scale: mean | final test accuracy (2 epochs) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, got in saved.items():
        for r in got["reports"]:
            rows.append("| %s | %d | %.3f | %.3f | %s | %s | %.3f | %.4f |" % (
                name, r["step"], r["mean"], r["median"], _cell(r["led_mean"]), _cell(r["others_mean"]),
                r["best_scale_mean"], got["final_test_accuracy"]))
    return "\n".join(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--report", action="store_true", help="run nothing: the table of the saved reports")
    parser.add_argument("--markdown", help="a page whose lgc_estimates section gets the table")
    args = parser.parse_args()
    saved = {}
    if os.path.exists(PATH):
        with open(PATH) as f:
            saved = json.load(f)
    if not args.report:
        for name in args.settings:
            print("running: %s" % name, flush=True)
            saved[name] = dict(run(SETTINGS[name]), provenance=provenance.record())
            with open(PATH, "w") as f:
                json.dump(saved, f, indent=1)
    text = table({n: saved[n] for n in SETTINGS if n in saved})
    print(text)
    if args.markdown:
        read = {"lab/lgc_study/estimates.json": [saved[n]["provenance"] for n in SETTINGS if n in saved]}
        write_section(args.markdown, "lgc_estimates", "Command: `.venv/bin/python -m tools.lgc_estimates`\n\n%s\n\n%s"
                      % (text, provenance.data_note(read)))


if __name__ == "__main__":
    main()
