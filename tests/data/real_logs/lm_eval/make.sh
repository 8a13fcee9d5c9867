#!/bin/sh
# Remake the lm-eval logs of this folder (run from the repository root) with lm-eval 0.4.13 in
# its own venv (python3.11 -m venv /work/tools/lmeval-venv &&
# /work/tools/lmeval-venv/bin/pip install lm-eval==0.4.13): the `dummy` model (random
# log-likelihoods, "lol" for every generation; `pretrained` names it, as the Every Eval Ever
# converter needs an organisation) on the local JSONL tasks of tasks/, offline.
set -e
here=tests/data/real_logs/lm_eval
rm -rf $here/logs /tmp/itemeval-lm-eval-out
HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 /work/tools/lmeval-venv/bin/lm_eval --model dummy \
  --model_args pretrained=example-org/dummy-model \
  --tasks repeat_a,repeat_b,colours,next_letter --include_path $here/tasks \
  --output_path /tmp/itemeval-lm-eval-out --log_samples --seed 1234
mkdir -p $here/logs
mv /tmp/itemeval-lm-eval-out/*/*.json* $here/logs/  # out of the folder lm-eval names
