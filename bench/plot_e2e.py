#!/usr/bin/python3
"""Charts and tables for bench/run_e2e.sh results: one PNG per (mode,
workers), bars of samples/s per loader, grouped by storage case, and one
markdown table per storage case.

    bench/plot_e2e.py <outdir> <dataset> [--runs e2e[,[STORAGE:]RUN...]]

Results are laid out by dataset and storage case (see bench/results/README.md):

    <outdir>/<dataset>-<storage>/<run>.csv     bench/e2e.py run --out <...>/<run>
    <outdir>/<dataset>-builds-<case>/builds.json   bench/e2e.py builds

Reads the CSVs of the runs named by --runs (default e2e: what run_e2e.sh
writes) in every storage case of <dataset>, or only in STORAGE for
STORAGE:RUN; where two runs measured the same (storage, loader, mode,
workers) the one named first wins.  The photos tables in docs/benchmarks.md:
`bench/plot_e2e.py bench/results photos --runs e2e,slowfs-0.25:2026-11-21`.  Writes
<outdir>/<dataset>-e2e-<mode>-w<workers>.png and <outdir>/<dataset>-tables.md.
"""

import csv
import glob
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import benchlib

ORDER = ["local-warm", "local-cold", "slowfs-0.25", "slowfs-0.5"]
# The storage cases of bench/run_e2e.sh, as the second half of a results
# directory's name (a dataset name may hold '-' too).
STORAGE = r"(local-warm|local-cold|slowfs-[0-9.]+|builds-local|builds-slowfs-[0-9.]+)"


def case_dirs(out, dataset):
    """{storage case: directory} of dataset's results under out."""
    pattern = re.compile(re.escape(dataset) + "-" + STORAGE)
    found = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(out), glob.escape(dataset) + "-*"))):
        m = pattern.fullmatch(os.path.basename(path))
        if m and os.path.isdir(path):
            found[m.group(1)] = path
    return found


def read_rows(dirs, runs):
    rows, seen = [], set()
    for spec in runs:
        only, _, run = spec.rpartition(":")
        for case, d in dirs.items():
            path = os.path.join(d, run + ".csv")
            if only and case != only:
                continue
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for r in csv.DictReader(f):
                    key = (r["storage"], r["loader"], r["mode"], r["workers"])
                    if r.get("samples_per_s") and key not in seen:
                        seen.add(key)
                        rows.append(r)
    return rows


def main():
    ap = benchlib.parser(__doc__)
    ap.add_argument("outdir")
    ap.add_argument("dataset")
    ap.add_argument("--runs", default="e2e", help="comma-separated [STORAGE:]RUN (<run>.csv); the first wins")
    args = ap.parse_args()
    out, dataset = args.outdir, args.dataset
    dirs = case_dirs(out, dataset)
    rows = read_rows(dirs, args.runs.split(","))
    if not rows:
        sys.exit(f"no results for dataset {dataset!r} in {out} (looked for {dataset}-<storage>/<run>.csv, "
                 f"runs {args.runs}, in: {', '.join(dirs) or 'no such directories'})")
    storages = [s for s in ORDER if any(r["storage"] == s for r in rows)]
    storages += sorted({r["storage"] for r in rows} - set(storages))
    loaders = sorted({r["loader"] for r in rows}, key=lambda name: (not name.startswith("ufspack"), name))
    for mode in sorted({r["mode"] for r in rows}):
        for workers in sorted({r["workers"] for r in rows}, key=int):
            sel = [r for r in rows if r["mode"] == mode and r["workers"] == workers]
            if not sel:
                continue
            fig, ax = plt.subplots(figsize=(11, 5.4))
            width = 0.8 / max(1, len(loaders))
            # One distinct colour per loader (tab20), ufspack's in saturated
            # blues/oranges first, ImageFolder's hatched.
            cmap = plt.get_cmap("tab20")
            for k, loader in enumerate(loaders):
                vals = []
                for s in storages:
                    v = [float(r["samples_per_s"]) for r in sel if r["loader"] == loader and r["storage"] == s]
                    vals.append(v[0] if v else 0.0)
                xs = [i + (k - (len(loaders) - 1) / 2) * width for i in range(len(storages))]
                ax.bar(xs, vals, width, label=loader, color=cmap(k % 20),
                       hatch="//" if loader.startswith("imagefolder") else None,
                       edgecolor="black" if loader.startswith("ufspack") else None, linewidth=0.6)
            ax.set_xticks(range(len(storages)))
            ax.set_xticklabels(storages)
            ax.set_yscale("log")
            ax.set_ylabel("samples/s (log scale)")
            what = "raw bytes" if mode == "raw" else "read + decode + ToTensor"
            ax.set_title(f"{what}, " + ("single process" if workers == "0" else f"DataLoader num_workers={workers}"))
            ax.legend(fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.07))
            ax.grid(axis="y", alpha=0.3)
            fig.tight_layout()
            path = os.path.join(out, f"{dataset}-e2e-{mode}-w{workers}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            print(path)
    write_tables(out, dataset, dirs, rows, storages, loaders)


def ratio_cell(v, base, fmt, what=""):
    """'v (v/base x<what>)', or just 'v' without a base, or '' without v."""
    if v is None:
        return ""
    if base:
        return f"{v:{fmt}} ({v / base:.2f}x{what})"
    return f"{v:{fmt}}"


def write_tables(out, dataset, dirs, rows, storages, loaders):
    """One markdown table per storage case: loaders x (mode, workers), with
    each loader's ratio to ImageFolder in the same column."""
    cols = sorted({(r["mode"], r["workers"]) for r in rows}, key=lambda c: (c[0] != "raw", int(c[1])))
    lines = []
    for s in storages:
        sel = {(r["loader"], r["mode"], r["workers"]): float(r["samples_per_s"]) for r in rows if r["storage"] == s}
        lines.append(f"### {s}\n")
        head = ["loader"] + [f"{m} w={w}" for m, w in cols]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for loader in loaders:
            cells = [loader]
            for m, w in cols:
                base = sel.get(("imagefolder", m, w)) if loader != "imagefolder" else None
                cells.append(ratio_cell(sel.get((loader, m, w)), base, ",.0f"))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    builds = []
    for case, d in dirs.items():
        path = os.path.join(d, "builds.json")
        if case.startswith("builds-") and os.path.exists(path):
            with open(path) as f:
                builds += json.load(f)
    if builds:
        lines.append("### builds (median seconds, outputs on local disk)\n")
        cases = list(dict.fromkeys(b["storage"] for b in builds))
        lines.append("| tool | " + " | ".join(f"from {c}" for c in cases) + " |")
        lines.append("|" + "---|" * (len(cases) + 1))
        for tool in dict.fromkeys(b["tool"] for b in builds):
            cells = [tool]
            for c in cases:
                v = [b["seconds"] for b in builds if b["tool"] == tool and b["storage"] == c]
                base = [b["seconds"] for b in builds if b["tool"] == "ufspack build" and b["storage"] == c]
                cells.append(ratio_cell(v[0] if v else None, base[0] if base and tool != "ufspack build" else None,
                                        ".2f", " ufspack's time"))
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    path = os.path.join(out, f"{dataset}-tables.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(path)


if __name__ == "__main__":
    main()
