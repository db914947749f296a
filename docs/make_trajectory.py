"""Record a scripted-model run through the whole graph and write it as docs/trajectory.md.

Why a script: the transcript shows what the agents really send and receive (prompts, answers, the
verifier's evidence, every routing decision), so it must come from a real run, and it must be easy to
regenerate when prompts or routing change. The models are the stub OpenAI server of the tests
(tests/support/llm_stub_server.py) replaying a fixed script: a build error, an unusable answer, a correct C++
extension, advice, an optimisation. Everything else is real and runs on the CPU (a few minutes).

    python docs/make_trajectory.py [--out docs/trajectory.md]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
os.environ["LANGSMITH_TRACING"] = "false"
os.environ.setdefault("OPENAI_API_KEY", "EMPTY")
os.environ["PATH"] = "/usr/local/cuda/bin:" + os.environ.get("PATH", "")

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from support.llm_answers import SCALE_RELU_PLAN  # noqa: E402
from support.llm_stub_server import RecordedRequest, Reply, StubServer  # noqa: E402
from support.scripted_policy import BUILD_ERROR, CORRECT_CPP, OPTIMIZED  # noqa: E402

from graph.build import builder, graph  # noqa: E402
from graph.context import Context  # noqa: E402

PROBLEM = REPO / "tests" / "fixtures" / "problems" / "scale_relu.py"
EXCERPT_LINES = 14

ADVICE_1 = {
    "kind": "optimize",
    "summary": "the scalar C++ loop runs on one core",
    "evidence": "one kernel launch per forward",
    "suggestions": ["let PyTorch's vectorised ops do the three steps", "avoid the extra empty_like"],
}
ADVICE_2 = {"kind": "optimize", "summary": "three aten kernels now; fuse them", "suggestions": ["fuse"]}


def _program(program: str, summary: str) -> str:
    return f"Summary: {summary}\n\n```python\n{program.strip()}\n```\n"


SCRIPT: list[Reply] = [
    Reply.json(SCALE_RELU_PLAN),
    Reply.text(_program(BUILD_ERROR, "a first C++ extension")),
    Reply.text("I am sorry, but as a language model I prefer to describe the kernel in words."),
    Reply.text(_program(CORRECT_CPP, "fixed the C++ syntax of the extension")),
    Reply.json(ADVICE_1),
    Reply.text(_program(OPTIMIZED, "vectorised torch ops instead of the scalar loop")),
    Reply.json(ADVICE_2),
]


def record(cache_dir: str) -> tuple[list[dict[str, Any]], list[RecordedRequest], dict[str, Any], Context]:
    """Run the scripted loop; every step with its node, update, end time and the requests it made."""
    os.environ.setdefault("STITCHCUDA_CACHE", cache_dir)
    with StubServer(list(SCRIPT)) as server:
        context = Context(
            policy="llm",
            llm_model="stub-model",
            llm_base_url=server.url,
            llm_max_retries=0,
            hybrid_start=False,
            device="cpu",
            correctness_trials=2,
            perf_trials=20,
            max_optimize_rounds=1,
        )
        app = builder.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "trajectory"}, "recursion_limit": 60}
        steps: list[dict[str, Any]] = []
        started = time.monotonic()
        for chunk in app.stream(
            {"problem_path": str(PROBLEM)}, config, context=context, stream_mode="updates"
        ):
            for node, update in chunk.items():
                steps.append({"node": node, "update": update or {}, "ended": time.monotonic()})
        final = app.get_state(config).values
        requests = list(server.requests)
    previous = started
    for step in steps:  # a request belongs to the node that was running when it arrived
        step["requests"] = [r for r in requests if previous <= r.received_at < step["ended"]]
        previous = step["ended"]
    return steps, requests, final, context


# ----------------------------------------------------------------------------------------------
# Rendering
# ----------------------------------------------------------------------------------------------


def _excerpt(text: str, lines: int = EXCERPT_LINES) -> str:
    rows = text.strip().splitlines()
    if len(rows) > lines:
        rows = rows[:lines] + [f"[... {len(rows) - lines} more lines]"]
    return "\n".join(rows)


def _quote(text: str, lang: str = "text") -> str:
    return f"````{lang}\n{text}\n````"


def _section(prompt: str, title: str) -> str:
    start = prompt.find(f"## {title}")
    if start == -1:
        return ""
    end = prompt.find("\n## ", start + 3)
    return prompt[start : end if end != -1 else None].strip()


# Sections shown per kind of prompt (by its title line): what changes from one turn to the next.
_SECTIONS = {
    "# Problem": ("Reference program", "Operators (torch.fx trace)"),
    "# Write": ("Plan",),
    "# Fix": ("Verifier feedback",),
    "# Speed up": ("Verifier feedback",),
    "# Advise": ("Timing", "Profile"),
}


def _prompt_excerpt(request: RecordedRequest) -> str:
    """The prompt's title and the sections that differ from turn to turn."""
    prompt = request.body["messages"][-1]["content"]
    title = prompt.splitlines()[0]
    titles = next((v for k, v in _SECTIONS.items() if title.startswith(k)), ())
    parts = [title] + [_excerpt(_section(prompt, t)) for t in titles if _section(prompt, t)]
    schema = (request.body.get("response_format") or {}).get("json_schema", {}).get("name")
    asked = f"structured output: json_schema `{schema}`" if schema else "free text (a fenced program)"
    return f"Asked for {asked}; {len(prompt):,} characters of prompt. Excerpt:\n\n" + _quote(
        "\n\n".join(parts)
    )


def _answer_excerpt(request: RecordedRequest, requests: list[RecordedRequest]) -> str:
    content = SCRIPT[next(i for i, r in enumerate(requests) if r is request)].content or ""
    with contextlib.suppress(ValueError, AttributeError):  # prose or a program stays as it is
        fields = json.loads(content).items()
        content = "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in fields) + "\n}"
    return _quote(_excerpt(content, 12))


def _route(node: str, nxt: str | None, state: dict[str, Any], context: Context) -> str:
    if nxt is None:
        return "END."
    label = {
        ("coder", "coder"): "fix",
        ("verifier", "coder"): "fix",
        ("verifier", "profiler"): "profile",
        ("profiler", "coder"): "optimize",
    }.get((node, nxt), nxt)
    test = state.get("test") or {}
    why = {
        "coder": f"coder outcome `{state.get('coder_outcome')}`",
        "verifier": f"test status `{test.get('status')}`",
        "profiler": f"optimisation rounds {state.get('optimize_rounds', 0)} of {context.max_optimize_rounds}",
        "planner": "a plan exists",
    }.get(node, "")
    if label == "fix":
        why += f", fix streak {state.get('fix_streak', 0)} of {context.max_fix_attempts}"
    return f"`route_after_{'profile' if node == 'profiler' else node}`: {why} → **{label}** (`{nxt}`)."


def _evidence(node: str, update: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if node == "verifier":
        build, test = update.get("build") or {}, update.get("test") or {}
        lines.append(
            (
                f"Worker: build ok in {build.get('seconds', 0):.1f} s; "
                if build.get("ok")
                else "Worker: build failed; "
            )
            + f"test status `{test.get('status')}`, {test.get('trials_passed')}/{test.get('trials')} trials"
            + (
                f"; candidate {test['candidate_ms']:.3f} ms vs eager {test['eager_ms']:.3f} ms"
                if test.get("candidate_ms") and test.get("eager_ms")
                else ""
            )
        )
        if build.get("errors"):
            lines.append("Compiler errors:\n\n" + _quote(_excerpt("\n".join(build["errors"]), 6)))
    if node == "coder" and update.get("coder_outcome") == "policy_error":
        feedback = update.get("feedback") or {}
        lines.append(f"Parse error, kept as evidence for the next turn: {feedback.get('summary')}")
    if node == "finalize":
        report = update.get("report") or {}
        lines.append(
            f"Report: status **{report.get('status')}** ({report.get('status_reason')}); "
            f"best candidate {report.get('candidate_id')}, {report.get('iterations')} coder turns."
        )
    return lines


def render(steps: list[dict[str, Any]], requests: list[RecordedRequest], context: Context) -> str:
    out = [
        "# A recorded trajectory",
        "",
        "One run of the whole graph with the LLM policy, its models replaced by the scripted OpenAI-compatible",
        "stub server of the tests (`tests/support/llm_stub_server.py`); the nodes, the routers, the prompts, the",
        "worker subprocess, the g++ build and the correctness and timing checks are real and ran on the CPU",
        f"(`Context.device='cpu'`, at most {context.max_fix_attempts} fixes in a row and",
        f"{context.max_optimize_rounds} optimisation round). The problem is",
        "`tests/fixtures/problems/scale_relu.py`, `relu(x - 0.5) * scale`. Regenerate with",
        "`python docs/make_trajectory.py` (timings change from run to run).",
        "",
        "The script: a program that does not build, then an answer with no program at all, then a correct",
        "C++ extension, the verifier's advice, and a faster program.",
        "",
        "## The graph",
        "",
        "```mermaid",
        graph.get_graph().draw_mermaid().strip(),
        "```",
        "",
        "## Transcript",
    ]
    state: dict[str, Any] = {}
    for number, step in enumerate(steps, 1):
        node, update = step["node"], step["update"]
        state |= {k: v for k, v in update.items() if k not in ("log", "history", "spent_s")}
        out += ["", f"### {number}. {node}", ""]
        for line in update.get("log", []):
            out.append(f"> {line}")
        for request in step["requests"]:
            role = "verifier model" if node == "profiler" else f"{node} model"
            out += ["", f"**Prompt to the {role}.** " + _prompt_excerpt(request)]
            out += ["", "**Answer.**", "", _answer_excerpt(request, requests)]
        for line in _evidence(node, update):
            out += ["", line]
        nxt = steps[number]["node"] if number < len(steps) else None
        out += ["", "Routing: " + _route(node, nxt, state, context)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "trajectory.md"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stitchcuda-trajectory-") as cache:
        steps, requests, final, context = record(cache)
    if len(requests) != len(SCRIPT):
        print(f"expected {len(SCRIPT)} model requests, saw {len(requests)}", file=sys.stderr)
        return 1
    Path(args.out).write_text(render(steps, requests, context))
    print(json.dumps({"out": args.out, "status": final.get("status"), "steps": len(steps)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
