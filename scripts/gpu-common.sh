# Sourced by scripts/gpu-{diagnosis,profile-runs,pm-sampling,mla-decode-gluon}.sh on a CUDA machine, clocks
# untouched: the results folder ($res, from $1 or the script's default), the Python ($py), `step` (a heading with the
# time and the SM clock) and the device's record (device.txt: nvidia-smi's read-only query and the torch/Triton
# versions). Usage: res=${1:-out/x}; . gpu-common.sh
set -uo pipefail
mkdir -p "$res"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 KBENCH_LOCK_CLOCKS=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S), sm $(nvidia-smi --query-gpu=clocks.sm --format=csv,noheader)) ==="; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv | tee "$res/device.txt"
$py -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$res/device.txt"
