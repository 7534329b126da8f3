// The lexer of Burst's Jinja (jinja.h): a template's source split into text
// and tags with Jinja2's whitespace control (trim_blocks, lstrip_blocks and
// the - and + signs, as transformers configures them), and a tag's inside
// split into tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace burst::jinja {

struct Piece {
  enum class Kind { kText, kOutput, kStatement };  // comments are dropped
  Kind kind;
  std::string text;  // the text, or the tag's inside without its delimiters
  int line;
};

// Fails (TemplateError "line N: ...") on an unclosed tag or comment.
std::vector<Piece> SplitPieces(std::string_view source, int* error_line);

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;  // a name, an operator, a string's value (escapes resolved)
  int64_t i = 0;
  double f = 0;
};

// A tag's inside as tokens, ending with kEnd. Fails on a character Jinja
// does not lex or an unterminated string.
std::vector<Token> Tokenize(std::string_view tag);

}  // namespace burst::jinja
