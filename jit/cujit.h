/// @file cujit.h
/// Umbrella header: everything a user of cujit needs.
#pragma once
#include "jit/attention.h"
#include "jit/error.h"
#include "jit/kernel_family.h"
#include "jit/serving.h"
#include "jit/tensor.h"
#include "jit/timing.h"
#include "jit/varlen.h"
#include "jit/warmup.h"
