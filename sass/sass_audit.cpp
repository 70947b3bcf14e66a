#include "sass/sass_audit.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <cstdint>
#include <deque>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

namespace jit::sass {
namespace {

// ---------------------------------------------------------------- parsing

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

// Splits on commas outside brackets ("desc[UR4][R2.64+0x10]" stays whole).
std::vector<std::string> split_operands(const std::string& s) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!trim(current).empty()) out.push_back(trim(current));
  return out;
}

Instruction parse_instruction(unsigned address, const std::string& body) {
  Instruction in;
  in.address = address;
  in.text = body;
  std::istringstream words(body);
  std::string word;
  words >> word;
  if (!word.empty() && word[0] == '@') {
    in.guard_negated = word.size() > 1 && word[1] == '!';
    in.guard = word.substr(in.guard_negated ? 2 : 1);
    if (in.guard == "PT" || in.guard == "UPT") in.guard.clear();  // always true (or, negated, never)
    words >> word;
  }
  in.opcode = word;
  std::string rest;
  std::getline(words, rest);
  in.operands = split_operands(rest);
  return in;
}

// ---------------------------------------------------------------- registers

// Dense indices: R0-R255, UR0-UR63, P0-P7, UP0-UP7, and one more for the
// result of a barrier reduction (BAR.RED writes it, B2R reads it). RZ, URZ,
// PT, UPT are constants and have none.
constexpr int kUniformBase = 256;
constexpr int kPredicateBase = 320;
constexpr int kUniformPredicateBase = 328;
constexpr int kBarrierResult = 336;
constexpr int kRegisters = 337;

struct RegisterRef {
  int index = -1;
  int width = 1;
};

// Registers named in an operand, with ".64"/".128" widening an address pair.
// PR (UPR) is the predicates P0-P6 (UP0-UP6) together, as P2R and R2P name them.
std::vector<RegisterRef> registers_in(const std::string& operand) {
  static const std::regex pattern(R"((^|[^A-Za-z0-9_])(UR|R|UP|P)(\d+|R\b)(\.64|\.128)?)");
  std::vector<RegisterRef> out;
  for (std::sregex_iterator it(operand.begin(), operand.end(), pattern), end; it != end; ++it) {
    const std::string kind = (*it)[2];
    if ((*it)[3] == "R") {
      if (kind == "P") out.push_back({kPredicateBase, 7});
      if (kind == "UP") out.push_back({kUniformPredicateBase, 7});
      continue;
    }
    const int n = std::stoi((*it)[3]);
    const std::string suffix = (*it)[4];
    RegisterRef r;
    r.width = suffix == ".64" ? 2 : suffix == ".128" ? 4 : 1;
    if (kind == "R" && n < 256) r.index = n;
    if (kind == "UR" && n < 64) r.index = kUniformBase + n;
    if (kind == "P" && n < 8) r.index = kPredicateBase + n;
    if (kind == "UP" && n < 8) r.index = kUniformPredicateBase + n;
    if (r.index >= 0) out.push_back(r);
  }
  return out;
}

bool is_bare_register(const std::string& operand) {
  if (operand.empty() || operand.find('[') != std::string::npos) return false;
  static const std::regex pattern(R"([-!|]*(UR|R|UP|P)(\d+|Z|T|R)(\.[A-Za-z0-9_]+)*\|?)");
  return std::regex_match(operand, pattern);
}
bool is_predicate(const std::string& operand) {
  static const std::regex pattern(R"(!?U?P(\d+|T))");
  return std::regex_match(operand, pattern);
}

std::string base_opcode(const std::string& opcode) { return opcode.substr(0, opcode.find('.')); }
bool has_modifier(const std::string& opcode, const std::string& modifier) {
  return opcode.find("." + modifier) != std::string::npos;
}

// P2R, R2P and their uniform forms: a register's bits from or to the
// predicates that a mask, their last operand, selects.
bool moves_predicates(const Instruction& in) {
  const std::string base = base_opcode(in.opcode);
  return base == "P2R" || base == "R2P" || base == "UP2UR" || base == "R2UP";
}
bool has_immediate_mask(const Instruction& in) {
  return !in.operands.empty() && in.operands.back().rfind("0x", 0) == 0;
}

// The registers an instruction's operand names. P2R and R2P move only the
// predicates their immediate mask selects ("P2R R0, PR, RZ, 0x1" reads P0
// alone, "R2P PR, R5, 0x6" writes P1 and P2), so for their PR (UPR) operand
// those predicates, not all seven: a loop that keeps P0 in a register would
// otherwise take the marks of every other predicate live there.
std::vector<RegisterRef> registers_in(const Instruction& in, std::size_t operand) {
  std::vector<RegisterRef> out = registers_in(in.operands[operand]);
  if (!moves_predicates(in) || !has_immediate_mask(in) || out.size() != 1 || out[0].width != 7) return out;
  const unsigned long mask = std::stoul(in.operands.back(), nullptr, 16);
  const int first = out[0].index;
  out.clear();
  for (int p = 0; p < 7; ++p) {
    if (mask & (1ul << p)) out.push_back({first + p, 1});
  }
  return out;
}

// wgmma in SASS: HGMMA for 16-bit operands, QGMMA for 8-bit ones.
bool is_wgmma(const std::string& base) { return base == "HGMMA" || base == "QGMMA"; }

// How many registers a destination spans.
int destination_width(const Instruction& in) {
  const std::string base = base_opcode(in.opcode);
  if (is_wgmma(base)) {
    static const std::regex shape(R"(\.64x(\d+)x)");
    std::smatch m;
    if (std::regex_search(in.opcode, m, shape)) return std::stoi(m[1]) / 2;
    return 128;
  }
  if (base == "HMMA" || base == "IMMA") return 4;
  if (base == "LDSM") return has_modifier(in.opcode, "4") ? 4 : has_modifier(in.opcode, "2") ? 2 : 1;
  if (base == "CS2R") return has_modifier(in.opcode, "32") ? 1 : 2;
  if (has_modifier(in.opcode, "128")) return 4;
  if (has_modifier(in.opcode, "64") || has_modifier(in.opcode, "WIDE")) return 2;
  return 1;
}

// Where a value can come from: bits of a mark.
constexpr std::uint8_t kData = 1;  // memory holding the inputs
constexpr std::uint8_t kSync = 2;  // synchronization state
constexpr std::uint8_t kIndexPointer = 4;  // an index parameter's pointer (AuditOptions::index_params)

// Byte ranges [first, last) of constant bank 0 that hold index parameters.
using ConstantRanges = std::vector<std::pair<unsigned, unsigned>>;

// Whether an operand reads bank 0 inside one of the ranges: "c[0x0][0x2a8]"
// (ULDC.64, LDC.64, or a source of IMAD.WIDE / LEA / IADD3 directly). The
// pointer's high word ("c[0x0][0x2ac]", as LEA.HI.X reads it) counts too.
bool reads_index_constant(const std::string& operand, const ConstantRanges& ranges) {
  if (ranges.empty()) return false;
  static const std::regex pattern(R"(c\[0x0\]\[(0x[0-9a-fA-F]+)\])");
  for (std::sregex_iterator it(operand.begin(), operand.end(), pattern), end; it != end; ++it) {
    const unsigned offset = unsigned(std::stoul((*it)[1], nullptr, 16));
    for (const auto& [first, last] : ranges) {
      if (offset >= first && offset < last) return true;
    }
  }
  return false;
}

// Global loads whose address may be an index pointer: their result is then an index.
bool loads_global(const std::string& base) { return base == "LDG" || base == "LD"; }

// Destinations carry data whatever the operands: loads of global, shared or
// local memory, and wgmma (which reads its operands from shared memory).
bool loads_data(const std::string& base) {
  static const std::set<std::string> loads = {"LDG", "LDS", "LDSM", "LD", "LDL", "ATOM", "ATOMS", "ATOMG",
                                              "TLD", "TEX", "SULD", "SUATOM"};
  return loads.count(base) > 0 || is_wgmma(base);
}
bool reads_sync_state(const std::string& base) { return base == "SYNCS"; }

// Instructions whose first operand, a register, is read and not written.
bool writes_no_register(const Instruction& in) {
  const std::string base = base_opcode(in.opcode);
  if (base == "BAR") return true;  // "BAR.SYNC R2, 0x80": R2 is the barrier's number
  static const std::set<std::string> none = {"WARPSYNC", "NANOSLEEP", "BPT", "YIELD", "RET", "EXIT", "BRA", "BRX",
                                             "JMP", "JMX", "CALL", "CCTL", "MEMBAR"};
  return none.count(base) > 0;
}

// Operand positions written: the leading operands, as the instruction's form
// says how many.
//   "R4, ..."                  one value
//   "R4, P0, P1, ..."          a value and carry outs (IADD3, LEA, UIADD3: the
//                              predicates right after the value, two at most)
//   "P0, P1, ..."              compare-and-set and PLOP3: two predicates
//   "P0, R9, ..."              a predicate and a value: LOP3 ("LOP3.LUT P2,
//                              R9, R3, 0x7f, RZ, 0xc0, !PT" writes R9 and
//                              P2), SHFL, R2UR ("R2UR P0, UR10, R7"), ELECT,
//                              atomics
//   "R5, PT, P0" / "UP2, P0"   VOTE: all but the last (the predicate voted on)
// Other instructions with a predicate first (FCHK P0, R4, R5; SYNCS.PHASECHK
// P0, [UR4], R5) write only the predicate.
std::vector<std::size_t> destination_operands(const Instruction& in) {
  std::vector<std::size_t> out;
  if (in.operands.empty() || !is_bare_register(in.operands[0]) || writes_no_register(in)) return out;
  out.push_back(0);
  const std::string base = base_opcode(in.opcode);
  const std::size_t n = in.operands.size();
  if (base == "VOTE" || base == "VOTEU") {
    for (std::size_t i = 1; i + 1 < n && is_bare_register(in.operands[i]); ++i) out.push_back(i);
    return out;
  }
  if (is_predicate(in.operands[0])) {
    static const std::set<std::string> predicate_and_value = {"PLOP3", "UPLOP3", "LOP3",  "ULOP3", "SHFL",
                                                              "R2UR",  "ELECT",  "ATOM", "ATOMG", "ATOMS"};
    const bool two = base.find("SETP") != std::string::npos || predicate_and_value.count(base) > 0;
    if (two && n > 1 && is_bare_register(in.operands[1])) out.push_back(1);
    return out;
  }
  for (std::size_t i = 1; i < n && i <= 2 && is_predicate(in.operands[i]) && is_bare_register(in.operands[i]); ++i) {
    out.push_back(i);
  }
  return out;
}

// Whether the written registers keep what they held as well: accumulators,
// R2UR.OR/.AND (which combine the predicate they write with its old value),
// and R2P with a mask in a register (which writes only the predicates the
// mask names: which, the audit cannot tell; an immediate mask names them,
// registers_in(in, operand)).
bool reads_destination(const Instruction& in) {
  const std::string base = base_opcode(in.opcode);
  const bool writes_predicates = base == "R2P" || base == "R2UP";
  return is_wgmma(base) || base == "HMMA" || (writes_predicates && !has_immediate_mask(in)) ||
         (base == "R2UR" && (has_modifier(in.opcode, "OR") || has_modifier(in.opcode, "AND")));
}

bool is_branch(const std::string& base) { return base == "BRA" || base == "BRX" || base == "JMX" || base == "JMP"; }
bool ends_flow(const std::string& base) { return base == "EXIT" || base == "RET"; }

std::optional<unsigned> branch_target(const Instruction& in) {
  for (const std::string& operand : in.operands) {
    if (operand.rfind("0x", 0) == 0) return unsigned(std::stoul(operand, nullptr, 16));
  }
  return std::nullopt;
}

// The predicate a branch tests: its guard, or a predicate operand ("BRA.U !UP0, 0x...").
std::optional<int> branch_condition(const Instruction& in) {
  if (!in.guard.empty()) return registers_in(in.guard).at(0).index;
  for (const std::string& operand : in.operands) {
    if (is_predicate(operand) && operand.find("PT") == std::string::npos) return registers_in(operand).at(0).index;
  }
  return std::nullopt;
}

using Marks = std::array<std::uint8_t, kRegisters>;

// What a register holds where its last write, a predicated one, took effect.
// If-converted code writes a register and reads it back under one guard
// ("@P1 LEA.HI R0, R5, R5, RZ, 0x1; @P1 IMAD.SHL.U32 R0, R0, 0x10, RZ"): the
// read executes only where the write did, so it sees the new value alone, not
// the old one that the joined marks keep possible. Void once the guard's
// predicate is written again, or the register is.
struct GuardedWrite {
  int guard = -1;  // the predicate register; -1: none recorded
  bool negated = false;
  std::uint8_t marks = 0;
  int origin = -1;
  bool operator==(const GuardedWrite&) const = default;
};

// The marks, and for each register with the data mark the instruction that
// put it there (an index into the function's code; -1 where none did).
struct State {
  Marks marks{};
  std::array<int, kRegisters> origin{};
  std::array<GuardedWrite, kRegisters> guarded{};
  State() { origin.fill(-1); }
};

// The guard's register (-1: unpredicated).
int guard_register(const Instruction& in) {
  if (in.guard.empty()) return -1;
  const std::vector<RegisterRef> refs = registers_in(in.guard);
  return refs.empty() ? -1 : refs.front().index;
}

// A register's marks and origin as an instruction with this guard reads them.
std::pair<std::uint8_t, int> read_under(const State& state, int reg, int guard, bool negated) {
  const GuardedWrite& g = state.guarded[std::size_t(reg)];
  if (guard >= 0 && g.guard == guard && g.negated == negated) return {g.marks, g.origin};
  return {state.marks[std::size_t(reg)], state.origin[std::size_t(reg)]};
}

// How an instruction first produced the data mark: the register it read that
// carried it (-1: the instruction loads, so the mark starts there) and the
// instruction that had put the mark in that register. via -2: not yet.
struct Cause {
  int via = -2;
  int from = -1;
};

// guard: the writing instruction's guard register (-1: unpredicated), whose
// write may not happen, so that the old marks stay possible.
void mark_range(State& state, const RegisterRef& r, int width, std::uint8_t value, int guard, bool negated,
                int writer) {
  const bool replace = guard < 0;
  for (int i = 0; i < width && r.index + i < kRegisters; ++i) {
    const std::size_t k = std::size_t(r.index + i);
    std::uint8_t& m = state.marks[k];
    if (value & kData) {
      state.origin[k] = writer;
    } else if (replace) {
      state.origin[k] = -1;
    }
    m = replace ? value : std::uint8_t(m | value);
    state.guarded[k] = replace ? GuardedWrite{} : GuardedWrite{guard, negated, value, (value & kData) ? writer : -1};
  }
}

// A predicate written (P0-P7, UP0-UP7): what was written under it no longer
// follows from it.
void forget_guard(State& state, int reg) {
  const bool predicate = (reg >= kPredicateBase && reg < kPredicateBase + 8) ||
                         (reg >= kUniformPredicateBase && reg < kUniformPredicateBase + 8);
  if (!predicate) return;
  for (GuardedWrite& g : state.guarded) {
    if (g.guard == reg) g = GuardedWrite{};
  }
}

// Applies instruction `index` to the state; records how it first produced data.
void transfer(const Instruction& in, int index, State& state, Cause& cause, const ConstantRanges& index_constants,
              bool index_only) {
  const std::string base = base_opcode(in.opcode);
  const std::vector<std::size_t> dests = destination_operands(in);
  const int guard = guard_register(in);
  std::uint8_t sources = 0;
  int data_via = -2;  // first register read that carries data
  int data_origin = -1;  // the instruction that put the data mark there
  auto read = [&](int reg) {
    const auto [m, origin] = read_under(state, reg, guard, in.guard_negated);
    sources |= m;
    if ((m & kData) && data_via == -2) {
      data_via = reg;
      data_origin = origin;
    }
    return m;
  };
  // Which sources are register pairs: all of a ".64" instruction's; of
  // IMAD.WIDE's "R10, R19, UR16, R10", only the addend (the third source):
  // the factors are 32 bits.
  const bool wide = has_modifier(in.opcode, "WIDE");
  const bool wide_sources = has_modifier(in.opcode, "64");
  std::size_t source_position = 0;
  std::uint8_t address = 0;  // marks of the memory operands ("[...]") alone
  for (std::size_t i = 0; i < in.operands.size(); ++i) {
    if (std::find(dests.begin(), dests.end(), i) != dests.end()) continue;
    const bool pair = wide_sources || (wide && (source_position == 2 || in.operands.size() - dests.size() < 3));
    ++source_position;
    std::uint8_t operand = reads_index_constant(in.operands[i], index_constants) ? kIndexPointer : 0;
    for (const RegisterRef& r : registers_in(in, i)) {
      const int width = pair && r.index < kUniformBase + 64 ? std::max(r.width, 2) : r.width;
      for (int k = 0; k < width && r.index + k < kRegisters; ++k) operand |= read(r.index + k);
    }
    sources |= operand;
    if (in.operands[i].find('[') != std::string::npos) address |= operand;
  }
  if (reads_destination(in)) {
    for (std::size_t d : dests) {
      for (const RegisterRef& r : registers_in(in, d)) {
        const int width = d == 0 ? std::max(destination_width(in), r.width) : r.width;
        for (int k = 0; k < width && r.index + k < kRegisters; ++k) read(r.index + k);
      }
    }
  }
  if (base == "B2R") read(kBarrierResult);  // "B2R.RESULT R0": a BAR.RED's reduction
  if (guard >= 0) read(guard);
  std::uint8_t value = sources;
  if (loads_data(base)) {
    // A loaded value is never the parameter's pointer itself. Through an
    // index pointer (and no data), or anywhere in a kernel that reads only
    // index metadata, it is an index; otherwise it is data.
    value &= std::uint8_t(~kIndexPointer);
    const bool index_load =
        index_only || (loads_global(base) && (address & kIndexPointer) && !(address & kData));
    if (!index_load) {
      value |= kData;
      data_via = -1;
    }
  }
  if (reads_sync_state(base)) value |= kSync;
  if ((value & kData) && cause.via == -2) {
    cause.via = data_via;
    cause.from = data_via >= 0 ? data_origin : -1;
  }
  for (std::size_t d : dests) {
    for (const RegisterRef& r : registers_in(in, d)) {
      const int width = d == 0 ? std::max(destination_width(in), r.width) : r.width;
      mark_range(state, r, width, value, guard, in.guard_negated, index);
    }
  }
  // After every destination is marked: a register written under a predicate
  // that the same instruction writes ("@P1 LOP3.LUT P1, R9, ...") keeps no entry.
  for (std::size_t d : dests) {
    for (const RegisterRef& r : registers_in(in, d)) {
      for (int k = 0; k < r.width && r.index + k < kRegisters; ++k) forget_guard(state, r.index + k);
    }
  }
  // "BAR.RED.POPC 0x0, P0" reduces its predicate over the block; B2R reads the result.
  if (base == "BAR" && has_modifier(in.opcode, "RED")) {
    mark_range(state, {kBarrierResult, 1}, 1, value, guard, in.guard_negated, index);
  }
}

std::string register_name(int index) {
  if (index == kBarrierResult) return "BAR.RED result";
  if (index >= kUniformPredicateBase) return "UP" + std::to_string(index - kUniformPredicateBase);
  if (index >= kPredicateBase) return "P" + std::to_string(index - kPredicateBase);
  if (index >= kUniformBase) return "UR" + std::to_string(index - kUniformBase);
  return "R" + std::to_string(index);
}

BranchKind classify(std::uint8_t condition_marks) {
  if (condition_marks & kData) return BranchKind::data;
  if (condition_marks & kSync) return BranchKind::sync;
  return BranchKind::index;
}

}  // namespace

const char* to_string(BranchKind kind) {
  switch (kind) {
    case BranchKind::unconditional: return "unconditional";
    case BranchKind::index: return "index";
    case BranchKind::sync: return "sync";
    case BranchKind::data: return "data";
    case BranchKind::indirect: return "indirect";
  }
  return "?";
}

std::optional<unsigned> parameter_bank_base(const std::string& arch) {
  static const std::regex pattern(R"(sm_(\d+)[a-z]?)");
  std::smatch m;
  if (!std::regex_match(arch, m, pattern)) return std::nullopt;
  const int cc = std::stoi(m[1]);
  if (cc >= 75 && cc < 90) return 0x160u;
  if (cc == 90) return 0x210u;
  if (cc == 100 || cc == 120) return 0x380u;
  return std::nullopt;
}

std::vector<Function> parse_sass(const std::string& text) {
  static const std::regex arch_line(R"(code for (sm_[0-9a-z]+))");
  static const std::regex function_line(R"(Function\s*:\s*(\S+))");
  static const std::regex instruction_line(R"(^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*;)");
  std::vector<Function> functions;
  std::istringstream lines(text);
  std::string line;
  std::smatch m;
  std::string arch;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, m, arch_line)) {
      arch = m[1];
    } else if (std::regex_search(line, m, function_line)) {
      functions.push_back({m[1], arch, {}});
    } else if (std::regex_search(line, m, instruction_line)) {
      if (functions.empty()) functions.push_back({"", arch, {}});
      functions.back().instructions.push_back(parse_instruction(unsigned(std::stoul(m[1], nullptr, 16)), m[2]));
    }
  }
  return functions;
}

int LoopMix::count(const std::string& opcode) const {
  const auto it = opcodes.find(opcode);
  return it == opcodes.end() ? 0 : it->second;
}

namespace {

std::string mix_key(const std::string& opcode) {
  const std::string base = base_opcode(opcode);
  if (base != "MUFU") return base;
  const std::size_t end = opcode.find('.', base.size() + 1);
  return opcode.substr(0, end);
}

std::optional<LoopMix> innermost_exp2_loop(const std::vector<Instruction>& code) {
  // exp2_before[i]: MUFU.EX2 among code[0, i), so a span's count is a difference.
  std::vector<int> exp2_before(code.size() + 1, 0);
  for (std::size_t i = 0; i < code.size(); ++i)
    exp2_before[i + 1] = exp2_before[i] + (mix_key(code[i].opcode) == "MUFU.EX2");
  std::optional<std::pair<std::size_t, std::size_t>> best;  // [first, last] instruction
  for (std::size_t last = 0; last < code.size(); ++last) {
    if (base_opcode(code[last].opcode) != "BRA") continue;
    const auto target = branch_target(code[last]);
    if (!target || *target > code[last].address) continue;
    const auto first = std::size_t(std::lower_bound(code.begin(), code.end(), *target,
                                                    [](const Instruction& in, unsigned a) { return in.address < a; }) -
                                   code.begin());
    if (exp2_before[last + 1] == exp2_before[first]) continue;
    if (!best || last - first < best->second - best->first) best = {{first, last}};
  }
  if (!best) return std::nullopt;
  LoopMix mix{code[best->first].address, code[best->second].address, 0, {}};
  for (std::size_t i = best->first; i <= best->second; ++i) {
    ++mix.instructions;
    ++mix.opcodes[mix_key(code[i].opcode)];
  }
  return mix;
}

}  // namespace

int Audit::data_branches() const {
  int n = 0;
  for (const Branch& b : branches) n += b.kind == BranchKind::data;
  return n;
}

Audit audit_function(const Function& function, const AuditOptions& options) {
  Audit audit;
  ConstantRanges index_constants;
  if (const auto bank = parameter_bank_base(function.arch)) {
    const unsigned align = unsigned(std::max(options.params_align, 1));
    const unsigned base = (*bank + align - 1) / align * align;
    for (int offset : options.index_params) {
      if (offset >= 0) index_constants.push_back({base + unsigned(offset), base + unsigned(offset) + 8});
    }
  }
  audit.function = function.name;
  const std::vector<Instruction>& code = function.instructions;
  for (const std::string& family : kCountedOpcodes) audit.counts[family] = 0;
  for (const Instruction& in : code) {
    for (const std::string& family : kCountedOpcodes) {
      if (in.opcode == family || in.opcode.rfind(family + ".", 0) == 0) ++audit.counts[family];
    }
  }
  int exp2_since_partial_wait = -1;  // -1: not after a wait that leaves a group in flight
  for (const Instruction& in : code) {
    if (in.opcode.rfind("WARPGROUP.DEPBAR", 0) == 0) {
      if (exp2_since_partial_wait > audit.exp2_under_wgmma) audit.exp2_under_wgmma = exp2_since_partial_wait;
      const bool leaves_one = !in.operands.empty() && in.operands.back() == "0x1";
      exp2_since_partial_wait = leaves_one ? 0 : -1;
    } else if (exp2_since_partial_wait >= 0 && in.opcode.rfind("MUFU.EX2", 0) == 0) {
      ++exp2_since_partial_wait;
    }
  }
  audit.exp2_loop = innermost_exp2_loop(code);
  if (code.empty()) return audit;

  // Basic blocks: starts at branch targets and after branches and exits.
  std::map<unsigned, std::size_t> index_of;
  for (std::size_t i = 0; i < code.size(); ++i) index_of[code[i].address] = i;
  std::set<std::size_t> starts = {0};
  for (std::size_t i = 0; i < code.size(); ++i) {
    const std::string base = base_opcode(code[i].opcode);
    if (is_branch(base) || ends_flow(base)) {
      if (i + 1 < code.size()) starts.insert(i + 1);
      if (const auto target = branch_target(code[i]); target && index_of.count(*target)) starts.insert(index_of[*target]);
    }
  }
  std::map<std::size_t, State> entry;  // block start -> marks on entry (joined over predecessors)
  std::map<unsigned, Branch> branches;
  std::map<unsigned, std::pair<int, int>> data_condition;  // data branch -> (its predicate, where the mark came from)
  std::vector<Cause> causes(code.size());
  std::deque<std::size_t> work = {0};
  entry[0] = State();
  std::set<std::size_t> queued = {0};
  while (!work.empty()) {
    const std::size_t start = work.front();
    work.pop_front();
    queued.erase(start);
    State state = entry[start];
    const Marks& marks = state.marks;
    auto flow_to = [&](std::size_t next) {
      auto [it, fresh] = entry.try_emplace(next, state);
      bool changed = fresh;
      if (!fresh) {
        for (std::size_t r = 0; r < std::size_t(kRegisters); ++r) {
          std::uint8_t& existing = it->second.marks[r];
          const std::uint8_t joined = existing | marks[r];
          if ((marks[r] & kData) && !(existing & kData)) it->second.origin[r] = state.origin[r];
          changed |= joined != existing;
          existing = joined;
          // A guarded write holds at the join only if every path made it.
          GuardedWrite& g = it->second.guarded[r];
          const GuardedWrite& incoming = state.guarded[r];
          GuardedWrite kept{};
          if (g.guard >= 0 && g.guard == incoming.guard && g.negated == incoming.negated) {
            kept = g;
            kept.marks = std::uint8_t(g.marks | incoming.marks);
            if ((incoming.marks & kData) && !(g.marks & kData)) kept.origin = incoming.origin;
          }
          changed |= kept != g;
          g = kept;
        }
      }
      if (changed && queued.insert(next).second) work.push_back(next);
    };
    for (std::size_t i = start; i < code.size(); ++i) {
      if (i != start && starts.count(i)) {
        flow_to(i);
        break;
      }
      const Instruction& in = code[i];
      const std::string base = base_opcode(in.opcode);
      if (is_branch(base) || ends_flow(base)) {
        const std::optional<int> condition = branch_condition(in);
        const bool conditional = condition.has_value();
        if (is_branch(base) || conditional) {
          Branch& b = branches[in.address];
          b.address = in.address;
          b.text = in.text;
          const BranchKind kind = base == "BRX" || base == "JMX" ? BranchKind::indirect
                                  : conditional ? classify(marks[std::size_t(*condition)])
                                                : BranchKind::unconditional;
          // Over iterations the marks only grow: keep the strongest kind seen.
          b.kind = std::max(b.kind, kind);
          if (kind == BranchKind::data && !data_condition.count(in.address)) {
            data_condition[in.address] = {*condition, state.origin[std::size_t(*condition)]};
          }
        }
        if (const auto target = branch_target(in); is_branch(base) && target && index_of.count(*target)) {
          flow_to(index_of[*target]);
        }
        if (conditional && i + 1 < code.size()) flow_to(i + 1);
        break;
      }
      transfer(in, int(i), state, causes[i], index_constants, options.index_only);
      if (i + 1 == code.size()) break;
    }
  }
  // Each data branch's chain, back along the recorded causes. A cause is
  // recorded once, the first time an instruction produces the data mark, and
  // names an instruction that produced it earlier, so the walk ends at a load.
  for (auto& [address, condition] : data_condition) {
    Branch& b = branches[address];
    b.chain.push_back({address, b.text, register_name(condition.first)});
    std::set<int> seen;
    for (int at = condition.second; at >= 0 && seen.insert(at).second;) {
      const Cause& c = causes[std::size_t(at)];
      b.chain.push_back(
          {code[std::size_t(at)].address, code[std::size_t(at)].text, c.via >= 0 ? register_name(c.via) : ""});
      at = c.via >= 0 ? c.from : -1;
    }
  }
  for (auto& [address, b] : branches) audit.branches.push_back(b);
  return audit;
}

nlohmann::json to_json(const Audit& audit, bool explain) {
  nlohmann::json j;
  j["function"] = audit.function;
  j["counts"] = audit.counts;
  j["exp2_under_wgmma"] = audit.exp2_under_wgmma;
  if (const auto& loop = audit.exp2_loop) {
    char begin[16], end[16];
    std::snprintf(begin, sizeof begin, "0x%04x", loop->begin);
    std::snprintf(end, sizeof end, "0x%04x", loop->end);
    j["exp2_loop"] = {{"begin", begin}, {"end", end}, {"instructions", loop->instructions}, {"opcodes", loop->opcodes}};
  }
  std::map<std::string, int> by_kind;
  nlohmann::json flagged = nlohmann::json::array();
  for (const Branch& b : audit.branches) {
    ++by_kind[to_string(b.kind)];
    if (b.kind == BranchKind::data || b.kind == BranchKind::indirect) {
      char address[16];
      std::snprintf(address, sizeof address, "0x%04x", b.address);
      nlohmann::json f = {{"address", address}, {"kind", to_string(b.kind)}, {"instruction", b.text}};
      if (explain && b.kind == BranchKind::data) {
        nlohmann::json chain = nlohmann::json::array();
        for (const ChainStep& step : b.chain) {
          std::snprintf(address, sizeof address, "0x%04x", step.address);
          chain.push_back({{"address", address}, {"instruction", step.text}, {"via", step.via}});
        }
        f["chain"] = chain;
      }
      flagged.push_back(f);
    }
  }
  j["branches"] = by_kind;
  j["flagged_branches"] = flagged;
  return j;
}

}  // namespace jit::sass
