#!/bin/sh
# Remake the inspect_ai logs of this folder (run from the repository root). The tools live in
# their own venvs, never in the project's: python3.11 -m venv /work/tools/inspect-venv &&
# /work/tools/inspect-venv/bin/pip install inspect_ai==0.3.285 (and inspect_ai==0.3.140 in
# /work/tools/inspect-old-venv, whose .eval members are Deflate where 0.3.285 writes Zstandard).
set -e
here=tests/data/real_logs/inspect_ai
rm -rf $here/logs
/work/tools/inspect-venv/bin/python $here/make_logs.py $here/logs/zstd eval mockllm/model addition multiplication colours
/work/tools/inspect-venv/bin/python $here/make_logs.py $here/logs/json json mockllm/second multiplication colours
/work/tools/inspect-old-venv/bin/python $here/make_logs.py $here/logs/deflate eval mockllm/older addition
