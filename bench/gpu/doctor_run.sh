#!/usr/bin/env bash
# One visit to the GPU machine for `pagoda doctor`: runs the table, the JSON and a loopback run of the
# multi-GPU code paths, plus nvidia-smi readings to cross-check NVML values. Read-only: it changes no
# GPU setting. Usage: bench/gpu/doctor_run.sh [path/to/pagoda]   (logs under $OUT)
set -u
BIN=${1:-build-cuda-carry/pagoda}
OUT=${OUT:-/tmp/doctor-run}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0  # never NVLink multicast on shared hosts

# The binary was built elsewhere against libcudart/libcublasLt 13; find them here.
libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && libs="$libs:$d"
done
py_libs=$(python3 - 2>/dev/null <<'PY'
import importlib, os
for m in ("nvidia.cublas", "nvidia.cuda_runtime", "nvidia.nccl", "nvidia.cu13"):
    try:
        mod = importlib.import_module(m)
        for p in mod.__path__:
            for sub in ("lib", "lib64"):
                if os.path.isdir(os.path.join(p, sub)):
                    print(os.path.join(p, sub))
    except Exception:
        pass
PY
)
for d in $py_libs; do libs="$libs:$d"; done
export LD_LIBRARY_PATH="${libs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

{
  echo "== host"; uname -r; nproc
  echo "== ldd"; ldd "$BIN" | grep -E "cuda|cublas|not found"
  echo "== nvidia-smi (reference readings)"
  nvidia-smi --query-gpu=index,name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max,persistence_mode,ecc.mode.current,mig.mode.current,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm --format=csv
  nvidia-smi topo -m
} > "$OUT/reference.txt" 2>&1
cat "$OUT/reference.txt"

echo "== pagoda doctor"
"$BIN" doctor 2>&1 | tee "$OUT/doctor.txt"
status=${PIPESTATUS[0]}
echo "exit status: $status" | tee -a "$OUT/doctor.txt"
if [ "$status" -gt 1 ]; then  # a crash in the benchmarks: still record the NVML checks
  echo "== pagoda doctor --quick (after a crash)"
  "$BIN" doctor --quick 2>&1 | tee "$OUT/doctor-quick.txt"
fi

echo "== pagoda doctor --json"
"$BIN" doctor --json > "$OUT/doctor.json" 2> "$OUT/doctor-json.stderr"
echo "exit status: $?"
head -c 600 "$OUT/doctor.json"; echo

echo "== pagoda doctor --loopback (P2P and NCCL code paths on one GPU)"
"$BIN" doctor --loopback 2>&1 | grep -E "measured|exit|pass," | tee "$OUT/doctor-loopback.txt"

echo "== pagoda doctor --quick, timed"
/usr/bin/time -f "quick run: %e s" "$BIN" doctor --quick > /dev/null
