// cujit-sass's reading of SASS: parsing, instruction counts, and the branch
// audit on small hand-written functions in cuobjdump's format.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sass/sass_audit.h"

namespace {

using jit::sass::BranchKind;

// Wraps instructions (one per string, addresses 0x10 apart) as cuobjdump prints them.
std::string sass(const std::vector<std::string>& body) {
  std::string text = "\n\tcode for sm_90a\n\t\tFunction : kernel\n";
  char line[256];
  for (std::size_t i = 0; i < body.size(); ++i) {
    std::snprintf(line, sizeof line, "        /*%04zx*/   %s ;   /* 0x0000000000000000 */\n", i * 16, body[i].c_str());
    text += line;
    text += "                                      /* 0x000fe20000000000 */\n";
  }
  return text;
}

jit::sass::Audit audit(const std::vector<std::string>& body) {
  const auto functions = jit::sass::parse_sass(sass(body));
  EXPECT_EQ(functions.size(), 1u);
  return jit::sass::audit_function(functions.at(0));
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

TEST(SassAudit, WgmmaAccumulatorsCarryData) {
  // m64n64: 32 accumulator registers from R24; R55 is the last of them.
  const auto a = audit({"HGMMA.64x64x16.F32 R24, gdesc[UR8], RZ, !UPT, gsb0", "FSETP.GT.AND P0, PT, R55, RZ, PT",
                        "@P0 BRA 0x40", "NOP", "EXIT"});
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

TEST(SassAudit, JsonListsFlaggedBranches) {
  const auto a = audit({"LDG.E R5, desc[UR4][R2.64]", "ISETP.NE.AND P0, PT, R5, RZ, PT", "@P0 BRA 0x40", "NOP",
                        "EXIT"});
  const nlohmann::json j = jit::sass::to_json(a);
  EXPECT_EQ(j.at("branches").at("data"), 1);
  ASSERT_EQ(j.at("flagged_branches").size(), 1u);
  EXPECT_EQ(j.at("flagged_branches")[0].at("address"), "0x0020");
}

}  // namespace
