// Burst's Jinja renderer: statements executed and expressions evaluated as
// Jinja2 does (scopes: each for iteration and each macro call has its own;
// `if` has none), with the bounds of RenderOptions.
#include <cmath>
#include <unordered_map>

#include "core/status.h"
#include "train/jinja.h"
#include "train/jinja_ast.h"
#include "train/jinja_builtins.h"

namespace burst::jinja {
namespace {

constexpr int kMaxCallDepth = 32;

using Frame = std::unordered_map<std::string, Value>;
enum class Flow { kNormal, kBreak, kContinue };

// x op y on int64, refusing what would overflow (Python's ints do not).
int64_t Checked(bool (*op)(int64_t, int64_t, int64_t*), int64_t x, int64_t y) {
  int64_t r;
  if (op(x, y, &r)) Fail("integer overflow");
  return r;
}
bool IntAdd(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool IntSub(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool IntMul(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }

Value Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) {
    Fail(std::string("unsupported operand types for ") + op + ": " + a.TypeName() + " and " + b.TypeName());
  }
  const bool ints = a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat;
  if (op == "/") {
    if (b.f() == 0) Fail("division by zero");
    return Value::Float(a.f() / b.f());
  }
  if (ints) {
    const int64_t x = a.i(), y = b.i();
    if (op == "+") return Value::Int(Checked(IntAdd, x, y));
    if (op == "-") return Value::Int(Checked(IntSub, x, y));
    if (op == "*") return Value::Int(Checked(IntMul, x, y));
    if (op == "//" || op == "%") {
      if (y == 0) Fail("integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) Fail("integer overflow");
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
      return Value::Int(op == "//" ? q : m);
    }
    if (op == "**") {
      if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
      int64_t p = 1;
      for (int64_t k = 0; k < y; ++k) {
        p = Checked(IntMul, p, x);
        if (p == 0 || p == 1) break;
      }
      return Value::Int(p);
    }
  }
  const double x = a.f(), y = b.f();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0) Fail("float division by zero");
  const double q = std::floor(x / y);
  return Value::Float(op == "//" ? q : x - q * y);
}

class Renderer {
 public:
  Renderer(const Template& t, const Dict& context, const RenderOptions& opt) : t_(t), opt_(opt) {
    Frame root;
    for (const auto& [k, v] : context.items) root[k.s] = v;
    AddGlobals(root);
    scopes_.push_back(std::move(root));
  }

  Rendered Run() {
    Exec(t_.body);
    return std::move(out_);
  }
  int line() const { return line_; }

 private:
  void AddGlobals(Frame& f) {
    auto add = [&](const char* name, Function fn) {
      if (!f.count(name)) f[name] = Value::MakeFunction(name, std::move(fn));
    };
    add("raise_exception", [](const Args& a) -> Value { Fail(a.Get(0, "message").ToText().s); });
    add("range", [this](const Args& a) {
      a.Check("range", 3, {});
      int64_t start = 0, stop, step = 1;
      for (const Value& v : a.pos)
        if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool) Fail("range: integers expected");
      if (a.pos.empty()) Fail("range expected at least 1 argument");
      if (a.pos.size() == 1) {
        stop = a.pos[0].i();
      } else {
        start = a.pos[0].i(), stop = a.pos[1].i();
        if (a.pos.size() == 3) step = a.pos[2].i();
      }
      if (step == 0) Fail("range: step must not be zero");
      // Jinja's sandbox refuses ranges over MAX_RANGE items.
      const double count =
          std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
      if (count > 100000) Fail("range: more than 100000 items");
      List out;
      for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) {
        Step();
        out.push_back(Value::Int(v));
      }
      return Value::MakeList(std::move(out));
    });
    auto make_dict = [](bool ns) {
      return [ns](const Args& a) {
        if (!a.pos.empty() && !(ns && a.pos.size() == 1 && a.pos[0].is_dict()))
          Fail(std::string(ns ? "namespace" : "dict") + ": keyword arguments only");
        auto d = std::make_shared<Dict>();
        d->is_namespace = ns;
        if (!a.pos.empty())
          for (const auto& [k, v] : a.pos[0].dict()->items) d->Set(k, v);
        for (const auto& [k, v] : a.kw) d->Set(Text::Literal(k), v);
        return Value::MakeDict(std::move(d));
      };
    };
    add("namespace", make_dict(true));
    add("dict", make_dict(false));
  }

  void Step() {
    if (++steps_ > opt_.max_steps)
      Fail("more than " + std::to_string(opt_.max_steps) + " loop iterations and calls");
  }

  void Write(const Text& t) {
    if (out_.text.s.size() + t.s.size() > opt_.max_output)
      Fail("the output is longer than " + std::to_string(opt_.max_output) + " bytes");
    out_.text.Append(t);
    out_.owner.insert(out_.owner.end(), t.s.size(), owners_.empty() ? -1 : owners_.back());
  }

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto f = it->find(name); f != it->end()) return f->second;
    }
    return {};
  }

  Flow Exec(const std::vector<Node>& body) {
    for (const Node& n : body) {
      line_ = n.line;
      switch (n.kind) {
        case Node::Kind::kText:
          Write(Text::Literal(n.text));
          break;
        case Node::Kind::kOutput:
          Write(Eval(*n.expr).ToText());
          break;
        case Node::Kind::kIf: {
          const std::vector<Node>* chosen = &n.else_body;
          for (const auto& [cond, b] : n.branches) {
            line_ = cond->line;
            if (Eval(*cond).Truthy()) {
              chosen = &b;
              break;
            }
          }
          if (Flow f = Exec(*chosen); f != Flow::kNormal) return f;
          break;
        }
        case Node::Kind::kFor:
          For(n);
          break;
        case Node::Kind::kSet:
          Set(n);
          break;
        case Node::Kind::kSetBlock: {
          Rendered saved = std::move(out_);
          out_ = {};
          Exec(n.body);
          Text captured = std::move(out_.text);
          out_ = std::move(saved);
          scopes_.back()[n.targets[0]] = Value::Str(std::move(captured));
          break;
        }
        case Node::Kind::kMacro:
          scopes_.back()[n.targets[0]] = Macro(n);
          break;
        case Node::Kind::kBreak:
          return Flow::kBreak;
        case Node::Kind::kContinue:
          return Flow::kContinue;
        case Node::Kind::kBlock:
          if (Flow f = Exec(n.body); f != Flow::kNormal) return f;
          break;
      }
    }
    return Flow::kNormal;
  }

  void Assign(const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = v;
      return;
    }
    const List items = Iterate(v);
    if (items.size() != targets.size()) {
      Fail("cannot unpack " + std::to_string(items.size()) + " values into " +
           std::to_string(targets.size()));
    }
    for (size_t k = 0; k < targets.size(); ++k) scopes_.back()[targets[k]] = items[k];
  }

  void Set(const Node& n) {
    Value v = Eval(*n.expr);
    if (n.attr.empty()) return Assign(n.targets, v);
    Value ns = Lookup(n.targets[0]);
    if (!ns.is_dict() || !ns.dict()->is_namespace) Fail("cannot assign attribute on non-namespace object");
    if (n.attr[0] == '_') Fail("access to attribute '" + n.attr + "' is unsafe");  // the sandbox's rule
    if (v.is_dict() && v.dict()->is_namespace) Fail("a namespace cannot hold a namespace");
    if (v.nesting() >= kMaxValueNesting)
      Fail("lists and dicts nested deeper than " + std::to_string(kMaxValueNesting));
    ns.dict()->Set(Text::Literal(n.attr), std::move(v));
  }

  void For(const Node& n) {
    const Value seq = Eval(*n.expr);
    List items;
    for (Value& item : Iterate(seq)) {
      if (n.filter) {
        scopes_.emplace_back();
        Assign(n.targets, item);
        const bool keep = Eval(*n.filter).Truthy();
        scopes_.pop_back();
        if (!keep) continue;
      }
      items.push_back(std::move(item));
    }
    const int64_t len = static_cast<int64_t>(items.size());
    // One loop object, advanced each iteration, as Jinja2's LoopContext.
    auto loop = std::make_shared<Dict>();
    auto at = std::make_shared<int64_t>(0);
    const Value loop_value = Value::MakeDict(loop);
    loop->Set(Text::Literal("length"), Value::Int(len));
    loop->Set(Text::Literal("depth"), Value::Int(1));
    loop->Set(Text::Literal("depth0"), Value::Int(0));
    loop->Set(Text::Literal("cycle"), Value::MakeFunction("loop.cycle", [at](const Args& a) {
                if (a.pos.empty()) Fail("loop.cycle: no items");
                return a.pos[static_cast<size_t>(*at) % a.pos.size()];
              }));
    // Jinja2 marks a loop as iterated at the end of a body that ran through,
    // so `else` also runs when every iteration broke off or continued.
    bool iterated = false;
    for (int64_t k = 0; k < len; ++k) {
      Step();
      *at = k;
      loop->Set(Text::Literal("index"), Value::Int(k + 1));
      loop->Set(Text::Literal("index0"), Value::Int(k));
      loop->Set(Text::Literal("revindex"), Value::Int(len - k));
      loop->Set(Text::Literal("revindex0"), Value::Int(len - k - 1));
      loop->Set(Text::Literal("first"), Value::Bool(k == 0));
      loop->Set(Text::Literal("last"), Value::Bool(k == len - 1));
      loop->Set(Text::Literal("previtem"), k > 0 ? items[k - 1] : Value());
      loop->Set(Text::Literal("nextitem"), k + 1 < len ? items[k + 1] : Value());
      scopes_.emplace_back();
      scopes_.back()["loop"] = loop_value;
      Assign(n.targets, items[k]);
      const Value& item = items[k];
      int owner = -1;
      if (item.is_dict()) {
        for (size_t o = 0; o < opt_.owners.size(); ++o)
          if (opt_.owners[o] == item.dict().get()) owner = static_cast<int>(o);
      }
      if (owner >= 0) owners_.push_back(owner);
      const Flow f = Exec(n.body);
      if (owner >= 0) owners_.pop_back();
      scopes_.pop_back();
      if (f == Flow::kNormal) iterated = true;
      if (f == Flow::kBreak) break;
    }
    if (!iterated) Exec(n.else_body);
  }

  // A macro sees the variables of the blocks around its definition as they
  // were then (a loop's item), the template's top level as it is at the
  // call, and its arguments.
  Value Macro(const Node& n) {
    auto closure = std::make_shared<std::vector<Frame>>(scopes_.begin() + 1, scopes_.end());
    return Value::MakeFunction(n.targets[0], [this, &n, closure](const Args& a) {
      Step();
      if (++call_depth_ > kMaxCallDepth) Fail("macros nested deeper than " + std::to_string(kMaxCallDepth));
      const std::string& name = n.targets[0];
      if (a.pos.size() > n.params.size())
        Fail("macro '" + name + "' takes not more than " + std::to_string(n.params.size()) + " arguments");
      for (size_t k = 0; k < a.kw.size(); ++k) {
        size_t at = n.params.size();
        for (size_t p = 0; p < n.params.size(); ++p)
          if (n.params[p] == a.kw[k].first) at = p;
        if (at == n.params.size())
          Fail("macro '" + name + "' takes no keyword argument '" + a.kw[k].first + "'");
        if (at < a.pos.size())
          Fail("macro '" + name + "' got multiple values for argument '" + a.kw[k].first + "'");
      }
      std::vector<Frame> saved_scopes = std::move(scopes_);
      scopes_.clear();
      scopes_.push_back(saved_scopes.front());
      scopes_.insert(scopes_.end(), closure->begin(), closure->end());
      scopes_.emplace_back();
      Rendered saved = std::move(out_);
      out_ = {};
      const int saved_line = line_;
      for (size_t k = 0; k < n.params.size(); ++k) {
        const Value* given = k < a.pos.size() ? &a.pos[k] : nullptr;
        for (const auto& [kw, v] : a.kw)
          if (kw == n.params[k]) given = &v;
        if (given) {
          scopes_.back()[n.params[k]] = *given;
        } else if (n.defaults[k]) {
          scopes_.back()[n.params[k]] = Eval(*n.defaults[k]);
        }
      }
      // The body renders on its own: a macro call is a string (Jinja's Markup).
      Exec(n.body);
      Text result = std::move(out_.text);
      out_ = std::move(saved);
      scopes_ = std::move(saved_scopes);
      line_ = saved_line;
      --call_depth_;
      return Value::Str(std::move(result));
    });
  }

  Args EvalArgs(const Expr& e, size_t first) {
    Args a;
    const size_t nkw = e.kw_names.size();
    const size_t npos = e.kids.size() - first - nkw;
    for (size_t k = 0; k < npos; ++k) a.pos.push_back(Eval(*e.kids[first + k]));
    for (size_t k = 0; k < nkw; ++k) a.kw.emplace_back(e.kw_names[k], Eval(*e.kids[first + npos + k]));
    return a;
  }

  Value Undefined(const Expr& e) {
    if (e.kind == Expr::Kind::kName) Fail("'" + e.name + "' is undefined");
    Fail("an undefined value has no attributes or items");
  }

  Value Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return Lookup(e.name);
      case Expr::Kind::kAttr: {
        const Value obj = Eval(*e.kids[0]);
        if (obj.is_undefined()) return Undefined(*e.kids[0]);
        return GetAttr(obj, e.name, true);
      }
      case Expr::Kind::kItem: {
        const Value obj = Eval(*e.kids[0]);
        if (obj.is_undefined()) return Undefined(*e.kids[0]);
        const Value idx = Eval(*e.kids[1]);
        if (idx.is_string()) return GetAttr(obj, idx.str(), false);
        if ((idx.kind() == Value::Kind::kInt || idx.kind() == Value::Kind::kBool) && !obj.is_dict())
          return GetIndex(obj, idx.i());
        return {};
      }
      case Expr::Kind::kSlice: {
        const Value obj = Eval(*e.kids[0]);
        if (obj.is_undefined()) return Undefined(*e.kids[0]);
        Value b[3];
        for (int k = 0; k < 3; ++k)
          if (e.kids[1 + k]) b[k] = Eval(*e.kids[1 + k]);
        return Slice(obj, b[0], b[1], b[2]);
      }
      case Expr::Kind::kCall: {
        const Value f = Eval(*e.kids[0]);
        if (f.kind() != Value::Kind::kFunction) {
          if (f.is_undefined()) return Undefined(*e.kids[0]);
          Fail(std::string("a ") + f.TypeName() + " is not callable");
        }
        return f.Call(EvalArgs(e, 1));
      }
      case Expr::Kind::kFilter:
        return ApplyFilter(e.name, Eval(*e.kids[0]), EvalArgs(e, 1));
      case Expr::Kind::kTest:
        return Value::Bool(ApplyTest(e.name, Eval(*e.kids[0]), EvalArgs(e, 1)) != e.negated);
      case Expr::Kind::kUnary: {
        const Value v = Eval(*e.kids[0]);
        if (e.name == "not") return Value::Bool(!v.Truthy());
        if (!v.is_number()) Fail("bad operand type for unary " + e.name + ": " + v.TypeName());
        if (e.name == "+") return v.kind() == Value::Kind::kFloat ? v : Value::Int(v.i());
        if (v.kind() == Value::Kind::kFloat) return Value::Float(-v.f());
        if (v.i() == INT64_MIN) Fail("integer overflow");
        return Value::Int(-v.i());
      }
      case Expr::Kind::kBinary:
        return Binary(e);
      case Expr::Kind::kCompare: {
        Value a = Eval(*e.kids[0]);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value b = Eval(*e.kids[k + 1]);
          const std::string& op = e.ops[k];
          bool r;
          if (op == "==")
            r = Equal(a, b);
          else if (op == "!=")
            r = !Equal(a, b);
          else if (op == "<")
            r = Less(a, b);
          else if (op == ">")
            r = Less(b, a);
          else if (op == "<=")
            r = !Less(b, a);
          else if (op == ">=")
            r = !Less(a, b);
          else if (op == "in")
            r = Contains(b, a);
          else
            r = !Contains(b, a);
          if (!r) return Value::Bool(false);
          a = std::move(b);
        }
        return Value::Bool(true);
      }
      case Expr::Kind::kCond: {
        if (Eval(*e.kids[1]).Truthy()) return Eval(*e.kids[0]);
        return e.kids[2] ? Eval(*e.kids[2]) : Value();
      }
      case Expr::Kind::kList: {
        List items;
        for (const ExprPtr& k : e.kids) items.push_back(Eval(*k));
        return e.name == "tuple" ? Value::MakeTuple(std::move(items)) : Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        auto d = std::make_shared<Dict>();
        for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
          const Value key = Eval(*e.kids[k]);
          if (!key.is_string()) Fail("dict keys must be strings");
          d->Set(key.text(), Eval(*e.kids[k + 1]));
        }
        return Value::MakeDict(std::move(d));
      }
    }
    return {};
  }

  Value Binary(const Expr& e) {
    const std::string& op = e.name;
    Value a = Eval(*e.kids[0]);
    if (op == "and") return a.Truthy() ? Eval(*e.kids[1]) : a;
    if (op == "or") return a.Truthy() ? a : Eval(*e.kids[1]);
    const Value b = Eval(*e.kids[1]);
    if (op == "~") {
      Text t = a.ToText();
      t.Append(b.ToText());
      return Value::Str(std::move(t));
    }
    if (op == "+" && a.is_string() && b.is_string()) {
      Text t = a.text();
      t.Append(b.text());
      return Value::Str(std::move(t));
    }
    if (op == "+" && a.is_list() && b.is_list()) {
      List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value::MakeList(std::move(l));
    }
    if (op == "*" && (a.is_string() || a.is_list()) &&
        (b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool))
      return Repeat(a, b.i());
    if (op == "*" && (b.is_string() || b.is_list()) &&
        (a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool))
      return Repeat(b, a.i());
    if ((a.is_undefined() || b.is_undefined()) && !(a.is_number() && b.is_number()))
      return Undefined(a.is_undefined() ? *e.kids[0] : *e.kids[1]);
    return Arithmetic(op, a, b);
  }

  Value Repeat(const Value& v, int64_t n) {
    if (n <= 0) return v.is_string() ? Value::Literal("") : Value::MakeList({});
    const size_t unit = v.is_string() ? v.str().size() : v.list().size();
    if (unit != 0 && static_cast<uint64_t>(n) > opt_.max_output / unit)
      Fail("a repetition longer than the output may be");
    if (v.is_string()) {
      Text t;
      for (int64_t k = 0; k < n; ++k) t.Append(v.text());
      return Value::Str(std::move(t));
    }
    List l;
    for (int64_t k = 0; k < n; ++k) l.insert(l.end(), v.list().begin(), v.list().end());
    return Value::MakeList(std::move(l));
  }

  const Template& t_;
  const RenderOptions& opt_;
  std::vector<Frame> scopes_;
  std::vector<int> owners_;
  Rendered out_;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  int line_ = 1;
};

}  // namespace

Rendered Render(const Template& t, const Dict& context, const RenderOptions& options) {
  Renderer r(t, context, options);
  try {
    return r.Run();
  } catch (const TemplateError& e) {
    throw Error(Code::kInvalidArgument, t.where + " line " + std::to_string(r.line()) + ": " + e.what(),
                t.where);
  }
}

Value FromJson(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.get<double>());
    case Json::value_t::string:
      return Value::Str(Text::Data(j.get<std::string>()));
    case Json::value_t::array: {
      List items;
      for (const Json& x : j) items.push_back(FromJson(x));
      return Value::MakeList(std::move(items));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, v] : j.items()) d->Set(Text::Data(k), FromJson(v));
      return Value::MakeDict(std::move(d));
    }
    default:
      return {};
  }
}

}  // namespace burst::jinja
