#include "bench_report.hpp"

#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mconv::tools {
namespace {

double geomean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += std::log(x);
  return std::exp(s / v.size());
}

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

struct Summary {
  double geo_fast = 0, geo_matched = 0, mconv_total = 0, fast_total = 0, matched_total = 0;
  double geo_tflops = 0;
  int wrong = 0, not_run = 0;
};

Summary summarize(const std::vector<LayerResult>& rows) {
  Summary s;
  std::vector<double> rf, rm, tf;
  for (const auto& r : rows) {
    if (!r.ran) {
      ++s.not_run;
      continue;
    }
    s.mconv_total += r.ms;
    if (!r.correct) ++s.wrong;
    if (r.ms > 0) tf.push_back(r.problem.flops() / (r.ms * 1e-3) / 1e12);
    if (r.fastest.valid) {
      rf.push_back(r.fastest.ms / r.ms);
      s.fast_total += r.fastest.ms;
    }
    if (r.matched.valid) {
      rm.push_back(r.matched.ms / r.ms);
      s.matched_total += r.matched.ms;
    }
  }
  s.geo_fast = geomean(rf);
  s.geo_matched = geomean(rm);
  s.geo_tflops = geomean(tf);
  return s;
}

}  // namespace

void print_csv_header(std::ostream& os) {
  os << "suite,name,n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,dil_h,dil_w,groups,target,algorithm,tile,ms,tflops,"
        "roofline_pct,extra_bytes,rel_err,correct,cudnn_fastest_algo,cudnn_fastest_ms,cudnn_fastest_ws,ratio_fastest,"
        "cudnn_matched_algo,cudnn_matched_ms,cudnn_matched_ws,ratio_matched,note\n";
}

void print_csv_row(std::ostream& os, const std::string& suite, const LayerResult& r) {
  const Problem& p = r.problem;
  os << suite << "," << r.name << "," << p.n << "," << p.c << "," << p.h << "," << p.w << "," << p.k << "," << p.r
     << "," << p.s << "," << p.pad_h << "," << p.pad_w << "," << p.stride_h << "," << p.stride_w << "," << p.dil_h
     << "," << p.dil_w << "," << p.groups << "," << r.target << "," << r.algorithm << "," << r.tile << ",";
  if (r.ran)
    os << r.ms << "," << p.flops() / (r.ms * 1e-3) / 1e12 << ","
       << (r.floor_ms > 0 ? fmt(100.0 * r.floor_ms / r.ms, 1) : "") << "," << r.extra_bytes << "," << r.rel_err << ","
       << (r.correct ? 1 : 0);
  else
    os << ",,,,,0";
  for (const PeerTime* pt : {&r.fastest, &r.matched}) {
    if (pt->valid)
      os << "," << pt->algo << "," << pt->ms << "," << pt->workspace << "," << (r.ran ? fmt(pt->ms / r.ms, 4) : "");
    else
      os << ",,,,";
  }
  std::string note = r.note;
  for (char& c : note)
    if (c == ',' || c == '\n' || c == '"') c = ';';
  os << "," << note << "\n";
}

double min_bytes(const Problem& p, int element_bytes) {
  return double(element_bytes) * (double(p.n) * p.c * p.h * p.w + double(p.k) * (p.c / p.groups) * p.r * p.s +
                                  double(p.n) * p.k * p.p() * p.q());
}

void print_report(std::ostream& os, const std::string& format, const std::string& suite,
                  const std::vector<LayerResult>& rows, const Peaks& peaks) {
  const Summary sum = summarize(rows);
  const bool peer = sum.fast_total > 0 || sum.matched_total > 0;
  if (format == "json") {
    nlohmann::json j;
    j["suite"] = suite;
    j["device"] = peaks.device;
    j["peak_gemm_tflops"] = peaks.gemm_flops / 1e12;
    j["peak_gemm"] = peaks.gemm_name;
    j["peak_bandwidth_gbs"] = peaks.bytes_per_s / 1e9;
    j["timing"] = peaks.timing;
    for (const auto& r : rows) {
      nlohmann::json l = {{"name", r.name},
                          {"problem", r.problem.to_string()},
                          {"target", r.target},
                          {"algorithm", r.algorithm},
                          {"tile", r.tile},
                          {"ms", r.ms},
                          {"tflops", r.problem.flops() / (r.ms * 1e-3) / 1e12},
                          {"extra_bytes", r.extra_bytes},
                          {"rel_err", r.rel_err},
                          {"correct", r.correct},
                          {"ran", r.ran}};
      if (!r.note.empty()) l["note"] = r.note;
      if (r.floor_ms > 0) l["roofline_pct"] = 100.0 * r.floor_ms / r.ms;
      for (const auto& [name, ms] : r.alternatives) l["algorithms"][name] = ms;
      for (auto [key, p] :
           {std::pair<const char*, const PeerTime*>{"cudnn_fastest", &r.fastest}, {"cudnn_matched", &r.matched}})
        if (p->valid)
          l[key] = {{"algo", p->algo},
                    {"ms", p->ms},
                    {"workspace", p->workspace},
                    {"ratio", p->ms / r.ms},
                    {"rel_err", p->rel_err}};
      j["layers"].push_back(l);
    }
    j["summary"] = {{"mconv_total_ms", sum.mconv_total},
                    {"geomean_tflops", sum.geo_tflops},
                    {"wrong", sum.wrong},
                    {"not_run", sum.not_run}};
    if (peer) {
      j["summary"]["geomean_ratio_fastest"] = sum.geo_fast;
      j["summary"]["geomean_ratio_matched"] = sum.geo_matched;
      j["summary"]["cudnn_fastest_total_ms"] = sum.fast_total;
      j["summary"]["cudnn_matched_total_ms"] = sum.matched_total;
    }
    os << j.dump(2) << "\n";
    return;
  }
  if (format == "csv") {
    print_csv_header(os);
    for (const auto& r : rows) print_csv_row(os, suite, r);
    return;
  }
  // table
  os << "suite " << suite << (peaks.device.empty() ? "" : " on " + peaks.device);
  if (peaks.gemm_flops > 0)
    os << "  (measured peaks: " << peaks.gemm_name << " " << fmt(peaks.gemm_flops / 1e12, 1) << " TFLOP/s, copy "
       << fmt(peaks.bytes_per_s / 1e9, 0) << " GB/s)";
  if (!peaks.timing.empty()) os << "\ntimed as " << peaks.timing;
  os << "\n";
  os << std::left << std::setw(28) << "layer" << std::setw(34) << "mconv algo" << std::right << std::setw(10) << "ms"
     << std::setw(9) << "TFLOP/s" << std::setw(7) << "roof%" << std::setw(9) << "extra B" << std::setw(9) << "rel err";
  if (peer)
    os << std::setw(10) << "cuDNN ms" << std::setw(9) << "ws MB" << std::setw(7) << "ratio" << std::setw(10) << "mm ms"
       << std::setw(9) << "mm ws KB" << std::setw(7) << "ratio"
       << "  peers (fastest / matched)";
  os << "\n";
  for (const auto& r : rows) {
    if (!r.ran) {
      os << std::left << std::setw(28) << r.name.substr(0, 27) << "not run: " << r.note << "\n";
      continue;
    }
    const double tflops = r.problem.flops() / (r.ms * 1e-3) / 1e12;
    os << std::left << std::setw(28) << r.name.substr(0, 27) << std::setw(34)
       << (r.algorithm + (r.tile.empty() ? "" : " " + r.tile)).substr(0, 33) << std::right << std::setw(10)
       << fmt(r.ms, 4) << std::setw(9) << fmt(tflops, tflops < 1 ? 3 : 2) << std::setw(7)
       << (r.floor_ms > 0 ? fmt(100.0 * r.floor_ms / r.ms, 0) : "-") << std::setw(9) << r.extra_bytes << std::setw(9)
       << (r.correct ? "" : "FAIL ") + fmt(r.rel_err * 1e6, 1) + "u";
    if (peer) {
      if (r.fastest.valid)
        os << std::setw(10) << fmt(r.fastest.ms, 4) << std::setw(9) << fmt(r.fastest.workspace / 1048576.0, 1)
           << std::setw(7) << fmt(r.fastest.ms / r.ms, 2);
      else
        os << std::setw(26) << "-";
      if (r.matched.valid)
        os << std::setw(10) << fmt(r.matched.ms, 4) << std::setw(9) << fmt(r.matched.workspace / 1024.0, 1)
           << std::setw(7) << fmt(r.matched.ms / r.ms, 2);
      else
        os << std::setw(26) << "-";
      os << "  " << r.fastest.algo << " / " << r.matched.algo;
    }
    for (const auto& [name, ms] : r.alternatives) os << "  [" << name << " " << (ms < 0 ? "WRONG" : fmt(ms, 4)) << "]";
    if (!r.note.empty()) os << "  (" << r.note << ")";
    os << "\n";
  }
  os << "rel err: norm-relative error of sampled outputs against the double reference, in millionths (u); "
        "ratio: cuDNN time / mconv time\n";
  os << "total mconv " << fmt(sum.mconv_total, 3) << " ms, geomean " << fmt(sum.geo_tflops, 3) << " TFLOP/s";
  if (peer)
    os << "; cuDNN fastest " << fmt(sum.fast_total, 3) << " ms (geomean ratio " << fmt(sum.geo_fast, 3)
       << "), memory-matched " << fmt(sum.matched_total, 3) << " ms (geomean ratio " << fmt(sum.geo_matched, 3) << ")";
  if (sum.not_run) os << "; " << sum.not_run << " layer(s) not run by mconv";
  os << (sum.wrong ? "; " + std::to_string(sum.wrong) + " layer(s) WRONG" : "; every layer run was checked") << "\n";
}

}  // namespace mconv::tools
