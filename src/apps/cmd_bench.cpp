// `tempo9 bench agents|cold|single --url URL [...]`: an agent-shaped load generator for
// OpenAI-compatible servers on this machine, and a side-by-side comparison (--compare URL2).
// Workloads: bench_workload.h; measurement: bench_client.h; report: bench_report.h.
#include <httplib.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "apps/bench_report.h"
#include "apps/command.h"

extern char** environ;

namespace t9::apps {
namespace {

namespace fs = std::filesystem;
using bench::WorkloadSpec;

struct BenchOptions {
  std::string workload = "agents";
  std::string url, compare_url, model, spec_file, json_file, plot_file, run_id;
  WorkloadSpec flags;  // values of the workload flags; applied only when given
  bench::RunLimits limits;
  // Options whose presence decides whether the flag overrides the preset / spec file.
  CLI::Option *o_agents, *o_turns, *o_system, *o_turn, *o_gen, *o_rounds, *o_seed, *o_temp,
      *o_tools;
};

Result<WorkloadSpec> build_spec(const BenchOptions& o) {
  T9_ASSIGN_OR_RETURN(WorkloadSpec s, bench::preset(o.workload));
  if (!o.spec_file.empty()) {
    std::ifstream in(o.spec_file);
    if (!in) return error("--spec {}: cannot open", o.spec_file);
    std::stringstream ss;
    ss << in.rdbuf();
    auto parsed = bench::parse_spec_json(ss.str(), s);
    if (!parsed.ok()) return error("--spec {}: {}", o.spec_file, parsed.message());
    s = std::move(parsed).value();
  }
  const WorkloadSpec& f = o.flags;
  if (o.o_agents->count()) s.n_agents = f.n_agents;
  if (o.o_turns->count()) s.n_turns = f.n_turns;
  if (o.o_system->count()) s.system_tokens = f.system_tokens;
  if (o.o_turn->count()) s.turn_tokens = f.turn_tokens;
  if (o.o_gen->count()) s.gen_tokens = f.gen_tokens;
  if (o.o_rounds->count()) s.n_rounds = f.n_rounds;
  if (o.o_seed->count()) s.seed = f.seed;
  if (o.o_temp->count()) s.temperature = f.temperature;
  if (o.o_tools->count()) s.tools_in_request = true;
  s.run_id = o.run_id;
  if (s.run_id.empty())
    s.run_id = fmt::format(
        "{:x}", std::chrono::system_clock::now().time_since_epoch().count() & 0xffffffffffull);
  T9_TRY(bench::validate(s));
  return s;
}

// Checks the server answers and picks the model id: --model, else the first of /v1/models.
Status probe_target(bench::Target& t, const std::string& model) {
  httplib::Client cli(t.host, t.port);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(30, 0);
  auto res = cli.Get("/v1/models");
  if (!res)
    return error("{}: cannot reach the server ({})", t.url, httplib::to_string(res.error()));
  if (res->status != 200) return error("{}: GET /v1/models answered HTTP {}", t.url, res->status);
  t.model = model;
  if (t.model.empty()) {
    auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
        j["data"][0].contains("id") && j["data"][0]["id"].is_string())
      t.model = j["data"][0]["id"].get<std::string>();
    else
      t.model = "default";
  }
  return {};
}

// bench/plot_bench.py beside the executable's source tree, or $TEMPO9_BENCH_PLOT.
std::string find_plot_script() {
  if (const char* e = std::getenv("TEMPO9_BENCH_PLOT")) return e;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& p : {exe.parent_path().parent_path() / "bench" / "plot_bench.py",
                            fs::path("bench") / "plot_bench.py"})
    if (fs::exists(p, ec)) return p.string();
  return "";
}

// $TEMPO9_PYTHON, else the checkout's .venv (matplotlib is installed there), else python3.
std::string find_python(const std::string& script) {
  if (const char* e = std::getenv("TEMPO9_PYTHON")) return e;
  std::error_code ec;
  const fs::path venv =
      fs::absolute(script, ec).parent_path().parent_path() / ".venv" / "bin" / "python";
  return fs::exists(venv, ec) ? venv.string() : "python3";
}

int run_plot(const std::string& json_path, const std::string& png_path) {
  const std::string script = find_plot_script();
  if (script.empty()) {
    std::fprintf(stderr,
                 "tempo9 bench: bench/plot_bench.py not found (set TEMPO9_BENCH_PLOT); run it "
                 "yourself: python bench/plot_bench.py %s %s\n",
                 json_path.c_str(), png_path.c_str());
    return 1;
  }
  std::string python = find_python(script);
  std::vector<std::string> args = {python, script, json_path, png_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "tempo9 bench: cannot start %s\n", python.c_str());
    return 1;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tempo9 bench: %s %s failed\n", python.c_str(), script.c_str());
    return 1;
  }
  std::fprintf(stderr, "bench: plot written to %s\n", png_path.c_str());
  return 0;
}

int bench_main(const BenchOptions& o) {
  auto spec = build_spec(o);
  if (!spec.ok()) {
    std::fprintf(stderr, "tempo9 bench: %s\n", spec.message().c_str());
    return 2;
  }
  std::vector<bench::Target> targets;
  for (const std::string& url : {o.url, o.compare_url}) {
    if (url.empty()) continue;
    auto t = bench::parse_loopback_url(url);
    if (!t.ok()) {
      std::fprintf(stderr, "tempo9 bench: %s\n", t.message().c_str());
      return 2;
    }
    t->label = targets.empty() ? "A" : "B";
    if (Status s = probe_target(*t, o.model); !s.ok()) {
      std::fprintf(stderr, "tempo9 bench: %s\n", s.message().c_str());
      return 1;
    }
    targets.push_back(std::move(t).value());
  }
  const bench::RunResult run = bench::run_workload(*spec, targets, o.limits);
  std::vector<bench::Summary> sums;
  for (const auto& tr : run.targets) sums.push_back(bench::summarize(tr, spec->n_turns));
  std::printf("%s", bench::format_table(*spec, sums).c_str());
  if (!run.stop_reason.empty()) std::printf("\nstopped early: %s\n", run.stop_reason.c_str());

  std::string json_path = o.json_file;
  if (json_path.empty() && !o.plot_file.empty())
    json_path =
        (fs::temp_directory_path() / fmt::format("tempo9-bench-{}.json", getpid())).string();
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << bench::report_json(*spec, o.limits, run, sums).dump(1) << "\n";
    if (!out) {
      std::fprintf(stderr, "tempo9 bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  int rc = 0;
  if (!o.plot_file.empty()) rc = run_plot(json_path, o.plot_file);
  int n_errors = 0;
  for (const auto& s : sums) n_errors += s.n_errors;
  return rc != 0 ? rc : (n_errors > 0 || !run.stop_reason.empty() ? 3 : 0);
}

const bool registered = register_command(Command{
    "bench",
    "Agent-shaped load against OpenAI-compatible servers on this machine (and A/B compare)",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<BenchOptions>();
      WorkloadSpec& f = o->flags;
      sub.add_option("workload", o->workload, "agents | cold | single")->capture_default_str();
      sub.add_option("--url", o->url, "server A, http://127.0.0.1:PORT (loopback only)")
          ->required();
      sub.add_option("--compare", o->compare_url, "server B: same workload, A then B each round");
      sub.add_option("--model", o->model,
                     "model field of the requests (default: first of /v1/models)");
      sub.add_option("--spec", o->spec_file, "JSON workload spec overlaid on the preset")
          ->check(CLI::ExistingFile);
      o->o_agents = sub.add_option("-k,--agents", f.n_agents, "concurrent agents (default 4)");
      o->o_turns = sub.add_option("--turns", f.n_turns, "turns per agent per round (default 3)");
      o->o_system = sub.add_option("--system-tokens", f.system_tokens,
                                   "shared system prompt size (default 10000)");
      o->o_turn =
          sub.add_option("--turn-tokens", f.turn_tokens, "tokens appended per turn (default 300)");
      o->o_gen =
          sub.add_option("--gen-tokens", f.gen_tokens, "tokens generated per turn (default 128)");
      o->o_rounds = sub.add_option("--rounds", f.n_rounds, "rounds (default 1)");
      o->o_seed = sub.add_option("--seed", f.seed, "workload seed (default 1)");
      o->o_temp =
          sub.add_option("--temperature", f.temperature, "sampling temperature (default 0)");
      o->o_tools = sub.add_flag("--tools-in-request", f.tools_in_request,
                                "tool definitions in the request's tools array, not the prompt");
      sub.add_option("--run-id", o->run_id,
                     "text opening every system prompt (default: from the clock)");
      sub.add_option("--json", o->json_file, "write every request and the summaries as JSON");
      sub.add_option("--plot", o->plot_file,
                     "PNG: TTFT by turn and throughput over time (bench/plot_bench.py)");
      sub.add_option("--max-seconds", o->limits.max_seconds, "stop starting requests after this")
          ->capture_default_str();
      sub.add_option("--max-requests", o->limits.max_requests, "stop after this many requests")
          ->capture_default_str();
      return [o] { return bench_main(*o); };
    }});

}  // namespace
}  // namespace t9::apps
