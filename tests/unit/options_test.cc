#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/options.h"

namespace gms {
namespace {

TEST(ParseSize, AcceptsPlainAndSuffixedForms) {
  uint64_t v = 0;
  ASSERT_TRUE(parse_size("0", &v));
  EXPECT_EQ(v, 0u);
  ASSERT_TRUE(parse_size("4096", &v));
  EXPECT_EQ(v, 4096u);
  ASSERT_TRUE(parse_size("4096B", &v));
  EXPECT_EQ(v, 4096u);
  ASSERT_TRUE(parse_size("1K", &v));
  EXPECT_EQ(v, 1024u);
  ASSERT_TRUE(parse_size("1k", &v));
  EXPECT_EQ(v, 1024u);
  ASSERT_TRUE(parse_size("8M", &v));
  EXPECT_EQ(v, 8u << 20);
  ASSERT_TRUE(parse_size("8MB", &v));
  EXPECT_EQ(v, 8u << 20);
  ASSERT_TRUE(parse_size("8MiB", &v));
  EXPECT_EQ(v, 8u << 20);
  ASSERT_TRUE(parse_size("8G", &v));
  EXPECT_EQ(v, 8ull << 30);
  ASSERT_TRUE(parse_size("1.5G", &v));
  EXPECT_EQ(v, 3ull << 29);
  ASSERT_TRUE(parse_size("2T", &v));
  EXPECT_EQ(v, 2ull << 40);
}

TEST(ParseSize, RejectsEverythingElse) {
  uint64_t v = 77;
  for (const char* bad : {"", "G", "-1", "1.5", "8X", "8GG", "8 G", " 8G", "8G ", "1e9", "0x10", "1.", ".5G",
                          "99999999999T", "8Gi B", "abc"}) {
    EXPECT_FALSE(parse_size(bad, &v)) << "'" << bad << "'";
  }
  EXPECT_EQ(v, 77u) << "a rejected value must not change the output";
}

TEST(ParseSizeOrPercent, PercentForms) {
  SizeOrPercent s;
  ASSERT_TRUE(parse_value("50%", &s));
  EXPECT_TRUE(s.is_percent);
  EXPECT_EQ(s.resolve(80ull << 30), 40ull << 30);
  ASSERT_TRUE(parse_value("12.5%", &s));
  EXPECT_EQ(s.resolve(800), 100u);
  ASSERT_TRUE(parse_value("100%", &s));
  ASSERT_TRUE(parse_value("8G", &s));
  EXPECT_FALSE(s.is_percent);
  EXPECT_EQ(s.resolve(1), 8ull << 30);
  for (const char* bad : {"%", "0%", "101%", "-5%", "5%%", "x%", "50 %"}) {
    EXPECT_FALSE(parse_value(bad, &s)) << "'" << bad << "'";
  }
}

TEST(ParseBool, EveryForm) {
  bool b = false;
  for (const char* t : {"1", "true", "TRUE", "on", "On", "yes"}) {
    ASSERT_TRUE(parse_bool(t, &b)) << t;
    EXPECT_TRUE(b) << t;
  }
  for (const char* f : {"0", "false", "False", "off", "OFF", "no"}) {
    ASSERT_TRUE(parse_bool(f, &b)) << f;
    EXPECT_FALSE(b) << f;
  }
  for (const char* bad : {"", "2", "enable", "y", "tru"}) EXPECT_FALSE(parse_bool(bad, &b)) << bad;
}

TEST(ParseStats, Forms) {
  StatsTarget t;
  ASSERT_TRUE(parse_value("1", &t));
  EXPECT_EQ(t.kind, StatsTarget::Kind::text_stderr);
  ASSERT_TRUE(parse_value("text", &t));
  EXPECT_EQ(t.kind, StatsTarget::Kind::text_stderr);
  ASSERT_TRUE(parse_value("off", &t));
  EXPECT_EQ(t.kind, StatsTarget::Kind::off);
  ASSERT_TRUE(parse_value("json", &t));
  EXPECT_EQ(t.kind, StatsTarget::Kind::json_stderr);
  ASSERT_TRUE(parse_value("/tmp/s-%p.json", &t));
  EXPECT_EQ(t.kind, StatsTarget::Kind::json_file);
  EXPECT_STREQ(t.path, "/tmp/s-%p.json");
  EXPECT_FALSE(parse_value("", &t));
  std::string too_long(600, 'x');
  EXPECT_FALSE(parse_value(too_long.c_str(), &t));
}

TEST(ParseLogAndPolicy, Forms) {
  LogLevel l;
  ASSERT_TRUE(parse_value("debug", &l));
  EXPECT_EQ(l, LogLevel::debug);
  ASSERT_TRUE(parse_value("QUIET", &l));
  EXPECT_EQ(l, LogLevel::quiet);
  EXPECT_FALSE(parse_value("loud", &l));
  Policy p;
  ASSERT_TRUE(parse_value("off", &p));
  EXPECT_FALSE(parse_value("spill-everything", &p));
}

struct Reports {
  std::vector<std::string> lines;
  static void add(const char* line, void* ctx) { static_cast<Reports*>(ctx)->lines.emplace_back(line); }
};

TEST(ParseOptions, ReadsOnlyPrefixedVariables) {
  char a[] = "PATH=/bin";
  char b[] = "GPUMEMSHIM_STATS=json";
  char c[] = "GPUMEMSHIM_HOST_THRESHOLD=4M";
  char d[] = "GPUMEMSHIM_LOG=debug";
  char* env[] = {a, b, c, d, nullptr};
  Options o;
  Reports r;
  EXPECT_EQ(parse_options(env, &o, Reports::add, &r), 0);
  EXPECT_TRUE(r.lines.empty());
  EXPECT_EQ(o.stats.kind, StatsTarget::Kind::json_stderr);
  EXPECT_EQ(o.host_threshold.bytes, 4u << 20);
  EXPECT_EQ(o.log, LogLevel::debug);
  EXPECT_EQ(o.policy, Policy::auto_);  // the default
}

TEST(ParseOptions, InvalidValueIsOneLineNamingVariableValueAndFormsAndKeepsDefault) {
  char a[] = "GPUMEMSHIM_HOST_THRESHOLD=lots";
  char b[] = "GPUMEMSHIM_LOG=info";
  char* env[] = {a, b, nullptr};
  Options o;
  Reports r;
  EXPECT_EQ(parse_options(env, &o, Reports::add, &r), 1);
  ASSERT_EQ(r.lines.size(), 1u);
  const std::string& line = r.lines[0];
  EXPECT_NE(line.find("GPUMEMSHIM_HOST_THRESHOLD"), std::string::npos) << line;
  EXPECT_NE(line.find("'lots'"), std::string::npos) << line;
  EXPECT_NE(line.find("K/M/G/T"), std::string::npos) << line;
  EXPECT_NE(line.find("pass-through"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line";
  EXPECT_EQ(o.host_threshold.bytes, 1u << 20) << "the default stays";
  EXPECT_EQ(o.log, LogLevel::info) << "valid options are still taken";
}

TEST(ParseOptions, UnknownNameWarnsButIsNotInvalid) {
  char a[] = "GPUMEMSHIM_POLCY=spill";
  char* env[] = {a, nullptr};
  Options o;
  Reports r;
  EXPECT_EQ(parse_options(env, &o, Reports::add, &r), 0);
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_NE(r.lines[0].find("GPUMEMSHIM_POLCY"), std::string::npos);
}

TEST(OptionTable, EveryDefaultParsesAndEveryEntryIsDocumented) {
  size_t n = 0;
  const OptionInfo* t = option_table(&n);
  ASSERT_GE(n, 4u);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(std::string(t[i].name).rfind("GPUMEMSHIM_", 0), 0u) << t[i].name;
    EXPECT_GT(std::string(t[i].doc).size(), 10u) << t[i].name;
    EXPECT_GT(std::string(t[i].accepted).size(), 1u) << t[i].name;
  }
  Options d = default_options();  // aborts if a default does not parse
  EXPECT_EQ(d.host_threshold.bytes, 1u << 20);
  EXPECT_EQ(d.stats.kind, StatsTarget::Kind::off);
}

TEST(PathPattern, ExpandsPid) {
  char out[64];
  ASSERT_TRUE(expand_path_pattern("/tmp/s-%p.json", 4242, out, sizeof(out)));
  EXPECT_STREQ(out, "/tmp/s-4242.json");
  ASSERT_TRUE(expand_path_pattern("plain", 1, out, sizeof(out)));
  EXPECT_STREQ(out, "plain");
  EXPECT_FALSE(expand_path_pattern("/a/very/long/path/that/does/not/fit/in/the/buffer/%p.json", 1, out, 16));
}

}  // namespace
}  // namespace gms

namespace gms {
namespace {

TEST(ParseDeviceLimits, AllPerDeviceAndMixed) {
  constexpr uint64_t GiB = 1ull << 30;
  DeviceLimits d;
  ASSERT_TRUE(parse_value("", &d));
  EXPECT_FALSE(d.any);
  EXPECT_EQ(d.for_device(0, 80 * GiB), 80 * GiB);
  ASSERT_TRUE(parse_value("8G", &d));
  EXPECT_EQ(d.for_device(0, 80 * GiB), 8 * GiB);
  EXPECT_EQ(d.for_device(3, 80 * GiB), 8 * GiB);
  EXPECT_EQ(d.for_device(0, 4 * GiB), 4 * GiB) << "never above the device's own memory";
  ASSERT_TRUE(parse_value("50%", &d));
  EXPECT_EQ(d.for_device(1, 80 * GiB), 40 * GiB);
  ASSERT_TRUE(parse_value("0:8G,1:4G", &d));
  EXPECT_EQ(d.for_device(0, 80 * GiB), 8 * GiB);
  EXPECT_EQ(d.for_device(1, 80 * GiB), 4 * GiB);
  EXPECT_EQ(d.for_device(2, 80 * GiB), 80 * GiB) << "devices not named keep their memory";
  ASSERT_TRUE(parse_value("16G,1:25%", &d));
  EXPECT_EQ(d.for_device(0, 80 * GiB), 16 * GiB);
  EXPECT_EQ(d.for_device(1, 80 * GiB), 20 * GiB);
  for (const char* bad : {",", "8G,", ",8G", "8G,9G", "0:8G,0:4G", "x:8G", "1.5:8G", "99:1G", "0:", "0:abc", "8Q"}) {
    EXPECT_FALSE(parse_value(bad, &d)) << "'" << bad << "'";
  }
}

TEST(ParsePolicyFamily, Forms) {
  Policy p;
  ASSERT_TRUE(parse_value("spill", &p));
  EXPECT_EQ(p, Policy::spill);
  ASSERT_TRUE(parse_value("AUTO", &p));
  EXPECT_EQ(p, Policy::auto_);
  ASSERT_TRUE(parse_value("Managed", &p));
  EXPECT_EQ(p, Policy::managed);
  ASSERT_TRUE(parse_value("pinned", &p));
  SpillTo s;
  ASSERT_TRUE(parse_value("pinned", &s));
  EXPECT_EQ(s, SpillTo::pinned);
  EXPECT_FALSE(parse_value("device", &s));
  Prefetch f;
  ASSERT_TRUE(parse_value("off", &f));
  EXPECT_EQ(f, Prefetch::off);
  EXPECT_FALSE(parse_value("always", &f));
  SwapOrder o;
  ASSERT_TRUE(parse_value("Scan", &o));
  EXPECT_EQ(o, SwapOrder::scan);
  ASSERT_TRUE(parse_value("context", &o));
  EXPECT_EQ(o, SwapOrder::context);
  EXPECT_FALSE(parse_value("stream", &o));
}

// The variables of others the shim reads come from the same table, each once, none of them ours.
TEST(EnvTable, EveryEntryIsNamedOnceDocumentedAndNotAnOption) {
  size_t n = 0, options = 0;
  const EnvInfo* t = env_table(&n);
  const OptionInfo* o = option_table(&options);
  ASSERT_EQ(n, static_cast<size_t>(Env::count));
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(t[i].name);
    EXPECT_STRNE(t[i].name, "");
    EXPECT_EQ(std::string(t[i].name).rfind("GPUMEMSHIM_", 0), std::string::npos);
    EXPECT_GT(std::string(t[i].doc).size(), 10u);
    for (size_t j = 0; j < i; ++j) EXPECT_STRNE(t[i].name, t[j].name);
    for (size_t j = 0; j < options; ++j) EXPECT_STRNE(t[i].name, o[j].name);
  }
  EXPECT_STREQ(t[static_cast<int>(Env::rank)].name, "RANK");
  EXPECT_STREQ(t[static_cast<int>(Env::pytorch_cuda_alloc_conf)].name, "PYTORCH_CUDA_ALLOC_CONF");
}

TEST(EnvLookup, WholeNamesOnlyAndTheFirstEntryAsGetenv) {
  std::vector<std::string> vars = {"RANKS=9", "RANK", "LOCAL_RANK=3", "RANK=1", "RANK=2", "EMPTY="};
  std::vector<char*> env;
  for (auto& v : vars) env.push_back(v.data());
  env.push_back(nullptr);
  EXPECT_STREQ(env_lookup(env.data(), "RANK"), "1");
  EXPECT_STREQ(env_lookup(env.data(), "LOCAL_RANK"), "3");
  EXPECT_STREQ(env_lookup(env.data(), "EMPTY"), "");
  EXPECT_EQ(env_lookup(env.data(), "RAN"), nullptr);
  EXPECT_EQ(env_lookup(env.data(), "WORLD_SIZE"), nullptr);
  EXPECT_EQ(env_lookup(nullptr, "RANK"), nullptr);
}

TEST(EnvValue, ReadsTheProcessEnvironmentAtTheCall) {
  size_t n = 0;
  const char* name = env_table(&n)[static_cast<int>(Env::local_rank)].name;
  unsetenv(name);
  EXPECT_EQ(env_value(Env::local_rank), nullptr);
  setenv(name, "5", 1);
  EXPECT_STREQ(env_value(Env::local_rank), "5");
  setenv(name, "6", 1);
  EXPECT_STREQ(env_value(Env::local_rank), "6");
  unsetenv(name);
  EXPECT_EQ(env_value(Env::local_rank), nullptr);
}

}  // namespace
}  // namespace gms
