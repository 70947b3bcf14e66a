// The warm-up shape and manifest readers (cujit-warmup --shape, --manifest).
//
// Mode byte: bit 0 set: jit::parse_attention_shape, else
// jit::parse_attention_manifest. jit::Error is the documented way to reject
// an input; any other exception escapes and crashes the target, as do
// sanitizer findings. An accepted shape has positive sizes, and a shape
// printed back as B,H,S,D,dtype,causal parses to the same shape.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fuzz_support.h"
#include "jit/error.h"
#include "jit/warmup.h"

namespace {

void check(const jit::AttentionShape& s) {
  if (s.batch <= 0 || s.heads <= 0 || s.seq <= 0 || s.head_dim <= 0) fuzz::violated("accepted a non-positive size");
  const std::string text = fmt::format("{},{},{},{},{},{}", s.batch, s.heads, s.seq, s.head_dim,
                                       jit::to_string(s.dtype), s.causal ? 1 : 0);
  const jit::AttentionShape t = jit::parse_attention_shape(text);
  if (t.batch != s.batch || t.heads != s.heads || t.seq != s.seq || t.head_dim != s.head_dim || t.dtype != s.dtype ||
      t.causal != s.causal) {
    fuzz::violated("a shape printed as B,H,S,D,dtype,causal does not parse back to itself");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const fuzz::Input in = fuzz::split(data, size);
  try {
    if (in.mode & 1) {
      check(jit::parse_attention_shape(in.rest));
    } else {
      for (const jit::AttentionShape& s : jit::parse_attention_manifest(in.rest)) check(s);
    }
  } catch (const jit::Error&) {
  }
  return 0;
}
