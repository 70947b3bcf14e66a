// Bars, verdicts, the CSV and the table of bars (serving_report.h).
#include "tools/serving_report.h"

#include <fmt/format.h>

#include <cmath>
#include <istream>
#include <ostream>

#include "jit/error.h"
#include "tools/comma_fields.h"

namespace serving_bench {
namespace {

constexpr const char* kHeader = "part,shape,dtype,page_size,metric,value,bar,verdict,variant";

// Fields are names and numbers: a comma in one would shift every later column.
const std::string& checked_field(const std::string& field) {
  if (field.find(',') != std::string::npos)
    throw jit::Error(jit::ErrorCode::Internal, fmt::format("CSV field '{}' holds a comma", field));
  return field;
}

}  // namespace

std::string Bar::text() const { return fmt::format("{} {:g}", kind == Kind::AtLeast ? ">=" : "<=", limit); }

std::optional<Bar> parse_bar(const std::string& text) {
  if (text.size() < 3 || (text.compare(0, 2, ">=") != 0 && text.compare(0, 2, "<=") != 0)) return std::nullopt;
  Bar bar;
  bar.kind = text[0] == '>' ? Bar::Kind::AtLeast : Bar::Kind::AtMost;
  try {
    std::size_t used = 0;
    const std::string number = text.substr(2);
    bar.limit = std::stod(number, &used);
    if (number.find_first_not_of(' ', used) != std::string::npos) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return bar;
}

std::string verdict(const Metric& metric) {
  if (!metric.bar) return "";
  return metric.bar->met(metric.value) ? "PASS" : "MISS";
}

double fraction_of_copy_ceiling(double bytes, double copy_bytes_per_us, double launch_us) {
  const double copy_us = bytes / copy_bytes_per_us;
  return copy_us / (copy_us + launch_us);
}

double geometric_mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / double(values.size()));
}

void write_csv_header(std::ostream& out) { out << kHeader << '\n'; }

void write_csv_row(std::ostream& out, const Metric& m) {
  out << fmt::format("{},{},{},{},{},{:.6g},{},{},{}\n", checked_field(m.part), checked_field(m.shape),
                     checked_field(m.dtype), m.page_size, checked_field(m.name), m.value, m.bar ? m.bar->text() : "",
                     verdict(m), checked_field(m.variant));
}

std::vector<Metric> read_csv(std::istream& in) {
  std::vector<Metric> metrics;
  std::string line;
  int number = 0;
  auto bad = [&](const std::string& why) {
    return jit::Error(jit::ErrorCode::InvalidArgument, fmt::format("CSV line {}: {}: '{}'", number, why, line));
  };
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line != kHeader) throw bad("not the header " + std::string(kHeader));
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> f = split_fields(line);
    if (f.size() != 9) throw bad(fmt::format("{} fields, not 9", f.size()));
    Metric m;
    m.part = f[0];
    m.shape = f[1];
    m.dtype = f[2];
    m.name = f[4];
    m.variant = f[8];
    try {
      m.page_size = std::stoll(f[3]);
      m.value = std::stod(f[5]);
    } catch (const std::exception&) {
      throw bad("page_size or value is not a number");
    }
    if (!f[6].empty()) {
      m.bar = parse_bar(f[6]);
      if (!m.bar) throw bad("bar '" + f[6] + "' is not '>= x' or '<= x'");
    }
    metrics.push_back(m);
  }
  if (number == 0) throw jit::Error(jit::ErrorCode::InvalidArgument, "CSV is empty (no header)");
  return metrics;
}

std::string bars_table(const std::vector<Metric>& metrics) {
  std::string table =
      fmt::format("{:<28} {:<34} {:>5} {:>8} {:>8}  {}\n", "ratio", "shape", "page", "value", "bar", "verdict");
  for (const Metric& m : metrics) {
    if (!m.bar) continue;
    const std::string page = m.page_size ? std::to_string(m.page_size) : "-";
    table += fmt::format("{:<28} {:<34} {:>5} {:>8.3f} {:>8}  {}\n", m.name,
                         m.shape + (m.dtype.empty() ? "" : " " + m.dtype), page, m.value, m.bar->text(), verdict(m));
  }
  return table;
}

}  // namespace serving_bench
