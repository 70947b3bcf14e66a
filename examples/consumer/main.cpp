// cujit_consumer: uses only cujit's installed public headers. With a GPU it
// runs one jit::attention on random tensors; without one it compiles one
// attention variant for sm_80 offline. Either way into a fresh temporary
// cache, removed on exit.
#include <jit/cujit.h>
#include <jit/warmup.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// A fresh private (0700) cache directory, used through CUJIT_CACHE_DIR.
struct TempCache {
  std::filesystem::path path;
  TempCache() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cujit-consumer-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
    setenv("CUJIT_CACHE_DIR", path.c_str(), 1);
  }
  ~TempCache() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

int main() {
  try {
    TempCache cache;
    const bool gpu = jit::gpu_present();
    std::cout << "consumer: GPU present: " << (gpu ? "yes" : "no") << "\n";
    if (!gpu) {
      const jit::WarmupSummary summary =
          jit::warm_up_attention({"sm_80"}, {jit::parse_attention_shape("1,4,128,64,fp16,0")}, 1);
      std::cout << "consumer: compiled " << summary.compiled << ", cached " << summary.cached << ", failed "
                << summary.failed << " for sm_80 into " << jit::cache_directory() << "\n";
      for (const std::string& error : summary.errors) std::cerr << error << "\n";
      return summary.compiled + summary.cached >= 1 && summary.failed == 0 ? 0 : 1;
    }
    const std::int64_t b = 1, h = 4, s = 128, d = 64;
    jit::DeviceTensor q = jit::random_tensor(jit::DType::f16, b, h, s, d, 1);
    jit::DeviceTensor k = jit::random_tensor(jit::DType::f16, b, h, s, d, 2);
    jit::DeviceTensor v = jit::random_tensor(jit::DType::f16, b, h, s, d, 3);
    jit::DeviceTensor o = jit::attention(q.view, k.view, v.view);
    jit::synchronize(nullptr);
    std::vector<std::uint16_t> host(static_cast<std::size_t>(o.view.numel()));
    o.buffer.download(host.data(), host.size() * sizeof(std::uint16_t));
    for (std::uint16_t bits : host)
      if (!std::isfinite(jit::bits_to_float(bits, jit::DType::f16))) throw std::runtime_error("non-finite output");
    std::cout << "consumer: attention [" << b << ", " << h << ", " << s << ", " << d << "] fp16 ran on "
              << jit::current_target().device_name << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
