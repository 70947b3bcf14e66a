// Kernel handles, the loaded-module table and offline compiles.
#include <fmt/format.h>

#include <map>
#include <mutex>

#include "jit/device.h"
#include "jit/driver.h"
#include "jit/error.h"
#include "jit/knobs.h"
#include "jit/loaded_kernel.h"
#include "jit/log.h"
#include "jit/runtime_state.h"

namespace jit {

Kernel::Kernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Kernel::~Kernel() {
  if (impl_ && impl_->module) {
    // A destructor never throws; the driver may already be gone at exit.
    if (detail::gpu_available()) detail::driver().cuModuleUnload(impl_->module);
  }
}

const std::string& Kernel::variant() const { return impl_->variant; }
int Kernel::registers() const { return impl_->registers; }

namespace {
// Opts the function in to `smem_bytes` of dynamic shared memory, and asks for
// the largest shared-memory carveout, so that as many CTAs as the shared
// memory allows can share an SM (the sm90 family's BM = 64 plans on two).
void opt_in_shared_memory(const Kernel::Impl& impl, unsigned smem_bytes) {
  if (smem_bytes <= impl.smem_opt_in.load(std::memory_order_relaxed)) return;
  const detail::DriverApi& cu = detail::driver();
  CUJIT_CU_CHECK(
      cu.cuFuncSetAttribute(impl.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem_bytes)));
  CUJIT_CU_CHECK(cu.cuFuncSetAttribute(impl.function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                       CU_SHAREDMEM_CARVEOUT_MAX_SHARED));
  impl.smem_opt_in.store(smem_bytes, std::memory_order_relaxed);
}
}  // namespace

int Kernel::resident_ctas_per_sm(const LaunchGeometry& g) const {
  opt_in_shared_memory(*impl_, g.smem_bytes);
  int ctas = 0;
  CUJIT_CU_CHECK(detail::driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &ctas, impl_->function, int(g.block.x * g.block.y * g.block.z), g.smem_bytes));
  return ctas;
}

void Kernel::launch(const LaunchGeometry& g, const void* params, std::size_t params_size, Stream stream) const {
  const detail::DriverApi& cu = detail::driver();
  opt_in_shared_memory(*impl_, g.smem_bytes);
  // The parameter struct is the kernel's only argument, passed by value. (Not
  // through CU_LAUNCH_PARAM_BUFFER_POINTER: the driver lays that buffer out
  // wrongly for a 64-byte-aligned struct, such as one holding TMA maps.)
  if (params_size != impl_->params_size) {
    throw Error(ErrorCode::Internal, fmt::format("{} takes a {}-byte parameter struct, the launch gives {} bytes",
                                                 impl_->variant, impl_->params_size, params_size));
  }
  void* args[] = {const_cast<void*>(params)};
  CUlaunchConfig launch_config{};
  launch_config.gridDimX = g.grid.x;
  launch_config.gridDimY = g.grid.y;
  launch_config.gridDimZ = g.grid.z;
  launch_config.blockDimX = g.block.x;
  launch_config.blockDimY = g.block.y;
  launch_config.blockDimZ = g.block.z;
  launch_config.sharedMemBytes = g.smem_bytes;
  launch_config.hStream = reinterpret_cast<CUstream>(stream);
  // Programmatic dependent launch: the kernel may start while the previous
  // one in the stream finishes; it waits for it with griddepcontrol.wait.
  CUlaunchAttribute attributes[2]{};
  unsigned count = 0;
  if (g.programmatic_dependent_launch) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[count++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (g.cluster_x > 1) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes[count].value.clusterDim.x = g.cluster_x;
    attributes[count].value.clusterDim.y = 1;
    attributes[count++].value.clusterDim.z = 1;
  }
  launch_config.attrs = count > 0 ? attributes : nullptr;
  launch_config.numAttrs = count;
  const CUresult result = cu.cuLaunchKernelEx(&launch_config, impl_->function, args, nullptr);
  if (result != CUDA_SUCCESS) {
    try {
      detail::throw_driver_error(result, "cuLaunchKernelEx", __FILE__, __LINE__);
    } catch (const Error& e) {
      throw Error(ErrorCode::Driver,
                  fmt::format("launching {} (grid {}x{}x{}, block {}, {} bytes shared memory{}): {}", impl_->variant,
                              g.grid.x, g.grid.y, g.grid.z, g.block.x, g.smem_bytes,
                              g.cluster_x > 1 ? fmt::format(", clusters of {}", g.cluster_x) : "", e.what()));
    }
  }
}

namespace detail {

std::unique_ptr<Kernel> load_kernel(const VariantBinary& binary) {
  const DriverApi& cu = driver();
  auto impl = std::make_unique<Kernel::Impl>();
  impl->variant = binary.variant;
  impl->registers = binary.usage.registers;
  CUJIT_CU_CHECK(cu.cuModuleLoadData(&impl->module, binary.cubin.data()));
  const CUresult found = cu.cuModuleGetFunction(&impl->function, impl->module, binary.lowered_name.c_str());
  if (found != CUDA_SUCCESS) {
    cu.cuModuleUnload(impl->module);
    throw_driver_error(found, "cuModuleGetFunction", __FILE__, __LINE__);
  }
  std::size_t offset = 0;
  const CUresult info = cu.cuFuncGetParamInfo(impl->function, 0, &offset, &impl->params_size);
  if (info != CUDA_SUCCESS) {
    cu.cuModuleUnload(impl->module);
    throw_driver_error(info, "cuFuncGetParamInfo", __FILE__, __LINE__);
  }
  return std::make_unique<Kernel>(std::move(impl));
}

}  // namespace detail

const Kernel& get_kernel(const KernelFamily& family, const Json& spec, const Json& config) {
  const detail::DeviceInfo& device = detail::current_device();
  const std::string key = family.name() + '/' + family.variant_name(spec, config);
  using Table = std::map<std::pair<CUcontext, std::string>, std::unique_ptr<Kernel>>;
  static std::mutex mutex;
  static auto* table = new Table();  // never destroyed: modules stay loaded while the driver lives
  {
    std::lock_guard lock(mutex);
    auto it = table->find({device.context, key});
    if (it != table->end()) return *it->second;
  }
  // Compile outside the lock so other variants can proceed.
  const auto policy = detail::knobs().autotune == detail::AutotuneMode::frozen ? detail::CompilePolicy::forbid
                                                                               : detail::CompilePolicy::allow;
  const detail::VariantBinary binary = detail::obtain_binary(family, spec, config, device.target.arch, policy);
  auto kernel = detail::load_kernel(binary);
  std::lock_guard lock(mutex);
  auto& slot = (*table)[{device.context, key}];
  if (!slot) slot = std::move(kernel);
  return *slot;
}

CompileReport compile_variant(const KernelFamily& family, const Json& spec, const Json& config,
                              const std::string& arch) {
  const detail::VariantBinary binary = detail::obtain_binary(family, spec, config, arch);
  return CompileReport{binary.variant, binary.arch, binary.from_cache, binary.usage.registers,
                       binary.usage.spill_bytes(), binary.compile_seconds,
                       binary.usage.wgmma_serialized};
}

bool gpu_present() { return detail::gpu_available(); }

Target current_target() { return detail::current_device().target; }

void synchronize(Stream stream) {
  CUJIT_CU_CHECK(detail::driver().cuStreamSynchronize(reinterpret_cast<CUstream>(stream)));
}

std::string cache_directory() {
  const auto& root = detail::cache_root();
  return root ? root->string() : std::string();
}

Stats stats() {
  const detail::Counters& c = detail::counters();
  return Stats{c.nvrtc_compiles.load(), c.disk_cache_hits.load(), c.tuning_runs.load(), c.tuning_db_hits.load()};
}

}  // namespace jit
