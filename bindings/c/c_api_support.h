// What every C entry point shares (bindings/c/cujit_c.h): the conversion of
// a cujit_tensor to a TensorView and of cujit_options to AttentionOptions,
// the per-thread message of the last failed call, and guarded(), which keeps
// every exception on the C++ side.
#pragma once
#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "bindings/c/cujit_c.h"
#include "jit/attention.h"
#include "jit/error.h"
#include "jit/tensor.h"

namespace cujit_c {

// This thread's message of its last failed call ("" after a success).
std::string& last_error();

// The dtype of a cujit_dtype value; `name` names the field in the error.
jit::DType dtype_of(std::int32_t dtype, const std::string& name);

// The view of `t`; `name` names the argument when it is NULL or its dtype unknown.
jit::TensorView view_of(const cujit_tensor* t, const std::string& name);

// The options of jit::attention (and attention_varlen); NULL means the defaults.
jit::AttentionOptions attention_options_of(const cujit_options* o);

// Throws Error(InvalidArgument) saying that `name` is NULL.
[[noreturn]] void null_argument(const char* name);

// Throws naming `caller` when buffer is NULL or has no room for the NUL;
// checked before any work, so a call with no buffer fails at once.
void check_text_buffer(const char* buffer, std::size_t size, const char* caller);
// Copies `text` into a checked buffer, NUL-terminated, truncated to size - 1.
void copy_text(const std::string& text, char* buffer, std::size_t size);

// Runs f, turning any exception into a status and this thread's message.
template <class F>
cujit_status guarded(F&& f) {
  try {
    f();
    last_error().clear();
    return CUJIT_OK;
  } catch (const jit::Error& e) {
    last_error() = e.what();
    return static_cast<cujit_status>(static_cast<int>(e.code()) + 1);
  } catch (const std::bad_alloc&) {
    last_error() = "out of host memory";
  } catch (const std::exception& e) {
    last_error() = std::string("internal error: ") + e.what();
  } catch (...) {
    last_error() = "internal error: unknown exception";
  }
  return CUJIT_INTERNAL;
}

}  // namespace cujit_c
