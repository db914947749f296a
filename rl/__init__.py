"""StitchCUDA's RL for the coder: skill datasets, one reward core, trainer adapters (TRL, verl).

Importing `rl` or `rl.reward` needs no RL engine; only `rl.trl_train` (and the `train` command)
imports trl, peft and transformers, from the `rl` extra. The rest of the project never imports `rl`
except the CLI, which registers the `stitchcuda rl` commands lazily.
"""
