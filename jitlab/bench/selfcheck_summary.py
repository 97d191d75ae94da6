"""The selfcheck's one summary file: Markdown tables a person reads, then every figure as JSON."""

from __future__ import annotations

import json


def summary_markdown(data: dict) -> str:
    """`data`: {"seconds", "logs", "tests": [ModuleRun.as_dict()], "rows": [...], "measured": {...}}."""
    m = data["measured"]
    head = ["# jitlab cuda selfcheck", ""]
    if m.get("status") == "ok":
        head.append(f"{m['device']} ({m['sm_count']} SMs): a device copy moved {m['copy_bytes_per_s'] / 1e9:,.0f} GB/s "
                    f"(nominal peak {m['peak_bytes_per_s'] / 1e9:,.0f} GB/s). ")
    else:
        head.append(f"The device measurements did not finish: {m.get('status')}. ")
    head[-1] += f"{data['seconds']:.0f} s in all; logs in `{data['logs']}`."
    lines = head + tests_section(data["tests"]) + rows_section(data["rows"], m.get("copy_bytes_per_s"))
    lines += calls_section(m.get("cached_call_us") or {}) + loops_section(m.get("loops"))
    lines += profiles_section(m.get("host_profiles") or {})
    return "\n".join(lines + ["", "```json", json.dumps(data, indent=1, default=str), "```", ""])


def _ended(t: dict) -> str:
    f = t["finished"]
    if not f["killed"]:
        return f"exit {f['returncode']}"
    why = "stopped at the end of the tests' time" if t["out_of_time"] else "KILLED at its limit"
    return f"{why} while running `{t['hung']}`" if t["hung"] else f"{why} before its first test started"


def tests_section(tests: list[dict]) -> list[str]:
    total = {k: sum(t[k] for t in tests) for k in ("passed", "failed", "error", "skipped")}
    hung = sum(1 for t in tests if t["finished"]["killed"] and not t["out_of_time"])
    cut = sum(1 for t in tests if t["out_of_time"])
    title = (f"## tests/cuda: {total['passed']} passed, {total['failed'] + total['error']} failed, {hung} hung, "
             f"{total['skipped']} skipped")
    title += f", {cut} module(s) unfinished at the end of the tests' time" if cut else ""
    lines = ["", title, "", "| module | passed | failed | skipped | seconds | ended |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {t['module']} | {t['passed']} | {t['failed'] + t['error']} | {t['skipped']} "
              f"| {t['finished']['seconds']:.1f} | {_ended(t)} |" for t in tests]
    failed = [f"- `{node}`: {outcome}" for t in tests for node, outcome in t["outcomes"].items()
              if outcome in ("failed", "error")]
    return lines + (["", "Failed:", *failed] if failed else [])


def _ms(result: dict | None) -> str:
    if result is None:
        return "-"
    return f"{result['ms']:.3f}" if result["status"] == "ok" else result["status"]


def rows_section(rows: list[dict], copy_rate: float | None) -> list[str]:
    """Each row's milliseconds per runner, O2 over jax.jit, and O2 over the streaming bound at the
    measured copy rate (the bytes a row must read and write, each once)."""
    runners = list(dict.fromkeys(k for r in rows for k in r.get("results", {})))
    lines = ["", "## Bench rows (ms, median; inputs and results on the device; jax at float32 matmul precision)", "",
             "| program | " + " | ".join(runners) + " | O2 / jax.jit | bound ms | O2 / bound | status |",
             "|" + " --- |" * (len(runners) + 5)]
    for row in rows:
        results = row.get("results", {})
        o2, jax = results.get("jitlab O2"), results.get("jax.jit")
        ok = lambda r: r is not None and r["status"] == "ok"  # noqa: E731
        bound = row["bytes_moved"] / copy_rate * 1e3 if row.get("memory_bound") and copy_rate else None
        cells = [_ms(results.get(k)) for k in runners]
        cells.append(f"{o2['ms'] / jax['ms']:.2f}" if ok(o2) and ok(jax) else "-")
        cells.append(f"{bound:.4f}" if bound else "-")
        cells.append(f"{o2['ms'] / bound:.1f}" if bound and ok(o2) else "-")
        lines.append(f"| {row['name']} | " + " | ".join(cells) + f" | {row['status']} |")
    problems = [f"- {row['name']} / {k}: {r['status']}: {r['error']}" for row in rows
                for k, r in row.get("results", {}).items() if r.get("error")]
    return lines + (["", "Problems:", *problems] if problems else [])


def calls_section(calls: dict[str, dict[str, float]]) -> list[str]:
    if not calls:
        return []
    kinds = list(next(iter(calls.values())))
    lines = ["", "## Cached call of x + 1 on one element (µs, median of 2,000)", "",
             "| caller | " + " | ".join(kinds) + " |", "|" + " --- |" * (len(kinds) + 1)]
    return lines + [f"| {who} | " + " | ".join(f"{us[k]:.1f}" for k in kinds) + " |" for who, us in calls.items()]


def loops_section(loops: dict | None) -> list[str]:
    """Microseconds per iteration of the loops run from the host, beside numpy's per stencil step."""
    if not loops:
        return []
    runners = [k for k in loops if k.startswith("jitlab")]
    kinds = list(loops[runners[0]]) if runners else []
    wrong = "" if loops["matches"] else ": A RESULT DIFFERED FROM NUMPY"
    lines = ["", f"## Loops run from the host ({loops['points']:,} float32 values, {loops['steps']} iterations; "
             f"µs per iteration, device arrays in and out){wrong}", "",
             "| runner | " + " | ".join(kinds) + " |", "|" + " --- |" * (len(kinds) + 1)]
    lines += [f"| {who} | " + " | ".join(f"{loops[who][k]:.1f}" for k in kinds) + " |" for who in runners]
    return lines + [f"| numpy, eager | {loops['numpy heat us per step']:.1f} |" + " - |" * (len(kinds) - 1)]


def profiles_section(profiles: dict[str, list[dict]]) -> list[str]:
    """cProfile's view of each case: the functions with the most time of their own, per call."""
    lines = []
    for case, rows in profiles.items():
        lines += ["", f"## Host time of one call: {case} (cProfile, µs per call, the most first)", "",
                  "| function | calls | own µs | cumulative µs |", "| --- | --- | --- | --- |"]
        lines += [f"| `{r['function']}` | {r['calls']:g} | {r['own_us']:.1f} | {r['cumulative_us']:.1f} |"
                  for r in rows]
    return lines


def verdict(data: dict) -> int:
    """0 when every test passed (none hung), every bench row and loop gave right results and the device was
    measured."""
    tests_ok = all(t["failed"] == t["error"] == 0 and not t["finished"]["killed"]
                   and t["finished"]["returncode"] in (0, 5) for t in data["tests"])
    rows_ok = all(r["status"] == "ok" for r in data["rows"])
    loops_ok = (data["measured"].get("loops") or {}).get("matches", True)
    return 0 if tests_ok and rows_ok and loops_ok and data["measured"].get("status") == "ok" else 1
