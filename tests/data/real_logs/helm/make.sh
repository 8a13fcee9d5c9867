#!/bin/sh
# Remake the HELM run folders of this folder (run from the repository root) with crfm-helm
# 0.5.16 in its own venv (python3.11 -m venv /work/tools/helm-venv &&
# /work/tools/helm-venv/bin/pip install crfm-helm==0.5.16): the two scenarios of plugin.py on
# the offline `simple/model1`, two trials each, instances in train, valid and test splits.
set -e
here=$(pwd)/tests/data/real_logs/helm
work=/tmp/itemeval-helm-out
rm -rf $work $here/logs
mkdir -p $work
cd $work
PYTHONPATH=$here /work/tools/helm-venv/bin/helm-run --plugins plugin --suite real \
  --run-entries "last_word:model=simple/model1" "odd_one_out:model=simple/model1" \
  --max-eval-instances 20 --disable-cache
mkdir -p $here/logs
for run in $work/benchmark_output/runs/real/*:*/; do  # a run's folder; ':' kept out of paths
  folder="$here/logs/$(basename "$run" | tr ':' '-')"
  mkdir -p "$folder"
  for f in run_spec.json scenario.json scenario_state.json stats.json per_instance_stats.json; do
    cp "$run/$f" "$folder/"
  done
done
