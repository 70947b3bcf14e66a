// A reading of SASS text (cuobjdump -sass): instruction counts that show
// whether a kernel compiled to what was meant (HGMMA, TMA, no local memory),
// and a dataflow audit of its branches, with the chain of instructions that
// carried the data mark to each flagged one.
//
// The audit marks every register and predicate with where its value can come
// from: memory that holds the inputs (global/shared loads, and wgmma, which
// reads shared memory), or synchronization state (mbarrier phase checks).
// Values from parameters, special registers (thread/block indices) and
// constants are clean. Marks flow forward through instructions and across the
// control-flow graph; an unpredicated write replaces a register's marks, a
// predicated one adds to them, except for a read under the same guard (its
// predicate not written since, on every path): there the write took effect,
// so the read sees its marks alone (if-converted code). A conditional branch
// whose predicate carries the data mark can make the kernel's timing depend
// on q, k or v.
//
// Index parameters: pointer parameters a kernel family names as pointing at
// index metadata (sequence lengths, block tables). A global load through one
// gives an index value, not data: a branch on a length is like a branch on a
// shape. A register read from such a parameter's constant-bank slot carries
// an index-pointer mark that flows like the others; an LDG/LD whose address
// carries it and not the data mark produces a clean value. Metadata staged
// through shared memory, or loaded with an address mixing in data, stays data.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace jit::sass {

struct Instruction {
  unsigned address = 0;
  std::string guard;    // "P0", "UP1", ... or "" when unpredicated (PT)
  bool guard_negated = false;
  std::string opcode;   // full, with modifiers: "ISETP.GE.AND"
  std::vector<std::string> operands;
  std::string text;     // the instruction as printed, without the address and ';'
};

struct Function {
  std::string name;
  std::string arch;  // "sm_90a" from cuobjdump's "code for sm_90a" line; "" when there is none
  std::vector<Instruction> instructions;
};

// Every function in cuobjdump -sass output, instructions in address order.
std::vector<Function> parse_sass(const std::string& text);

enum class BranchKind {
  unconditional,  // BRA with no predicate, or a predicate that is always true
  index,          // predicate from indices, parameters, and values loaded through index parameters
  sync,           // predicate from synchronization state (an mbarrier wait loop)
  data,           // predicate may depend on loaded data: flagged
  indirect,       // target not in the instruction (BRX, JMX): not analysed
};
const char* to_string(BranchKind kind);

// One instruction on the way from a load to a flagged branch: the instruction,
// and the register it read that carried the data mark ("" where the mark
// starts: a load, or wgmma).
struct ChainStep {
  unsigned address = 0;
  std::string text;
  std::string via;
};

struct Branch {
  unsigned address = 0;
  std::string text;
  BranchKind kind = BranchKind::unconditional;
  // For a data branch: one chain of instructions that carried the mark to its
  // predicate, the branch first and the instruction that introduced the mark
  // last. A witness of the analysis (the first way the mark arrived), not
  // necessarily a path the program can take.
  std::vector<ChainStep> chain;
};

// A loop's instructions by opcode: the base opcode ("FFMA", "F2FP"), and for
// MUFU its function too ("MUFU.EX2", "MUFU.RCP").
struct LoopMix {
  unsigned begin = 0;  // the backward branch's target
  unsigned end = 0;    // the backward branch
  int instructions = 0;
  std::map<std::string, int> opcodes;
  int count(const std::string& opcode) const;
};

struct Audit {
  std::string function;
  std::map<std::string, int> counts;  // opcode family -> instructions (see kCountedOpcodes)
  // The most MUFU.EX2 found, in address order, between a wait that leaves
  // one wgmma group in flight (WARPGROUP.DEPBAR.LE gsb0, 0x1) and the next
  // wait: the softmax exp2 that run while a warpgroup's P V may still be
  // running. 0 when ptxas moved the full wait ahead of the softmax.
  int exp2_under_wgmma = 0;
  // The innermost loop that runs MUFU.EX2 (the shortest span from a backward
  // branch's target to the branch that holds one): the softmax's main loop,
  // whose instructions per exp2 are what a score costs in issue slots.
  // Both arms of a branch inside the loop count, so a loop with a masked and
  // an unmasked copy of the softmax counts both. Absent without such a loop.
  std::optional<LoopMix> exp2_loop;
  std::vector<Branch> branches;
  int data_branches() const;
};

// Opcode families counted, by prefix.
inline const std::vector<std::string> kCountedOpcodes = {"HGMMA", "QGMMA", "HMMA",   "UTMALDG", "UTMASTG", "LDGSTS",
                                                         "LDG",   "STG",    "LDS",     "STS",     "LDSM",
                                                         "LDL",   "STL",    "MUFU.EX2", "BAR",    "SYNCS"};

// Where the kernel's parameter struct starts in constant bank 0 for an arch
// ("sm_90a" -> 0x210), or nullopt for an arch not known here. Read from the
// EIATTR_PARAM_CBANK attribute of cubins nvcc -cubin built from a small kernel:
// 0x160 on sm_75/80/86/89, 0x210 on sm_90a, 0x380 on sm_100a/sm_120.
std::optional<unsigned> parameter_bank_base(const std::string& arch);

struct AuditOptions {
  // Byte offsets within the kernel's parameter struct of pointers to index
  // metadata (KernelFamily::index_param_offsets). Ignored (every load is
  // data) when the function's arch has no known parameter_bank_base.
  std::vector<int> index_params;
  // The parameter struct's alignment (KernelFamily::params_alignment): it
  // starts at parameter_bank_base rounded up to this.
  int params_align = 8;
  // The kernel reads only index metadata (KernelFamily::reads_only_index_data):
  // every load gives an index value, shared-memory ones included.
  bool index_only = false;
};

Audit audit_function(const Function& function, const AuditOptions& options = {});

// explain: each flagged branch's chain as well.
nlohmann::json to_json(const Audit& audit, bool explain = false);

}  // namespace jit::sass
