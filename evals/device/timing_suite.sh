#!/usr/bin/env bash
# On the H200 (device tool): one resumable slice of a full-suite eval with every baseline mode, for
# issue 12's agreement and throughput numbers. Call it again until it prints "NAME: complete"; then
# the same for the second eval (NAME=b), after which it also prints the agreement of the two.
#
#   [ONLY=regex] [BASELINE_MODES=list] bash evals/device/timing_suite.sh NAME [JOBS] [extra run args...]
#   (NAME: a or b, the two strict evals of the agreement on an H200, ha or hb on an H100; auto / auto2
#   pick the first / second of the card the call got; any other name is one more eval, e.g. the
#   KernelBench-mode run of issue 17: BASELINE_MODES=eager bash evals/device/timing_suite.sh k 12
#   --harness kernelbench, then python -m evals.benchmarks.harnesses on a's and k's results)
#
# One slice per device call: run(command="bash evals/device/timing_suite.sh a",
# carry=[".whl", ".device/timing"], timeout_s=600). The whole call (install, restore, eval, stopping
# the eval, saving the state, agreement) is planned to end SLICE_BUDGET (580) s after it starts; the
# eval gets what is left after RESERVE (60) s are set aside for the steps after it (about 20 s were
# used in the slices of 2026-12-07, which ended 500 s into the call), and prints how
# long the call took. The state comes back as one file; after each call, on the CPU machine:
#
#   rm -rf .device/timing && mkdir -p .device/timing && tar xzf FILES_AT/state.tgz -C .device/timing
#   python3 -m evals.device.timing_slice snapshot --state .device/timing --name NAME \
#       --into docs/benchmarks-data/suite-progress          (then commit that folder)
#   mkdir -p out/suite-turns/NAME && tar xzf FILES_AT/NAME.turns.tgz -C out/suite-turns/NAME
#       (every slice's; later ones replace a resumed run's file; then, once the eval is complete:
#       stitchcuda rl dataset out/suite-turns/NAME --out DIR, the GPU skill-2 rows)
#
# The snapshot (records, slice log, command, GPU model, baseline cache: small) is what survives a new
# checkout: a slice whose state lacks the eval resumes from it (SNAPSHOT names another folder). The
# caches and run folders do not survive: a new checkout's first slice rebuilds what it needs.
#
# The state lives in .device/timing/ of the checkout (ignored by git): it survives between calls and
# sessions as long as the checkout does; to go on from another checkout, copy that one folder there.
# A 98-problem eval needs more than one session's 30 minutes of device time: keep calling, in any
# session, with the folder in place. It holds (at most STATE_MB, 15 MiB, so it comes back whole):
#   NAME.results.jsonl          the records so far (the runner skips what is recorded)
#   baselines.json              the baseline cache ($STITCHCUDA_BASELINE_CACHE; eval b reuses eval a's)
#                               (its keys hash tools/worker/{timing,rounds,gpu_lock,timing_window}.py:
#                               an edit there between a and b measures every baseline again)
#   NAME.runs.tgz               run folders of the problems the last slice cut (their graph
#                               checkpoints: the next slice resumes them at their last finished node)
#   build.cache.tgz, inductor.cache.tgz   the newest build-cache entries and torch.compile cache
#                               files that fit in what is left (the caches on disk get far larger:
#                               each slice prints their sizes; the rest is rebuilt on a fresh machine)
#   NAME.slices.jsonl           each slice's eval start, end, exit and records (suite wall = the sum
#                               of the slices' spans: evals.benchmarks.scaling --slices)
#   NAME.command, suite.command the exact eval command with its environment (suite.command: the latest)
#   NAME.gpu                    the GPU model the eval is tied to at its first slice: a slice on another
#                               model stops before the eval (speedups of two models are not one table);
#                               records of another model (a seed) move to NAME.other-gpu.jsonl and run again
# Beside the state, $OUT/NAME.reports.tgz holds the report.json of every run in the work folder and
# $OUT/NAME.turns.tgz their turns.jsonl (the coder's turns and the verifier's outcomes: RL datasets).
#
# Stand-ins for a CPU dry run (tests/evals/test_timing_suite.py): SKIP_INSTALL=1, STATE, WORK_ROOT, GPU_NAME,
# RUN_COMMAND (the eval's hidden --run-command), SLICE_BUDGET, RESERVE.
set -u
t0=$(date +%s)
name=${1:?usage: timing_suite.sh NAME [JOBS] [run args...]}; shift
gpu=${GPU_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)}
# auto: the first eval of the card the device tool gave (a on an H200, ha on an H100); auto2 the second
case "$name" in
    auto|auto2) second=; [ "$name" = auto2 ] && second=1
        case "$gpu" in *H100*) name=ha;; *) name=a;; esac
        [ -n "$second" ] && name=${name%a}b;;
esac
jobs=${1:-12}; shift || true
state=${STATE:-.device/timing}
mkdir -p "$state" && state=$(cd "$state" && pwd)
work=${WORK_ROOT:-/tmp/timing-eval}/$name
budget=${SLICE_BUDGET:-580}
reserve=${RESERVE:-60}
mkdir -p "$state" "$OUT"
if [ "${SKIP_INSTALL:-0}" = 1 ]; then
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export STITCHCUDA_CACHE=${STITCHCUDA_CACHE:-/tmp/sc-cache}
export STITCHCUDA_BASELINE_CACHE=$state/baselines.json
# Inside the cache root: the sandbox honours only a compile cache in a tree a run may write.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$STITCHCUDA_CACHE/torchinductor}
export STITCHCUDA_PROFILERS=${STITCHCUDA_PROFILERS:-torch}
caches=("build=$STITCHCUDA_CACHE" "inductor=$TORCHINDUCTOR_CACHE_DIR")
helper=(python3 -m evals.device.timing_slice)
filter=()
[ -n "${ONLY:-}" ] && filter=(--only "$ONLY")
stand_in=()
[ -n "${RUN_COMMAND:-}" ] && stand_in=(--run-command "$RUN_COMMAND")

# A state lost with its checkout goes on from the committed snapshot (timing_slice snapshot, after a slice).
"${helper[@]}" resume --state "$state" --name "$name" --from "${SNAPSHOT:-docs/benchmarks-data/suite-progress}"
"${helper[@]}" restore --state "$state" --name "$name" --work "$work" --caches "${caches[@]}" --gpu "$gpu" || exit 1
slice=$("${helper[@]}" next-slice --work "$work")
cmd=(python3 -m graph.cli eval evals/suite --out "$work" --jobs "$jobs" "${filter[@]}"
     --baseline-modes "${BASELINE_MODES:-eager,default,max-autotune-no-cudagraphs,reduce-overhead}"
     "${stand_in[@]}" -- --max-iterations 3 "$@")
{
    echo "# from the repository root, in slices of one device call each (evals/device/timing_suite.sh $name $jobs)"
    python3 -c 'import os, shlex, sys; print(" ".join(f"{v}={shlex.quote(os.environ[v])}" for v in sys.argv[1].split()), shlex.join(sys.argv[2:]))' \
        "PYTHONPATH STITCHCUDA_PROFILERS STITCHCUDA_CACHE STITCHCUDA_BASELINE_CACHE TORCHINDUCTOR_CACHE_DIR" "${cmd[@]}"
} > "$state/$name.command"
cp "$state/$name.command" "$state/suite.command"

read -r before total < <("${helper[@]}" count "${filter[@]}" "$work/results.jsonl")
before=${before:-0}
seconds=$(( budget - reserve - ($(date +%s) - t0) ))
started=$(date +%s)
if [ "$seconds" -ge 30 ]; then
    "${helper[@]}" run --seconds "$seconds" --grace 10 -- "${cmd[@]}" > "$OUT/$name.eval.log" 2>&1
    rc=$?
else
    echo "slice: only $seconds s left for the eval; not started" | tee "$OUT/$name.eval.log"
    rc=125
fi
ended=$(date +%s)
read -r recorded total < <("${helper[@]}" count "${filter[@]}" "$work/results.jsonl")
recorded=${recorded:-0} total=${total:-0}
printf '{"slice": %s, "start": %s, "end": %s, "exit": %s, "recorded_before": %s, "recorded_after": %s, "total": %s, "jobs": %s}\n' \
    "$slice" "$started" "$ended" "$rc" "$before" "$recorded" "$total" "$jobs" >> "$state/$name.slices.jsonl"
echo "slice $slice: eval $(( ended - started )) s (its limit $seconds s, then up to 10 s to stop it), exit $rc (124: the slice's time ran out; call again to resume)"
tail -5 "$OUT/$name.eval.log"

"${helper[@]}" save --state "$state" --into "$OUT/state" --name "$name" --work "$work" --caches "${caches[@]}" \
    --budget-mb "${STATE_MB:-15}"
tar czf "$OUT/state.tgz" -C "$OUT/state" . && rm -rf "$OUT/state"
[ -f "$work/results.jsonl" ] && cp "$work/results.jsonl" "$state/$name.results.jsonl"  # for the agreement below
[ -f "$work/table.md" ] && cp "$work/table.md" "$OUT/$name.table.md"
# Each finished run's report (node seconds, attempts with their worker phases, the tuner's log): where
# a problem's time went, for the throughput table (issue 12).
if [ -d "$work/runs" ]; then
    (cd "$work" && find runs -name report.json -print0 | tar czf "$OUT/$name.reports.tgz" --null -T -) || true
    # The coder turns with the GPU verifier's feedback: skill-2 rows (stitchcuda rl dataset, issue 14).
    (cd "$work" && find runs -name turns.jsonl -print0 | tar czf "$OUT/$name.turns.tgz" --null -T -) || true
    if [ "$(stat -c %s "$OUT/$name.turns.tgz" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
        rm -f "$OUT/$name.turns.tgz" && echo "turns: over 15 MiB, left out (the device returns 16 MiB a file)"
    fi
fi
echo "$name: $recorded of $total problems recorded"
[ "$total" -gt 0 ] && [ "$recorded" -ge "$total" ] && echo "$name: complete"
timeout 30 python3 -m evals.benchmarks.agreement "$work/results.jsonl" || true
# the pairs of evals of one card: a and b (the H200), ha and hb (an H100; docs/benchmarks.md)
for pair in "a b" "ha hb"; do
    read -r first second <<< "$pair"
    [ -f "$state/$first.results.jsonl" ] && [ -f "$state/$second.results.jsonl" ] || continue
    timeout 30 python3 -m evals.benchmarks.agreement "$state/$first.results.jsonl" "$state/$second.results.jsonl" || true
    for n in $first $second; do
        timeout 30 python3 -m evals.benchmarks.scaling "$state/$n.results.jsonl" --slices "$state/$n.slices.jsonl" --problems 250 || true
    done
done
echo "call: $(( $(date +%s) - t0 )) s (the device call's limit is 600 s)"
