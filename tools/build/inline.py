"""`load_inline` and `load` through the cache: torch's signatures, our key, the direct builder by default.

Why: programs call `torch.utils.cpp_extension.load_inline` at import; `install_cached_load_inline`
patches that module attribute in this process only, so every build goes through `cached_build`
with a key that hashes the sources, functions, flags, name, toolchain and arch. Options this torch
does not know are dropped, so a program written for a newer torch still builds.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tools.build.cache import cached_build, default_cache_dir
from tools.build.compiler_output import BuildError
from tools.build.direct import DirectUnavailable, builder_choice, direct_build, inline_sources
from tools.build.toolchain import as_list, cpp_extension, effective_flags
from tools.cache_paths import pch_root
from tools.worker.kernel_names import kernel_names


def _with_line_marker(sources: list[str], label: str) -> list[str]:
    """Prefix a `#line` directive so compiler errors give lines of the candidate's own string."""
    return [f'#line 1 "{label}"', *sources] if sources else sources


def cached_load_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    sycl_sources: str | Sequence[str] | None = None,
    functions: str | Sequence[str] | dict[str, str] | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_sycl_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    with_sycl: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool = False,
    no_implicit_headers: bool = False,
    *,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_start: Callable[[str], None] | None = None,
    **other_options: Any,
) -> Any:
    """`load_inline` with a content-addressed cache; `build_directory` and `verbose` are ignored.

    The parameters mirror torch's, in torch's order. `verbose` is forced off because torch keeps the
    compiler output (our error evidence) only when it captures it. Options this torch does not know
    are dropped, so a program written for a newer torch (`no_implicit_headers`) still builds, slower.
    """
    del build_directory, verbose, keep_intermediates
    ce = cpp_extension()
    cpp = as_list(cpp_sources)
    cuda = as_list(cuda_sources)
    use_cuda = bool(cuda) if with_cuda is None else with_cuda
    flags = effective_flags(
        as_list(extra_cflags),
        as_list(extra_cuda_cflags),
        as_list(extra_ldflags),
        as_list(extra_include_paths),
        use_cuda,
        arch,
        source_count=1 + (1 if cuda else 0),
    )
    accepted = _load_inline_parameters()
    options: dict[str, Any] = {
        "sycl_sources": sycl_sources,
        "extra_sycl_cflags": extra_sycl_cflags,
        "with_sycl": with_sycl,
        "with_pytorch_error_handling": with_pytorch_error_handling,
        "use_pch": use_pch,
        "no_implicit_headers": no_implicit_headers,
        **other_options,
    }
    options = {k: v for k, v in options.items() if k in accepted and v is not None}
    material = {
        "kind": "load_inline",
        "cpp_sources": cpp,
        "cuda_sources": cuda,
        "functions": functions,
        "cflags": flags.cflags,
        "cuda_cflags": flags.cuda_cflags,
        "ldflags": flags.ldflags,
        "include_paths": flags.include_paths,
        "with_cuda": with_cuda,
        "is_python_module": is_python_module,
        "options": options,
        "arch": arch if use_cuda else None,  # a C++-only build is the same binary for every arch
    }

    details: dict[str, Any] = {}
    direct = (
        builder_choice() == "direct"
        and is_python_module
        and not sycl_sources
        and not with_sycl
        and (with_cuda is None or with_cuda == bool(cuda))
        and not other_options
    )
    root = Path(cache_dir) if cache_dir else default_cache_dir()

    def build(directory: str, module_name: str) -> Any:
        marked_cpp = _with_line_marker(list(cpp), "cpp_sources")
        marked_cuda = _with_line_marker(list(cuda), "cuda_sources")
        if direct:
            main_cpp, cuda_cu = inline_sources(
                marked_cpp, marked_cuda, functions, with_pytorch_error_handling, no_implicit_headers
            )
            try:
                return direct_build(directory, module_name, main_cpp, cuda_cu, flags, pch_root(root), details)
            except DirectUnavailable as why:
                details.clear()
                details["phases"] = {"direct_unavailable": str(why)}
        details["builder"] = "torch"
        return _ORIGINAL["load_inline"](
            name=module_name,
            cpp_sources=marked_cpp,
            cuda_sources=marked_cuda or None,
            functions=functions,
            extra_cflags=flags.cflags,
            extra_cuda_cflags=flags.cuda_cflags,
            extra_ldflags=flags.ldflags,
            extra_include_paths=flags.include_paths,
            build_directory=directory,
            verbose=False,
            with_cuda=with_cuda,
            is_python_module=is_python_module,
            **options,
        )

    _ORIGINAL.setdefault("load_inline", ce.load_inline)
    return cached_build(
        name,
        material,
        use_cuda,
        is_python_module,
        kernel_names(cuda),
        build,
        cache_dir,
        flags.env,
        on_start,
        details,
    )


def cached_load(
    name: str,
    sources: str | Sequence[str],
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_sycl_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    with_sycl: bool | None = None,
    is_python_module: bool = True,
    is_standalone: bool = False,
    keep_intermediates: bool = True,
    *,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_start: Callable[[str], None] | None = None,
    **other_options: Any,
) -> Any:
    """`load` (sources on disk) with the same cache; the key hashes the files' contents."""
    del build_directory, verbose, keep_intermediates
    if extra_sycl_cflags is not None or with_sycl:
        other_options.update(extra_sycl_cflags=extra_sycl_cflags, with_sycl=with_sycl)
    ce = cpp_extension()
    paths = [os.path.abspath(p) for p in as_list(sources)]
    if is_standalone:  # an executable, not a module: nothing to import, nothing worth caching
        return _ORIGINAL.setdefault("load", ce.load)(name, paths, is_standalone=True, **other_options)
    try:
        contents = {p: Path(p).read_text(errors="replace") for p in paths}
    except OSError as exc:
        raise BuildError(name, [f"cannot read source: {exc}"], "", 0.0) from None
    cuda_texts = [text for p, text in contents.items() if p.endswith((".cu", ".cuh"))]
    use_cuda = bool(cuda_texts) if with_cuda is None else with_cuda
    flags = effective_flags(
        as_list(extra_cflags),
        as_list(extra_cuda_cflags),
        as_list(extra_ldflags),
        as_list(extra_include_paths),
        use_cuda,
        arch,
        source_count=len(paths),
    )
    material = {
        "kind": "load",
        "sources": contents,
        "cflags": flags.cflags,
        "cuda_cflags": flags.cuda_cflags,
        "ldflags": flags.ldflags,
        "include_paths": flags.include_paths,
        "with_cuda": with_cuda,
        "is_python_module": is_python_module,
        "options": other_options,
        "arch": arch if use_cuda else None,
    }

    def build(directory: str, module_name: str) -> Any:
        return _ORIGINAL["load"](
            name=module_name,
            sources=paths,
            extra_cflags=flags.cflags,
            extra_cuda_cflags=flags.cuda_cflags,
            extra_ldflags=flags.ldflags,
            extra_include_paths=flags.include_paths,
            build_directory=directory,
            verbose=False,
            with_cuda=with_cuda,
            is_python_module=is_python_module,
            **other_options,
        )

    _ORIGINAL.setdefault("load", ce.load)
    return cached_build(
        name,
        material,
        use_cuda,
        is_python_module,
        kernel_names(cuda_texts),
        build,
        cache_dir,
        flags.env,
        on_start,
    )


_ORIGINAL: dict[str, Callable[..., Any]] = {}


@functools.cache
def _load_inline_parameters() -> frozenset[str]:
    import inspect

    return frozenset(
        inspect.signature(_ORIGINAL.get("load_inline") or cpp_extension().load_inline).parameters
    )


def install_cached_load_inline(
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    on_start: Callable[[str], None] | None = None,
) -> None:
    """Route this process's `load_inline` and `load` through the cache (the worker calls this).

    Programs do `from torch.utils.cpp_extension import load_inline` at import, so patching the
    module attribute before the program runs is enough; nothing outside this process changes.
    """
    ce = cpp_extension()
    _ORIGINAL.setdefault("load_inline", ce.load_inline)
    _ORIGINAL.setdefault("load", ce.load)
    ce.load_inline = functools.partial(cached_load_inline, arch=arch, cache_dir=cache_dir, on_start=on_start)  # type: ignore[attr-defined]
    ce.load = functools.partial(cached_load, arch=arch, cache_dir=cache_dir, on_start=on_start)  # type: ignore[attr-defined]
