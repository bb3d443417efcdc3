// The reports' text (Note [Report text]): names and messages of any bytes
// leave every report well-formed and every terminal untouched, and long
// messages are cut. The writers run on hand-made runs, no worker involved.
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "backend_run.h"
#include "backplane/conformance/text_format.h"
#include "gtest/gtest.h"
#include "reports.h"

namespace backplane::conformance {
namespace {

constexpr std::string_view kFffd = "\xEF\xBF\xBD";  // U+FFFD

// Whether `s` is UTF-8 (an oracle of its own: lead byte, continuation
// bytes, no overlong form, no surrogate, at most U+10FFFF).
bool isUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
    if (n == 0 || i + n > s.size()) return false;
    unsigned cp = n == 1 ? c : c & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += n;
  }
  return true;
}

// Whether `s` holds a control character other than newline (and tab when `tab`).
bool hasControl(std::string_view s, bool tab_and_cr) {
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && !(tab_and_cr && (c == '\t' || c == '\r'))) || c == 0x7f) return true;
  }
  return false;
}

TEST(ReportText, JsonStringReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(jsonString("a\xff\xfe"
                       "b"),
            "\"a" + std::string(kFffd) + std::string(kFffd) + "b\"");
  EXPECT_EQ(jsonString("\x1b[31m"), "\"\\u001b[31m\"");
  EXPECT_EQ(jsonString("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"");
  // Overlong, surrogate, truncated and past U+10FFFF: one U+FFFD per byte.
  for (const std::string_view bad : {std::string_view("\xC0\x80"), std::string_view("\xED\xA0\x80"),
                                     std::string_view("\xE2\x82"), std::string_view("\xF4\x90\x80\x80")}) {
    std::string expected = "\"";
    for (size_t i = 0; i < bad.size(); ++i) expected += kFffd;
    EXPECT_EQ(jsonString(bad), expected + "\"") << bad.size();
  }
  EXPECT_TRUE(isUtf8(jsonString("\xff\xfe\x80\xbf\xc3")));
}

TEST(ReportText, XmlTextHoldsOnlyWhatXml10Allows) {
  EXPECT_EQ(xmlText("<a & \"b\">\x1b[31m\ttab\r\n\x01"), "&lt;a &amp; &quot;b&quot;&gt;\\x1b[31m\ttab\r\n\\x01");
  EXPECT_EQ(xmlText("\xff\xEF\xBF\xBE\xEF\xBF\xBF"), std::string(kFffd) + std::string(kFffd) + std::string(kFffd));
}

TEST(ReportText, VisibleTextShowsControlCharacters) {
  EXPECT_EQ(visibleText("\x1b[31mred\x1b[0m\x7f\tok\nnext\r"), "\\x1b[31mred\\x1b[0m\\x7f\tok\nnext\\x0d");
  EXPECT_EQ(visibleText("\xC2\x9B"
                        "31m \xff"),
            "\\u009b31m " + std::string(kFffd));
}

TEST(ReportText, CapTextCutsAtACharacterAndSaysHowMuch) {
  EXPECT_EQ(capText("short", 10), "short");
  EXPECT_EQ(capText(std::string(5000, 'x')), std::string(4096, 'x') + "... (904 more bytes; --full-errors to see all)");
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\xC3\xA9";  // 20 bytes
  const std::string cut = capText(accents, 7);         // 7 falls inside the fourth character
  EXPECT_EQ(cut, accents.substr(0, 6) + "... (14 more bytes; --full-errors to see all)");
  EXPECT_TRUE(isUtf8(cut));
}

std::vector<BackendRun> hostileRuns() {
  BackendRun b;
  b.name = "hostile";
  b.provider = "plug\x1b[2Jin\xff";
  b.devices = 1;
  Result r;
  r.op = "bp::\xff\xfe\x1b[31mop";
  r.form = "functional";
  r.backend = "hostile";
  r.kernel = KernelKind::Native;
  r.outcome = Outcome::Error;
  r.sample = "sample \x1b]0;title\x07";
  r.message = "kernel said \xff\xfe \x1b[31mred\x1b[0m " + std::string(10000, 'x');
  b.results.push_back(r);
  b.error = "the worker said \x1b[31m\xfe";
  return {b};
}

TEST(Reports, StayWellFormedWhateverTheirTextHolds) {
  const std::vector<BackendRun> runs = hostileRuns();
  std::ostringstream json, junit, markdown, summary;
  writeJson(json, runs, false, false);
  writeJunit(junit, runs, false);
  writeMarkdown(markdown, runs, false, false);
  printSummary(summary, runs, false);
  for (const std::string& s : {json.str(), junit.str(), markdown.str(), summary.str()}) {
    EXPECT_TRUE(isUtf8(s)) << s.substr(0, 400);
    EXPECT_FALSE(hasControl(s, true)) << s.substr(0, 400);
  }
  EXPECT_NE(json.str().find("\\u001b[31mred"), std::string::npos);
  EXPECT_NE(junit.str().find("\\x1b[31mred"), std::string::npos);
  for (const std::string& s : {markdown.str(), summary.str()})
    EXPECT_NE(s.find("bp::" + std::string(kFffd) + std::string(kFffd) + "\\x1b[31mop"), std::string::npos) << s;
}

TEST(Reports, LongMessagesAreCutUnlessAskedForWhole) {
  std::vector<BackendRun> runs = hostileRuns();
  const size_t whole = runs[0].results[0].message.size();
  capMessages(runs);
  const std::string& m = runs[0].results[0].message;
  EXPECT_EQ(m.rfind("kernel said", 0), 0u);
  EXPECT_NE(m.find("... (" + std::to_string(whole - kMessageLimit) + " more bytes; --full-errors to see all)"),
            std::string::npos)
      << m.substr(kMessageLimit);
  EXPECT_LT(m.size(), kMessageLimit + 100);
  EXPECT_EQ(runs[0].results[0].op, hostileRuns()[0].results[0].op);  // names are not cut
}

// Note [Uncertified operators]: an op with a native kernel and no spec is
// in every report as uncertified: the summary's UNCERTIFIED column and list,
// the JSON counts, a JUnit skip. Not a failure, but under --strict, where
// every report counts it as one.
TEST(Reports, UncertifiedOpsAreInEveryReportAndFailUnderStrict) {
  BackendRun b;
  b.name = "dsp";
  b.provider = "dsp_plugin";
  b.devices = 1;
  Result pass;
  pass.op = "bp::relu.out";
  pass.form = "out";
  pass.backend = "dsp";
  pass.kernel = KernelKind::Native;
  pass.samples = 3;
  Result own = pass;
  own.op = "dsp::scale";
  own.form = "functional";
  own.samples = 0;
  own.outcome = Outcome::Uncertified;
  own.message = "no conformance spec covers this op";
  b.results = {pass, own};
  for (bool strict : {false, true}) {
    SCOPED_TRACE(strict ? "--strict" : "without --strict");
    EXPECT_EQ(countsAsFailure(own, strict), strict);
    const Counts c = countsOf(b, strict);
    EXPECT_EQ(c.uncertified, 1);
    EXPECT_EQ(c.failures, strict ? 1 : 0);
    std::ostringstream summary, json, junit, markdown;
    printSummary(summary, {b}, strict);
    writeJson(json, {b}, strict, !strict);
    writeJunit(junit, {b}, strict);
    writeMarkdown(markdown, {b}, strict, !strict);
    EXPECT_NE(summary.str().find("UNCERTIFIED"), std::string::npos) << summary.str();
    if (strict) {
      EXPECT_NE(summary.str().find("dsp:0  dsp::scale (functional, native): uncertified"), std::string::npos)
          << summary.str();
      EXPECT_NE(junit.str().find("<failure type=\"uncertified\""), std::string::npos) << junit.str();
      EXPECT_NE(markdown.str().find("❌ uncertified (native)"), std::string::npos) << markdown.str();
    } else {
      EXPECT_NE(summary.str().find("uncertified (a native kernel and no conformance spec"), std::string::npos);
      EXPECT_NE(summary.str().find("  dsp:0  dsp::scale (functional)\n"), std::string::npos) << summary.str();
      EXPECT_NE(junit.str().find("<skipped message=\"uncertified: no conformance spec"), std::string::npos)
          << junit.str();
      EXPECT_NE(markdown.str().find("❔ uncertified (native)"), std::string::npos) << markdown.str();
    }
    EXPECT_NE(json.str().find("\"uncertified\": 1"), std::string::npos) << json.str();
    EXPECT_NE(json.str().find("\"outcome\": \"uncertified\""), std::string::npos);
  }
}

}  // namespace
}  // namespace backplane::conformance
