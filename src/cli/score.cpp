// `vkspec logits` and `vkspec perplexity`: the verifier alone over a token sequence, the tools
// people use to judge a (quantized) file against llama.cpp or against another file.
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/session.hpp"
#include "vkspec/score.hpp"

namespace vkspec::cli {

namespace {

static_assert(std::endian::native == std::endian::little, "logits files are written as little-endian f32");

// The sequence to score, from exactly one of --tokens IDS, --tokens-file FILE (ids separated by
// spaces, commas or newlines), --text TEXT / -p TEXT, -f FILE (text, through the GGUF's
// tokenizer, BOS as its metadata says).
struct TokenSource {
  std::string ids, ids_file, text, text_file;
  explicit TokenSource(Args& a)
      : ids(a.get("tokens", "")), ids_file(a.get("tokens-file", "")), text(a.get_one({"text", "p"})),
        text_file(a.get_one({"f", "file"})) {
    const int given = !ids.empty() + !ids_file.empty() + !text.empty() + !text_file.empty();
    if (given != 1)
      throw Error("give exactly one of --tokens IDS, --tokens-file FILE, --text TEXT, -f TEXT_FILE (got " +
                  std::to_string(given) + ")");
  }
  // `as_llama_file`: -f's text loses one final newline, as llama.cpp's tools read -f (perplexity
  // scores the tokens llama-perplexity scores; logits keeps the file as it is).
  std::vector<uint32_t> tokens(const Session& s, bool as_llama_file = false) const {
    if (!ids.empty()) return s.parse_tokens(ids);
    if (!ids_file.empty()) return s.parse_tokens(read_file(ids_file, "token file"), "--tokens-file " + ids_file);
    if (!text.empty()) return s.encode(text);
    std::string t = read_file(text_file, "text file");
    if (as_llama_file && !t.empty() && t.back() == '\n') t.pop_back();
    return s.encode(t);
  }
};

int run_logits(const std::vector<std::string>& argv) {
  Args args(argv);
  const TokenSource src(args);
  const std::string out_path = args.get_one({"out", "o"});
  if (out_path.empty()) throw Error("no output file: --out LOGITS.f32");
  refuse_overwrite("--out", out_path, {{"-m", args.get_one({"m", "model"})}, {"--tokens-file", src.ids_file}, {"-f", src.text_file}});
  check_writable("--out", out_path);  // a folder, a missing folder, a read-only file: before the run
  const bool to_stdout = out_path == "-";
  Session s;
  s.open(args);
  args.reject_unknown();
  const std::vector<uint32_t> ids = src.tokens(s);
  if (ids.empty()) throw Error("no tokens to run");
  s.ctx_need = ids.size();  // the default context holds them all
  s.load_verifier(64);
  // Opened at the first row, after the run's own checks (a sequence past the context is refused
  // before any row): a refused request leaves a file already at that path as it was.
  // "-": standard output (binary, for a pipe).
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(nullptr, to_stdout ? +[](std::FILE*) { return 0; } : &std::fclose);
  auto open_out = [&] {
    if (out) return;
    out.reset(to_stdout ? stdout : std::fopen(out_path.c_str(), "wb"));
    if (!out) throw Error("cannot write --out " + out_path + ": " + std::strerror(errno));
  };
  const auto write_error = [&] { return Error("cannot write --out " + out_path + ": " + std::strerror(errno)); };
  ChainRunner run(*s.model);
  // Row by row, so a long sequence over a large vocabulary never needs T*V floats of memory.
  run.run(ids, 0, [&](uint32_t, std::span<const float> row) {
    open_out();
    if (std::fwrite(row.data(), 4, row.size(), out.get()) != row.size()) throw write_error();
  });
  open_out();
  if (std::fflush(out.get()) != 0) throw write_error();  // /dev/full says so here
  if (!to_stdout && std::fclose(out.release()) != 0) throw write_error();
  std::fprintf(stderr, "wrote the logits of %zu positions x %d vocabulary entries (f32, little-endian, row-major) to %s\n",
               ids.size(), s.model->config().V, to_stdout ? "standard output" : out_path.c_str());
  return 0;
}

int run_perplexity(const std::vector<std::string>& argv) {
  Args args(argv);
  const TokenSource src(args);
  const bool json = args.flag("json");
  Session s;
  s.open(args);
  args.reject_unknown();
  // The window is the context of each evaluation: --ctx, else llama-perplexity's default 512
  // (or the model's context if shorter).
  if (s.ctx_len == 0) s.ctx_len = uint32_t(std::min(512, read_llama_config(*s.file).ctx));
  const std::vector<uint32_t> ids = src.tokens(s, /*as_llama_file=*/true);
  s.load_verifier(64);
  PerplexityOptions po;
  po.window = s.model->capacity();
  // llama.cpp puts BOS first in every window when the vocabulary adds one.
  po.bos = s.tokenizer && s.tokenizer->add_bos() ? int32_t(s.tokenizer->bos()) : -1;
  check_perplexity(*s.model, ids.size(), po);  // a refusal comes before the plan line
  const uint32_t n_windows = uint32_t(ids.size() / po.window);
  std::fprintf(stderr, "perplexity: %zu tokens, %u windows of %u (second half of each scored)%s\n", ids.size(), n_windows,
               po.window, po.bos >= 0 ? ", BOS first in each window" : "");
  const PerplexityResult r = perplexity(*s.model, ids, po, [&](uint32_t w, const PerplexityResult& so_far) {
    std::fprintf(stderr, "[%u/%u] PPL %.4f, %.1f tokens/s\n", w, n_windows, so_far.ppl, so_far.tokens_per_s);
  });
  if (json) {
    const nlohmann::json j = {{"tokens", ids.size()},      {"window", po.window},         {"windows", r.windows},
                              {"scored", r.scored},        {"mean_nll", r.mean_nll},      {"ppl", r.ppl},
                              {"seconds", r.seconds},      {"tokens_per_s", r.tokens_per_s}, {"device", s.ctx->caps().name},
                              {"bos", po.bos}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("PPL = %.4f (mean NLL %.6f over %llu scored tokens, %u windows of %u), %.1f tokens/s on %s\n", r.ppl,
                r.mean_nll, static_cast<unsigned long long>(r.scored), r.windows, po.window, r.tokens_per_s,
                s.ctx->caps().name.c_str());
  }
  return 0;
}

const RegisterCommand reg_logits{
    "logits",
    "every position's logits: -m MODEL.gguf (--tokens IDS | --tokens-file F | --text T | -f FILE) --out F.f32 [--ctx N] [--kv-type f16|f32] [--batch-tiles even|pow2] [--device D]",
    run_logits};
const RegisterCommand reg_ppl{
    "perplexity",
    "perplexity as llama-perplexity: -m MODEL.gguf (-f TEXT_FILE | --text T | --tokens IDS | --tokens-file F) "
    "[--ctx N (512, or the model's context if shorter)] [--json] [--kv-type f16|f32] [--batch-tiles even|pow2] "
    "[--device D]; -f drops the file's last newline, as llama.cpp's -f does",
    run_perplexity};

}  // namespace

}  // namespace vkspec::cli
