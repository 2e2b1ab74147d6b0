// The suite's main. With VKSPEC_PIPELINE_LOG set (src/pipeline.cpp), each test case's start and
// end go into that log too, so the pipelines a cold run compiles, and the time between, can be
// charged to the cases that cause them (tools/pipeline_log.py sums them per case).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {
struct CaseLog : doctest::IReporter {
  explicit CaseLog(const doctest::ContextOptions&) {}
  static void line(const char* what, const doctest::TestCaseData& tc) {
    static const char* path = std::getenv("VKSPEC_PIPELINE_LOG");
    if (!path || !*path) return;
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (FILE* f = std::fopen(path, "a")) {
      std::fprintf(f, "#%s\t%.3f\t%s\n", what, now, tc.m_name);
      std::fclose(f);
    }
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override { current_ = &tc; line("case", tc); }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    if (current_) line("end", *current_);
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}

 private:
  const doctest::TestCaseData* current_ = nullptr;
};
}  // namespace

REGISTER_LISTENER("vkspec-case-log", 1, CaseLog);
