#!/usr/bin/env bash
# GRPO with LoRA for Qwen3-32B on a Ray cluster (verl), rewarded by StitchCUDA's reward core.
#
# Layout (see docs/rl.md for the sizing table): N training nodes of 8 GPUs run verl (FSDP actor with
# parameter and optimizer offload, vLLM rollout); one more node's GPUs are set apart for timing, one
# evaluation server per GPU (rl/verl/eval_servers.sh), so no rollout or update ever shares a GPU
# with a timed candidate. The judge (optional) is any OpenAI-compatible server.
#
# Usage, on the Ray head node, from the repository root (the repo must be on every node's PYTHONPATH):
#   ray start --head            # on the head; `ray start --address HEAD:6379` on the other training nodes
#   STITCHCUDA_EVAL_URLS=http://timing-node:8600,...,http://timing-node:8607 \
#   MODEL=/models/Qwen3-32B DATA=/data/stitchcuda-verl NNODES=4 bash rl/verl/qwen3_32b_lora.sh [overrides...]
# DATA holds skill1.parquet and skill2.parquet from `stitchcuda rl verl-data DATASET --out DATA`.
# For verl 0.9 (the reward hook lives under `reward.`: its main_ppo reads
# reward.custom_reward_function and no longer migrates the top-level key; on verl 0.8 pass
# custom_reward_function.path=... custom_reward_function.name=compute_score instead). The overrides
# below compose against verl 0.9.1's ppo_trainer config (checked with Hydra's compose, no GPU).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
: "${MODEL:?set MODEL to the Qwen3-32B folder}"
: "${DATA:?set DATA to the folder with skill1.parquet and skill2.parquet}"
: "${STITCHCUDA_EVAL_URLS:?set STITCHCUDA_EVAL_URLS to the timing GPUs evaluation servers}"
NNODES=${NNODES:-4}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
STEPS=${STEPS:-200}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
export STITCHCUDA_RL_RULE=gpu STITCHCUDA_RL_JUDGE=${STITCHCUDA_RL_JUDGE:-0} STITCHCUDA_EVAL_URLS
train_files="['$DATA/skill1.parquet','$DATA/skill2.parquet']"

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=False \
  data.train_files="$train_files" \
  data.val_files="['$DATA/skill1.parquet']" \
  data.train_batch_size=64 \
  data.max_prompt_length=8192 \
  data.max_response_length=16384 \
  data.filter_overlong_prompts=True \
  data.truncation=error \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.lora_rank=64 \
  actor_rollout_ref.model.lora_alpha=128 \
  actor_rollout_ref.model.target_modules=all-linear \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.actor.use_kl_loss=True \
  actor_rollout_ref.actor.kl_loss_coef=0.003 \
  actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.clip_ratio_low=0.2 \
  actor_rollout_ref.actor.clip_ratio_high=0.28 \
  actor_rollout_ref.actor.loss_agg_mode=token-mean \
  actor_rollout_ref.actor.fsdp_config.param_offload=True \
  actor_rollout_ref.actor.fsdp_config.optimizer_offload=True \
  actor_rollout_ref.ref.fsdp_config.param_offload=True \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.temperature=0.9 \
  actor_rollout_ref.rollout.top_k=20 \
  actor_rollout_ref.rollout.top_p=0.95 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=4 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.load_format=safetensors \
  actor_rollout_ref.rollout.layered_summon=True \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \
  reward.reward_manager.name=naive \
  reward.custom_reward_function.path="$repo/rl/verl_reward.py" \
  reward.custom_reward_function.name=compute_score \
  trainer.logger="['console']" \
  trainer.project_name=stitchcuda \
  trainer.experiment_name=qwen3-32b-lora-grpo \
  trainer.nnodes="$NNODES" \
  trainer.n_gpus_per_node="$GPUS_PER_NODE" \
  trainer.total_training_steps="$STEPS" \
  trainer.save_freq=20 \
  trainer.test_freq=20 \
  trainer.resume_mode=auto \
  "$@"
