"""The summary at the end of tools/demo.sh: a few lines to paste, from the files the demo left in
its output folder (train.py's JSON results, the shim's statistics, the copy runs' JSON lines, the
report). A part that did not run or failed says so instead of a number."""
import argparse
import datetime
import json
import os
import re


def load_json(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None


def json_lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def stats_decisions(path):
    """[(name, calls, bytes)] from the 'placement and residency decisions' rows of a stats table."""
    rows, on = [], False
    try:
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line == "  placement and residency decisions":
                    on = True
                    continue
                m = re.match(r"  ([a-z_]+) +(\d+) +(.*)$", line) if on else None
                if not m:
                    if on:
                        break
                    continue
                rows.append((m.group(1), int(m.group(2)), m.group(3).strip()))
    except OSError:
        pass
    return rows


def report_section(path, title):
    """The lines of one section of the report's text, title first, up to the next blank line."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if out and not line:
                break
            if out or line.startswith(title):
                out.append(line)
    return out


def run_line(label, r):
    if r is None:
        return f"  {label:<44} did not run"
    if "error" in r:
        message = f": {r['message']}" if r.get("message") else ""
        return f"  {label:<44} {r['error']}{message}"
    stopped = f", stopped {r['stopped']}" if "stopped" in r else ""
    return (f"  {label:<44} {r['median_ms']:8.1f} ms/step (median of {r['measured_steps']}{stopped}), "
            f"loss {r['loss_first']} -> {r['loss_last']}")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True)
    p.add_argument("--policy", required=True)
    p.add_argument("--budget-mib", type=int, required=True)
    p.add_argument("--commit", default="unknown")
    p.add_argument("--build-seconds", type=int, default=0)
    p.add_argument("--total-seconds", type=int, default=0)
    a = p.parse_args()
    out = a.out
    free = load_json(os.path.join(out, "free.json"))
    default = load_json(os.path.join(out, "default.json"))
    off = load_json(os.path.join(out, "off.json"))
    traced = load_json(os.path.join(out, "traced.json"))

    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    gpu = f"{free['device']} ({free['device_gib']} GiB)" if free and "device" in free else "GPU unknown"
    lines = [f"== gpumemshim demo, {when}, {gpu}, commit {a.commit}; "
             f"{a.total_seconds} s in all, {a.build_seconds} s of it building"]
    if free:
        lines.append(f"training loop (tools/demo/train.py): GPT-style, width {free['width']}, {free['layers']} layers, "
                     f"batch {free['batch']}, sequence {free['seq']}, {free['dtype']}; peak {free.get('peak_gib', '?')} GiB; "
                     f"budget {a.budget_mib} MiB (peak / 1.5)")
    lines.append(run_line("no shim, no budget", free))
    lines.append(run_line(f"default policy ({a.policy}), budget", default))
    if free and default and "error" not in free and "error" not in default:
        lines[-1] += f"; {default['median_ms'] / free['median_ms']:.2f}x the step with no budget"
    lines.append(run_line("--policy off, budget", off))
    rows = stats_decisions(os.path.join(out, "default.err"))
    if rows:
        lines.append("  the shim's decisions (default policy): " + ", ".join(f"{n} {c} ({b})" for n, c, b in rows))

    copies = {k: json_lines(os.path.join(out, f"copies-{k}.out")) for k in ("driver", "shim", "pinned")}
    lines.append("copies from pageable memory, a 40 MB tensor x100 (tests/gpu/copies/s2_torch.py), GB/s:")
    for what in (".to('cuda', non_blocking=True)", ".cpu()"):
        got = {k: next((r for r in v if r.get("what") == what), None) for k, v in copies.items()}
        cells = []
        for k in ("driver", "shim", "pinned"):
            cells.append(f"{k} {got[k]['gbps']:.1f}" if got[k] else f"{k} -")
        if got["driver"] and got["shim"]:
            cells[1] += f" ({got['shim']['gbps'] / got['driver']['gbps']:.1f}x the driver)"
            cells.append("same data" if got["driver"]["checksum"] == got["shim"]["checksum"] else "DATA DIFFERS")
        lines.append(f"  {what:<32} " + ", ".join(cells))
    copy_rows = [r for r in stats_decisions(os.path.join(out, "copies-shim.err")) if r[0] != "kept_on_device"]
    if copy_rows:
        lines.append("  the shim's decisions (copies): " + ", ".join(f"{n} {c}" for n, c, _ in copy_rows))

    report = os.path.join(out, "report.txt")
    if os.path.exists(report):
        lines += ["  " + line for line in report_section(report, "Repeating step")]
        step = f", {traced['median_ms']} ms/step" if traced and "median_ms" in traced else ""
        lines.append(f"report of a traced run of the default policy at the budget ({traced['steps_run'] if traced else '?'} "
                     f"steps{step}): {report}, {os.path.join(out, 'report.html')}, "
                     f"timeline {os.path.join(out, 'timeline.json')} (ui.perfetto.dev)")
    else:
        lines.append("report: not made")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
