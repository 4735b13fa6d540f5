#!/usr/bin/env bash
# Builds the carry of MLA decode's peers (issue 52) on a machine with nvcc 13.0 and no GPU, for
# scripts/gpu-mla-peers.sh and tests/benchmark/mla_peers.py on the device (Python 3.12, no network):
#   OUT/flashinfer_python-<v>-py3-none-any.whl  FlashInfer re-zipped to what `import flashinfer.mla` and the fa3 MLA
#       decode need: the modules that import loads (traced here) plus all of flashinfer/{mla,jit,trace} and the
#       top-level modules; the fa3 bf16 module prebuilt for sm_90a as an AOT artifact (data/aot/<uri>/<uri>.so, which
#       FlashInfer loads before it thinks of compiling); and, for its JIT fallback, the three .cu sources, the config
#       template and exactly the headers that build read (ninja's dependency log), nothing else of data/.
#   OUT/apache_tvm_ffi-*-cp312-*.whl            FlashInfer's FFI (absent from the device image).
#   OUT/libflashmla_capi.so                      FlashMLA's SM90 dense decode (splitkv + combine + scheduler) behind the
#       C entry points of scripts/mla-peers/flashmla_capi.cu, built against FlashInfer's bundled CUTLASS (FlashMLA's
#       own is a submodule); it links only libcudart.so.13, so no torch ABI is involved.
#   OUT/.gitignore ("*": the folder ignores itself) and OUT/MANIFEST.txt (what, from where, sizes).
# Usage: scripts/mla-peers/build-carry.sh FLASHINFER_WHEEL FLASHMLA_SOURCE [OUT]   (OUT defaults to .whl-fi;
# FLASHMLA_SOURCE: a folder holding FlashMLA's csrc/; FLASHMLA_REV=<commit> names it in the manifest if not a checkout)
# Needs here: nvcc 13.0 at $CUDA_HOME (default /usr/local/cuda), g++, python3 with torch, pip able to reach PyPI.
set -euo pipefail
wheel=$(realpath "$1"); flashmla=$(realpath "$2"); out=$(realpath -m "${3:-.whl-fi}")
here=$(cd "$(dirname "$0")" && pwd)
cuda_home=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d /tmp/mla-peers-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out" "$work/whl" "$work/site" "$work/stub" "$work/ws"
echo '*' > "$out/.gitignore"
rm -f "$out"/*.whl "$out"/*.so

echo "== FlashInfer: unpack $(basename "$wheel")"
(cd "$work/whl" && python3 -m zipfile -e "$wheel" .)
fi_version=$(sed -n 's/^Version: //p' "$work"/whl/flashinfer_python-*.dist-info/METADATA)

echo "== tvm-ffi for the device (cp312) and, to trace and build here, for this Python"
tvm_spec='apache-tvm-ffi>=0.1.11,<0.2'
pyver=$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$out" "$tvm_spec"
tvm_version=$(ls "$out"/apache_tvm_ffi-*.whl | sed 's/.*apache_tvm_ffi-\([^-]*\)-.*/\1/')
# the device image has einops, tabulate, tqdm and ninja; this machine may not
python3 -m pip install -q --no-deps --target "$work/site" "apache-tvm-ffi==$tvm_version" einops tabulate tqdm ninja

export PYTHONPATH="$work/site:$work/whl" PATH="$work/site/bin:$PATH" CUDA_HOME="$cuda_home"
export FLASHINFER_WORKSPACE_BASE="$work/ws" FLASHINFER_CUDA_ARCH_LIST=9.0a MAX_JOBS=2 TVM_FFI_CACHE_DIR="$work/tvm"
echo "== FlashInfer: trace the modules that \`import flashinfer.mla\` loads (python $pyver)"
(cd "$work" && python3 - > "$work/imported.txt" <<'PY'
import os, sys
import flashinfer.mla  # noqa: F401
root = os.path.dirname(os.path.dirname(flashinfer.__file__))
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None) or ""
    if f.startswith(os.path.join(root, "flashinfer") + os.sep):
        print(os.path.relpath(f, root))
PY
)
echo "$(wc -l < "$work/imported.txt") modules"

echo "== FlashInfer: build the fa3 MLA module (bf16 q/kv/o, int32 indices, ckv 512, kpe 64) for sm_90a"
# no GPU here, so no libcuda: an empty stub with the driver's soname satisfies the module's -lcuda
gcc -shared -o "$work/stub/libcuda.so" -x c /dev/null -Wl,-soname,libcuda.so.1
uri=$(cd "$work" && LIBRARY_PATH="$work/stub" python3 - <<'PY'
import torch
from flashinfer.jit import gen_batch_mla_module
spec = gen_batch_mla_module("fa3", torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, 512, 64, False)
spec.build(verbose=False)
print(spec.name)
PY
) && uri=$(echo "$uri" | tail -1)
build="$work/ws/.cache/flashinfer/$fi_version/90a/cached_ops/$uri"
ls -la "$build/$uri.so"

echo "== FlashInfer: assemble the stripped wheel"
strip_root="$work/strip"
mkdir -p "$strip_root"
{
  cat "$work/imported.txt"
  (cd "$work/whl" && find flashinfer/mla flashinfer/jit flashinfer/trace -name '*.py' && ls flashinfer/*.py flashinfer/py.typed)
  (cd "$work/whl" && ls flashinfer/data/csrc/batch_mla_sm90_*.cu flashinfer/data/csrc/batch_mla_config.jinja)
  # the headers the fa3 build read, as ninja logged them (relative to the unpacked wheel)
  (cd "$build" && ninja -t deps) | sed -n "s#^ *$work/whl/##p" | grep '^flashinfer/data/'
} | sort -u > "$work/keep.txt"
(cd "$work/whl" && tar cf - -T "$work/keep.txt") | (cd "$strip_root" && tar xf -)
mkdir -p "$strip_root/flashinfer/data/aot/$uri"
cp "$build/$uri.so" "$strip_root/flashinfer/data/aot/$uri/$uri.so"
dist=$(cd "$work/whl" && ls -d flashinfer_python-*.dist-info)
mkdir -p "$strip_root/$dist"
cp "$work/whl/$dist"/{METADATA,WHEEL} "$strip_root/$dist/"
[ -f "$work/whl/$dist/entry_points.txt" ] && cp "$work/whl/$dist/entry_points.txt" "$strip_root/$dist/"
python3 - "$strip_root" "$dist" "$out/$(basename "$wheel")" <<'PY'
import base64, hashlib, os, sys, zipfile
root, dist, target = sys.argv[1:]
files = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
rows = []
with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    for rel in files:
        if rel == f"{dist}/RECORD":
            continue
        data = open(os.path.join(root, rel), "rb").read()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{rel},sha256={digest},{len(data)}")
        z.writestr(rel, data)
    rows.append(f"{dist}/RECORD,,")
    z.writestr(f"{dist}/RECORD", "\n".join(rows) + "\n")
print(f"{len(files)} files")
PY

echo "== FlashMLA: build libflashmla_capi.so (sm_90a, bf16)"
cutlass="$work/whl/flashinfer/data/cutlass"
src="$flashmla/csrc"
flags=(-O3 -std=c++20 -DNDEBUG -D_USE_MATH_DEFINES -DFLASH_MLA_DISABLE_FP16 -U__CUDA_NO_HALF_OPERATORS__
  -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_HALF2_OPERATORS__ -U__CUDA_NO_BFLOAT16_CONVERSIONS__
  --expt-relaxed-constexpr --expt-extended-lambda --use_fast_math -gencode arch=compute_90a,code=sm_90a
  -Xcompiler -fPIC -I"$src" -I"$src/kerutils/include" -I"$src/sm90" -I"$cutlass/include" -I"$cutlass/tools/util/include")
pids=()
for s in "$here/flashmla_capi.cu" "$src/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu" \
    "$src/smxx/decode/combine/combine.cu" "$src/sm90/decode/dense/instantiations/bf16.cu"; do
  "$cuda_home/bin/nvcc" "${flags[@]}" -c "$s" -o "$work/$(basename "$s" .cu).o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$cuda_home/bin/nvcc" -shared -cudart shared -gencode arch=compute_90a,code=sm_90a -o "$out/libflashmla_capi.so" \
  "$work"/{flashmla_capi,get_decoding_sched_meta,combine,bf16}.o

flashmla_rev=${FLASHMLA_REV:-$(git -C "$flashmla" rev-parse HEAD 2>/dev/null || echo unknown)}
{
  echo "MLA decode peers' carry, built $(date -u +%Y-%m-%dT%H:%MZ) by scripts/mla-peers/build-carry.sh"
  echo "flashinfer-python $fi_version, stripped: $(wc -l < "$work/keep.txt") files + AOT $uri.so"
  echo "apache-tvm-ffi $tvm_version (cp312, as published)"
  echo "FlashMLA $flashmla_rev (csrc/sm90/decode/dense + smxx), CUTLASS from flashinfer's data/cutlass"
  echo "nvcc: $("$cuda_home/bin/nvcc" --version | tail -1)"
  (cd "$out" && ls -l --time-style=+ ./*.whl ./*.so | awk '{print $5, $NF}')
  echo "total bytes: $(cat "$out"/*.whl "$out"/*.so | wc -c)"
} > "$out/MANIFEST.txt"
cat "$out/MANIFEST.txt"
