// The values of Burst's Jinja (jinja.h): Python's None, bool, int, float,
// str, list and dict as Jinja2 sees them, plus Undefined and callables.
//
// Strings are UTF-8 and carry, per byte, whether the byte came from the data
// (a message's content, a variable passed in) or from the template's own
// text, so that a rendered chat can tell the template's control tokens from
// the same characters typed in a message (Text). Lists and dicts are shared
// and never changed once built, except a namespace() object's attributes.
//
// Thread-safety: a Value shares its list or dict; use one render per thread.
// Errors: throw jinja::TemplateError (the renderer adds the template's line).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace burst::jinja {

// How deeply lists and dicts may nest.
constexpr int kMaxValueNesting = 200;

class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
[[noreturn]] void Fail(const std::string& message);

// A string with its bytes' origin: from_data[i] is 1 where s[i] came from
// the data, 0 where it came from the template's text.
struct Text {
  std::string s;
  std::string from_data;

  static Text Literal(std::string s);
  static Text Data(std::string s);
  void Append(const Text& o);
  void Append(std::string_view literal);
  // Bytes [pos, pos + n) (n clipped).
  Text Sub(size_t pos, size_t n = std::string::npos) const;
  bool operator==(const Text& o) const { return s == o.s; }
};

class Value;
using List = std::vector<Value>;

struct Dict {
  std::vector<std::pair<Text, Value>> items;  // insertion order, as Python's dict
  bool is_namespace = false;                  // namespace(): `set ns.x = ...` allowed
  const Value* Find(std::string_view key) const;
  void Set(Text key, Value v);  // replaces an existing key in place
};

// Positional and keyword arguments of a call, filter or test.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // The argument at position i or named `name` (Undefined when absent);
  // Fail()s when a keyword is not in `allowed` (checked by Check).
  const Value& Get(size_t i, std::string_view name) const;
  bool Has(size_t i, std::string_view name) const;
  // Fails naming `what` when more than max_pos positionals or a keyword
  // outside `names` is given.
  void Check(std::string_view what, size_t max_pos, const std::vector<std::string_view>& names) const;
};

using Function = std::function<Value(const Args&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // Undefined
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value Str(Text t);
  static Value Literal(std::string s) { return Str(Text::Literal(std::move(s))); }
  // Fails when the result would nest deeper than kMaxValueNesting (freeing and
  // printing values recurse).
  static Value MakeList(List items);
  static Value MakeTuple(List items);  // a list that prints and compares as Python's tuple
  static Value MakeDict(std::shared_ptr<Dict> d);
  static Value MakeFunction(std::string name, Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  int nesting() const { return nesting_; }  // lists and dicts within, this one included
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool b() const { return b_; }
  int64_t i() const { return i_; }  // kInt (kBool: 0/1)
  double f() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const Text& text() const { return *text_; }
  const std::string& str() const { return text_->s; }
  const List& list() const { return *list_; }
  const std::shared_ptr<Dict>& dict() const { return dict_; }
  const std::string& function_name() const { return fn_name_; }
  Value Call(const Args& args) const;

  // Python's truth value (Undefined is false).
  bool Truthy() const;
  // What `{{ v }}` prints: Python's str() (None, True, 1.0, ['a', 1], {'k': 'v'}).
  Text ToText() const;
  // Python's repr() (strings quoted as Python quotes them).
  std::string Repr() const;
  // A short name of the kind for errors ("string", "list", ...).
  const char* TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  int nesting_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const Text> text_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> fn_;
  std::string fn_name_;
};

// Python's ==, with Jinja's Undefined equal only to Undefined.
bool Equal(const Value& a, const Value& b);
// Python's <; Fail()s on kinds Python cannot order.
bool Less(const Value& a, const Value& b);
// Python's `a in b` (substring, list member, dict key).
bool Contains(const Value& container, const Value& item);
// len(): code points of a string, items of a list or dict.
int64_t Length(const Value& v);
// The items a `for` walks: a list's items, a dict's keys, a string's code
// points; Undefined walks nothing. Fail()s on anything else.
List Iterate(const Value& v);
// transformers' tojson filter: json.dumps(v, ensure_ascii=False, indent,
// separators, sort_keys). indent < 0: none.
std::string ToJson(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                   bool sort_keys);
// Python's repr() of a float ("1.0", "0.1", "1e+20").
std::string FloatRepr(double d);

// UTF-8 helpers: byte offsets of each code point's start (plus the end).
std::vector<size_t> CodePointStarts(const std::string& s);

}  // namespace burst::jinja
