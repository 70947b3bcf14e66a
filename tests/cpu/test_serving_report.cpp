// cujit-serving-bench's logic that needs no GPU: which rows carry the
// bandwidth bar, bars and verdicts, the geometric mean, the CSV the graph
// part's child processes hand back, and the shuffled page table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "jit/error.h"
#include "tools/serving_report.h"
#include "tools/serving_shapes.h"
#include "tools/shuffled_block_table.h"

using namespace serving_bench;

TEST(ServingBenchShapes, TheIssuesLongAndMqaDecodesCarryTheBarAndTheSmallOneDoesNot) {
  const std::vector<DecodeShape> shapes = decode_shapes(false);
  const DecodeShape long_one{1, 64, 8, 131072, 128, jit::DType::bf16};
  const DecodeShape mqa{4, 32, 1, 32768, 128, jit::DType::bf16};
  for (const DecodeShape& s : {long_one, mqa}) {
    EXPECT_NE(std::find(shapes.begin(), shapes.end(), s), shapes.end()) << label(s);
    EXPECT_GE(kv_bytes(s), kBarBytes) << label(s);
  }
  EXPECT_NE(std::find(shapes.begin(), shapes.end(), small_decode()), shapes.end());
  EXPECT_LT(kv_bytes(small_decode()), kBarBytes);
  EXPECT_DOUBLE_EQ(kv_bytes(small_decode()), 2.0 * 8 * 4096 * 128 * 2);  // K and V, 2 bytes an element
  for (const DecodeShape& s : decode_shapes(true))
    EXPECT_NE(std::find(shapes.begin(), shapes.end(), s), shapes.end()) << "--quick times a shape of its own";
}

TEST(ServingBenchReport, TheCeilingIsTheCopyTimeOverItPlusOneLaunchFloor) {
  // MQA's 67 MB: 22.13 us at an H100's 3.033 TB/s plus a 3.74 us floor, and
  // 15.77 us at an H200's 4.255 TB/s plus 3.52 us.
  const DecodeShape mqa{4, 32, 1, 32768, 128, jit::DType::bf16};
  EXPECT_NEAR(fraction_of_copy_ceiling(kv_bytes(mqa), 3.033e6, 3.74), 0.8554, 1e-4);
  EXPECT_NEAR(fraction_of_copy_ceiling(kv_bytes(mqa), 4.255e6, 3.52), 0.8175, 1e-4);
  EXPECT_DOUBLE_EQ(fraction_of_copy_ceiling(1e6, 1e6, 0), 1.0);
  EXPECT_NEAR(fraction_of_copy_ceiling(1e6, 1e6, 1.0), 0.5, 1e-12);  // a floor as long as the copy
}

TEST(ServingBenchReport, BarsAreInclusiveBothWays) {
  const Bar at_least{Bar::Kind::AtLeast, 0.85}, at_most{Bar::Kind::AtMost, 1.05};
  EXPECT_TRUE(at_least.met(0.85));
  EXPECT_FALSE(at_least.met(0.849));
  EXPECT_TRUE(at_most.met(1.05));
  EXPECT_FALSE(at_most.met(1.051));
  Metric m;
  m.value = 0.9;
  EXPECT_EQ(verdict(m), "");
  m.bar = at_least;
  EXPECT_EQ(verdict(m), "PASS");
  m.value = 0.5;
  EXPECT_EQ(verdict(m), "MISS");
}

TEST(ServingBenchReport, BarTextReadsBack) {
  for (const Bar& bar : {Bar{Bar::Kind::AtLeast, 0.9}, Bar{Bar::Kind::AtMost, 2}, Bar{Bar::Kind::AtMost, 1.15}}) {
    const std::optional<Bar> back = parse_bar(bar.text());
    ASSERT_TRUE(back) << bar.text();
    EXPECT_EQ(back->kind, bar.kind);
    EXPECT_DOUBLE_EQ(back->limit, bar.limit);
  }
  EXPECT_EQ(Bar(Bar::Kind::AtLeast, 0.85).text(), ">= 0.85");
  for (const char* bad : {"", ">=", "= 1", "> 1", "<= x", ">= 1 2"}) EXPECT_FALSE(parse_bar(bad)) << bad;
}

TEST(ServingBenchReport, GeometricMean) {
  EXPECT_DOUBLE_EQ(geometric_mean({}), 0);
  EXPECT_NEAR(geometric_mean({0.5, 2.0}), 1.0, 1e-12);
  EXPECT_NEAR(geometric_mean({0.8, 0.9, 1.0}), std::cbrt(0.72), 1e-12);
}

TEST(ServingBenchReport, CsvRoundTrips) {
  Metric timed;
  timed.part = "graph";
  timed.shape = "B=1 Hq=32 Hkv=8 Sk=4096 D=128";
  timed.dtype = "f16";
  timed.name = "step_us_pdl_on";
  timed.value = 12.345;
  timed.variant = "decode_variant";
  Metric ratio;
  ratio.part = "paged";
  ratio.shape = timed.shape;
  ratio.page_size = 16;
  ratio.name = "paged_over_contiguous";
  ratio.value = 1.07;
  ratio.bar = Bar{Bar::Kind::AtMost, 1.05};
  std::stringstream csv;
  write_csv_header(csv);
  write_csv_row(csv, timed);
  write_csv_row(csv, ratio);
  EXPECT_NE(csv.str().find(",<= 1.05,MISS,"), std::string::npos) << csv.str();
  const std::vector<Metric> back = read_csv(csv);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].part, "graph");
  EXPECT_EQ(back[0].shape, timed.shape);
  EXPECT_EQ(back[0].dtype, "f16");
  EXPECT_EQ(back[0].name, "step_us_pdl_on");
  EXPECT_DOUBLE_EQ(back[0].value, 12.345);
  EXPECT_FALSE(back[0].bar);
  EXPECT_EQ(back[0].variant, "decode_variant");
  EXPECT_EQ(back[1].page_size, 16);
  ASSERT_TRUE(back[1].bar);
  EXPECT_EQ(verdict(back[1]), "MISS");
  EXPECT_EQ(back[1].variant, "");
}

TEST(ServingBenchReport, CsvProblemsNameTheLine) {
  std::stringstream no_header("part,shape\n");
  EXPECT_THROW(read_csv(no_header), jit::Error);
  std::stringstream empty("");
  EXPECT_THROW(read_csv(empty), jit::Error);
  std::stringstream short_row;
  write_csv_header(short_row);
  short_row << "graph,shape,f16,0,step_us,1.5\n";
  try {
    read_csv(short_row);
    FAIL() << "a row of 6 fields was read";
  } catch (const jit::Error& e) {
    EXPECT_NE(std::string(e.what()).find("CSV line 2"), std::string::npos) << e.what();
  }
  std::stringstream not_a_number;
  write_csv_header(not_a_number);
  not_a_number << "graph,shape,f16,0,step_us,fast,,,v\n";
  EXPECT_THROW(read_csv(not_a_number), jit::Error);
  Metric comma;
  comma.variant = "a,b";
  std::stringstream out;
  EXPECT_THROW(write_csv_row(out, comma), jit::Error);
}

TEST(ServingBenchReport, TheBarsTableListsOnlyBarredRows) {
  Metric plain;
  plain.name = "time_us";
  plain.value = 10;
  Metric barred;
  barred.name = "fraction_of_copy";
  barred.shape = "B=8 Hq=32 Hkv=8 Sk=8192 D=128";
  barred.dtype = "f16";
  barred.value = 0.91;
  barred.bar = Bar{Bar::Kind::AtLeast, 0.85};
  const std::string table = bars_table({plain, barred});
  EXPECT_EQ(table.find("time_us"), std::string::npos) << table;
  EXPECT_NE(table.find("fraction_of_copy"), std::string::npos) << table;
  EXPECT_NE(table.find("0.910"), std::string::npos) << table;
  EXPECT_NE(table.find(">= 0.85  PASS"), std::string::npos) << table;
}

TEST(ServingBenchPages, TheTableIsAShuffledPermutationOfThePool) {
  const std::vector<std::int32_t> table = shuffled_block_table(4, 256, 6);
  ASSERT_EQ(table.size(), 1024u);
  EXPECT_EQ(std::set<std::int32_t>(table.begin(), table.end()).size(), 1024u);
  EXPECT_EQ(*std::min_element(table.begin(), table.end()), 0);
  EXPECT_EQ(*std::max_element(table.begin(), table.end()), 1023);
  // Shuffled: sequence 0 does not own the first pages in order.
  std::vector<std::int32_t> in_order(256);
  std::iota(in_order.begin(), in_order.end(), 0);
  EXPECT_NE(std::vector<std::int32_t>(table.begin(), table.begin() + 256), in_order);
  EXPECT_EQ(shuffled_block_table(4, 256, 6), table) << "the same seed gives the same table";
  EXPECT_THROW(shuffled_block_table(1 << 16, 1 << 16, 6), jit::Error);
}

TEST(ServingBenchShapes, ShapeTextGivesADecodeShapeOrSaysWhichFieldIsWrong) {
  EXPECT_EQ(parse_decode_shape("4,64,1,32768,128,bf16"), (DecodeShape{4, 64, 1, 32768, 128, jit::DType::bf16}));
  EXPECT_EQ(parse_decode_shape("8,32,8,8192,128,fp16,e4m3"),
            (DecodeShape{8, 32, 8, 8192, 128, jit::DType::f16, jit::DType::e4m3}));
  EXPECT_EQ(parse_decode_shape("8,32,8,8192,128,bf16,e5m2").fp8_kv, jit::DType::e5m2);
  EXPECT_EQ(parse_decode_shape("8,32,8,8192,128,bf16,bf16").fp8_kv, std::nullopt) << "kv = the dtype: a 16-bit cache";
  auto why = [](const std::string& text) {
    try {
      (void)parse_decode_shape(text);
    } catch (const jit::Error& e) {
      EXPECT_EQ(e.code(), jit::ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(why("4,64,1,32768,128").find("5 fields, not 6 or 7"), std::string::npos);
  EXPECT_NE(why("4,64,0,32768,128,bf16").find("Hkv '0' is not a positive integer"), std::string::npos);
  EXPECT_NE(why("4,64,1,32k,128,bf16").find("Sk '32k'"), std::string::npos);
  EXPECT_NE(why("4,48,32,1024,128,bf16").find("Hq 48 is not a multiple of Hkv 32"), std::string::npos);
  EXPECT_NE(why("4,64,1,1024,128,fp32").find("dtype 'fp32'"), std::string::npos);
  EXPECT_NE(why("4,64,1,1024,128,bf16,int8").find("kv 'int8'"), std::string::npos);
  EXPECT_NE(why("4,64,1,1024,128,bf16,int8").find("e.g. 4,64,1,32768,128,bf16"), std::string::npos);
}
