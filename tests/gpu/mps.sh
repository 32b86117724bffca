#!/usr/bin/env bash
# Starts or stops an MPS daemon in a private directory, so several ranks on
# one GPU run their kernels at once (without MPS they time-slice and a flag
# round trip takes milliseconds). Usage: source tests/gpu/mps.sh; mps_start; ...; mps_stop
mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-$(mktemp -d /tmp/cco-mps-pipe.XXXXXX)}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-$(mktemp -d /tmp/cco-mps-log.XXXXXX)}
  nvidia-cuda-mps-control -d && echo "mps: started ($CUDA_MPS_PIPE_DIRECTORY)"
}
mps_stop() {
  echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 && echo "mps: stopped"
}
