// The report around `bench --suite`'s figures: build and host records, the device lock, the
// units table, and the paste-ready markdown (bench_common.hpp).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/bench_common.hpp"
#include "vkspec_build_info.h"

namespace vkspec::cli {

namespace fs = std::filesystem;

nlohmann::json build_json() {
  return {{"vkspec_version", VKSPEC_VERSION},
          {"git_commit", VKSPEC_GIT_COMMIT},
          {"build_type", VKSPEC_BUILD_TYPE},
#if defined(__clang__)
          {"compiler", "clang " __clang_version__}
#elif defined(__GNUC__)
          {"compiler", "gcc " __VERSION__}
#else
          {"compiler", "unknown"}
#endif
  };
}

namespace {

// A count or setting of a results file as written there: any JSON integer, never narrowed (a
// hand-edited 4294967296 stays that, not 0); anything else is refused like a missing field.
int64_t count_of(const nlohmann::json& v) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    throw nlohmann::json::type_error::create(302, "a count must be an integer in int64 range, got " + v.dump(), &v);
  return v.get<int64_t>();
}

std::string read_line(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  if (!f || !std::getline(f, s)) return {};
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The distinct values of /sys/devices/system/cpu/cpu<N>/cpufreq/<file> over the CPUs, as
// "value (cpus 0-1)" entries, or "unavailable" when no CPU exposes it (containers, VMs).
nlohmann::json per_cpu(const std::string& file) {
  std::map<std::string, std::vector<int>> seen;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string n = e.path().filename().string();
    if (n.size() < 4 || n.compare(0, 3, "cpu") || n.find_first_not_of("0123456789", 3) != std::string::npos) continue;
    const std::string v = read_line(e.path() / "cpufreq" / file);
    if (!v.empty()) seen[v].push_back(std::stoi(n.substr(3)));
  }
  if (seen.empty()) return "unavailable";
  nlohmann::json out = nlohmann::json::array();
  for (auto& [v, cpus] : seen) out.push_back({{"value", v}, {"cpus", cpus.size()}});
  return out;
}

// How idle CPUs wait: the cpuidle driver and governor, and on a KVM guest with the haltpoll driver
// how long an idle vCPU polls before it halts. A halted vCPU is woken by the host, which on a VM
// costs tens of microseconds, and lavapipe's thread pool sleeps and wakes its threads once per
// dispatch: with no polling that wake-up, not the arithmetic, is most of a small dispatch.
nlohmann::json idle_json() {
  const fs::path idle = "/sys/devices/system/cpu/cpuidle";
  const std::string driver = read_line(idle / "current_driver");
  std::string governor = read_line(idle / "current_governor_ro");
  if (governor.empty()) governor = read_line(idle / "current_governor");
  const std::string poll = read_line("/sys/module/haltpoll/parameters/guest_halt_poll_ns");
  bool virtualized = false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; !virtualized && std::getline(cpuinfo, line);)
    virtualized = line.compare(0, 5, "flags") == 0 && (line + " ").find(" hypervisor ") != std::string::npos;
  return {{"driver", driver.empty() ? "unavailable" : driver},
          {"governor", governor.empty() ? "unavailable" : governor},
          {"halt_poll_ns", poll.empty() ? "unavailable" : poll},
          {"virtualized", virtualized}};
}

}  // namespace

void warn_idle(const DeviceCaps& caps) {
  if (!caps.is_cpu()) return;
  const nlohmann::json i = idle_json();
  if (i["driver"] != "haltpoll" || i["halt_poll_ns"] != "0") return;
  std::fprintf(stderr,
               "note: this VM's idle vCPUs halt at once (cpuidle haltpoll, guest_halt_poll_ns = 0), so every dispatch "
               "waits for the host to wake lavapipe's threads; small-model figures are then up to ~2x slower and swing "
               "from run to run (README: \"Stable figures\")\n");
}

nlohmann::json host_json() {
  const char* lp = std::getenv("LP_NUM_THREADS");
  const std::string profile = read_line("/sys/firmware/acpi/platform_profile");
  const std::string no_turbo = read_line("/sys/devices/system/cpu/intel_pstate/no_turbo");
  const std::string boost = read_line("/sys/devices/system/cpu/cpufreq/boost");
  return {{"cpu_governor", per_cpu("scaling_governor")},
          {"energy_performance_preference", per_cpu("energy_performance_preference")},
          {"platform_profile", profile.empty() ? "unavailable" : profile},
          {"turbo", !no_turbo.empty() ? (no_turbo == "1" ? "off" : "on")
                    : !boost.empty() ? (boost == "1" ? "on" : "off") : "unavailable"},
          {"online_cpus", sysconf(_SC_NPROCESSORS_ONLN)},
          {"loadavg", read_line("/proc/loadavg")},
          {"cpuidle", idle_json()},
          {"LP_NUM_THREADS", lp ? lp : "unset"}};
}

nlohmann::json units_json() {
  return {{"tokens_per_s", "tokens/s"},
          {"gb_per_s", "GB/s (1e9 bytes read per second: weights as stored + activations)"},
          {"gflop_per_s", "GFLOP/s (2·rows·cols·batch per second)"},
          {"us", "microseconds per matmul dispatch (GPU timestamps)"},
          {"us_per_forward", "microseconds per verifier forward (wall clock)"},
          {"cost_ratio", "c(N) = time(forward N rows) / time(forward 1 row), dimensionless"},
          {"tau", "tokens committed per verifier pass"},
          {"speedup", "tokens/s over ar's in the same repetition, dimensionless"},
          {"ratio", "a model's tokens/s over the first model's in the same repetition and test, dimensionless"},
          {"nodes_per_step", "verified tree nodes per step, root included"},
          {"dispatches_per_step", "compute dispatches per step"},
          {"host_waits_per_step", "host waits per step"},
          {"size_bytes", "bytes"},
          {"weight_bytes", "bytes on the device"},
          {"kv_bytes", "bytes on the device (the KV cache at kv_context tokens)"},
          {"scratch_bytes", "bytes on the device"},
          {"kv_context", "tokens"},
          {"params", "parameters"},
          {"wall_s", "seconds"},
          {"matmul_s", "seconds"},
          {"models_s", "seconds (pp/tg and c(N), random models generated included)"},
          {"speculative_s", "seconds"},
          {"rotate_mib", "MiB"},
          {"max_shared_memory", "bytes"},
          {"timestamp_period_ns", "nanoseconds per timestamp tick"},
          {"device_local_bytes", "bytes"},
          {"new_tokens", "tokens per prompt"}};
}

// ---- lock -------------------------------------------------------------------------------------

BenchLock::BenchLock(const DeviceCaps& caps) {
  const char* rt = std::getenv("XDG_RUNTIME_DIR");
  std::error_code ec;
  const std::string dir = rt && *rt && fs::is_directory(rt, ec) ? rt : "/tmp";
  std::string key;
  for (char c : caps.name) key += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  char uuid[33];
  for (int i = 0; i < 16; ++i) std::snprintf(uuid + 2 * i, 3, "%02x", caps.uuid[size_t(i)]);
  path_ = dir + "/vkspec-bench-" + key.substr(0, 48) + "-" + uuid + ".lock";
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open the benchmark lock " + path_ + ": " + std::strerror(errno));
  // flock is released when its holder exits, however it exits: a lock file left by a dead process
  // is taken over here without any PID check.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string pid = n > 0 ? std::string(buf, size_t(n)) : "";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error("another benchmark is running on device '" + caps.name + "' (pid " + (pid.empty() ? "?" : pid) +
                  ", lock " + path_ + "); figures taken side by side are worthless — wait for it to finish");
    throw Error("cannot lock " + path_ + ": " + std::strerror(err));
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size()))
    throw Error("cannot write the benchmark lock " + path_ + ": " + std::strerror(errno));
}

BenchLock::~BenchLock() {
  if (fd_ >= 0) {
    if (::ftruncate(fd_, 0) != 0) {
    }  // the lock is released by close; an empty file only says so
    ::close(fd_);
  }
}

// ---- markdown ---------------------------------------------------------------------------------

namespace {

struct Notes {
  std::vector<std::string> lines;
  // "12.34 ± 0.56" plus a footnote mark when the figure is flagged.
  std::string cell(const nlohmann::json& s, int digits, const std::string& what) {
    char b[96];
    std::snprintf(b, sizeof b, "%.*f ± %.*f", digits, s.at("mean").get<double>(), digits, s.at("sd").get<double>());
    std::string out = b;
    const auto& why = s.at("unreliable");
    if (!why.empty()) {
      std::string text = what + ": ";
      for (size_t i = 0; i < why.size(); ++i) text += (i ? "; " : "") + why[i].get<std::string>();
      lines.push_back(text);
      out += " †" + std::to_string(lines.size());
    }
    return out;
  }
};

std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

std::string governor_text(const nlohmann::json& g) {
  if (g.is_string()) return g.get<std::string>();
  std::string s;
  for (auto& e : g) s += (s.empty() ? "" : ", ") + e["value"].get<std::string>() + " ×" + std::to_string(count_of(e["cpus"]));
  return s;
}

// " · idle: haltpoll/haltpoll, halt polling 0 ns, VM"; nothing for files written before the record.
std::string idle_text(const nlohmann::json& host) {
  if (!host.contains("cpuidle")) return {};
  const auto& i = host.at("cpuidle");
  return " · idle: " + i.at("driver").get<std::string>() + "/" + i.at("governor").get<std::string>() +
         (i.at("halt_poll_ns") == "unavailable" ? std::string() : ", halt polling " + i.at("halt_poll_ns").get<std::string>() + " ns") +
         (i.at("virtualized").get<bool>() ? ", VM" : "");
}

}  // namespace

std::string suite_markdown(const nlohmann::json& j) {
  std::ostringstream md;
  Notes notes;
  const auto& d = j.at("device");
  const auto& h = j.at("host");
  const auto& b = j.at("build");
  md << "**Device:** " << d.at("name").get<std::string>() << " · " << d.at("type").get<std::string>() << " · driver "
     << d.at("driver").get<std::string>() << " (" << d.at("driver_info").get<std::string>() << ") · Vulkan "
     << d.at("api_version").get<std::string>() << " · fp16: " << int(d.at("fp16_arithmetic").get<bool>())
     << " · int8 dot: " << int(d.at("int8_arithmetic").get<bool>()) << " · subgroup: "
     << count_of(d.at("subgroup_size")) << " (" << count_of(d.at("min_subgroup_size")) << "–"
     << count_of(d.at("max_subgroup_size")) << ") · shared memory: " << count_of(d.at("max_shared_memory"))
     << " B · matrix cores: not used\n\n";
  md << "**Build:** vkspec " << b.at("vkspec_version").get<std::string>() << " (" << b.at("git_commit").get<std::string>()
     << ", " << b.at("build_type").get<std::string>() << ") · suite `" << j.at("suite").get<std::string>() << "` · "
     << count_of(j.at("settings").at("reps")) << (count_of(j.at("settings").at("reps")) == 1 ? " repetition" : " repetitions")
     << " after a warm-up · CPU governor: "
     << governor_text(h.at("cpu_governor")) << " · EPP: " << governor_text(h.at("energy_performance_preference"))
     << " · LP_NUM_THREADS: " << h.at("LP_NUM_THREADS").get<std::string>() << idle_text(h) << " · load: "
     << h.at("loadavg").get<std::string>() << "\n\n";

  md << "| model | size | params | backend | test | t/s |\n| --- | ---: | ---: | --- | --- | ---: |\n";
  for (const auto& m : j.at("models")) {
    const std::string name = m.at("model").get<std::string>() + " " + m.at("type").get<std::string>();
    for (const auto& t : m.at("tests")) {
      md << "| " << name << " | " << fixed(m.at("size_bytes").get<double>() / 1048576.0, 2) << " MiB | "
         << fixed(m.at("params").get<double>() / 1e6, 2) << " M | Vulkan | " << t.at("test").get<std::string>() << " | ";
      if (t.contains("error"))
        md << "skipped: " << t.at("error").get<std::string>() << " |\n";
      else
        md << notes.cell(t.at("tokens_per_s"), 2, name + " " + t.at("test").get<std::string>()) << " |\n";
    }
  }
  // Each model against the first, repetition by repetition (files before 2026-12-03 have none).
  std::string relative;
  for (const auto& m : j.at("models"))
    for (const auto& t : m.at("tests"))
      if (t.contains("relative")) {
        const std::string what = m.at("model").get<std::string>() + " " + t.at("test").get<std::string>();
        relative += (relative.empty() ? "" : ", ") + what + " " + notes.cell(t.at("relative").at("ratio"), 2, what + " ratio");
      }
  if (!relative.empty())
    md << "\n**Relative to " << j.at("models").at(0).at("model").get<std::string>()
       << "** (ratio of t/s in the same repetition, the models interleaved): " << relative << "\n";

  // Device bytes against the file's (files before 2026-12-04 have none).
  std::string memory;
  for (const auto& m : j.at("models")) {
    if (!m.contains("device_memory")) continue;
    const auto& d = m.at("device_memory");
    const double file = m.at("size_bytes").get<double>(), w = d.at("weight_bytes").get<double>(),
                 kv = d.at("kv_bytes").get<double>();
    memory += std::string(memory.empty() ? "" : "; ") + m.at("model").get<std::string>() + " weights " +
              fixed(w / 1048576.0, 2) + " MiB (" + fixed(w / file, 3) + " × file), KV " + fixed(kv / 1048576.0, 2) +
              " MiB at " + std::to_string(count_of(d.at("kv_context"))) + " tokens, scratch " +
              fixed(d.at("scratch_bytes").get<double>() / 1048576.0, 2) + " MiB, (weights + KV) / (file + KV) " +
              fixed((w + kv) / (file + kv), 3);
  }
  if (!memory.empty()) md << "\n**Device memory:** " << memory << "\n";

  const auto& sp = j.at("speculative");
  md << "\n**Speculative decoding** (" << sp.at("model").get<std::string>() << ", heads "
     << sp.at("heads").at(0).get<std::string>() << " + " << sp.at("heads").at(1).get<std::string>() << ", "
     << count_of(sp.at("prompts")) << " prompts × " << count_of(sp.at("new_tokens")) << " tokens, depth "
     << count_of(sp.at("depth")) << ", greedy)\n\n";
  md << "| strategy | budget | top-k | τ | t/s | speedup | nodes/step | dispatches/step | waits/step |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : sp.at("results")) {
    // Files written before the suite ran several top-ks give one top-k for all rows.
    const int64_t topk = count_of(r.contains("topk") ? r.at("topk") : sp.at("topk"));
    const std::string what = r.at("strategy").get<std::string>() + " B=" + std::to_string(count_of(r.at("budget"))) +
                             " k=" + std::to_string(topk);
    md << "| " << r.at("strategy").get<std::string>() << " | " << count_of(r.at("budget")) << " | " << topk << " | ";
    if (r.contains("error")) {
      md << "skipped: " << r.at("error").get<std::string>() << " | | | | | |\n";
      continue;
    }
    md << notes.cell(r.at("tau"), 2, what + " τ") << " | " << notes.cell(r.at("tokens_per_s"), 2, what + " t/s")
       << " | " << notes.cell(r.at("speedup"), 2, what + " speedup") << " | " << count_of(r.at("nodes_per_step"))
       << " | " << count_of(r.at("dispatches_per_step")) << " | " << fixed(r.at("host_waits_per_step").get<double>(), 2)
       << " |\n";
  }

  const auto& mm = j.at("matmul");
  std::vector<int64_t> batches;
  std::vector<std::string> types;
  for (const auto& r : mm.at("results")) {
    const int64_t B = count_of(r.at("batch"));
    if (std::find(batches.begin(), batches.end(), B) == batches.end()) batches.push_back(B);
    const std::string t = r.at("dtype").get<std::string>();
    if (std::find(types.begin(), types.end(), t) == types.end()) types.push_back(t);
  }
  for (const char* key : {"gb_per_s", "gflop_per_s"}) {
    const bool gb = std::string(key) == "gb_per_s";
    md << "\n**Matmul " << (gb ? "GB/s" : "GFLOP/s") << "** (" << count_of(mm.at("rows")) << "×" << count_of(mm.at("cols"))
       << " weights, batch B rows)\n\n| type |";
    for (int64_t B : batches) md << " B=" << B << " |";
    md << "\n| --- |";
    for (size_t i = 0; i < batches.size(); ++i) md << " ---: |";
    md << "\n";
    for (const std::string& t : types) {
      md << "| " << t << " |";
      for (int64_t B : batches)
        for (const auto& r : mm.at("results"))
          if (r.at("dtype") == t && r.at("batch") == B)
            md << " " << notes.cell(r.at(key), 2, "matmul " + t + " B=" + std::to_string(B) + (gb ? " GB/s" : " GFLOP/s"))
               << " |";
      md << "\n";
    }
  }

  const auto& vc = j.at("verify_cost");
  md << "\n**Verify cost** c(N) = time(forward N rows) / time(forward 1 row), " << vc.at("model").get<std::string>()
     << ", every row's logits, at KV length " << count_of(vc.at("kv_length")) << "\n\n| N |";
  for (const auto& r : vc.at("results")) md << " " << count_of(r.at("rows")) << " |";
  md << "\n| --- |";
  for (size_t i = 0; i < vc.at("results").size(); ++i) md << " ---: |";
  md << "\n| µs/forward |";
  for (const auto& r : vc.at("results"))
    md << " " << notes.cell(r.at("us_per_forward"), 1, "forward N=" + std::to_string(count_of(r.at("rows")))) << " |";
  md << "\n| c(N) |";
  for (const auto& r : vc.at("results"))
    md << " " << notes.cell(r.at("cost_ratio"), 2, "c(" + std::to_string(count_of(r.at("rows"))) + ")") << " |";
  md << "\n";

  if (!notes.lines.empty()) {
    md << "\nUnreliable figures (timer resolution, or sd/mean over " << int(kMaxRelativeSd * 100) << "%):\n\n";
    for (size_t i = 0; i < notes.lines.size(); ++i) md << "- †" << i + 1 << " " << notes.lines[i] << "\n";
  }
  return md.str();
}

}  // namespace vkspec::cli
