"""bench/kernel_trace.py on a hand-made trace: the windows split at gaps, each kernel's chain
share is its end minus the previous end within its window, and only the last --last windows
count."""
import subprocess
import sys
from pathlib import Path

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
    assert out[0] == "3 windows in the trace; the last 2: 2 kernels and 13.0 us each (first start to last end)"
    # The GEMV first: its chain share is 10 us a step (its end 13 us minus the norm's 3), 76.9%
    # of 13, though it ran 12 us (it started during the norm); the norm's share is its 3 us.
    # Names lose their namespaces, return type and arguments, not their template arguments.
    assert out[2] == ("         10.0  76.9    1.0         10.00            12.00  "
                      "gemv_slice_kernel<(t9::GgmlType)8, 1, true, 2, 2> (657,1,1)"), out
    assert out[3] == ("          3.0  23.1    1.0          3.00             3.00  "
                      "rms_norm_codes_kernel<true> (8,1,1)"), out
    assert len(out) == 4


def test_not_a_trace(tmp_path):
    bad = tmp_path / "x.tsv"
    bad.write_text("hello\n")
    p = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True, text=True)
    assert p.returncode == 1 and "not a TEMPO9_CUDA_TRACE file" in p.stderr
