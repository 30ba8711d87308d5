"""The benchmark's outputs: the table of rows, the target ratios (thresholds in targets.json), the plot,
and the section of a markdown file between the benchmark's markers."""
import json
import os

from tools import plots

from .modes import HOROVOD_PREFIX, MODES, RATES_BITS

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets.json")) as _f:
    TARGETS = json.load(_f)
FOUR_BIT_MODES = ("4bit", "4bit-groups", "4bit-cpull")


def fmt(value, digits=0):
    return "–" if value is None else "%.*f" % (digits, value)


def busy(row):
    """The machine's CPU busy fraction, with the kernel's part of it where it was measured."""
    if row.get("machine_cpu_busy") is None:
        return "–"
    kernel = row.get("machine_cpu_kernel")
    return "%.0f%%" % (100 * row["machine_cpu_busy"]) + ("" if kernel is None else " (%.0f%% kernel)" % (100 * kernel))


def dilation(row):
    """The row's dilation factor as the tables show it ('–': hosts shared every core)."""
    return "%g" % row["dilation"] if row.get("emulated") else "–"


def table(rows):
    lines = ["| model | W | S | rate | D | mode | step ms median | min–max | compute ms | comm ms | busiest link in / out "
             "MB/step | wire bound ms | codec ms (est.) | worker CPU ms/step | servers' CPU ms/step | machine CPU busy |",
             "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s–%s | %s | %s | %.2f / %.2f | %s | %s | %s | %s | %s |" % (
            r["model"], r["workers"], r["servers"] or "–", r["rate"], dilation(r), r["mode"], fmt(r["step_ms"]),
            fmt(r["step_ms_min"]),
            fmt(r["step_ms_max"]), fmt(r["compute_ms"]), fmt(r["comm_ms"]), r["server_in_mb_per_step"],
            r["server_out_mb_per_step"], fmt(r["wire_bound_ms"]) if r["rate"] != "unlimited" else "–",
            fmt(r["codec_ms"], 1), fmt(r["worker_cpu_ms_per_step"]), fmt(r.get("server_cpu_ms_per_step")),
            busy(r)))
    return "\n".join(lines)


def _check(name, ratio):
    """(the target's text for the table, met?) of target ``name`` in targets.json."""
    target = TARGETS[name]
    if "at_least" in target:
        return ">= %g" % target["at_least"], ratio >= target["at_least"]
    if "at_most" in target:
        return "<= %g" % target["at_most"], ratio <= target["at_most"]
    return "> %g" % target["above"], ratio > target["above"]


def _first_servers(rows):
    """The rows of the first number of servers of each model and number of workers in ``rows`` (and the
    Horovod rows, which have none), at the first dilation asked for."""
    first = {}
    for r in rows:
        if r["servers"]:
            first.setdefault((r["model"], r["workers"]), r["servers"])
    asked = rows[0].get("dilation_asked") if rows else None
    return [r for r in rows if r["servers"] in (first.get((r["model"], r["workers"])), 0)
            and r.get("dilation_asked") == asked]


AGREEMENT = 0.10  # rows at D and 2D: step times within 10% of each other after division
STABILITY = 0.05  # each run's step time within 5% of the runs' median
CPU_BOUND = 0.8  # a row whose worker CPU time per step is at least 80% of its step, at every D


def _spread(values):
    """The larger over the smaller of ``values``; None for fewer than two."""
    return max(values) / min(values) if len(values) > 1 else None


def agreement(rows):
    """The emulation's validation, as markdown: each job at every dilation asked for (its step time and
    worker CPU time per step, the larger over the smaller), and each job's runs (at the smallest D: each
    run's median step, ``run_step_ms`` of a pooled row) against their median.  A CPU-bound row is judged by its step per worker CPU millisecond: its CPU time per
    step changes from run to run with the machine (other virtual machines on the same host), at any D,
    and its step with it; what the emulation adds to the CPU work is the step beyond it."""
    key = lambda r: (r["model"], r["workers"], r["servers"], r["rate"], r["mode"])  # noqa: E731
    jobs = sorted({key(r) for r in rows}, key=lambda k: [str(v) for v in k])
    lines = ["| model | W | S | rate | mode | D | step ms | worker CPU ms/step | step: larger / smaller | step per CPU "
             "ms: larger / smaller | within %d%% | each run's step ms (smallest D) | farthest run from their median | "
             "within %d%% |" % (100 * AGREEMENT, 100 * STABILITY), "|---|---:|---:|---|---|---|---|---|---:|---:|---|---|---:|---|"]
    for job in jobs:
        same = sorted((r for r in rows if key(r) == job), key=lambda r: r["dilation"])
        step = _spread([r["step_ms"] for r in same])
        per_cpu = _spread([r["step_ms"] / r["worker_cpu_ms_per_step"] for r in same])
        cpu_bound = all(r["worker_cpu_ms_per_step"] >= CPU_BOUND * r["step_ms"] for r in same)
        judged = per_cpu if cpu_bound else step
        per_run = same[0]["run_step_ms"]  # (the runs at the smallest D)
        middle = sorted(per_run)[len(per_run) // 2]
        spread = max(abs(x / middle - 1) for x in per_run)
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f%% | %s |" % (
            job[0], job[1], job[2] or "–", job[3], job[4], " / ".join(dilation(r) for r in same),
            " / ".join(fmt(r["step_ms"], 1) for r in same), " / ".join(fmt(r["worker_cpu_ms_per_step"], 1) for r in same),
            fmt(step, 2), fmt(per_cpu, 2), "–" if judged is None else "%s (%s)" % (
                "yes" if judged <= 1 + AGREEMENT else "**no**", "CPU-bound: step per CPU ms" if cpu_bound else "step"),
            " ".join(fmt(x, 1) for x in per_run), 100 * spread, "yes" if spread <= STABILITY else "**no**"))
    return "\n".join(lines)


def targets(rows):
    """The target ratios, each from two rows of this run (with the first number of servers): (text, ratio,
    target, met)."""
    step = {(r["model"], r["workers"], r["rate"], r["mode"]): r["step_ms"] for r in _first_servers(rows)}
    server_cpu = {(r["model"], r["workers"], r["rate"], r["mode"]): r.get("server_cpu_ms_per_step")
                  for r in _first_servers(rows)}
    row_of = {(r["model"], r["workers"], r["rate"], r["mode"]): r for r in _first_servers(rows)}
    found = []

    def add(name, text, ratio):
        goal, met = _check(name, ratio)
        found.append((text, ratio, goal, met))

    for (model, workers, rate, mode), ms in sorted(step.items()):
        base = step.get((model, workers, rate, "none"))
        if mode in FOUR_BIT_MODES and base and model == "mlp10m" and rate == "100mbit":
            add("compressed_speedup_100mbit", "%s, %d workers, 100 Mbit/s: uncompressed / %s step time"
                % (model, workers, mode), base / ms)
        if mode in FOUR_BIT_MODES and base and rate == "unlimited":
            add("compressed_overhead_unlimited", "%s, %d workers, unlimited: %s / uncompressed step time"
                % (model, workers, mode), ms / base)
        prefix = HOROVOD_PREFIX if mode.startswith(HOROVOD_PREFIX) else ""
        dense = step.get((model, workers, rate, HOROVOD_PREFIX + "gc-none")) if prefix else base
        if mode == prefix + "topk-pipelined" and dense and rate == "1gbit" and model != "fmnist-cnn":
            add("sparse_speedup_1gbit", "%s, %d workers, 1 Gbit/s: uncompressed / merged+pipelined top-k step time%s"
                % (model, workers, " (Horovod)" if prefix else ""), dense / ms)
        for other in (prefix + "topk-layerwise", prefix + "topk-one"):
            if mode == prefix + "topk-pipelined" and (model, workers, rate, other) in step:
                add("merged_beats_baselines", "%s, %d workers, %s: %s / merged+pipelined step time"
                    % (model, workers, rate, other), step[model, workers, rate, other] / ms)
        dgc = step.get((model, workers, rate, prefix + "topk-1e-3"))
        if mode == prefix + "lgc" and dgc and rate == "100mbit":
            add("lgc_beats_dgc_100mbit", "%s, %d workers, 100 Mbit/s: top-k 1e-3 / %s step time"
                % (model, workers, "LGC-RAR (Horovod)" if prefix else "LGC-PS"), dgc / ms)
        if mode == prefix + "lgc" and dgc and rate == "10mbit" and model == "cnn-fc" and workers == 4:
            add("lgc_beats_dgc_10mbit", "%s, %d workers, 10 Mbit/s: top-k 1e-3 / %s step time"
                % (model, workers, "LGC-RAR (Horovod)" if prefix else "LGC-PS"), dgc / ms)
        if mode == HOROVOD_PREFIX + "4bit-cpull":  # (4 bits a value: n / 2 bytes of payload)
            r = row_of[model, workers, rate, mode]
            mb, n = r["worker0_sent_mb_per_step"], r["parameters"]
            add("ring_allreduce_bytes", "%s, %d workers, %s: bytes sent per worker and step / 2 (W-1)/W n/2, 4bit by "
                "the compressed allreduce" % (model, workers, rate), 1e6 * mb / (2 * (workers - 1) / workers * n / 2))
            gathered = step.get((model, workers, rate, HOROVOD_PREFIX + "4bit"))
            if dense and gathered and model == "mlp10m" and workers == 8:  # (the targets are set at 100 Mbit/s)
                add("ring_allreduce_vs_dense", "%s, %d workers, %s: float32 allreduce / 4bit by the compressed "
                    "allreduce step time" % (model, workers, rate), dense / ms)
                add("ring_allreduce_vs_allgather", "%s, %d workers, %s: 4bit by allgather / by the compressed "
                    "allreduce step time" % (model, workers, rate), gathered / ms)
        if mode in ("4bit-cpull", HOROVOD_PREFIX + "4bit-cpull") and rate == "100mbit":
            r = row_of[model, workers, rate, mode]
            add("cpull_near_bound", "%s, %d workers, %s: %s step time / max(wire bound, compute)"
                % (model, workers, rate, mode),
                ms / max(r["wire_bound_ms"], r["compute_ms"]))
        if mode == "classic-4bit-cpull" and model == "fmnist-cnn" and workers == 2 and rate == "100mbit":
            if base:
                add("classic_cpull_vs_dense", "%s, %d workers, %s: MXNet's dist_sync / 4bit both ways step time, the "
                    "optimizer on the servers" % (model, workers, rate), base / ms)
            if (model, workers, rate, "classic-2bit") in step:
                add("classic_cpull_vs_2bit", "%s, %d workers, %s: MXNet's 2bit / 4bit both ways step time, the "
                    "optimizer on the servers" % (model, workers, rate), step[model, workers, rate, "classic-2bit"] / ms)
        if mode == "classic-4bit-cpull" and (model, workers, rate, "classic-4bit") in row_of:
            add("classic_cpull_pull_bytes", "%s, %d workers, %s: bytes a worker receives per step, float32 weight "
                "pulls / 4bit both ways" % (model, workers, rate),
                row_of[model, workers, rate, "classic-4bit"]["worker0_received_mb_per_step"]
                / row_of[model, workers, rate, mode]["worker0_received_mb_per_step"])
        if mode == "gc-none" and base:
            add("uncompressed_vs_mxnet", "%s, %d workers, %s: mxnet_gc's uncompressed / MXNet's dist_sync step time"
                % (model, workers, rate), ms / base)
        cpu, mxnet_cpu = server_cpu[model, workers, rate, mode], server_cpu.get((model, workers, rate, "none"))
        if mode == "gc-none" and cpu is not None and mxnet_cpu:
            add("server_cpu_vs_mxnet", "%s, %d workers, %s: mxnet_gc's / MXNet's server CPU per step, uncompressed"
                % (model, workers, rate), cpu / mxnet_cpu)
        mxnet_2bit = step.get((model, workers, rate, "mxnet-2bit"))
        if mode == "4bit-groups" and mxnet_2bit and rate in ("100mbit", "1gbit"):
            add("four_bit_vs_mxnet_2bit", "%s, %d workers, %s: 4bit with groups / MXNet's 2bit step time"
                % (model, workers, rate), ms / mxnet_2bit)
        if mode == "gc_2bit" and mxnet_2bit:
            add("our_2bit_vs_mxnet", "%s, %d workers, %s: our 2bit / MXNet's 2bit step time" % (model, workers, rate),
                ms / mxnet_2bit)
    return found


def plot(rows, path):
    rows = _first_servers(rows)
    panels = sorted({(r["model"], r["workers"]) for r in rows})
    fig, axes = plots.grid(len(panels))
    for ax, (model, workers) in zip(axes, panels):
        mine = [r for r in rows if (r["model"], r["workers"]) == (model, workers)]
        rates = [rate for rate in RATES_BITS if any(r["rate"] == rate for r in mine)]
        modes = [m for m in MODES if any(r["mode"] == m for r in mine)]
        width = 0.8 / len(modes)
        for j, mode in enumerate(modes):
            for i, rate in enumerate(rates):
                row = next((r for r in mine if (r["rate"], r["mode"]) == (rate, mode)), None)
                if row is None:
                    continue
                x = i + (j - (len(modes) - 1) / 2) * width
                ax.bar(x, row["step_ms"], width, color="C%d" % j, label=mode if i == 0 else None)
                ax.annotate("%.0f" % row["step_ms"], (x, row["step_ms"]), ha="center", va="bottom", fontsize=6,
                            rotation=90)  # (the log axis hides ratios: each bar's milliseconds)
                ax.plot([x - width / 2, x + width / 2], [row["compute_ms"]] * 2, color="white", lw=1)
                if row["wire_bound_ms"]:
                    ax.plot([x - width / 2, x + width / 2], [row["wire_bound_ms"]] * 2, color="black", lw=1.5)
        ax.set_xticks(range(len(rates)), rates)
        ax.set_yscale("log")
        ax.set_ylabel("step time, ms (log)")
        ax.set_title("%s, %d workers" % (model, workers))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(len(labels), 6), fontsize=8)
    fig.suptitle("Step time per compression (bars), wire bound (black), compute (white); tools/bench_network.py",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")


def _line(row, halves):
    """A row's line in the scaling plot: (mode, servers), servers 'half' for W/2 of them (bench --servers
    half) in the modes of ``halves`` (those with such a row of more than one server; their 2-worker row,
    one server, is on the same line)."""
    if row["mode"] in halves and row["servers"] == max(1, row["workers"] // 2):
        return row["mode"], "half"
    return row["mode"], row["servers"]


FAMILIES = ["parameter server", "optimizer on the servers", "Horovod"]


def _family(mode):
    """The scaling plot's panel of a mode (at most 8 lines a panel)."""
    return "Horovod" if MODES[mode].horovod else FAMILIES[1] if MODES[mode].classic else FAMILIES[0]


def plot_scaling(rows, path):
    """Step time against workers, one panel per model, rate and family of modes (parameter server, the
    optimizer on the servers, Horovod), one line per mode and number of servers, with each job's wire
    bound dotted."""
    panels = sorted({(r["model"], r["rate"], _family(r["mode"])) for r in rows},
                    key=lambda p: (p[0], list(RATES_BITS).index(p[1]), FAMILIES.index(p[2])))
    fig, axes = plots.grid(len(panels))
    for ax, (model, rate, family) in zip(axes, panels):
        mine = [r for r in rows if (r["model"], r["rate"], _family(r["mode"])) == (model, rate, family)]
        halves = {r["mode"] for r in mine if r["servers"] > 1 and r["servers"] == r["workers"] // 2}
        lines = sorted({_line(r, halves) for r in mine}, key=lambda l: (list(MODES).index(l[0]), str(l[1])))
        for j, (mode, servers) in enumerate(lines):
            line = sorted((r for r in mine if _line(r, halves) == (mode, servers)), key=lambda r: r["workers"])
            workers = [r["workers"] for r in line]
            label = "%s, %s server%s" % (mode, "W/2" if servers == "half" else servers, "s" if servers != 1 else "") \
                if servers else mode
            ax.plot(workers, [r["step_ms"] for r in line], "o-", color="C%d" % j, label=label)
            if rate != "unlimited":
                ax.plot(workers, [r["wire_bound_ms"] for r in line], ":", color="C%d" % j)
        ax.set_xticks(sorted({r["workers"] for r in mine}))
        ax.set_yscale("log")
        ax.set_xlabel("workers")
        ax.set_ylabel("step time, ms (log)")
        ax.set_title("%s, %s: %s" % (model, rate, family))
        ax.legend(fontsize=7)
    fig.suptitle("Step time (solid) and the busiest link's wire bound (dotted); tools/bench_network.py",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
