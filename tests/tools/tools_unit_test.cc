// The pieces of the gpumemshim command that are plain functions.
#include <gtest/gtest.h>

#include <cstdio>

#include "option_check.h"
#include "options_text.h"
#include "preload.h"
#include "spawn.h"

namespace gms::tools {
namespace {

TEST(Preload, AloneWhenNothingWasThere) { EXPECT_EQ(prepend_preload("/p/libgpumemshim.so", ""), "/p/libgpumemshim.so"); }

TEST(Preload, FirstBeforeColonOrSpaceSeparatedEntries) {
  EXPECT_EQ(prepend_preload("/p/libgpumemshim.so", "/a.so:/b.so"), "/p/libgpumemshim.so:/a.so:/b.so");
  EXPECT_EQ(prepend_preload("/p/libgpumemshim.so", " /a.so  /b.so "), "/p/libgpumemshim.so:/a.so:/b.so");
}

TEST(Preload, OtherCopiesOfTheShimAreDropped) {
  EXPECT_EQ(prepend_preload("/p/libgpumemshim.so", "/old/libgpumemshim.so /a.so"), "/p/libgpumemshim.so:/a.so");
  EXPECT_EQ(prepend_preload("/p/libgpumemshim.so", "libgpumemshim.so"), "/p/libgpumemshim.so");
  EXPECT_EQ(prepend_preload("/p/libgpumemshim.so", "/x/libgpumemshim.so.bak"),
            "/p/libgpumemshim.so:/x/libgpumemshim.so.bak");
}

TEST(Preload, RemovingTheShimKeepsTheRest) {
  EXPECT_EQ(remove_shim_from_preload("/a.so /p/libgpumemshim.so:/b.so"), "/a.so:/b.so");
  EXPECT_EQ(remove_shim_from_preload("/p/libgpumemshim.so"), "");
}

TEST(Preload, PathsLdSoWouldSplitAreRefused) {
  EXPECT_TRUE(preload_safe_path("/opt/gms/lib/libgpumemshim.so"));
  EXPECT_FALSE(preload_safe_path("/home/a b/libgpumemshim.so"));
  EXPECT_FALSE(preload_safe_path("/x:y/libgpumemshim.so"));
  EXPECT_FALSE(preload_safe_path(""));
}

TEST(Preload, CandidatesCoverInstalledPrefixAndBuildTree) {
  auto c = shim_candidates("/opt/gms/bin");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0], "/opt/gms/bin/../lib/libgpumemshim.so");
  EXPECT_EQ(c[1], "/opt/gms/bin/../shim/libgpumemshim.so");
  EXPECT_TRUE(shim_candidates("").empty());
}

TEST(OptionCheck, UsesTheShimParsers) {
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_POLICY", "off"));
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_POLICY", "bogus"));
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_LOG", "DEBUG"));
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_LOG", "loud"));
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_STATS", "out-%p.json"));
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_STATS", ""));
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_HOST_THRESHOLD", "4MiB"));
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_HOST_THRESHOLD", "4Q"));
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_NOT_AN_OPTION", "1"));
}

TEST(OptionCheck, RangesAndReasons) {
  std::string why;
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_SWAP_CHUNK", "2M", &why));
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_SWAP_CHUNK", "64M", &why));
  EXPECT_EQ(why, "");
  for (const char* bad : {"3M", "1M", "128M", "0"}) {
    EXPECT_FALSE(value_is_valid("GPUMEMSHIM_SWAP_CHUNK", bad, &why)) << bad;
    EXPECT_EQ(why, "not a power of two from 2M to 64M") << bad;
  }
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_SWAP_CHUNK", "lots", &why));
  EXPECT_EQ(why, "");  // only the accepted forms apply
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_HOST_THRESHOLD", "0", &why));
  EXPECT_EQ(why, "below 64K");
  EXPECT_TRUE(value_is_valid("GPUMEMSHIM_HOST_THRESHOLD", "64K"));
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_DEVICE_LIMIT", "0:8G,1:4G,0:2G", &why));
  EXPECT_EQ(why, "a device given twice");
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_DEVICE_LIMIT", "8G,4G", &why));
  EXPECT_EQ(why, "two limits for every device");
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_DEVICE_LIMIT", "1:150%", &why));
  EXPECT_EQ(why, "a percentage above 100");
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_DEVICE_LIMIT", "64:1G", &why));
  EXPECT_EQ(why, "a device number above 63");
  EXPECT_FALSE(value_is_valid("GPUMEMSHIM_MIN_SIZE", "20000000T", &why));
  EXPECT_EQ(why, "too large");
  EXPECT_EQ(invalid_value_line("GPUMEMSHIM_REGISTER_LIMIT", "0%"),
            "GPUMEMSHIM_REGISTER_LIMIT='0%' is not valid (a percentage of 0; accepted: SIZE or N% of host RAM)");
}

TEST(OptionCheck, ReportedSettingsAreKnownByTheirFingerprint) {
  char a[] = "GPUMEMSHIM_LOG=loud", b[] = "PATH=/bin", c[] = "GPUMEMSHIM_POLICY=off";
  char* env[] = {a, b, c, nullptr};
  char* reordered[] = {c, a, b, nullptr};
  EXPECT_EQ(settings_fingerprint(env), settings_fingerprint(reordered));  // shells reorder environments
  EXPECT_FALSE(settings_reported(env));
  std::string mark = std::string(kReportedVariable) + "=";
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(settings_fingerprint(env)));
  mark += hex;
  char* marked[] = {a, b, c, mark.data(), nullptr};
  EXPECT_EQ(settings_fingerprint(marked), settings_fingerprint(env));  // the mark is not a setting
  EXPECT_TRUE(settings_reported(marked));
  char d[] = "GPUMEMSHIM_POLICY=spill";
  char* changed[] = {a, b, d, mark.data(), nullptr};
  EXPECT_FALSE(settings_reported(changed));  // other settings: said again
  EXPECT_TRUE(check_environment(marked).size() == 1u) << "the mark is not an unknown variable";
}

TEST(OptionCheck, EveryTableEntryHasAParser) {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  for (size_t i = 0; i < count; ++i) EXPECT_TRUE(value_is_valid(table[i].name, table[i].default_value)) << table[i].name;
}

TEST(OptionCheck, EnvironmentProblemsNameTheVariable) {
  char a[] = "GPUMEMSHIM_LOG=loud", b[] = "GPUMEMSHIM_TYPO=1", c[] = "PATH=/bin", d[] = "GPUMEMSHIM_POLICY=off";
  char* env[] = {a, b, c, d, nullptr};
  auto problems = check_environment(env);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_TRUE(problems[0].fatal);
  EXPECT_NE(problems[0].line.find("GPUMEMSHIM_LOG='loud'"), std::string::npos);
  EXPECT_NE(problems[0].line.find("quiet|error|warn|info|debug"), std::string::npos);
  EXPECT_FALSE(problems[1].fatal);
  EXPECT_NE(problems[1].line.find("GPUMEMSHIM_TYPO"), std::string::npos);
}

TEST(OptionFlags, DerivedFromTheVariableName) {
  OptionInfo info{"GPUMEMSHIM_HOST_THRESHOLD", "1M", "", ""};
  EXPECT_EQ(flag_for(info), "--host-threshold");
}

TEST(OptionFlags, EveryOptionHasAFlagThatLeadsBackToIt) {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  for (size_t i = 0; i < count; ++i) {
    std::string flag = flag_for(table[i]);
    EXPECT_EQ(option_for_flag(flag.substr(2)), &table[i]) << flag;
  }
  EXPECT_EQ(option_for_flag("no-such-option"), nullptr);
  EXPECT_EQ(option_for_flag(""), nullptr);
}

TEST(OptionFlags, LimitIsShortForDeviceLimitWhileThatExists) {
  EXPECT_EQ(option_for_flag("limit"), find_option("GPUMEMSHIM_DEVICE_LIMIT"));
}

TEST(Markdown, PipesAndNewlinesCannotBreakTheTable) {
  EXPECT_EQ(markdown_cell("a|b\nc"), "a\\|b c");
}

TEST(Markdown, OneRowPerOption) {
  size_t count = 0;
  const OptionInfo* table = option_table(&count);
  std::string md = options_as_markdown(table, count);
  size_t rows = 0;
  for (char ch : md) rows += ch == '\n';
  EXPECT_EQ(rows, count + 2);
  EXPECT_EQ(md.rfind("| Variable | Default | Accepted | What it does |\n", 0), 0u);
  EXPECT_EQ(md.find("``"), std::string::npos) << "an empty default must not become an empty code span";
}

TEST(ExitCode, ShellConvention) {
  EXPECT_EQ(exit_code_of(3 << 8), 3);
  EXPECT_EQ(exit_code_of(15), 128 + 15);
}

}  // namespace
}  // namespace gms::tools
