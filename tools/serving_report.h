// cujit-serving-bench's results as data: one metric per row (a time, a rate,
// a ratio), a ratio's bar and its verdict, the CSV they are written to and
// read back from (the graph part runs in child processes), and the table of
// bars printed at the end.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace serving_bench {

/// A speed goal for one ratio: at least (a fraction of the copy rate) or at
/// most (a time over a reference time) `limit`.
struct Bar {
  enum class Kind { AtLeast, AtMost };
  Kind kind = Kind::AtLeast;
  double limit = 0;

  bool met(double value) const { return kind == Kind::AtLeast ? value >= limit : value <= limit; }
  /// ">= 0.85", "<= 2"; parse_bar reads it back.
  std::string text() const;
};
std::optional<Bar> parse_bar(const std::string& text);

struct Metric {
  std::string part;   ///< copy, launch_floor, decode, paged, graph, summary
  std::string shape;  ///< serving_shapes.h's label, or what the row is over
  std::string dtype;
  std::int64_t page_size = 0;
  std::string name;  ///< time_us, tb_per_s, fraction_of_copy, paged_over_contiguous, ...
  double value = 0;
  std::optional<Bar> bar;
  std::string variant;
};

/// "PASS" or "MISS" for a metric with a bar, "" without one.
std::string verdict(const Metric& metric);

/// The fraction of the copy rate that reading `bytes` at the copy rate after
/// one launch floor of `launch_us` reaches: what one timed launch of a decode
/// over those bytes can reach at most.
double fraction_of_copy_ceiling(double bytes, double copy_bytes_per_us, double launch_us);

/// exp(mean(log x)); 0 for an empty list. Every value must be > 0.
double geometric_mean(const std::vector<double>& values);

/// CSV with a header: part,shape,dtype,page_size,metric,value,bar,verdict,variant.
void write_csv_header(std::ostream& out);
void write_csv_row(std::ostream& out, const Metric& metric);
/// Reads what write_csv_* wrote; throws jit::Error(InvalidArgument) naming the
/// line that does not parse.
std::vector<Metric> read_csv(std::istream& in);

/// One line per metric with a bar: what it is, over which shape, its value,
/// the bar and PASS/MISS.
std::string bars_table(const std::vector<Metric>& metrics);

}  // namespace serving_bench
