"""StitchCUDA: rl."""
