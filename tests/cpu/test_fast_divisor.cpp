// FastDivisor (kernel_src/common/fast_divisor.h) against the
// hardware's division, on the divisors and dividends where a multiply-shift
// division goes wrong first: around powers of two, multiples of the divisor
// and the largest dividend (2^31 - 1).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernel_src/common/fast_divisor.h"

namespace {

std::vector<unsigned> divisors() {
  std::vector<unsigned> d;
  for (unsigned i = 1; i <= 1000; ++i) d.push_back(i);
  for (unsigned b = 10; b <= 31; ++b) {
    const unsigned long long p = 1ull << b;
    for (long long delta : {-3, -1, 0, 1, 3}) {
      const long long v = (long long)p + delta;
      if (v >= 1 && v < (1ll << 31)) d.push_back(unsigned(v));
    }
  }
  for (unsigned v : {1000003u, 46341u, 65537u, 2147483647u, 1431655765u, 715827883u}) d.push_back(v);
  return d;
}

void expect_exact(const cujit::FastDivisor& f, unsigned n) {
  const unsigned q = f.quotient(n);
  ASSERT_EQ(q, n / f.divisor) << n << " / " << f.divisor;
  ASSERT_EQ(f.remainder(n, q), n % f.divisor) << n << " % " << f.divisor;
}

TEST(FastDivisor, MatchesDivisionForEveryDividendBelow2To31) {
  std::mt19937 rng(12345);
  std::uniform_int_distribution<unsigned> any(0, (1u << 31) - 1);
  for (const unsigned d : divisors()) {
    const cujit::FastDivisor f = cujit::make_fast_divisor(d);
    ASSERT_LT(f.multiplier, ~0u) << d;
    const unsigned top = (1u << 31) - 1;
    for (unsigned n : {0u, 1u, d - 1, d, d + 1, top, top - 1, top - top % d, top - top % d - 1}) expect_exact(f, n);
    for (unsigned k = 1; k < 2000 && k <= top / d; k += 1 + k / 16) {
      expect_exact(f, k * d - 1);
      expect_exact(f, k * d);
    }
    for (int i = 0; i < 200; ++i) expect_exact(f, any(rng));
  }
}

TEST(FastDivisor, DenseDividendsForSmallDivisors) {
  for (unsigned d = 1; d <= 64; ++d) {
    const cujit::FastDivisor f = cujit::make_fast_divisor(d);
    for (unsigned n = 0; n < 100000; ++n) expect_exact(f, n);
  }
}

TEST(FastDivisor, ZeroIsTakenAsOne) {
  const cujit::FastDivisor f = cujit::make_fast_divisor(0);
  EXPECT_EQ(f.divisor, 1u);
  expect_exact(f, 12345);
}

}  // namespace
