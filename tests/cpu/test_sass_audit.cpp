// cujit-sass's reading of SASS: parsing, instruction counts, and the branch
// audit on small hand-written functions in cuobjdump's format.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sass/sass_audit.h"

namespace {

using jit::sass::BranchKind;

// Wraps instructions (one per string, addresses 0x10 apart) as cuobjdump prints them.
std::string sass(const std::vector<std::string>& body, const std::string& arch = "sm_90a") {
  std::string text = "\n\tcode for " + arch + "\n\t\tFunction : kernel\n";
  char line[256];
  for (std::size_t i = 0; i < body.size(); ++i) {
    std::snprintf(line, sizeof line, "        /*%04zx*/   %s ;   /* 0x0000000000000000 */\n", i * 16, body[i].c_str());
    text += line;
    text += "                                      /* 0x000fe20000000000 */\n";
  }
  return text;
}

jit::sass::Audit audit(const std::vector<std::string>& body, const jit::sass::AuditOptions& options = {},
                       const std::string& arch = "sm_90a") {
  const auto functions = jit::sass::parse_sass(sass(body, arch));
  EXPECT_EQ(functions.size(), 1u);
  return jit::sass::audit_function(functions.at(0), options);
}

BranchKind kind_at(const jit::sass::Audit& a, unsigned address) {
  for (const auto& b : a.branches)
    if (b.address == address) return b.kind;
  ADD_FAILURE() << "no branch at " << address;
  return BranchKind::unconditional;
}

TEST(SassParse, ReadsFunctionsGuardsOpcodesAndOperands) {
  const auto functions = jit::sass::parse_sass(sass({"@!P1 BRA 0x40", "HGMMA.64x128x16.F32 R24, gdesc[UR8], R24, gsb0"}));
  ASSERT_EQ(functions.size(), 1u);
  EXPECT_EQ(functions[0].name, "kernel");
  EXPECT_EQ(functions[0].arch, "sm_90a");
  ASSERT_EQ(functions[0].instructions.size(), 2u);
  const auto& bra = functions[0].instructions[0];
  EXPECT_EQ(bra.guard, "P1");
  EXPECT_TRUE(bra.guard_negated);
  EXPECT_EQ(bra.opcode, "BRA");
  const auto& mma = functions[0].instructions[1];
  EXPECT_EQ(mma.address, 0x10u);
  EXPECT_EQ(mma.opcode, "HGMMA.64x128x16.F32");
  EXPECT_EQ(mma.operands, (std::vector<std::string>{"R24", "gdesc[UR8]", "R24", "gsb0"}));
}

// The two orders seen in the sm90 kernel's main loop: the softmax's exp2
// between the wait for S (one group left in flight) and the wait for P V, or
// the full wait moved ahead of them.
TEST(SassAudit, CountsExp2BetweenAPartialAndTheFullWgmmaWait) {
  const std::vector<std::string> issue = {"HGMMA.64x128x16.F32 R24, gdesc[UR16], RZ, !UPT",
                                          "HGMMA.64x128x16.F32 R88, R172, gdesc[UR20], R88, gsb0"};
  std::vector<std::string> overlapped = issue;
  for (const char* in : {"WARPGROUP.DEPBAR.LE gsb0, 0x1", "MUFU.EX2 R24, R24", "MUFU.EX2 R25, R25",
                         "MUFU.EX2 R26, R26", "WARPGROUP.DEPBAR.LE gsb0, 0x0", "MUFU.EX2 R27, R27", "EXIT"})
    overlapped.push_back(in);
  EXPECT_EQ(audit(overlapped).exp2_under_wgmma, 3);
  std::vector<std::string> hoisted = issue;
  for (const char* in : {"WARPGROUP.DEPBAR.LE gsb0, 0x1", "FMNMX R184, R24, R25, !PT",
                         "WARPGROUP.DEPBAR.LE gsb0, 0x0", "MUFU.EX2 R24, R24", "MUFU.EX2 R25, R25", "EXIT"})
    hoisted.push_back(in);
  EXPECT_EQ(audit(hoisted).exp2_under_wgmma, 0);
  EXPECT_EQ(audit({"MUFU.EX2 R1, R1", "EXIT"}).exp2_under_wgmma, 0);
}

// An outer loop (0x00-0xb0) around the softmax's loop (0x20-0x80), a
// shorter loop without exp2 after them (0xc0-0xd0) and a forward branch:
// the mix is the inner exp2 loop's, by base opcode and MUFU function.
TEST(SassAudit, MixesTheInnermostLoopThatRunsExp2) {
  const auto a = audit({"S2R R0, SR_TID.X",                     // 0x00
                        "IMAD.MOV.U32 R1, RZ, RZ, R0",          // 0x10
                        "FMNMX R2, R3, R4, !PT",                // 0x20 <- inner loop
                        "FFMA R5, R2, R6, -R7",                 // 0x30
                        "MUFU.EX2 R5, R5",                      // 0x40
                        "MUFU.RCP R8, R8",                      // 0x50
                        "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R9, R5, R5, RZ",  // 0x60
                        "ISETP.GE.AND P0, PT, R0, 0x4, PT",     // 0x70
                        "@!P0 BRA 0x20",                        // 0x80 inner back edge
                        "@P0 BRA 0xa0",                         // 0x90 forward
                        "ISETP.GE.AND P1, PT, R1, 0x8, PT",     // 0xa0
                        "@!P1 BRA 0x0",                         // 0xb0 outer back edge
                        "IADD3 R1, R1, 0x1, RZ",                // 0xc0
                        "@!P1 BRA 0xc0",                        // 0xd0 a loop without exp2
                        "EXIT"});
  ASSERT_TRUE(a.exp2_loop.has_value());
  EXPECT_EQ(a.exp2_loop->begin, 0x20u);
  EXPECT_EQ(a.exp2_loop->end, 0x80u);
  EXPECT_EQ(a.exp2_loop->instructions, 7);
  EXPECT_EQ(a.exp2_loop->count("MUFU.EX2"), 1);
  EXPECT_EQ(a.exp2_loop->count("MUFU.RCP"), 1);
  EXPECT_EQ(a.exp2_loop->count("F2FP"), 1);
  EXPECT_EQ(a.exp2_loop->count("ISETP"), 1);
  EXPECT_EQ(a.exp2_loop->count("BRA"), 1);
  EXPECT_EQ(a.exp2_loop->count("S2R"), 0);
  EXPECT_EQ(jit::sass::to_json(a)["exp2_loop"]["begin"], "0x0020");
  EXPECT_EQ(jit::sass::to_json(a)["exp2_loop"]["opcodes"]["FFMA"], 1);
  // No loop, or loops without exp2: none.
  EXPECT_FALSE(audit({"MUFU.EX2 R1, R1", "EXIT"}).exp2_loop.has_value());
  EXPECT_FALSE(audit({"IADD3 R1, R1, 0x1, RZ", "@P0 BRA 0x0", "MUFU.EX2 R1, R1", "EXIT"}).exp2_loop.has_value());
  EXPECT_FALSE(jit::sass::to_json(audit({"EXIT"})).contains("exp2_loop"));
}

TEST(SassAudit, CountsInstructionFamiliesByExactPrefix) {
  const auto a = audit({"LDS.128 R4, [R2]", "LDSM.16.M88.4 R8, [R3]", "UTMALDG.4D [UR8], [UR4]",
                        "HGMMA.64x64x16.F32 R24, gdesc[UR8], RZ, !UPT, gsb0", "LDGSTS.E.128 [R5], desc[UR4][R6.64]",
                        "EXIT"});
  EXPECT_EQ(a.counts.at("LDS"), 1);
  EXPECT_EQ(a.counts.at("LDSM"), 1);
  EXPECT_EQ(a.counts.at("UTMALDG"), 1);
  EXPECT_EQ(a.counts.at("HGMMA"), 1);
  EXPECT_EQ(a.counts.at("LDGSTS"), 1);
  EXPECT_EQ(a.counts.at("LDG"), 0);
}

TEST(SassAudit, BranchOnIndicesAndParametersIsClean) {
  const auto a = audit({"S2R R0, SR_TID.X", "LDC R1, c[0x0][0x210]", "IMAD R2, R0, 0x4, R1",
                        "ISETP.GE.AND P0, PT, R2, R1, PT", "@P0 BRA 0x60", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x40), BranchKind::index);
  EXPECT_EQ(a.data_branches(), 0);
}

TEST(SassAudit, BranchOnLoadedValueIsFlagged) {
  const auto a = audit({"LDG.E R5, desc[UR4][R2.64]", "FSETP.GT.AND P0, PT, R5, RZ, PT", "@!P0 BRA 0x40", "NOP",
                        "EXIT"});
  EXPECT_EQ(kind_at(a, 0x20), BranchKind::data);
  EXPECT_EQ(a.data_branches(), 1);
}

TEST(SassAudit, OverwritingARegisterClearsItsMark) {
  const auto a = audit({"LDS R5, [R2]", "MOV R5, c[0x0][0x20]", "ISETP.NE.AND P0, PT, R5, RZ, PT", "@P0 BRA 0x50",
                        "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::index);
}

TEST(SassAudit, PredicatedWriteKeepsTheOldMark) {
  const auto a = audit({"LDS R5, [R2]", "@P1 MOV R5, RZ", "ISETP.NE.AND P0, PT, R5, RZ, PT", "@P0 BRA 0x50", "NOP",
                        "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::data);
}

// If-converted code (decode v15's merge loop bound, sm_90a): R0 holds a
// loaded value, then "@P1" writes it from an index and reads it back. Where
// the read executes the write did, so the bound is an index.
TEST(SassAudit, AReadUnderTheGuardOfItsWriteSeesTheWrittenValue) {
  const std::vector<std::string> prologue = {"LDS R0, [R6]", "S2R R5, SR_TID.X", "MOV R21, RZ",
                                             "ISETP.GT.AND P1, PT, R5, 0x3, PT"};
  auto with = [&](std::vector<std::string> body) {
    body.insert(body.begin(), prologue.begin(), prologue.end());
    body.insert(body.end(), {"ISETP.GE.AND P0, PT, R5, R21, PT", "@P0 BRA 0xb0", "NOP", "EXIT"});
    return audit(body);
  };
  const auto same = with({"@P1 LEA.HI R0, R5, R5, RZ, 0x1", "@P1 IMAD.SHL.U32 R0, R0, 0x10, RZ",
                          "@P1 LOP3.LUT R21, R0, 0xffffffe0, RZ, 0xc0, !PT"});
  EXPECT_EQ(kind_at(same, 0x80), BranchKind::index);
  EXPECT_EQ(same.data_branches(), 0);
  // Read under the other sense of the guard: the write did not happen there.
  const auto other = with({"@P1 LEA.HI R0, R5, R5, RZ, 0x1", "@!P1 IMAD.SHL.U32 R0, R0, 0x10, RZ",
                           "@P1 LOP3.LUT R21, R0, 0xffffffe0, RZ, 0xc0, !PT"});
  EXPECT_EQ(kind_at(other, 0x80), BranchKind::data);
  // The guard's predicate written between the write and the read.
  const auto rewritten = with({"@P1 LEA.HI R0, R5, R5, RZ, 0x1", "ISETP.GT.AND P1, PT, R5, 0x4, PT",
                               "@P1 LOP3.LUT R21, R0, 0xffffffe0, RZ, 0xc0, !PT"});
  EXPECT_EQ(kind_at(rewritten, 0x80), BranchKind::data);
}

// Two paths join: a guarded write made on one of them only does not hold
// after the join.
TEST(SassAudit, AGuardedWriteOnOnePathDoesNotHoldAfterTheJoin) {
  const auto a = audit({"LDS R0, [R6]", "S2R R5, SR_TID.X", "ISETP.GT.AND P1, PT, R5, 0x3, PT",
                        "ISETP.GT.AND P2, PT, R5, 0x7, PT", "@P2 BRA 0x60", "@P1 MOV R0, R5",
                        "@P1 ISETP.NE.AND P0, PT, R0, RZ, PT", "@P0 BRA 0x90", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x70), BranchKind::data);
  const auto b = audit({"LDS R0, [R6]", "S2R R5, SR_TID.X", "ISETP.GT.AND P1, PT, R5, 0x3, PT",
                        "ISETP.GT.AND P2, PT, R5, 0x7, PT", "@P1 MOV R0, R5", "@P2 BRA 0x60",
                        "@P1 ISETP.NE.AND P0, PT, RZ, R0, PT", "@P0 BRA 0x90", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(b, 0x70), BranchKind::index) << "the write came before the paths parted";
}

TEST(SassAudit, WgmmaAccumulatorsCarryData) {
  // m64n64: 32 accumulator registers from R24; R55 is the last of them.
  const auto a = audit({"HGMMA.64x64x16.F32 R24, gdesc[UR8], RZ, !UPT, gsb0", "FSETP.GT.AND P0, PT, R55, RZ, PT",
                        "@P0 BRA 0x40", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x20), BranchKind::data);
}

// 8-bit wgmma (FP8 inputs) is QGMMA in SASS: counted, and its accumulators
// carry data as HGMMA's do (m64n128: 64 registers from R24; R87 the last).
TEST(SassAudit, Fp8WgmmaIsCountedAndItsAccumulatorsCarryData) {
  const auto a = audit({"QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], RZ, !UPT, gsb0",
                        "FSETP.GT.AND P0, PT, R87, RZ, PT", "@P0 BRA 0x40", "NOP", "EXIT"});
  EXPECT_EQ(a.counts.at("QGMMA"), 1);
  EXPECT_EQ(a.counts.at("HGMMA"), 0);
  EXPECT_EQ(kind_at(a, 0x20), BranchKind::data);
}

TEST(SassAudit, MbarrierWaitLoopIsASyncBranch) {
  const auto a = audit({"SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4+0x30000], R5", "@!P0 BRA 0x0", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x10), BranchKind::sync);
  EXPECT_EQ(a.data_branches(), 0);
}

TEST(SassAudit, MarksFlowAroundLoopBackEdges) {
  // The compare at 0x10 sees R7 from the load at 0x30 on the second trip.
  const auto a = audit({"MOV R7, RZ", "ISETP.NE.AND P0, PT, R7, RZ, PT", "@P0 BRA 0x50", "LDG.E R7, desc[UR4][R2.64]",
                        "BRA 0x10", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x20), BranchKind::data);
  EXPECT_EQ(kind_at(a, 0x40), BranchKind::unconditional);
}

TEST(SassAudit, UniformBranchPredicateOperandIsTheCondition) {
  const auto a = audit({"LDS R5, [R2]", "R2UR UR6, R5", "UISETP.NE.AND UP0, UPT, UR6, URZ, UPT", "BRA.U !UP0, 0x50",
                        "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::data);
}

// "LOP3.LUT P0, R14, R3, ..." writes R14 as well as P0: R14's old (loaded) value
// does not reach P0, which tests only the thread index. (The epilogue's
// `lane % 4 == 0` in sm90 attention compiles to this.)
TEST(SassAudit, PredicateAndValueLop3WritesBoth) {
  const auto a = audit({"LDS R14, [R2]", "S2R R3, SR_TID.X", "LOP3.LUT P0, R14, R3, 0x3, RZ, 0xc0, !PT",
                        "@P0 BRA 0x70", "ISETP.NE.AND P1, PT, R14, RZ, PT", "@P1 BRA 0x70", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::index);
  EXPECT_EQ(kind_at(a, 0x50), BranchKind::index);
  const auto b = audit({"LDS R5, [R2]", "LOP3.LUT P0, R14, R5, 0x3, RZ, 0xc0, !PT", "@P0 BRA 0x50",
                        "ISETP.NE.AND P1, PT, R14, RZ, PT", "@P1 BRA 0x60", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(b, 0x20), BranchKind::data);
  EXPECT_EQ(kind_at(b, 0x40), BranchKind::data);
}

// IMAD.WIDE's factors are 32 bits; only the addend is a register pair. R30
// (loaded) sits next to the factor R29 and must not be read.
TEST(SassAudit, ImadWideReadsAPairOnlyForTheAddend) {
  const auto a = audit({"LDS R30, [R2]", "S2R R29, SR_TID.X", "MOV R12, RZ", "MOV R13, RZ",
                        "IMAD.WIDE.U32 R12, R29, UR28, R12", "LEA R14, P0, R12, UR22, 0x2", "@P0 BRA 0x80", "NOP",
                        "EXIT"});
  EXPECT_EQ(kind_at(a, 0x60), BranchKind::index);
  // The addend's high half is read, and both halves of the result written.
  const auto b = audit({"LDS R13, [R2]", "S2R R29, SR_TID.X", "MOV R12, RZ", "IMAD.WIDE.U32 R12, R29, 0x4, R12",
                        "ISETP.NE.AND P0, PT, R12, RZ, PT", "@P0 BRA 0x70", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(b, 0x50), BranchKind::data);
}

// "R2UR P0, UR10, R7" writes UR10 and P0 from R7; R2UR.OR also keeps P0's old value.
TEST(SassAudit, R2urWritesItsUniformRegisterAndOrKeepsThePredicate) {
  const auto a = audit({"LDS R5, [R2]", "R2UR UR10, R5", "S2R R7, SR_TID.X", "R2UR P0, UR10, R7", "@P0 BRA 0x80",
                        "UISETP.NE.AND UP0, UPT, UR10, URZ, UPT", "BRA.U !UP0, 0x80", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x40), BranchKind::index);
  EXPECT_EQ(kind_at(a, 0x60), BranchKind::index);
  const auto b = audit({"LDS R5, [R2]", "ISETP.NE.AND P0, PT, R5, RZ, PT", "S2R R7, SR_TID.X",
                        "R2UR.OR P0, UR8, R7", "@P0 BRA 0x60", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(b, 0x40), BranchKind::data);
}

// "IADD3 R4, P0, P1, ...": both carry outs are written from the sources.
TEST(SassAudit, BothCarryOutsCarryTheSourcesMarks) {
  const auto a = audit({"LDS R5, [R2]", "MOV R6, RZ", "IADD3 R4, P0, P1, R5, R6, RZ", "@P1 BRA 0x50", "NOP",
                        "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::data);
}

// BAR's register is the barrier's number: read, not overwritten.
TEST(SassAudit, BarrierRegisterIsNotWritten) {
  const auto a = audit({"LDS R2, [R3]", "BAR.SYNC.DEFER_BLOCKING R2, 0x80", "ISETP.NE.AND P0, PT, R2, RZ, PT",
                        "@P0 BRA 0x50", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::data);
}

// "VOTEU.ALL UP2, P0" reads P0 and writes UP2.
TEST(SassAudit, VoteReadsItsLastPredicate) {
  const auto a = audit({"LDS R5, [R2]", "ISETP.NE.AND P0, PT, R5, RZ, PT", "VOTEU.ALL UP2, P0", "BRA.U !UP2, 0x60",
                        "@P0 BRA 0x60", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::data);
  EXPECT_EQ(kind_at(a, 0x40), BranchKind::data);
}

// PR is all the predicates: R2P writes them, P2R reads them; a barrier
// reduction's result goes through B2R.
TEST(SassAudit, PredicateRegisterMovesAndBarrierReductionsCarryMarks) {
  const auto a = audit({"LDS R5, [R2]", "R2P PR, R5, 0x7f", "@P3 BRA 0x40", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x20), BranchKind::data);
  const auto b = audit({"LDS R5, [R2]", "ISETP.NE.AND P2, PT, R5, RZ, PT", "P2R R0, PR, RZ, 0x4",
                        "ISETP.NE.AND P0, PT, R0, RZ, PT", "@P0 BRA 0x60", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(b, 0x40), BranchKind::data);
  const auto c = audit({"LDS R5, [R2]", "ISETP.NE.AND P0, PT, R5, RZ, PT", "BAR.RED.POPC.DEFER_BLOCKING 0x0, P0",
                        "B2R.RESULT R0", "ISETP.NE.AND P1, PT, R0, RZ, PT", "@P1 BRA 0x70", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(c, 0x50), BranchKind::data);
}

// An immediate mask names the predicates P2R reads and R2P writes: the
// others keep their own marks.
TEST(SassAudit, PredicateMovesTakeOnlyTheirMasksPredicates) {
  // P2 holds data, P0 an index; "P2R R0, PR, RZ, 0x1" saves P0 alone.
  const auto a = audit({"LDS R5, [R2]", "ISETP.NE.AND P2, PT, R5, RZ, PT", "S2R R6, SR_TID.X",
                        "ISETP.NE.AND P0, PT, R6, RZ, PT", "P2R R0, PR, RZ, 0x1", "ISETP.NE.AND P1, PT, R0, RZ, PT",
                        "@P1 BRA 0x80", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(a, 0x60), BranchKind::index);
  // "R2P PR, R5, 0x2" writes P1 alone: P3 keeps its index mark, P1 takes data.
  const auto b = audit({"LDS R5, [R2]", "S2R R6, SR_TID.X", "ISETP.NE.AND P3, PT, R6, RZ, PT", "R2P PR, R5, 0x2",
                        "@P3 BRA 0x60", "@P1 BRA 0x60", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(b, 0x40), BranchKind::index);
  EXPECT_EQ(kind_at(b, 0x50), BranchKind::data);
  // A mask in a register may name any predicate: all keep their old marks and take R5's.
  const auto c = audit({"LDS R5, [R2]", "S2R R6, SR_TID.X", "ISETP.NE.AND P3, PT, R6, RZ, PT", "R2P PR, R5, R7",
                        "@P3 BRA 0x50", "NOP", "EXIT"});
  EXPECT_EQ(kind_at(c, 0x40), BranchKind::data);
}

// CS2R writes a register pair.
TEST(SassAudit, Cs2rClearsAPair) {
  const auto a = audit({"LDS R5, [R2]", "CS2R R4, SRZ", "ISETP.NE.AND P0, PT, R5, RZ, PT", "@P0 BRA 0x50", "NOP",
                        "EXIT"});
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::index);
}

// The chain of a data branch goes back from the branch to the load, through
// the register each instruction read.
TEST(SassAudit, ExplainGivesTheChainFromTheLoad) {
  const auto a = audit({"LDG.E R5, desc[UR4][R2.64]", "S2R R0, SR_TID.X", "FMUL R6, R5, R5", "IADD3 R7, R0, R6, RZ",
                        "ISETP.NE.AND P0, PT, R7, RZ, PT", "@P0 BRA 0x70", "NOP", "EXIT"});
  ASSERT_EQ(a.branches.size(), 1u);
  const auto& chain = a.branches[0].chain;
  ASSERT_EQ(chain.size(), 5u);
  const std::vector<unsigned> addresses = {0x50, 0x40, 0x30, 0x20, 0x00};
  const std::vector<std::string> via = {"P0", "R7", "R6", "R5", ""};
  for (std::size_t i = 0; i < chain.size(); ++i) {
    EXPECT_EQ(chain[i].address, addresses[i]);
    EXPECT_EQ(chain[i].via, via[i]);
  }
  EXPECT_EQ(chain.back().text, "LDG.E R5, desc[UR4][R2.64]");
  const nlohmann::json j = jit::sass::to_json(a, true);
  EXPECT_EQ(j.at("flagged_branches")[0].at("chain").size(), 5u);
  EXPECT_FALSE(jit::sass::to_json(a).at("flagged_branches")[0].contains("chain"));
}

// Around a loop the chain still ends at the load (the cause recorded first).
TEST(SassAudit, ExplainChainAcrossABackEdgeEndsAtTheLoad) {
  const auto a = audit({"MOV R7, RZ", "ISETP.NE.AND P0, PT, R7, RZ, PT", "@P0 BRA 0x50", "LDG.E R7, desc[UR4][R2.64]",
                        "BRA 0x10", "EXIT"});
  const auto& chain = a.branches.at(0).chain;
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0].address, 0x20u);
  EXPECT_EQ(chain[1].address, 0x10u);
  EXPECT_EQ(chain[2].address, 0x30u);
  EXPECT_EQ(chain[2].via, "");
}

// Index parameters. Offsets as in DecodeParams: seq_lens at 0x98, block_table
// at 0x88, q at 0 and k at 0x8; on sm_90a the struct starts at c[0x0][0x210].
const jit::sass::AuditOptions kDecodeIndexParams = {{0x98, 0x88}};

// Loads a length through the parameter at `pointer` and loops up to it.
std::vector<std::string> loop_to_loaded_length(const std::string& pointer) {
  return {"S2R R0, SR_CTAID.X", "ULDC.64 UR4, c[0x0][0x208]", "LDC.64 R2, " + pointer, "IMAD.WIDE R2, R0, 0x4, R2",
          "LDG.E R5, desc[UR4][R2.64]", "MOV R7, RZ", "IADD3 R7, R7, 0x1, RZ", "ISETP.GE.AND P0, PT, R7, R5, PT",
          "@!P0 BRA 0x60", "EXIT"};
}

TEST(SassAudit, LoopBoundLoadedThroughAnIndexParameterIsAnIndex) {
  const auto a = audit(loop_to_loaded_length("c[0x0][0x2a8]"), kDecodeIndexParams);
  EXPECT_EQ(kind_at(a, 0x80), BranchKind::index);
  EXPECT_EQ(a.data_branches(), 0);
  // Without the option, or through another pointer parameter (q), it is data.
  EXPECT_EQ(kind_at(audit(loop_to_loaded_length("c[0x0][0x2a8]")), 0x80), BranchKind::data);
  EXPECT_EQ(kind_at(audit(loop_to_loaded_length("c[0x0][0x210]"), kDecodeIndexParams), 0x80), BranchKind::data);
}

// A struct aligned to 64 bytes (the sm90 family's, which opens with TMA
// descriptors) starts at sm_90a's base rounded up: c[0x0][0x240], not 0x210.
// The ragged tile count sits at 0x2e0 in it: c[0x0][0x520].
TEST(SassAudit, IndexParametersOfAnAlignedStructStartPastTheBase) {
  const jit::sass::AuditOptions aligned = {{0x2e0}, 64};
  EXPECT_EQ(kind_at(audit(loop_to_loaded_length("c[0x0][0x520]"), aligned), 0x80), BranchKind::index);
  // Taken at the unrounded base, the same offset names another slot: data.
  EXPECT_EQ(kind_at(audit(loop_to_loaded_length("c[0x0][0x4f0]"), aligned), 0x80), BranchKind::data);
  EXPECT_EQ(kind_at(audit(loop_to_loaded_length("c[0x0][0x520]"), {{0x2e0}}), 0x80), BranchKind::data);
}

// ULDC into a uniform pair, and the constant read straight into address
// arithmetic (IMAD.WIDE's addend; LEA and LEA.HI.X with the high word) on
// sm_80, where the struct starts at c[0x0][0x160].
TEST(SassAudit, IndexParameterReadInAddressArithmetic) {
  const auto uniform = audit({"S2R R0, SR_CTAID.X", "ULDC.64 UR6, c[0x0][0x2a8]", "IMAD.WIDE R2, R0, 0x4, UR6",
                              "LDG.E R5, desc[UR4][R2.64]", "ISETP.GE.AND P0, PT, R5, 0x10, PT", "@P0 BRA 0x70",
                              "NOP", "EXIT"},
                             kDecodeIndexParams);
  EXPECT_EQ(kind_at(uniform, 0x50), BranchKind::index);
  const auto direct = audit({"S2R R0, SR_CTAID.X", "IMAD.WIDE R2, R0, 0x4, c[0x0][0x1f8]", "LDG.E R5, [R2.64]",
                             "ISETP.GE.AND P0, PT, R5, 0x10, PT", "@P0 BRA 0x60", "NOP", "EXIT"},
                            kDecodeIndexParams, "sm_80");
  EXPECT_EQ(kind_at(direct, 0x40), BranchKind::index);
  const auto lea = audit({"S2R R0, SR_CTAID.X", "SHF.R.S32.HI R1, RZ, 0x1f, R0", "LEA R2, P1, R0, c[0x0][0x1f8], 0x2",
                          "LEA.HI.X R3, R0, c[0x0][0x1fc], R1, 0x2, P1", "LDG.E R5, [R2.64]",
                          "ISETP.GE.AND P0, PT, R5, 0x10, PT", "@P0 BRA 0x80", "NOP", "EXIT"},
                         kDecodeIndexParams, "sm_80");
  EXPECT_EQ(kind_at(lea, 0x60), BranchKind::index);
  // The same offsets on sm_90a's base name other parameters there: data.
  const auto other_base = audit({"S2R R0, SR_CTAID.X", "IMAD.WIDE R2, R0, 0x4, c[0x0][0x1f8]", "LDG.E R5, [R2.64]",
                                 "ISETP.GE.AND P0, PT, R5, 0x10, PT", "@P0 BRA 0x60", "NOP", "EXIT"},
                                kDecodeIndexParams);
  EXPECT_EQ(kind_at(other_base, 0x40), BranchKind::data);
  // An arch with no known base: index parameters are not applied.
  EXPECT_EQ(kind_at(audit(loop_to_loaded_length("c[0x0][0x2a8]"), kDecodeIndexParams, "sm_61"), 0x80),
            BranchKind::data);
}

TEST(SassAudit, ValueFromAnIndexLoadAndADataLoadIsData) {
  const auto a = audit({"LDC.64 R2, c[0x0][0x2a8]", "LDG.E R5, desc[UR4][R2.64]", "LDC.64 R8, c[0x0][0x218]",
                        "LDG.E R6, desc[UR4][R8.64]", "IADD3 R7, R5, R6, RZ", "ISETP.GE.AND P0, PT, R7, 0x10, PT",
                        "@P0 BRA 0x80", "NOP", "EXIT"},
                       kDecodeIndexParams);
  EXPECT_EQ(kind_at(a, 0x60), BranchKind::data);
  ASSERT_EQ(a.branches.at(0).chain.size(), 4u);
  EXPECT_EQ(a.branches.at(0).chain.back().address, 0x30u);  // the load of k, not the length
}

// A page id from the block table is an index, but k loaded at an address
// computed from it is data: the loaded id does not carry the pointer's mark.
TEST(SassAudit, DataLoadedAtAnAddressFromAPageIdIsData) {
  const auto a = audit({"LDC.64 R2, c[0x0][0x298]", "LDG.E R5, desc[UR4][R2.64]", "LDC.64 R8, c[0x0][0x218]",
                        "IMAD.WIDE R8, R5, 0x100, R8", "LDG.E R6, desc[UR4][R8.64]", "FSETP.GT.AND P0, PT, R6, RZ, PT",
                        "@P0 BRA 0x80", "NOP", "EXIT"},
                       kDecodeIndexParams);
  EXPECT_EQ(kind_at(a, 0x60), BranchKind::data);
}

// Only the address decides: a load of q guarded by a test of the index
// pointer (seq_lens != null) still loads data.
TEST(SassAudit, IndexPointerInTheGuardOnlyDoesNotMakeALoadAnIndex) {
  const auto a = audit({"LDC.64 R2, c[0x0][0x2a8]", "ISETP.NE.U32.AND P1, PT, R2, RZ, PT", "LDC.64 R8, c[0x0][0x210]",
                        "@P1 LDG.E R6, desc[UR4][R8.64]", "FSETP.GT.AND P0, PT, R6, RZ, PT", "@P0 BRA 0x70", "NOP",
                        "EXIT"},
                       kDecodeIndexParams);
  EXPECT_EQ(kind_at(a, 0x50), BranchKind::data);
}

// The ragged prepare step sorts its tile list (made of the sequence lengths)
// in shared memory: read back, it is data to the audit unless the kernel
// declares that it reads nothing but indices.
TEST(SassAudit, AnIndexOnlyKernelsSharedMemoryLoadsAreIndices) {
  const std::vector<std::string> sorted = {"LDS R5, [R2]", "LDS R6, [R2+0x4]", "ISETP.GT.AND P0, PT, R5, R6, PT",
                                           "@P0 BRA 0x50", "NOP", "EXIT"};
  EXPECT_EQ(kind_at(audit(sorted), 0x30), BranchKind::data);
  jit::sass::AuditOptions index_only;
  index_only.index_only = true;
  const auto a = audit(sorted, index_only);
  EXPECT_EQ(kind_at(a, 0x30), BranchKind::index);
  EXPECT_EQ(a.data_branches(), 0);
}

TEST(SassAudit, ParameterBankBaseByArch) {
  EXPECT_EQ(jit::sass::parameter_bank_base("sm_90a"), 0x210u);
  EXPECT_EQ(jit::sass::parameter_bank_base("sm_90"), 0x210u);
  EXPECT_EQ(jit::sass::parameter_bank_base("sm_80"), 0x160u);
  EXPECT_EQ(jit::sass::parameter_bank_base("sm_89"), 0x160u);
  EXPECT_EQ(jit::sass::parameter_bank_base("sm_100a"), 0x380u);
  EXPECT_EQ(jit::sass::parameter_bank_base("sm_61"), std::nullopt);
  EXPECT_EQ(jit::sass::parameter_bank_base(""), std::nullopt);
}

TEST(SassAudit, JsonListsFlaggedBranches) {
  const auto a = audit({"LDG.E R5, desc[UR4][R2.64]", "ISETP.NE.AND P0, PT, R5, RZ, PT", "@P0 BRA 0x40", "NOP",
                        "EXIT"});
  const nlohmann::json j = jit::sass::to_json(a);
  EXPECT_EQ(j.at("branches").at("data"), 1);
  ASSERT_EQ(j.at("flagged_branches").size(), 1u);
  EXPECT_EQ(j.at("flagged_branches")[0].at("address"), "0x0020");
}

}  // namespace
