// Owners from stacks: library names in module paths and C++ symbols, innermost library first.
#include "allocscope/owners.h"

#include <algorithm>
#include <string>
#include <vector>

namespace allocscope {

namespace {

bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// The file part of a path ("/x/libnccl.so.2" -> "libnccl.so.2").
std::string_view leaf(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// A directory with "." and "name/.." taken out, ending in '/' ("/a/torch/lib/../../nvidia/" -> "/a/nvidia/").
std::string lexically_normal(std::string_view dir) {
  std::vector<std::string_view> parts;
  for (size_t at = 0; at <= dir.size();) {
    size_t slash = dir.find('/', at);
    if (slash == std::string_view::npos) slash = dir.size();
    const std::string_view part = dir.substr(at, slash - at);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") parts.pop_back();
      else parts.push_back(part);
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    at = slash + 1;
  }
  std::string out = !dir.empty() && dir[0] == '/' ? "/" : "";
  for (std::string_view p : parts) out.append(p).push_back('/');
  return out;
}

// NVIDIA's libraries that keep device memory of their own, wherever they are installed.
bool is_nvidia_library(std::string_view file) {
  for (std::string_view lib : {"libcurand", "libcufft", "libcusparse", "libcusolver", "libcutensor", "libcudss",
                               "libcufile", "libnvrtc", "libnvjpeg", "libnvJitLink", "libnvjitlink", "libnpp",
                               "libnvblas", "libnvshmem", "libnvinfer", "libcudla"})
    if (file.rfind(lib, 0) == 0) return true;
  return false;
}

}  // namespace

std::string_view owner_name(Owner o) {
  switch (o) {
    case Owner::kUnknown: return "unknown";
    case Owner::kUser: return "user";
    case Owner::kCudaRuntime: return "cuda_runtime";
    case Owner::kPyTorch: return "pytorch";
    case Owner::kXla: return "xla";
    case Owner::kCuPy: return "cupy";
    case Owner::kNccl: return "nccl";
    case Owner::kCublas: return "cublas";
    case Owner::kCudnn: return "cudnn";
    case Owner::kCudaGraphs: return "cuda_graphs";
    case Owner::kCudaLibrary: return "cuda_library";
  }
  return "unknown";
}

std::string_view owner_label(Owner o) {
  switch (o) {
    case Owner::kUnknown: return "unknown (no stack)";
    case Owner::kUser: return "the program's own CUDA calls";
    case Owner::kCudaRuntime: return "CUDA runtime";
    case Owner::kPyTorch: return "PyTorch caching allocator";
    case Owner::kXla: return "XLA/JAX allocator";
    case Owner::kCuPy: return "CuPy memory pool";
    case Owner::kNccl: return "NCCL";
    case Owner::kCublas: return "cuBLAS";
    case Owner::kCudnn: return "cuDNN";
    case Owner::kCudaGraphs: return "CUDA graphs";
    case Owner::kCudaLibrary: return "other CUDA libraries (cuRAND, cuFFT, ...)";
  }
  return "unknown";
}

bool is_library_owner(Owner o) {
  return o == Owner::kPyTorch || o == Owner::kXla || o == Owner::kCuPy || o == Owner::kNccl || o == Owner::kCublas ||
         o == Owner::kCudnn || o == Owner::kCudaGraphs || o == Owner::kCudaLibrary;
}

Owner owner_of_frame(std::string_view name, std::string_view filename) {
  const std::string_view file = leaf(filename);
  // Graph memory is allocated inside the runtime's graph calls (cudaGraphInstantiate, cuGraphAddMemAllocNode, ...),
  // which name it better than whoever called them.
  if (name.rfind("cudaGraph", 0) == 0 || name.rfind("cuGraph", 0) == 0 || has(name, "CUDAGraph"))
    return Owner::kCudaGraphs;
  // The runtime and the driver say how memory was asked for, not who asked. Decided by the module before any
  // directory: PyTorch's wheels load the runtime as ".../torch/lib/../../nvidia/cu13/lib/libcudart.so.13", which
  // once made every runtime frame PyTorch's, so another library's cudaMalloc under it counted as PyTorch's pool.
  if (file.rfind("libcudart", 0) == 0 || file.rfind("libcuda.so", 0) == 0 || file.rfind("libcupti", 0) == 0)
    return Owner::kCudaRuntime;
  // Libraries by module (wheels ship without symbols, so a frame is often "libnccl.so.2+0x1234") or by symbol.
  if (file.rfind("libnccl", 0) == 0 || name.rfind("nccl", 0) == 0 || has(name, "ncclMem")) return Owner::kNccl;
  if (file.rfind("libcublas", 0) == 0 || name.rfind("cublas", 0) == 0) return Owner::kCublas;
  if (file.rfind("libcudnn", 0) == 0 || name.rfind("cudnn", 0) == 0) return Owner::kCudnn;
  // Directories are matched on the path with "dir/.." resolved, as the loader resolved it.
  const std::string dir = lexically_normal(filename.substr(0, filename.size() - file.size()));
  if (file.rfind("libc10_cuda", 0) == 0 || file.rfind("libtorch", 0) == 0 || file.rfind("libc10", 0) == 0 ||
      name.rfind("c10::", 0) == 0 || name.rfind("at::", 0) == 0 || name.rfind("torch::", 0) == 0 ||
      has(dir, "/torch/lib/"))
    return Owner::kPyTorch;
  if (has(dir, "/jaxlib/") || has(dir, "/jax_plugins/") || file.rfind("xla_extension", 0) == 0 ||
      file.rfind("libxla", 0) == 0 || name.rfind("xla::", 0) == 0 || name.rfind("tsl::", 0) == 0 ||
      name.rfind("stream_executor::", 0) == 0 || has(name, "BFCAllocator"))
    return Owner::kXla;
  if (has(dir, "/cupy/") || has(dir, "/cupy_backends/") || has(name, "cupy")) return Owner::kCuPy;
  // NVIDIA's other libraries: cuRAND's generator state, cuFFT plans, cuSPARSE/cuSOLVER buffers, NVRTC, nvJPEG. By
  // name, or any libcu*/libnv* that NVIDIA's packages install: a user's own "libcustom_kernels.so" is the user's.
  if (is_nvidia_library(file) ||
      ((file.rfind("libcu", 0) == 0 || file.rfind("libnv", 0) == 0) &&
       (has(dir, "/nvidia/") || has(dir, "/cuda/") || has(dir, "/cuda-"))))
    return Owner::kCudaLibrary;
  if (name.rfind("cudaMalloc", 0) == 0 || name.rfind("cuMem", 0) == 0 || name.rfind("cudaFree", 0) == 0)
    return Owner::kCudaRuntime;
  // The capture's own frames (dropped when recording, but a linked build may keep one).
  if (file.rfind("liballocscope", 0) == 0 || name.rfind("allocscope::", 0) == 0 || name.rfind("allocscope_", 0) == 0)
    return Owner::kUnknown;
  return Owner::kUser;
}

OwnerMap::OwnerMap(const Snapshot& s) {
  std::vector<uint8_t> of_frame(s.frames.size());
  for (size_t f = 0; f < s.frames.size(); ++f)
    of_frame[f] = static_cast<uint8_t>(owner_of_frame(s.str(s.frames[f].name), s.str(s.frames[f].filename)));
  owner_.assign(s.stacks.size(), static_cast<uint8_t>(Owner::kUnknown));
  for (uint32_t id = 0; id < s.stacks.size(); ++id) {
    Owner found = Owner::kUnknown;
    for (FrameId f : s.stack(id)) {  // innermost first
      if (f >= of_frame.size()) continue;
      const Owner o = static_cast<Owner>(of_frame[f]);
      if (o == Owner::kUnknown) continue;
      if (o == Owner::kCudaRuntime) {
        found = Owner::kCudaRuntime;  // keep looking for who called the runtime
        continue;
      }
      found = o;  // a library, or the user's own code calling the runtime directly
      break;
    }
    owner_[id] = static_cast<uint8_t>(found);
  }
}

std::vector<std::pair<Owner, uint64_t>> bytes_by_owner(const DeviceLifetimes& lt, const OwnerMap& owners, uint32_t step) {
  uint64_t bytes[kOwnerCount] = {};
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (lt.alive_at(i, step)) bytes[static_cast<int>(owners.owner(lt.stack[i]))] += lt.size[i];
  std::vector<std::pair<Owner, uint64_t>> out;
  for (int o = 0; o < kOwnerCount; ++o)
    if (bytes[o]) out.emplace_back(static_cast<Owner>(o), bytes[o]);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace allocscope
