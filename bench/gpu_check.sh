#!/usr/bin/env bash
# One short check on a CUDA machine: the GPU-marked MD tests, then the batched LJ benchmark
# on CUDA (Warp) against ASE and OpenMM (CUDA platform and CPU), printed as tables; the
# kinetics kernel on CUDA; the vLLM backend on CUDA where vLLM is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then . .venv/bin/activate; fi

python - <<'PY'
import warp as wp
wp.init()
print("warp devices:", [str(d) for d in wp.get_devices()])
from labtwin.simulators.md.openmm_engine import platform_name
print("OpenMM platform:", platform_name())
PY

python -m pytest tests/simulators/test_md_gpu.py -m gpu -q -p no:cacheprovider
python -m pytest tests/simulators/test_md_lj_warp.py tests/simulators/test_md_openmm.py -q -p no:cacheprovider

python bench/md_lj.py --device cuda --workloads 1024x256 --steps 1000 \
    --looped-systems 8 --openmm-platform CUDA
python bench/md_lj.py --device cuda --workloads 256x512 --steps 1000 \
    --looped-systems 8 --openmm-platform CPU

# the kinetics kernel on CUDA against scipy (the reactors' integrator), and the GRPO update
python -m pytest tests/simulators/test_kinetics.py -q -p no:cacheprovider
python bench/kinetics.py --large

# vLLM on CUDA, where the device's environment has it (labtwin[vllm]); the vllm tests pick
# the CUDA engine by themselves, and the generation benchmark times HF on cuda against it
if python -c "import vllm" 2>/dev/null; then
    python -m pytest -m vllm tests/agents/test_vllm_policy.py -q -p no:cacheprovider --timeout=1800
    python bench/generation.py --device cuda
else
    echo "vLLM is not installed here: its CUDA path was not checked (pip install 'labtwin[vllm]')"
fi
