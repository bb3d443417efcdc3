#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, CUDA 13 and PyTorch: unpacks what pack.sh
# made (from the folder this script is in) and runs the GPU checks, each with
# a time limit, writing logs to /tmp/gpu-check and, after each step, all of
# them as one tarball DEST_DIR/gpu-check.tgz (default DEST_DIR: /tmp).
#   bash gpu-pack/check.sh [DEST_DIR]
# GPU_CHECK_ONLY=REGEX runs only the steps whose names match (a rerun of
# what failed, inside a short device lease).
set -u
here=$(cd "$(dirname "$0")" && pwd); D=${1:-/tmp}; L=/tmp/gpu-check; mkdir -p "$L" "$D"; t0=$(date +%s)
mkdir -p /tmp && tar xJf "$here/bp-gpu.tar.xz" -C /tmp
lib() { dirname "$(find /usr/local /opt /usr/lib -name "$1" 2>/dev/null | head -1)"; }
export LD_LIBRARY_PATH=/tmp/bp-gpu/deps:$(lib libcublasLt.so.13):$(lib libcudart.so.13):$(lib libcudnn.so.9):${LD_LIBRARY_PATH:-}
# NCCL for the CUDA plugin's collective engine (Note [NCCL engine]): the
# first libnccl.so.2 on the machine, wherever its package put it.
BACKPLANE_NCCL_LIBRARY=${BACKPLANE_NCCL_LIBRARY:-$(find / -name 'libnccl.so.2*' -not -path '/proc/*' 2>/dev/null | head -1)}
export BACKPLANE_NCCL_LIBRARY
nvidia-smi -L; cd /tmp/bp-gpu; cp HEAD "$L/"; echo "nccl: $BACKPLANE_NCCL_LIBRARY" | tee "$L/nccl.txt"
step() { local n=$1 lim=$2; shift 2; [[ -n ${GPU_CHECK_ONLY:-} && ! $n =~ $GPU_CHECK_ONLY ]] && return; echo "=== $n ($(($(date +%s)-t0)) s)"; timeout "$lim" "$@" >"$L/$n.txt" 2>&1
         echo "rc=$?" >>"$L/$n.txt"; tail -n 12 "$L/$n.txt"; tar czf "$D/gpu-check.tgz" -C "$L" .; }
bp=$(find . -type f -name backplane -perm -u+x | head -1)
step devices 20 "$bp" devices
for t in $(find . -type f -perm -u+x -name 'gpu_*_tests'); do step "$(basename "$t")" 120 "$t" --gtest_brief=1; done
# Collectives: NCCL missing (every call staged through the host), and two
# ranks on the one GPU under Open MPI (staged: NCCL takes one GPU per rank).
gc=$(find . -type f -perm -u+x -name gpu_collectives_tests | head -1)
mc=$(find . -type f -perm -u+x -name mpi_collectives_tests | head -1)
step collectives_without_nccl 60 env BACKPLANE_NCCL_LIBRARY=/nonexistent/libnccl.so.2 "$gc" --gtest_brief=1
R=/tmp/ompi-root; mkdir -p $R; for f in "$here"/debs/*.deb; do dpkg -x "$f" $R; done; T=$R/usr
cat > /tmp/bp-mpirun <<EOS
#!/bin/sh
# Open MPI from the carried packages, relocated (OPAL_PREFIX), as root, on one machine.
export OPAL_PREFIX=$T LD_LIBRARY_PATH=$T/lib/x86_64-linux-gnu:$T/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mca_base_component_show_load_errors=0
export PMIX_MCA_pcompress_base_silence_warning=1 BACKPLANE_COMM_TIMEOUT=60 BACKPLANE_FALLBACK=silent
exec $T/bin/orterun "\$@"
EOS
chmod +x /tmp/bp-mpirun
step collectives_np2_one_gpu 120 /tmp/bp-mpirun -np 2 "$gc" --gtest_brief=1
step mpi_collectives_np2 120 /tmp/bp-mpirun -np 2 "$mc" --gtest_brief=1
step conformance 200 "$bp" conformance --backend cuda --junit "$L/cuda_junit.xml" --markdown "$L/cuda_conformance.md"
# ONNX's node tests (the pinned onnx wheel's, packed by pack.sh) on cuda,
# with cuda's checked-in expected failures, as scripts/test.sh runs them on
# cpu and gpusim.
mkdir -p /tmp/onnx-node && tar xJf "$here/onnx-node.tar.xz" -C /tmp/onnx-node
step onnx_conformance 200 "$bp" conformance --onnx /tmp/onnx-node --backend cuda \
     --onnx-expected /tmp/bp-gpu/onnx-expected --junit "$L/onnx_cuda_junit.xml" --markdown "$L/onnx_cuda.md"
step encoder 60 "$(find . -type f -name encoder -perm -u+x | head -1)" --device cuda:0 --iters 20
# The Python package on cuda (built by pack.sh for Python 3.12): DLPack with
# torch's CUDA tensors both ways, and the Python encoder sample on cuda:0.
if [ -d /tmp/bp-gpu/python/backplane ]; then
  step python_cuda 300 env PYTHONPATH=/tmp/bp-gpu/python BACKPLANE_PYTHON_ENCODER_SAMPLE=/tmp/bp-gpu/python/encoder_layer.py \
       python3 -m pytest -q -p no:cacheprovider /tmp/bp-gpu/python/test_dlpack_cuda.py
fi
# Training on cuda:0 (backward kernels, fused optimizers) against the same run on the CPU.
step train_curves 120 python3 "$here/train_curves.py" "$(find . -type f -name train -perm -u+x | head -1)"
step sparse_lidar 90 "$(find . -type f -name sparse_lidar -perm -u+x | head -1)" --device cuda:0
step cuda_bench 120 "$(find . -type f -name cuda_bench -perm -u+x | head -1)" --benchmark_repetitions=5 \
     --benchmark_report_aggregates_only=true --benchmark_out="$L/cuda_bench.json" --benchmark_out_format=json
step torch_baseline 120 python3 "$here/torch_baseline.py" "$L/torch_baseline.json"
# cuda_bench's ratios, those against PyTorch included, with their targets.
step ratios 30 python3 "$here/bench_ratios.py" "$L/cuda_bench.json" "$L/torch_baseline.json"
step memcheck 240 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 "$bp" conformance --backend cuda --timeout 200
echo "total $(($(date +%s)-t0)) s"
