"""Reports on crafted run directories with known counts: per-suite rates and Wilson intervals, infrastructure
failures apart, the paired comparison's difference, discordant pairs and exact McNemar p, and the HTML report
rendered by headless Chromium.

The interval functions themselves are checked against published values in test_stats.py; here the counts that
reach them, the JSON shapes and the output formats are what is asserted.
"""

import csv
import json
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from pyrua_ros.reports import compare as C
from pyrua_ros.reports import metrics as M
from pyrua_ros.reports import report as R
from pyrua_ros.reports import summarize as S
from pyrua_ros.testing.browser import open_offline

GOLDEN = Path(__file__).parent / "data" / "result_v2.json"


def write_run(root: Path, suite: str, task: int, seed: int, *, success: bool, status: str = "completed",
              system: str = "pyrualean", arm: str | None = "cells", **extra) -> Path:
    """A run directory at ``root/<suite>/<task>/<seed>`` holding the golden result.json with these values."""
    data = json.loads(GOLDEN.read_text())
    data.update(system=system, arm=arm, suite=suite, task=task, seed=seed, environment_success=success,
                status=status, **extra)
    folder = root / suite / str(task) / str(seed)
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def crafted(tmp_path):
    """libero_goal: 7 successes, 2 failures, 1 boot_error; libero_spatial: 1 success, 1 failure and one
    planner_error whose episode had already succeeded when the model server died."""
    root = tmp_path / "eval"
    for task in range(10):
        if task < 7:
            write_run(root, "libero_goal", task, 0, success=True)
        elif task < 9:
            write_run(root, "libero_goal", task, 0, success=False, status="call_budget")
        else:
            write_run(root, "libero_goal", task, 0, success=False, status="boot_error")
    write_run(root, "libero_spatial", 0, 0, success=True)
    write_run(root, "libero_spatial", 1, 0, success=False, status="timeout")
    write_run(root, "libero_spatial", 2, 0, success=True, status="planner_error")
    return root


def test_suite_report_counts_rates_and_wilson_intervals(crafted):
    report = R.suite_report(M.load_metrics([crafted]))
    goal, spatial, overall = report["suites"]["libero_goal"], report["suites"]["libero_spatial"], report["overall"]
    assert list(report["suites"]) == ["libero_goal", "libero_spatial"]
    assert (goal["episodes"], goal["successes"], goal["failures"], goal["infra_failures"], goal["denominator"]) == \
        (10, 7, 2, 1, 9)
    assert goal["success_rate"] == round(7 / 9, 6)
    assert goal["ci95"] == {"low": 0.452589, "high": 0.936775}
    assert goal["statuses"] == {"completed": 7, "call_budget": 2, "boot_error": 1}
    assert (spatial["successes"], spatial["denominator"], spatial["infra_failures"]) == (1, 2, 1)
    assert (overall["successes"], overall["denominator"], overall["infra_failures"]) == (8, 11, 2)
    assert overall["ci95"] == {"low": 0.434355, "high": 0.902539}
    assert goal["tasks"]["libero_goal:9"] == {"episodes": 1, "successes": 0, "failures": 0, "denominator": 0,
                                              "success_rate": None, "infra_failures": 1, "interrupted": 0}
    assert goal["mean_input_tokens"] == 1203345 and goal["mean_wall_time_s"] == 1874.26


def test_count_errors_as_failures_puts_infrastructure_failures_back(crafted):
    report = R.suite_report(M.load_metrics([crafted]), count_errors_as_failures=True)
    goal, spatial, overall = report["suites"]["libero_goal"], report["suites"]["libero_spatial"], report["overall"]
    assert (goal["successes"], goal["denominator"]) == (7, 10)
    assert goal["ci95"] == {"low": 0.396778, "high": 0.892209}
    assert (spatial["successes"], spatial["denominator"]) == (2, 3)   # judged by the benchmark, not the status
    assert (overall["successes"], overall["denominator"]) == (9, 13)


def test_summarize_text_json_and_markdown(crafted, tmp_path, capsys):
    assert S.main([str(crafted)]) == 0
    out = capsys.readouterr().out
    table, report = out.split("\n\n", 1)
    assert len(table.splitlines()) == 14   # header + 13 episodes
    lines = report.splitlines()
    assert lines[0].split() == ["suite", "episodes", "success", "fail", "infra", "intr", "rate", "95%", "CI",
                                "in_tok/ep", "out_tok/ep", "wall_s/ep"]
    assert lines[1].split()[:8] == ["libero_goal", "10", "7", "2", "1", "0", "77.8%", "[45.3%,"]
    assert lines[3].split()[:7] == ["all", "13", "8", "3", "2", "0", "72.7%"]
    assert "left out of the rate" in report
    assert "libero_goal:9 seed 0: boot_error:" in report   # every infrastructure failure with its cause
    assert S.main([str(crafted), "--json", "--count-errors-as-failures"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["count_errors_as_failures"] is True and data["overall"]["denominator"] == 13
    assert data["native_sr"] == pytest.approx(9 / 13)   # one rate: the reference's key carries the same number
    assert data["native_sr_denominator"] == 13 and data["outcomes"]["infra"] == 2
    assert S.main([str(crafted), "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["native_sr"] == pytest.approx(8 / 11) == default["overall"]["success_rate"]
    assert default["native_sr_denominator"] == default["overall"]["denominator"] == 11
    again = C.load_metrics([_write(tmp_path / "summary.json", data)])   # --json output is itself an input
    assert len(again) == 13
    md = tmp_path / "report.md"
    assert S.main([str(crafted), "--markdown", str(md)]) == 0
    text = md.read_text()
    assert text.startswith("# Evaluation report") and "| libero_goal | 10 | 7 | 2 | 1 | 0 | 77.8% |" in text


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def paired_runs(root: Path) -> list:
    """20 paired LIBERO episodes: both succeed 8, only rpent 2, only pyrualean 6, neither 4; plus a 21st pair whose
    pyrualean side failed to boot."""
    outcomes = [(True, True)] * 8 + [(True, False)] * 2 + [(False, True)] * 6 + [(False, False)] * 4
    left = []
    (golden,) = M.load_metrics([GOLDEN])
    for i, (a, b) in enumerate(outcomes):
        suite, task = ("libero_goal", i) if i < 10 else ("libero_object", i - 10)
        write_run(root, suite, task, 0, success=b, backend="libero")
        left.append({**golden.to_json(), "system": "rpent", "task": f"{suite}:{task}", "seed": 0,
                     "environment_success": a, "source": "rpent"})
    write_run(root, "libero_object", 10, 0, success=False, status="boot_error", backend="libero")
    left.append({**golden.to_json(), "system": "rpent", "task": "libero_object:10", "seed": 0,
                 "environment_success": True, "source": "rpent"})
    return left


def test_compare_reports_rates_difference_discordant_pairs_and_mcnemar(tmp_path, capsys):
    left = _write(tmp_path / "rpent.json", {"metrics": paired_runs(tmp_path / "runs")})
    report = C.compare(M.load_metrics([left, tmp_path / "runs"]))
    assert report["pairing"]["valid"] and report["pairing"]["matched_episodes"] == 21
    stats = report["statistics"]
    assert (stats["pairs_used"], stats["pairs_excluded"]) == (20, 1)   # the boot_error pair is left out
    assert stats["rates"]["rpent"] == {"successes": 10, "episodes": 20, "success_rate": 0.5,
                                       "ci95": {"low": 0.299298, "high": 0.700702}}
    assert stats["rates"]["pyrualean"]["successes"] == 14 and stats["rates"]["pyrualean"]["success_rate"] == 0.7
    assert stats["difference"]["definition"] == "pyrualean - rpent"
    assert stats["difference"]["estimate"] == 0.2
    assert stats["difference"]["ci95"] == {"low": -0.080428, "high": 0.439564}
    assert stats["discordant"] == {"only_rpent": 2, "only_pyrualean": 6}
    assert stats["concordant"] == {"both_succeeded": 8, "both_failed": 4}
    assert stats["mcnemar_exact_p"] == 0.289062   # 2 * (1 + 8 + 28) / 2**8
    assert list(stats["suites"]) == ["libero_goal", "libero_object"]
    assert stats["suites"]["libero_object"]["discordant"] == {"only_rpent": 0, "only_pyrualean": 6}
    assert stats["suites"]["libero_object"]["mcnemar_exact_p"] == 0.03125   # 2 / 2**6
    counted = C.compare(M.load_metrics([left, tmp_path / "runs"]), count_errors_as_failures=True)["statistics"]
    assert counted["pairs_used"] == 21 and counted["discordant"] == {"only_rpent": 3, "only_pyrualean": 6}
    assert counted["mcnemar_exact_p"] == 0.507812   # 2 * (1 + 9 + 36 + 84) / 2**9

    assert C.main([str(left), str(tmp_path / "runs"), "--table"]) == 0
    table = capsys.readouterr().out
    assert "21 pairs from 42 input episodes; valid" in table
    assert "difference (pyrualean - rpent): +20.0 points, 95% CI [-8.0, +44.0] (Newcombe, paired)" in table
    assert "discordant pairs: 2 only rpent, 6 only pyrualean; exact McNemar p = 0.2891" in table
    assert "1 pair(s) left out" in table and "libero_object:" in table


# ---------------------------------------------------------------------------------------------------- HTML
def _png_size_and_colours(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct colours in a sample of rows) of an 8-bit RGB/RGBA PNG, decoded here."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour_type = header[:4]
    assert depth == 8 and colour_type in (2, 6)
    channels = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):   # undo the PNG row filters
        filt, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b, c = prev[x], prev[x - channels] if x >= channels else 0
            if filt == 1:
                line[x] = (line[x] + a) & 255
            elif filt == 2:
                line[x] = (line[x] + b) & 255
            elif filt == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    colours = {row[i:i + 3] for row in rows[::7] for i in range(0, stride, channels * 5)}
    return width, height, len(colours)


def test_html_report_renders_in_headless_chromium(crafted, tmp_path):
    assert shutil.which("chromium"), "scripts/setup.sh installs Debian's chromium"
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    options = {"model": "coder-4b", "arm": "cells", "images": "on-demand"}
    code = {"pyrua_ros": "0.1.0", "git_commit": "abc123def4567", "git_dirty": False}
    (crafted / "eval.json").write_text(json.dumps({"options": options, "code": code}))
    assert S.main([str(crafted), "--html", str(page), "--screenshot", str(png), "--title", "crafted eval"]) == 0
    text = page.read_text()
    for fetch in ("src=", "url(", "@import", "<script", "<link"):
        assert fetch not in text   # self-contained: nothing to load from anywhere; links lead to the runs
    assert text.count("<svg") == 3   # the overview and one per-task chart per suite
    check = open_offline(page)
    assert check.console == () and check.broken == () and check.external == (), check
    dom = check.dom
    assert "<h1>crafted eval</h1>" in dom and "libero_spatial" in dom
    assert "77.8% (7/9, 1 infra)" in dom and "72.7% (8/11, 2 infra)" in dom
    # each episode row links its viewer page (written by summarize) and run directory
    assert "Configuration (eval.json)" in dom and "coder-4b" in dom and "commit abc123def456" in dom
    assert '<a href="eval/libero_goal/0/0/view.html">view</a>' in dom
    assert (crafted / "libero_goal" / "0" / "0" / "view.html").is_file()
    assert '<a href="eval/libero_goal/9/0/">run</a>' in dom
    assert '<td class="l">open the top drawer and put the bowl inside</td>' in dom   # the per-task table
    width, height, colours = _png_size_and_colours(png)
    assert width == 1280 and 200 <= height < 4000   # as tall as the content, not the window
    assert colours > 4   # text, bars and whiskers drawn: not a blank page


def test_csv_has_one_formula_safe_row_per_episode(crafted, tmp_path):
    write_run(crafted, "libero_spatial", 3, 0, success=False, status="error", reason="=HYPERLINK(\"x\")")
    path = tmp_path / "episodes.csv"
    assert S.main([str(crafted), "--csv", str(path)]) == 0
    rows = list(csv.reader(path.open(encoding="utf-8")))
    assert rows[0] == ["suite", "task", "instruction", "seed", "status", "reason", "success", "turns", "calls",
                       "steps", "tokens", "wall_s", "run_dir"]
    assert len(rows) == 1 + 14
    by_key = {(r[0], r[1]): r for r in rows[1:]}
    first = by_key[("libero_goal", "0")]
    assert first[4] == "completed" and first[6] == "true" and first[12] == str(crafted / "libero_goal" / "0" / "0")
    assert first[2] == json.loads(GOLDEN.read_text())["task_language"]
    assert by_key[("libero_spatial", "3")][5] == "'=HYPERLINK(\"x\")"   # text, never a formula
