// Every shipped attention family by name, for tests and tools that pick one
// directly (the call path finds them through the registry instead).
#pragma once
#include "jit/attention/decode/decode_family.h"
#include "jit/attention/family_registry.h"
#include "jit/attention/portable/portable_family.h"
#include "jit/attention/sm90/sm90_family.h"
