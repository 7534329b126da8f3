// The model card of a downloaded checkpoint (api/checkpoint_download.h):
// what the organisation wrote (file names, the model, the suffix, the
// recipe) shows as it is and forms no Markdown of its own: no raw HTML, no
// link, no extra table cell or row.
#include "api/checkpoint_download.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

namespace burst {
namespace {

// `s` with the character references a renderer would resolve (&#N; and
// the three named ones the card may use) turned back into characters.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      const std::string ref = semi == std::string::npos ? "" : s.substr(i + 1, semi - i - 1);
      if (ref.size() > 1 && ref[0] == '#') {
        out += static_cast<char>(std::stoi(ref.substr(1)));
        i = semi;
        continue;
      }
      if (ref == "lt" || ref == "gt" || ref == "amp") {
        out += ref == "lt" ? '<' : ref == "gt" ? '>' : '&';
        i = semi;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(ModelCard, WhatTheUserNamedIsInert) {
  const std::string hostile = "<img src=x onerror=alert(1)>[x](javascript:alert(1))|col";
  JobRecord job;
  job.id = "ftjob-abc";
  job.total_steps = 10;
  job.spec = {
      {"model", "burst-small`<b>x</b>\n| injected | row |"},
      {"suffix", "s|`x`"},
      {"recipe", {{"method", "lora](javascript:alert(1))"}, {"note", "```\n<script>alert(1)</script>"}}}};
  CheckpointRecord cp;
  cp.step = 4;
  FileRecord train;
  train.id = "file-1";
  train.filename = hostile;
  train.examples = 10;
  train.sha256 = "abc";
  FileRecord valid = train;
  valid.filename = "valid_set.jsonl";
  const std::string card = ModelCard(job, cp, "ftjob-abc:s|`x`:step-4", &train, &valid, "");

  // The head and the table: everything up to the recipe's JSON.
  const std::string head = card.substr(0, card.find("## Recipe"));
  ASSERT_NE(head.size(), card.size()) << card;
  for (const char* markup : {"<", ">", "[", "](", "javascript:", "\\"}) {
    EXPECT_EQ(head.find(markup), std::string::npos) << "\"" << markup << "\" in\n" << head;
  }
  int rows = 0;
  for (const std::string& line : Lines(head)) {
    if (line.empty() || line[0] != '|') continue;
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 3) << "a row of two cells: " << line;
    EXPECT_EQ(std::count(line.begin(), line.end(), '`') % 2, 0) << "code spans closed: " << line;
  }
  EXPECT_EQ(rows, 6) << "header, rule, base model, training data, validation data, suffix:\n" << head;
  // A renderer shows the names as they were written.
  EXPECT_NE(Unescape(head).find(hostile + " (`file-1`), 10 examples"), std::string::npos) << head;
  EXPECT_NE(Unescape(head).find("burst-small`<b>x</b>"), std::string::npos) << head;
  // A plain name stays readable: a code span.
  EXPECT_NE(head.find("| validation data | `valid_set.jsonl` (`file-1`)"), std::string::npos) << head;
  // The recipe stays inside its fence: JSON strings cannot start a line.
  int fences = 0;
  for (const std::string& line : Lines(card)) fences += line.rfind("```", 0) == 0 ? 1 : 0;
  EXPECT_EQ(fences, 4) << "the recipe's and the usage's fences:\n" << card;
}

}  // namespace
}  // namespace burst
