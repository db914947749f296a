"""The StitchCUDA graph.

    planner -> coder -> verifier --pass--> profiler --optimize--> coder
                 ^          |                  \\--> finalize
                 +---fix----+--> finalize (no GPU, or budget spent)

`builder` is the uncompiled StateGraph (tests and the CLI compile it with a checkpointer);
`graph` is compiled without one, as `langgraph dev` (Studio) requires. Importing this module
creates no model client, opens no store and loads no torch extension.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from graph.context import Context
from graph.routers import route_after_coder, route_after_planner, route_after_profile, route_after_verifier
from graph.state import InputState, OutputState, State
from nodes.coder import coder
from nodes.finalize import finalize
from nodes.llm.call_log import collect_model_calls
from nodes.planner import planner
from nodes.profiler import profiler
from nodes.verifier import verifier


def make_builder() -> StateGraph[State, Context, InputState, OutputState]:
    """A fresh, uncompiled StitchCUDA graph."""
    builder = StateGraph(State, context_schema=Context, input_schema=InputState, output_schema=OutputState)
    # The nodes that ask the policy also hand its model-call records to the state (State.model_calls).
    builder.add_node("planner", collect_model_calls(planner))
    builder.add_node("coder", collect_model_calls(coder))
    builder.add_node("verifier", verifier)
    builder.add_node("profiler", collect_model_calls(profiler))
    builder.add_node("finalize", finalize)
    builder.add_edge(START, "planner")
    builder.add_conditional_edges("planner", route_after_planner, {"coder": "coder", "finalize": "finalize"})
    builder.add_conditional_edges(
        "coder", route_after_coder, {"verifier": "verifier", "fix": "coder", "finalize": "finalize"}
    )
    builder.add_conditional_edges(
        "verifier", route_after_verifier, {"fix": "coder", "profile": "profiler", "finalize": "finalize"}
    )
    builder.add_conditional_edges(
        "profiler", route_after_profile, {"optimize": "coder", "finalize": "finalize"}
    )
    builder.add_edge("finalize", END)
    return builder


builder = make_builder()
graph = builder.compile(name="StitchCUDA")
