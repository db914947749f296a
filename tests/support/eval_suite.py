"""A three-problem suite and the scripted CLI its problems run under (the eval and Ray executor tests)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TESTS = Path(__file__).resolve().parents[1]

# Picks the script by problem name: 1_ScaleRelu verifies, 2_ScaleReluBroken never builds, and
# level2's program is correct but hides a try/except fallback (the hack checker says "hacked").
WRAPPER = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from support.scripted_policy import BUILD_ERROR, OPTIMIZED, SCALE_RELU_HEAD, ScriptedPolicy, install
from graph.cli import main

FALLBACK = SCALE_RELU_HEAD + '''
    def forward(self, x):
        try:
            return torch.clamp_min(x - 0.5, 0.0) * self.scale
        except Exception:
            return x
'''
problem = next(a for a in sys.argv[1:] if a.endswith(".py"))
if "Broken" in problem:
    script = [BUILD_ERROR] * 8
elif "Fallback" in problem:
    script = [FALLBACK] * 8
else:
    script = [OPTIMIZED] * 8
install(ScriptedPolicy(script))
sys.exit(main(sys.argv[1:]))
"""
RUN_ARGS = ["--device", "cpu", "--perf-trials", "5", "--max-iterations", "3"]


def make_suite(root: Path) -> Path:
    source = (FIXTURES / "problems" / "scale_relu.py").read_text()
    for rel in ("level1/1_ScaleRelu.py", "level1/2_ScaleReluBroken.py", "level2/1_ScaleReluFallback.py"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root
