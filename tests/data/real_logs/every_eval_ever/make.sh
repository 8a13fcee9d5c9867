#!/bin/sh
# Remake the Every Eval Ever records of this folder (run from the repository root): the
# every-eval-ever 0.3.0 converters (Python 3.12, in their own venv:
# /root/.pyenv/versions/3.12.1/bin/python -m venv /work/tools/eee-venv &&
# /work/tools/eee-venv/bin/pip install every-eval-ever==0.3.0) applied to a run of the same
# lm-eval tasks as ../lm_eval by another model (so that the records and the raw logs are two
# models on the same benchmarks, never the same run twice). Its inspect converter refuses
# inspect's mock model ("Cannot determine model developer from model path 'mockllm/...'").
set -e
real=tests/data/real_logs
here=$real/every_eval_ever
work=/tmp/itemeval-eee-runs
rm -rf $work $here/logs
mkdir -p $work
HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 /work/tools/lmeval-venv/bin/lm_eval --model dummy \
  --model_args pretrained=example-org/dummy-model-b \
  --tasks repeat_a,repeat_b,colours,next_letter --include_path $real/lm_eval/tasks \
  --output_path $work/lm_eval --log_samples --seed 7
/work/tools/eee-venv/bin/python -m every_eval_ever.converters.lm_eval \
  --log_path $work/lm_eval --output_dir $here/logs/lm_eval --include_samples \
  --source_organization_name "itemeval test data"
