// The suite's main. With VKSPEC_PIPELINE_LOG set (src/pipeline.cpp), each test case's start and
// end go into that log too, so the pipelines a cold run compiles, and the time between, can be
// charged to the cases that cause them (tools/pipeline_log.py sums them per case).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "vkspec/pipeline.hpp"

namespace {
struct CaseLog : doctest::IReporter {
  explicit CaseLog(const doctest::ContextOptions&) {}
  static void line(const char* what, const doctest::TestCaseData& tc) {
    if (!std::getenv("VKSPEC_PIPELINE_LOG")) return;
    char now[32];
    std::snprintf(now, sizeof now, "%.3f",
                  std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
    vkspec::pipeline_log(std::string("#") + what + "\t" + now + "\t" + tc.m_name + "\n");
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
