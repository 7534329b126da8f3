#include "train/jinja_lex.h"

#include <cerrno>
#include <cstdlib>

#include "train/jinja_value.h"

namespace burst::jinja {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Line numbers of offsets asked for in increasing order, counted once.
class LineCounter {
 public:
  explicit LineCounter(std::string_view src) : src_(src) {}
  int At(size_t pos) {
    for (; at_ < pos && at_ < src_.size(); ++at_) line_ += src_[at_] == '\n';
    return line_;
  }

 private:
  std::string_view src_;
  size_t at_ = 0;
  int line_ = 1;
};

// The end of a tag opened at `from` (just past its opener): the offset of
// its closer ("}}" or "%}") outside string literals and brackets, as
// Jinja2's lexer balances them; npos when unclosed.
size_t FindCloser(std::string_view src, size_t from, char close) {
  int depth = 0;
  for (size_t i = from; i < src.size(); ++i) {
    const char c = src[i];
    if (c == '\'' || c == '"') {
      for (++i; i < src.size() && src[i] != c; ++i)
        if (src[i] == '\\') ++i;
      if (i >= src.size()) return std::string_view::npos;
    } else if (depth == 0 && c == close && i + 1 < src.size() && src[i + 1] == '}') {
      return i;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Jinja2 reads a template as Python's splitlines() and joins the lines
// with "\n": every line break becomes "\n" and a final one goes.
std::string NormalizeNewlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(src[i]);
    const std::string_view rest = src.substr(i);
    if (c == '\r') {
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      out += '\n';
    } else if (c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) {
      out += '\n';
    } else if (rest.substr(0, 2) == "\xc2\x85") {  // U+0085
      out += '\n', ++i;
    } else if (rest.substr(0, 3) == "\xe2\x80\xa8" ||
               rest.substr(0, 3) == "\xe2\x80\xa9") {  // U+2028, U+2029
      out += '\n', i += 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Piece> SplitPieces(std::string_view source, int* error_line) {
  const std::string normalized = NormalizeNewlines(source);
  const std::string_view src = normalized;
  std::vector<Piece> out;
  LineCounter lines(src);
  size_t pos = 0;
  bool strip_next = false;  // the previous tag ended with "-": the text's leading whitespace goes
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() && src[open + 1] != '{' &&
           src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string_view::npos && open + 1 >= src.size()) open = std::string_view::npos;
    std::string text(src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    const bool line_starting = pos == 0 || src[pos - 1] == '\n';
    if (strip_next) {
      size_t a = 0;
      while (a < text.size() && IsSpace(text[a])) ++a;
      text.erase(0, a);
    }
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({Piece::Kind::kText, text, lines.At(pos)});
      break;
    }
    const char type = src[open + 1];
    const char sign = open + 2 < src.size() ? src[open + 2] : '\0';
    const bool block = type == '%' || type == '#';
    if (sign == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (sign != '+' && block) {
      // lstrip_blocks: a tag alone on its line after indentation takes the indentation.
      const size_t l_pos = text.rfind('\n') + 1;  // npos + 1 == 0
      if ((l_pos > 0 || line_starting) && l_pos < text.size()) {
        bool blank = true;
        for (size_t i = l_pos; i < text.size(); ++i) blank = blank && IsSpace(text[i]);
        if (blank) text.erase(l_pos);
      }
    }
    if (!text.empty()) out.push_back({Piece::Kind::kText, text, lines.At(pos)});
    const int line = lines.At(open);
    size_t inner = open + 2 + (sign == '-' || sign == '+' ? 1 : 0);
    size_t close;
    if (type == '#') {
      close = src.find("#}", inner);
    } else {
      close = FindCloser(src, inner, type == '{' ? '}' : '%');
    }
    if (close == std::string_view::npos) {
      *error_line = line;
      Fail(std::string("unclosed ") + (type == '#' ? "comment" : type == '{' ? "{{" : "{%"));
    }
    size_t inner_end = close;
    char end_sign = '\0';
    if (close > inner && (src[close - 1] == '-' || src[close - 1] == '+')) {
      end_sign = src[close - 1];
      inner_end = close - 1;
    }
    if (type != '#') {
      out.push_back({type == '{' ? Piece::Kind::kOutput : Piece::Kind::kStatement,
                     std::string(src.substr(inner, inner_end - inner)), line});
    }
    pos = close + 2;
    strip_next = end_sign == '-';
    // trim_blocks: the newline right after a block tag goes.
    if (!strip_next && end_sign != '+' && block && pos < src.size() && src[pos] == '\n') ++pos;
    if (pos == src.size()) break;
  }
  return out;
}

std::vector<Token> Tokenize(std::string_view tag) {
  const std::string_view s = tag;
  std::vector<Token> out;
  size_t i = 0;
  auto is_name = [](char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
  };
  while (true) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i >= s.size()) break;
    const char c = s[i];
    if (is_name(c, true)) {
      size_t j = i;
      while (j < s.size() && is_name(s[j], false)) ++j;
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i))});
      i = j;
    } else if (c >= '0' && c <= '9') {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
        is_float = true;
        for (++j; j < s.size() && ((s[j] >= '0' && s[j] <= '9') || s[j] == '_');) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && s[k] >= '0' && s[k] <= '9') {
          is_float = true;
          for (j = k; j < s.size() && s[j] >= '0' && s[j] <= '9';) ++j;
        }
      }
      std::string digits;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') digits += s[k];
      Token t{is_float ? Token::Kind::kFloat : Token::Kind::kInt, digits};
      errno = 0;
      if (is_float) {
        t.f = std::strtod(digits.c_str(), nullptr);
      } else {
        t.i = std::strtoll(digits.c_str(), nullptr, 10);
        if (errno == ERANGE) Fail("integer literal " + digits + " is too large");
      }
      out.push_back(std::move(t));
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          v += s[j];
          continue;
        }
        const char e = s[++j];
        switch (e) {
          case 'n':
            v += '\n';
            break;
          case 't':
            v += '\t';
            break;
          case 'r':
            v += '\r';
            break;
          case '\\':
            v += '\\';
            break;
          case '\'':
            v += '\'';
            break;
          case '"':
            v += '"';
            break;
          case '\n':
            break;
          case 'a':
            v += '\a';
            break;
          case 'b':
            v += '\b';
            break;
          case 'f':
            v += '\f';
            break;
          case 'v':
            v += '\v';
            break;
          case '0':
            v += '\0';
            break;
          case 'x':
          case 'u':
          case 'U': {
            const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (size_t k = 1; k <= n; ++k) {
              const char h = j + k < s.size() ? s[j + k] : '\0';
              const int d = h >= '0' && h <= '9'   ? h - '0'
                            : h >= 'a' && h <= 'f' ? h - 'a' + 10
                            : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                   : -1;
              if (d < 0) Fail(std::string("truncated \\") + e + " escape");
              cp = cp * 16 + static_cast<uint32_t>(d);
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) Fail("escape of an invalid code point");
            AppendUtf8(v, cp);
            j += n;
            break;
          }
          default:
            v += '\\', v += e;  // Python keeps unknown escapes as written
        }
      }
      if (j >= s.size()) Fail("unterminated string literal");
      out.push_back({Token::Kind::kString, std::move(v)});
      i = j + 1;
    } else {
      static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                   ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
      bool matched = false;
      for (const char* op : kOps) {
        const std::string_view o(op);
        if (s.substr(i, o.size()) == o) {
          out.push_back({Token::Kind::kOp, std::string(o)});
          i += o.size();
          matched = true;
          break;
        }
      }
      if (!matched) Fail(std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

}  // namespace burst::jinja
