// Burst's Jinja parser: pieces (jinja_lex.h) to statements, and each tag's
// tokens to expressions by Jinja2's precedence (parser.py): conditional,
// or, and, not, comparisons, + -, ~, * / // %, **, unary - +, then
// postfix (. [] ()), filters and tests.
#include <set>

#include "core/status.h"
#include "train/jinja.h"
#include "train/jinja_ast.h"
#include "train/jinja_builtins.h"
#include "train/jinja_lex.h"

namespace burst::jinja {
namespace {

constexpr int kMaxNesting = 64;  // nesting of expressions and of blocks
constexpr int kMaxOperators = 2000;

class ExprParser {
 public:
  ExprParser(std::vector<Token> toks, int line) : t_(std::move(toks)), line_(line) {}

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(p_ + ahead, t_.size() - 1)]; }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  bool SkipOp(const char* op) { return IsOp(op) ? (++p_, true) : false; }
  bool SkipName(const char* name) { return IsName(name) ? (++p_, true) : false; }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Fail(std::string("expected '") + op + "'" + Near());
  }
  std::string ExpectName() {
    if (Peek().kind != Token::Kind::kName) Fail("expected a name" + Near());
    return t_[p_++].text;
  }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  void ExpectEnd() {
    if (!AtEnd()) Fail("unexpected '" + Peek().text + "'");
  }
  std::string Near() const { return AtEnd() ? " at the end of the tag" : ", found '" + Peek().text + "'"; }

  // An expression, or several separated by commas as a tuple (Jinja's parse_tuple).
  ExprPtr Tuple() {
    ExprPtr first = Cond();
    if (!IsOp(",")) return first;
    ExprPtr t = Make(Expr::Kind::kList);
    t->name = "tuple";
    t->kids.push_back(std::move(first));
    while (SkipOp(",") && !AtEnd()) t->kids.push_back(Cond());
    return t;
  }

  ExprPtr Cond() {
    Deeper d(this);
    ExprPtr e = Or();
    while (SkipName("if")) {
      ExprPtr c = Make(Expr::Kind::kCond);
      c->kids.push_back(std::move(e));
      c->kids.push_back(Or());
      c->kids.push_back(SkipName("else") ? Cond() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr Or() {
    ExprPtr e = And();
    while (SkipName("or")) e = Binary("or", std::move(e), And());
    return e;
  }

 private:
  struct Deeper {
    explicit Deeper(ExprParser* p) : p(p) {
      if (++p->depth_ > kMaxNesting) Fail("expressions nested too deeply");
    }
    ~Deeper() { --p->depth_; }
    ExprParser* p;
  };

  ExprPtr Make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  // Chains (1 + 1 + ..., x|trim|trim...) are loops here but a tree as deep
  // as the chain is long to evaluate and free; a tag has at most this many.
  void Operator() {
    if (++operators_ > kMaxOperators)
      Fail("more than " + std::to_string(kMaxOperators) + " operators in one tag");
  }
  ExprPtr Binary(const std::string& op, ExprPtr a, ExprPtr b) {
    Operator();
    ExprPtr e = Make(Expr::Kind::kBinary);
    e->name = op;
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  ExprPtr And() {
    ExprPtr e = Not();
    while (SkipName("and")) e = Binary("and", std::move(e), Not());
    return e;
  }
  ExprPtr Not() {
    if (!SkipName("not")) return Compare();
    Deeper d(this);
    ExprPtr e = Make(Expr::Kind::kUnary);
    e->name = "not";
    e->kids.push_back(Not());
    return e;
  }
  ExprPtr Compare() {
    ExprPtr first = Add();
    ExprPtr c;
    while (true) {
      std::string op;
      if (Peek().kind == Token::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
           Peek().text == "<=" || Peek().text == ">=")) {
        op = t_[p_++].text;
      } else if (SkipName("in")) {
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        p_ += 2;
        op = "not in";
      } else {
        break;
      }
      if (!c) {
        c = Make(Expr::Kind::kCompare);
        c->kids.push_back(std::move(first));
      }
      Operator();
      c->ops.push_back(op);
      c->kids.push_back(Add());
    }
    return c ? std::move(c) : std::move(first);
  }
  ExprPtr Add() {
    ExprPtr e = Concat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = t_[p_++].text;
      e = Binary(op, std::move(e), Concat());
    }
    return e;
  }
  ExprPtr Concat() {
    ExprPtr e = Mul();
    while (SkipOp("~")) e = Binary("~", std::move(e), Mul());
    return e;
  }
  ExprPtr Mul() {
    ExprPtr e = Pow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = t_[p_++].text;
      e = Binary(op, std::move(e), Pow());
    }
    return e;
  }
  ExprPtr Pow() {
    ExprPtr e = Unary(true);
    while (SkipOp("**")) e = Binary("**", std::move(e), Unary(true));
    return e;
  }
  ExprPtr Unary(bool with_filter) {
    Deeper d(this);
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Make(Expr::Kind::kUnary);
      e->name = t_[p_++].text;
      e->kids.push_back(Unary(false));
    } else {
      e = Primary();
    }
    e = Postfix(std::move(e));
    return with_filter ? FilterExpr(std::move(e)) : std::move(e);
  }

  ExprPtr Primary() {
    const Token& tok = Peek();
    ExprPtr e = Make(Expr::Kind::kLiteral);
    switch (tok.kind) {
      case Token::Kind::kName: {
        const std::string& n = tok.text;
        ++p_;
        if (n == "true" || n == "True") {
          e->value = Value::Bool(true);
        } else if (n == "false" || n == "False") {
          e->value = Value::Bool(false);
        } else if (n == "none" || n == "None") {
          e->value = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        return e;
      }
      case Token::Kind::kString: {
        std::string s;
        while (Peek().kind == Token::Kind::kString) s += t_[p_++].text;  // adjacent literals join
        e->value = Value::Literal(std::move(s));
        return e;
      }
      case Token::Kind::kInt:
        e->value = Value::Int(tok.i);
        ++p_;
        return e;
      case Token::Kind::kFloat:
        e->value = Value::Float(tok.f);
        ++p_;
        return e;
      case Token::Kind::kEnd:
        Fail("expected an expression at the end of the tag");
      case Token::Kind::kOp:
        break;
    }
    if (SkipOp("(")) {
      if (SkipOp(")")) {  // ()
        ExprPtr t = Make(Expr::Kind::kList);
        t->name = "tuple";
        return t;
      }
      ExprPtr inner = Cond();
      if (IsOp(",")) {
        ExprPtr t = Make(Expr::Kind::kList);
        t->name = "tuple";
        t->kids.push_back(std::move(inner));
        while (SkipOp(",") && !IsOp(")")) t->kids.push_back(Cond());
        inner = std::move(t);
      }
      ExpectOp(")");
      return inner;
    }
    if (SkipOp("[")) {
      e->kind = Expr::Kind::kList;
      while (!IsOp("]")) {
        e->kids.push_back(Cond());
        if (!SkipOp(",")) break;
      }
      ExpectOp("]");
      return e;
    }
    if (SkipOp("{")) {
      e->kind = Expr::Kind::kDict;
      while (!IsOp("}")) {
        e->kids.push_back(Cond());
        ExpectOp(":");
        e->kids.push_back(Cond());
        if (!SkipOp(",")) break;
      }
      ExpectOp("}");
      return e;
    }
    Fail("unexpected '" + tok.text + "'");
  }

  ExprPtr Postfix(ExprPtr e) {
    while (true) {
      if (IsOp(".") || IsOp("[") || IsOp("(")) Operator();
      if (SkipOp(".")) {
        ExprPtr a = Make(Expr::Kind::kAttr);
        if (Peek().kind == Token::Kind::kInt) {  // x.0 is x[0]
          a->kind = Expr::Kind::kItem;
          a->kids.push_back(std::move(e));
          ExprPtr idx = Make(Expr::Kind::kLiteral);
          idx->value = Value::Int(t_[p_++].i);
          a->kids.push_back(std::move(idx));
        } else {
          a->name = ExpectName();
          a->kids.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (SkipOp("[")) {
        e = Subscript(std::move(e));
      } else if (IsOp("(")) {
        e = Call(std::move(e));
      } else {
        return e;
      }
    }
  }
  ExprPtr Subscript(ExprPtr obj) {
    ExprPtr bound[3];
    bool slice = false;
    for (int part = 0; part < 3; ++part) {
      if (!IsOp(":") && !IsOp("]")) bound[part] = Cond();
      if (part == 2 || !SkipOp(":")) break;
      slice = true;
    }
    ExpectOp("]");
    ExprPtr e = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem);
    e->kids.push_back(std::move(obj));
    if (!slice && !bound[0]) Fail("empty subscript");
    for (int part = 0; part < (slice ? 3 : 1); ++part) e->kids.push_back(std::move(bound[part]));
    return e;
  }
  // Arguments in parentheses into e (its kids after the callee or value).
  void Args(Expr& e) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) Fail("*args and **kwargs in calls are not supported");
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        for (const std::string& seen : e.kw_names)
          if (seen == t_[p_].text) Fail("keyword argument '" + seen + "' repeated");
        e.kw_names.push_back(t_[p_].text);
        p_ += 2;
        e.kids.push_back(Cond());
      } else {
        if (!e.kw_names.empty()) Fail("a positional argument after a keyword argument");
        e.kids.push_back(Cond());
      }
      if (!SkipOp(",")) break;
    }
    ExpectOp(")");
  }
  ExprPtr Call(ExprPtr callee) {
    ExprPtr e = Make(Expr::Kind::kCall);
    e->kids.push_back(std::move(callee));
    Args(*e);
    return e;
  }
  ExprPtr FilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|") || IsName("is") || IsOp("(")) Operator();
      if (SkipOp("|")) {
        ExprPtr f = Make(Expr::Kind::kFilter);
        f->name = ExpectName();
        if (!HasFilter(f->name)) Fail("filter '" + f->name + "' is not supported");
        f->kids.push_back(std::move(e));
        if (IsOp("(")) Args(*f);
        e = std::move(f);
      } else if (SkipName("is")) {
        ExprPtr t = Make(Expr::Kind::kTest);
        t->negated = SkipName("not");
        t->name = ExpectName();
        if (!HasTest(t->name)) Fail("test '" + t->name + "' is not supported");
        t->kids.push_back(std::move(e));
        const Token& n = Peek();
        if (IsOp("(")) {
          Args(*t);
        } else if ((n.kind == Token::Kind::kName && n.text != "else" && n.text != "or" && n.text != "and" &&
                    n.text != "is") ||
                   n.kind == Token::Kind::kString || n.kind == Token::Kind::kInt ||
                   n.kind == Token::Kind::kFloat || IsOp("[") || IsOp("{")) {
          t->kids.push_back(Postfix(Primary()));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        e = Call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
  int depth_ = 0;
  int operators_ = 0;
};

class Parser {
 public:
  explicit Parser(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  // Statements up to one of `ends` (returned in *end) or the template's end
  // (only allowed when ends is empty).
  std::vector<Node> Body(const std::set<std::string>& ends, std::string* end, ExprParser** end_tag) {
    if (++depth_ > kMaxNesting) Fail("blocks nested too deeply");
    std::vector<Node> out;
    while (i_ < pieces_.size()) {
      const Piece& pc = pieces_[i_++];
      line_ = pc.line;
      Node n;
      n.line = pc.line;
      if (pc.kind == Piece::Kind::kText) {
        n.text = pc.text;
        out.push_back(std::move(n));
        continue;
      }
      tag_ = std::make_unique<ExprParser>(Tokenize(pc.text), pc.line);
      ExprParser& x = *tag_;
      if (pc.kind == Piece::Kind::kOutput) {
        n.kind = Node::Kind::kOutput;
        n.expr = x.Tuple();
        x.ExpectEnd();
        out.push_back(std::move(n));
        continue;
      }
      const std::string kw = x.ExpectName();
      if (ends.count(kw)) {
        *end = kw;
        *end_tag = &x;
        --depth_;
        return out;
      }
      Statement(kw, x, n);
      out.push_back(std::move(n));
    }
    if (!ends.empty()) Fail("missing {% " + *ends.rbegin() + " %}");
    --depth_;
    return out;
  }

  int line() const { return line_; }

 private:
  void Statement(const std::string& kw, ExprParser& x, Node& n) {
    std::string end;
    ExprParser* tag = nullptr;
    if (kw == "if") {
      n.kind = Node::Kind::kIf;
      ExprPtr cond = x.Tuple();
      x.ExpectEnd();
      while (true) {
        std::vector<Node> body = Body({"elif", "else", "endif"}, &end, &tag);
        n.branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") {
          cond = tag->Tuple();
          tag->ExpectEnd();
          continue;
        }
        tag->ExpectEnd();
        if (end == "else") {
          n.else_body = Body({"endif"}, &end, &tag);
          tag->ExpectEnd();
        }
        return;
      }
    }
    if (kw == "for") {
      n.kind = Node::Kind::kFor;
      const bool paren = x.SkipOp("(");
      do n.targets.push_back(x.ExpectName());
      while (x.SkipOp(","));
      if (paren) x.ExpectOp(")");
      if (!x.SkipName("in")) Fail("expected 'in' in for");
      n.expr = x.Or();
      if (x.SkipName("if")) n.filter = x.Cond();
      if (x.IsName("recursive")) Fail("recursive for loops are not supported");
      x.ExpectEnd();
      n.body = Body({"else", "endfor"}, &end, &tag);
      tag->ExpectEnd();
      if (end == "else") {
        n.else_body = Body({"endfor"}, &end, &tag);
        tag->ExpectEnd();
      }
      return;
    }
    if (kw == "set") {
      n.kind = Node::Kind::kSet;
      n.targets.push_back(x.ExpectName());
      if (x.SkipOp(".")) {
        n.attr = x.ExpectName();
      } else {
        while (x.SkipOp(",")) n.targets.push_back(x.ExpectName());
      }
      if (x.AtEnd() && n.targets.size() == 1 && n.attr.empty()) {
        n.kind = Node::Kind::kSetBlock;
        n.body = Body({"endset"}, &end, &tag);
        tag->ExpectEnd();
        return;
      }
      x.ExpectOp("=");
      n.expr = x.Tuple();
      x.ExpectEnd();
      return;
    }
    if (kw == "macro") {
      n.kind = Node::Kind::kMacro;
      n.targets.push_back(x.ExpectName());
      x.ExpectOp("(");
      while (!x.IsOp(")")) {
        n.params.push_back(x.ExpectName());
        n.defaults.push_back(x.SkipOp("=") ? x.Cond() : nullptr);
        if (!x.SkipOp(",")) break;
      }
      x.ExpectOp(")");
      x.ExpectEnd();
      n.body = Body({"endmacro"}, &end, &tag);
      tag->ExpectEnd();
      return;
    }
    if (kw == "break" || kw == "continue") {
      n.kind = kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      x.ExpectEnd();
      return;
    }
    if (kw == "generation") {
      n.kind = Node::Kind::kBlock;
      x.ExpectEnd();
      n.body = Body({"endgeneration"}, &end, &tag);
      tag->ExpectEnd();
      return;
    }
    Fail("{% " + kw + " %} is not supported");
  }

  std::vector<Piece> pieces_;
  size_t i_ = 0;
  int line_ = 1;
  int depth_ = 0;
  std::unique_ptr<ExprParser> tag_;  // the tag being parsed (an end tag stays alive for its caller)
};

}  // namespace

std::shared_ptr<const Template> Parse(std::string_view source, const std::string& where) {
  int line = 1;
  try {
    std::vector<Piece> pieces = SplitPieces(source, &line);
    Parser p(std::move(pieces));
    auto t = std::make_shared<Template>();
    t->where = where;
    try {
      std::string end;
      ExprParser* tag = nullptr;
      t->body = p.Body({}, &end, &tag);
    } catch (const TemplateError&) {
      line = p.line();
      throw;
    }
    return t;
  } catch (const TemplateError& e) {
    throw Error(Code::kInvalidArgument, where + " line " + std::to_string(line) + ": " + e.what(), where);
  }
}

}  // namespace burst::jinja
