"""bench/kernel_trace.py on a hand-made trace: the windows split at gaps, each kernel's chain
share is its end minus the previous end within its window, and only the last --last windows
count."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "bench" / "kernel_trace.py"

HEADER = "start_ns\tend_ns\tgraph\tgrid_x\tgrid_y\tgrid_z\tname\n"
NORM = "void t9::cuda::(anonymous namespace)::rms_norm_codes_kernel<true>(t9::cuda::TensorDesc)"
GEMV = "void t9::cuda::(anonymous namespace)::gemv_slice_kernel<(t9::GgmlType)8, 1, true, 2, 2>(t9::cuda::SliceArgs)"


def run(tmp_path, lines, *args):
    trace = tmp_path / "trace.tsv"
    trace.write_text(HEADER + "".join(lines))
    return subprocess.run([sys.executable, str(SCRIPT), str(trace), *args], capture_output=True,
                          text=True, timeout=60)


def window(t0):
    # A norm from t0 to t0 + 3 us, then a GEMV that started early (PDL) and ends 10 us later.
    return [f"{t0}\t{t0 + 3000}\t1\t8\t1\t1\t{NORM}\n",
            f"{t0 + 1000}\t{t0 + 13000}\t1\t657\t1\t1\t{GEMV}\n"]


def test_chain_shares_of_the_last_windows(tmp_path):
    # Three windows 1 ms apart; the first is a slow warm-up that --last 2 leaves out.
    slow = [f"0\t50000\t0\t8\t1\t1\t{NORM}\n"]
    p = run(tmp_path, slow + window(1_000_000) + window(2_000_000), "--last", "2")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == ("3 windows in the trace; the last 2: 2 kernels and 13.0 us each (first start "
                      "to last end), idle 0.0 us each (split at gaps)")
    # The GEMV first: its chain share is 10 us a step (its end 13 us minus the norm's 3), 76.9%
    # of 13, though it ran 12 us (it started during the norm); the norm's share is its 3 us.
    # Names lose their namespaces, return type and arguments, not their template arguments.
    assert out[2] == ("         10.0  76.9    1.0         10.00            12.00  "
                      "gemv_slice_kernel<(t9::GgmlType)8, 1, true, 2, 2> (657,1,1)"), out
    assert out[3] == ("          3.0  23.1    1.0          3.00             3.00  "
                      "rms_norm_codes_kernel<true> (8,1,1)"), out
    assert len(out) == 4


def test_windows_picked_by_length(tmp_path):
    # A served load's prompt steps and decode steps apart: a 50 us window among two of 13 us.
    slow = [f"0\t50000\t0\t8\t1\t1\t{NORM}\n"]
    lines = slow + window(1_000_000) + window(2_000_000)
    p = run(tmp_path, lines, "--min-us", "20")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == ("3 windows in the trace; the last 1: 1 kernels and 50.0 us each (first start "
                      "to last end), idle 0.0 us each (split at gaps)")
    assert out[2].endswith("rms_norm_codes_kernel<true> (8,1,1)") and len(out) == 3, out
    p = run(tmp_path, lines, "--max-us", "20")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith("3 windows in the trace; the last 2: 2 kernels and "
                                               "13.0 us each")
    p = run(tmp_path, lines, "--min-us", "100")
    assert p.returncode == 1 and "no window of 100-inf us" in p.stderr


def test_not_a_trace(tmp_path):
    bad = tmp_path / "x.tsv"
    bad.write_text("hello\n")
    p = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert p.returncode == 1 and "not a TEMPO9_CUDA_TRACE file" in p.stderr


def test_host_calls_stay_out_of_the_table_and_show_in_the_timeline(tmp_path):
    # Two windows 1 ms apart, each one graph (id 7) launched by the host 20 us before its first
    # kernel; a host call is not a kernel, so the table is the same as without it.
    launch = "cudaGraphLaunch_v10000"
    lines = []
    for t0 in (1_000_000, 2_000_000):
        lines.append(f"{t0 - 20_000}\t{t0 - 15_000}\t0\t0\t0\t0\tapi:{launch}\n")
        lines += [l.replace("\t1\t", "\t7\t", 1) for l in window(t0)]
    p = run(tmp_path, lines, "--last", "2")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == ("2 windows in the trace; the last 2: 2 kernels and 13.0 us each (first start "
                      "to last end), idle 0.0 us each (split at gaps)")
    assert len(out) == 4
    # The timeline of the last window, in us from the end of the one before (1.013 ms).
    p = run(tmp_path, lines, "--timeline", "1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        " start us    end us  what",
        f"    967.0     972.0  host {launch}",
        "    987.0    1000.0  device graph 7: 2 kernels, idle 987.0 us before",
    ]


def test_timeline_skips_the_last_windows(tmp_path):
    # Three windows 1 ms apart, graphs 7, 8, 9: --skip 1 ends the timeline at the second (graph
    # 8, in us from the end of the first), --skip 2 at the first; --skip 3 leaves no window.
    lines = []
    for g, t0 in ((7, 1_000_000), (8, 2_000_000), (9, 3_000_000)):
        lines += [l.replace("\t1\t", f"\t{g}\t", 1) for l in window(t0)]
    p = run(tmp_path, lines, "--timeline", "1", "--skip", "1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        " start us    end us  what",
        "    987.0    1000.0  device graph 8: 2 kernels, idle 987.0 us before",
    ]
    p = run(tmp_path, lines, "--timeline", "1", "--skip", "2")
    assert p.returncode == 0, p.stderr
    assert "device graph 7: 2 kernels" in p.stdout.splitlines()[1]
    p = run(tmp_path, lines, "--timeline", "1", "--skip", "3")
    assert p.returncode == 1
    assert "--skip 3: the trace has 3 windows" in p.stderr


@pytest.mark.parametrize("sync", ["cudaStreamSynchronize_v3020", "cudaEventSynchronize_v3020"])
def test_windows_end_at_the_hosts_synchronizations(tmp_path, sync):
    # Two steps, each a short graph launch and, 40 us after it ends (under --gap-us: one window
    # by gaps), a long one; the host synchronizes after each step. With the synchronizations a
    # window is a step, and its 40 us without a kernel count as idle.
    # A step ends with a stream synchronization, or since pipelined steps with its window's
    # event's (Stream::wait_for): either ends a window.
    lines = []
    for t0 in (1_000_000, 1_200_000):
        lines += [f"{t0}\t{t0 + 3000}\t4\t8\t1\t1\t{NORM}\n",
                  f"{t0 + 43_000}\t{t0 + 53_000}\t5\t657\t1\t1\t{GEMV}\n",
                  f"{t0 + 10_000}\t{t0 + 54_000}\t0\t0\t0\t0\tapi:{sync}\n"]
    p = run(tmp_path, lines, "--last", "2")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == ("2 windows in the trace; the last 2: 2 kernels and 53.0 us each (first start "
                      "to last end), idle 40.0 us each (one per host synchronization)")
    # The GEMV's chain share is its end minus the norm's: the idle time is charged to it.
    assert out[2].split()[:2] == ["50.0", "94.3"], out


def test_sequence_lists_one_window_in_chain_order(tmp_path):
    # Two windows 1 ms apart; the first one's GEMV 2 us longer. --sequence prints the last
    # window's kernels by end, each after the previous end: the norm from the window's start, the
    # GEMV 2 us before the norm's end (its early blocks) to 10 us after it. --skip 1: the first.
    first = [l.replace(f"{1_000_000 + 13000}\t", f"{1_000_000 + 15000}\t") for l in window(1_000_000)]
    lines = first + window(2_000_000)
    p = run(tmp_path, lines, "--sequence")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "   start      end duration  kernel grid (us after the previous end)",
        "   +0.00    +3.00     3.00  rms_norm_codes_kernel<true> (8,1,1)",
        "   -2.00   +10.00    12.00  gemv_slice_kernel<(t9::GgmlType)8, 1, true, 2, 2> (657,1,1)",
    ]
    p = run(tmp_path, lines, "--sequence", "--skip", "1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[2].startswith("   -2.00   +12.00    14.00  gemv_slice"), p.stdout
    p = run(tmp_path, lines, "--sequence", "--skip", "2")
    assert p.returncode == 1 and "--skip 2: the trace has 2 windows" in p.stderr
