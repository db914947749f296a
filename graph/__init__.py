"""StitchCUDA's graph layer: state, artifacts, context, policies, the graph builder and the CLI.

Importing this package (or `graph.build`) creates no model client, opens no store and loads no
torch extension.
"""
