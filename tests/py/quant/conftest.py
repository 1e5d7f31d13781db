# Lets test modules in this folder import each other's helpers (test_real_models uses
# test_quants' tool runner) however pytest is invoked.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
