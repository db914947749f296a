"""Where model-written code runs: an allowlisted environment, no network, a filesystem policy, limits.

docs/sandbox.md has the threat model and the layers. The one entry point is `Sandbox`
(tools.sandbox.session); `SandboxSettings.resolve` reads the mode (auto, required, off) and limits.
Standard library only (pyseccomp and bubblewrap are optional, probed at run time).
"""

from tools.sandbox.limits import MODES, SandboxError, SandboxSettings
from tools.sandbox.session import FINDING_ID, LAYERS, Sandbox, layers_line, platform_layers

__all__ = [
    "FINDING_ID", "LAYERS", "MODES", "Sandbox", "SandboxError", "SandboxSettings", "layers_line", "platform_layers",
]  # fmt: skip
