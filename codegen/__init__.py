"""StitchCUDA: codegen."""
