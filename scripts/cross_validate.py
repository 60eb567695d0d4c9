"""Which trained policy transfers best: several policies (e.g. SHAC and PPO trained in our simulator, PPO trained in
Isaac Lab) each validated in the same backends on the same scenarios, side by side.

    .venv/bin/python scripts/cross_validate.py --task DiffLoco-Velocity-Flat-AnymalD \\
        --policy SHAC=<run>/exported/policy.pt PPO=<run>/model_590.pt PPO-Isaac=<isaac run>/exported/policy.pt \\
        --trained_in SHAC=hard PPO=hard PPO-Isaac=isaaclab-physx \\
        --backend hard mujoco isaaclab-physx isaaclab-newton \\
        --scenarios config/validation/anymal_d_random100.yaml --only random_commands --out /tmp/cross

Each policy is validated by ``scripts/validate.py`` (one process per policy, ``--jobs`` of them at a time, its report
in ``<out>/<label>/``; a report already there is reused with ``--reuse``): an exported TorchScript/ONNX file goes to
``--policy``, an rsl_rl checkpoint (``model_*.pt``, ``average_*.pt``, told apart by content) to ``--checkpoint``.
The table (``<out>/cross_validation.md`` and ``.json``) lists per scenario, policy and backend the planar and yaw
tracking errors and the fall rate, and per policy the transfer gap: the largest difference of a validator's planar
error from the one in the simulator the policy was trained in (``--trained_in``; without it the spread over the
backends). The figure (``<out>/cross_validation.png``) shows the three measures as grouped bars, a row per scenario.

A policy FAILing its gates is expected here (validate.py exits 1 then): the script reads the measures either way and
stops, with a one-line error, only when a validation did not produce its report.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

MEASURES = (("lin_vel_error", "planar error (m/s)"), ("ang_vel_error", "yaw-rate error (rad/s)"),
            ("fall_rate", "fall rate"))
SCRIPTS = os.path.dirname(os.path.abspath(__file__))


def parse_pairs(items: list[str] | None, what: str) -> dict[str, str]:
    """``["A=x", "B=y"]`` -> ``{"A": "x", "B": "y"}`` (labels unique, values non-empty)."""
    pairs: dict[str, str] = {}
    for item in items or []:
        label, sep, value = item.partition("=")
        if not sep or not label or not value:
            raise SystemExit(f"error: {what} '{item}' is not LABEL=VALUE")
        if label in pairs:
            raise SystemExit(f"error: {what} label '{label}' given twice")
        pairs[label] = value
    return pairs


def is_exported_policy(path: str) -> bool:
    """An exported policy (ONNX, or a TorchScript archive: its zip holds the scripted ``code/``) rather than an rsl_rl
    checkpoint (a ``torch.save`` archive of state dicts, whatever its name: ``model_*.pt``, the main job's
    ``average_*.pt``)."""
    import zipfile

    if path.endswith(".onnx"):
        return True
    if os.path.isdir(path) or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any("/code/" in name for name in archive.namelist())


def validate_command(args, path: str, out: str) -> list[str]:
    """The validate.py command line for one policy (an exported file, or a checkpoint or run folder)."""
    source = "--policy" if is_exported_policy(path) else "--checkpoint"
    cmd = [sys.executable, os.path.join(SCRIPTS, "validate.py"), "--task", args.task, source, path,
           "--backend", *args.backend, "--out", out, "--no_reference"]
    if args.scenarios:
        cmd += ["--scenarios", args.scenarios]
    if args.only:
        cmd += ["--only", *args.only]
    return cmd


def run_validations(args, policies: dict[str, str]) -> None:
    """validate.py for every policy without a report to reuse, up to ``args.jobs`` processes at a time (with more
    than one, each process's output goes to ``<out>/<label>/validate.log``). A validation that exits with neither
    PASS (0) nor FAIL (1), or writes no report, stops the script."""
    pending = []
    for label, path in policies.items():
        summary_path = os.path.join(args.out, label, "summary.json")
        if args.reuse and os.path.isfile(summary_path):
            continue
        if os.path.isfile(summary_path):
            os.remove(summary_path)  # a stale report must not stand in for a validation that fails to write one
        pending.append((label, path))
    running: list[tuple[str, subprocess.Popen, object]] = []
    failed = []

    def wait_one() -> None:
        label, proc, log = running.pop(0)
        rc = proc.wait()
        if log is not None:
            log.close()
        print(f"[cross_validate] {label}: validation exit {rc}", flush=True)
        if rc not in (0, 1) or not os.path.isfile(os.path.join(args.out, label, "summary.json")):
            failed.append((label, rc))

    for label, path in pending:
        while len(running) >= args.jobs:
            wait_one()
        out = os.path.join(args.out, label)
        os.makedirs(out, exist_ok=True)
        print(f"[cross_validate] {label}: {path} in {', '.join(args.backend)}", flush=True)
        log = open(os.path.join(out, "validate.log"), "w") if args.jobs > 1 else None
        running.append((label, subprocess.Popen(validate_command(args, path, out), stdout=log,
                                                stderr=subprocess.STDOUT if log else None), log))
    while running:
        wait_one()
    if failed:
        where = " (its output: <out>/<label>/validate.log)" if args.jobs > 1 else " (its output above)"
        names = ", ".join(f"{label!r} (exit {rc})" for label, rc in failed)
        raise SystemExit(f"error: the validation of {names} failed{where}")


def backend_measures(summary: dict, backend: str) -> dict[str, dict[str, float]]:
    """``{scenario: {measure: value}}`` of one backend's report."""
    report = summary["backends"].get(backend)
    if report is None:
        raise SystemExit(f"error: the report of {summary.get('policy')} has no backend '{backend}' "
                         f"(skipped: {summary.get('skipped', {})})")
    return {name: {key: float(sc["metrics"][key]) for key, _ in MEASURES} for name, sc in report["scenarios"].items()}


def transfer_gap(row: dict[str, dict[str, float]], trained_in: str | None) -> float:
    """The largest planar-error difference of a validator from the training simulator's (or the spread)."""
    values = {b: m["lin_vel_error"] for b, m in row.items()}
    if trained_in in values:
        return max(abs(v - values[trained_in]) for v in values.values())
    return max(values.values()) - min(values.values())


def table_markdown(table: dict, backends: list[str], trained_in: dict[str, str]) -> str:
    """One table per scenario: a row per policy, a column per backend, and the policy's transfer gap."""
    out = []
    scenarios = next(iter(table.values())).keys()
    for scenario in scenarios:
        out += [f"### {scenario}", "", "| policy (trained in) | " + " | ".join(backends) + " | transfer gap (m/s) |",
                "| --- | " + " | ".join("---" for _ in backends) + " | ---: |"]
        for label, rows in table.items():
            row = rows[scenario]
            cells = [f"{row[b]['lin_vel_error']:.3f} / {row[b]['ang_vel_error']:.3f} / "
                     f"{100 * row[b]['fall_rate']:.0f} %" for b in backends]
            out.append(f"| {label} ({trained_in.get(label, '?')}) | " + " | ".join(cells)
                       + f" | {transfer_gap(row, trained_in.get(label)):.3f} |")
        out.append("")
    out.append("Cells: planar error (m/s) / yaw-rate error (rad/s) / falls (% of episodes).")
    return "\n".join(out) + "\n"


def plot(table: dict, backends: list[str], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    scenarios = list(next(iter(table.values())).keys())
    fig, axes = plt.subplots(len(scenarios), len(MEASURES), figsize=(4.2 * len(MEASURES), 3.6 * len(scenarios)),
                             squeeze=False)
    width = 0.8 / max(1, len(table))
    x = np.arange(len(backends))
    for axes_row, scenario in zip(axes, scenarios):
        for ax, (key, title) in zip(axes_row, MEASURES):
            for i, (label, rows) in enumerate(table.items()):
                ax.bar(x + (i - (len(table) - 1) / 2) * width, [rows[scenario][b][key] for b in backends], width,
                       label=label)
            ax.set_xticks(x, backends, rotation=20, fontsize=8)
            ax.set_title(f"{scenario}: {title}", fontsize=10)
            ax.grid(axis="y", alpha=0.3)
        axes_row[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="DiffLoco-Velocity-Flat-AnymalD")
    parser.add_argument("--policy", nargs="+", required=True,
                        help="LABEL=PATH (exported .pt/.onnx file or rsl_rl checkpoint)")
    parser.add_argument("--trained_in", nargs="*", default=None, help="LABEL=BACKEND the policy was trained in")
    parser.add_argument("--backend", nargs="+", default=["hard", "mujoco"])
    parser.add_argument("--scenarios", default=None)
    parser.add_argument("--only", nargs="+", default=None)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reuse", action="store_true", help="reuse a policy's report already in <out>/<label>")
    parser.add_argument("--jobs", type=int, default=1,
                        help="policies validated at once, one process each (2 on a 2-core machine: Newton's "
                             "backend runs on one core)")
    args = parser.parse_args(argv)
    policies = parse_pairs(args.policy, "--policy")
    trained_in = parse_pairs(args.trained_in, "--trained_in")
    unknown = sorted(set(trained_in) - set(policies))
    if unknown:
        raise SystemExit(f"error: --trained_in names policies not given: {unknown}")
    for label, path in policies.items():
        if not os.path.exists(path):
            raise SystemExit(f"error: policy '{label}': no file {path}")
    if args.jobs < 1:
        raise SystemExit("error: --jobs must be at least 1")
    os.makedirs(args.out, exist_ok=True)
    run_validations(args, policies)
    table: dict[str, dict[str, dict[str, float]]] = {}
    for label in policies:
        with open(os.path.join(args.out, label, "summary.json")) as f:
            summary = json.load(f)
        per_backend = {b: backend_measures(summary, b) for b in args.backend}
        scenarios = next(iter(per_backend.values())).keys()
        table[label] = {sc: {b: per_backend[b][sc] for b in args.backend} for sc in scenarios}
    markdown = table_markdown(table, args.backend, trained_in)
    with open(os.path.join(args.out, "cross_validation.md"), "w") as f:
        f.write(markdown)
    result = {"table": table, "trained_in": trained_in,
              "transfer_gap": {label: {sc: transfer_gap(row, trained_in.get(label)) for sc, row in rows.items()}
                               for label, rows in table.items()}}
    with open(os.path.join(args.out, "cross_validation.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(table, args.backend, os.path.join(args.out, "cross_validation.png"))
    print(markdown, flush=True)
    print(f"[cross_validate] report: {os.path.join(args.out, 'cross_validation.md')}", flush=True)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
