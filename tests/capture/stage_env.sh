# Sourced by the GPU-machine scripts (`. tests/capture/stage_env.sh STAGE_DIR OUT_DIR`): S = the staged binaries
# (allocscope, liballocscope_capture.so and the libraries they need), O = the output folder (made, absolute), and the
# loader path that finds CUPTI, the CUDA runtime and the staged libraries.
S=$(cd "$1" && pwd)
O=$(mkdir -p "$2" && cd "$2" && pwd)
LDP=""
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/lib64; do [ -d "$d" ] && LDP="$LDP$d:"; done
export LD_LIBRARY_PATH="$LDP$S"
