#include "jit/nvrtc_compiler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nvrtc.h>

#include <regex>

#include "jit/error.h"

namespace jit::detail {
namespace {

// Owns one nvrtcProgram.
class Program {
 public:
  explicit Program(const CompileRequest& request) {
    const KernelSources& src = *request.sources;
    const std::string* entry_text = nullptr;
    std::vector<const char*> names, texts;
    for (const auto& [name, text] : src.files) {
      if (name == src.entry) {
        entry_text = &text;
      } else {
        names.push_back(name.c_str());
        texts.push_back(text.c_str());
      }
    }
    if (entry_text == nullptr) {
      throw Error(ErrorCode::Internal, fmt::format("kernel sources have no entry file '{}'", src.entry));
    }
    check(nvrtcCreateProgram(&program_, entry_text->c_str(), src.entry.c_str(), int(names.size()), texts.data(),
                             names.data()),
          "nvrtcCreateProgram");
  }
  ~Program() {
    if (program_) nvrtcDestroyProgram(&program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcProgram get() const { return program_; }

  std::string log() const {
    size_t size = 0;
    nvrtcGetProgramLogSize(program_, &size);
    std::string text(size, '\0');
    if (size > 0) nvrtcGetProgramLog(program_, text.data());
    while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
    return text;
  }

  static void check(nvrtcResult result, const char* call) {
    if (result != NVRTC_SUCCESS) {
      throw Error(ErrorCode::Compile, fmt::format("{} failed: {}", call, nvrtcGetErrorString(result)));
    }
  }

 private:
  nvrtcProgram program_ = nullptr;
};

int match_int(std::string_view log, const std::regex& pattern) {
  std::match_results<std::string_view::const_iterator> match;
  if (std::regex_search(log.begin(), log.end(), match, pattern)) return std::stoi(match[1].str());
  return 0;
}

}  // namespace

std::vector<std::string> nvrtc_options(const CompileRequest& request) {
  std::vector<std::string> options = {
      "--gpu-architecture=" + request.arch,
      "--std=c++17",
      "--ptxas-options=-v",  // the resource report lands in the log: registers, spills
      "--device-int128",
  };
  options.insert(options.end(), request.options.begin(), request.options.end());
  return options;
}

CompiledBinary nvrtc_compile(const CompileRequest& request) {
  Program program(request);
  Program::check(nvrtcAddNameExpression(program.get(), request.name_expression.c_str()), "nvrtcAddNameExpression");
  const std::vector<std::string> options = nvrtc_options(request);
  std::vector<const char*> option_ptrs;
  for (const auto& option : options) option_ptrs.push_back(option.c_str());
  const nvrtcResult result = nvrtcCompileProgram(program.get(), int(option_ptrs.size()), option_ptrs.data());
  CompiledBinary out;
  out.log = program.log();
  if (result != NVRTC_SUCCESS) {
    throw Error(ErrorCode::Compile,
                fmt::format("NVRTC could not compile {} for {} ({}).\noptions: {}\nlog:\n{}", request.name_expression,
                            request.arch, nvrtcGetErrorString(result), fmt::join(options, " "), out.log));
  }
  const char* lowered = nullptr;
  Program::check(nvrtcGetLoweredName(program.get(), request.name_expression.c_str(), &lowered),
                 "nvrtcGetLoweredName");
  out.lowered_name = lowered;
  size_t size = 0;
  Program::check(nvrtcGetCUBINSize(program.get(), &size), "nvrtcGetCUBINSize");
  out.cubin.resize(size);
  Program::check(nvrtcGetCUBIN(program.get(), out.cubin.data()), "nvrtcGetCUBIN");
  out.usage = parse_ptxas_report(out.log);
  return out;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

ResourceUsage parse_ptxas_report(std::string_view log) {
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex spill_stores(R"((\d+) bytes spill stores)");
  static const std::regex spill_loads(R"((\d+) bytes spill loads)");
  static const std::regex stack(R"((\d+) bytes stack frame)");
  static const std::regex smem(R"((\d+) bytes smem)");
  ResourceUsage usage;
  std::match_results<std::string_view::const_iterator> match;
  if (std::regex_search(log.begin(), log.end(), match, registers)) usage.registers = std::stoi(match[1].str());
  usage.spill_store_bytes = match_int(log, spill_stores);
  usage.spill_load_bytes = match_int(log, spill_loads);
  usage.stack_bytes = match_int(log, stack);
  usage.static_smem_bytes = match_int(log, smem);
  usage.wgmma_serialized = log.find("wgmma.mma_async instructions are serialized") != std::string_view::npos;
  return usage;
}

}  // namespace jit::detail
