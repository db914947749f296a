"""The environment a sandboxed child gets: an allowlist, never a copy of the caller's.

Why an allowlist: the graph's process holds API keys (OPENAI_API_KEY, LANGSMITH_API_KEY, a
coder endpoint's token) and often cloud or SSH-agent variables; model-written code that can read
os.environ can send them anywhere. A denylist misses the next vendor's name, so only the
variables a build, a CUDA program or a profiler needs pass, and even those lose any name that
looks like a secret. HOME and TMPDIR point inside the run's own directory, so caches that tools
keep under $HOME (CUDA's JIT cache, Triton's) land where the run may write; torch.compile's cache,
which should outlive the run, goes under the machine's cache root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

EXACT = frozenset(
    {
        "PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
        "CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAX_JOBS", "VIRTUAL_ENV",
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
        "PYTHONUNBUFFERED", "PYTHONFAULTHANDLER", "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONIOENCODING",
    }
)  # fmt: skip
PREFIXES = (
    "LC_", "CUDA_", "NVIDIA_", "NVCC_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "CUBLAS_", "CUDNN_", "STITCHCUDA_",
)  # fmt: skip
# Compilers' caches that must outlive a run: torch.compile's (its Triton kernels included), by default
# under the per-run TMPDIR, so every baseline process compiled from scratch. It goes under the machine's
# cache root, as the subfolder named here, unless the caller's own setting lies in a tree the run may write.
COMPILE_CACHES = {"TORCHINDUCTOR_CACHE_DIR": "torchinductor"}
# Names that carry a secret, or say where one lives, whatever prefix let them in.
SECRET = re.compile(
    r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|SESSION|_AUTH|AUTH_|_URL$|_URI$|_DSN$"
    r"|^(LANGSMITH|LANGCHAIN|OPENAI|ANTHROPIC|AWS|AZURE|GOOGLE|GCP|GCLOUD|HF|HUGGING|SSH|GPG|KUBE|DOCKER)",
    re.IGNORECASE,
)
# STITCHCUDA_ settings that only the graph's LLM client reads: no child needs them.
LLM_SETTINGS = re.compile(r"^STITCHCUDA_(LLM|PLANNER|CODER|VERIFIER|JUDGE|POLICY)_?")


def allowed(name: str) -> bool:
    """True when a variable of this name may reach a sandboxed child."""
    if SECRET.search(name) or LLM_SETTINGS.match(name):
        return False
    return name in EXACT or name.startswith(PREFIXES)


def sandbox_environment(
    base: Mapping[str, str],
    root: Path,
    *,
    cache_dir: Path,
    python_path: list[str],
    writable: list[Path],
) -> dict[str, str]:
    """The child's environment: `base` filtered, then HOME, TMPDIR, the cache and PYTHONPATH set.

    base: what the caller would have passed (os.environ plus its own settings such as
    TORCH_EXTENSIONS_DIR); its TMPDIR is kept only when it lies inside a writable tree.
    python_path: entries put before the base's own PYTHONPATH (the sandbox's site dir, the repo).
    """
    env = {k: v for k, v in base.items() if allowed(k)}
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    tmp = base.get("TMPDIR", "")
    if not tmp or not any(_inside(Path(tmp), w) for w in writable):
        tmp = str(root)
    env["TMPDIR"] = tmp
    env["STITCHCUDA_CACHE"] = str(cache_dir)
    for name, folder in COMPILE_CACHES.items():
        given = env.get(name, "")
        if not given or not any(_inside(Path(given), w) for w in writable):
            env[name] = str(cache_dir / folder)
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the sources are read-only here
    env["PYTHONNOUSERSITE"] = "1"
    inherited = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p and p not in python_path]
    env["PYTHONPATH"] = os.pathsep.join([*python_path, *inherited])
    return env


def _inside(path: Path, tree: Path) -> bool:
    try:
        path.resolve().relative_to(tree.resolve())
    except ValueError:
        return False
    return True
