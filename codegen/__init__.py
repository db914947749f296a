"""StitchCUDA's offline policy: fx analysis, fusion planning, CUDA templates, program assembly.

Pipeline: tracing (fx on the meta device) -> ops (canonical op kinds) -> fusion (groups, demotion
levels) -> planner (Plan artifact) -> kernels + cuda_unit (CUDA functors, launchers, binding) ->
assemble (the standalone program) ; policy ties them to graph.policy.Policy, with repair (fix)
and advice (diagnosis, optimisations). Nothing here is imported by the generated programs.
"""
