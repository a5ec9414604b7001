// Jinja's parser: tag tokens into expression trees (bounded in size and height), pieces into statements.
#include "jinja_syntax.h"

namespace qkv::jinja {

namespace {

// Nodes made by the parser of the current tag: a tag's expression tree is bounded (a chain like
// 1+1+1+... or a.b.c... grows it without nesting, and trees are freed and walked recursively).
constexpr int kMaxTagNodes = 4096;
thread_local int g_tag_nodes = 0;

ExprP node(Expr::T t) {
  if (++g_tag_nodes > kMaxTagNodes) too_much("an expression of more than 4096 parts");
  ExprP e(new Expr);
  e->t = t;
  return e;
}

// Hangs a child under a node, keeping the tree's height bounded at parse time: evaluating,
// walking and freeing a tree recurse as deep as it is high, and a chain (a.b.c..., x|f|g...,
// 1+1+1...) grows it without brackets. Small thread stacks (WebAssembly's workers) must hold that.
int height_of(const Expr* c) { return c ? c->h : 0; }
void grow(Expr* e, const Expr* c) {
  if (height_of(c) + 1 > e->h) {
    e->h = height_of(c) + 1;
    if (e->h > kMaxExprHeight)
      too_much("an expression more than " + std::to_string(kMaxExprHeight) +
               " levels deep (a chain of attributes, filters or operators)");
  }
}
void adopt(Expr* e, ExprP c) {
  grow(e, c.get());
  e->a.push_back(std::move(c));
}
void adopt(const ExprP& e, ExprP c) { adopt(e.get(), std::move(c)); }
void adopt_kw(Expr* e, std::string k, ExprP c) {
  grow(e, c.get());
  e->kw.emplace_back(std::move(k), std::move(c));
}

class Parser {
 public:
  explicit Parser(const std::string& s) : toks_(lex(s)) { g_tag_nodes = 0; }
  bool at_end() const { return toks_[p_].t == Tok::T::End; }
  bool is_name(const char* n) const { return toks_[p_].t == Tok::T::Name && toks_[p_].s == n; }
  bool is_op(const char* o) const { return toks_[p_].t == Tok::T::Op && toks_[p_].s == o; }
  std::string name() {
    if (toks_[p_].t != Tok::T::Name) bad("a name");
    return toks_[p_++].s;
  }
  void expect_op(const char* o) {
    if (!is_op(o)) bad(std::string("'") + o + "'");
    p_++;
  }
  bool accept_op(const char* o) { return is_op(o) ? (p_++, true) : false; }
  bool accept_name(const char* n) { return is_name(n) ? (p_++, true) : false; }
  void expect_end() {
    if (!at_end()) bad("the end of the tag");
  }

  ExprP expr() {
    Depth d(this);
    ExprP e = or_expr();
    if (is_name("if")) {
      p_++;
      ExprP c = node(Expr::T::Cond);
      ExprP cond = or_expr();
      ExprP other = accept_name("else") ? expr() : node(Expr::T::Lit);  // no else: undefined
      adopt(c, std::move(cond));
      adopt(c, std::move(e));
      adopt(c, std::move(other));
      return c;
    }
    return e;
  }
  // A for loop's target list or an expression without a ternary (for 'for x in y if c').
  ExprP or_expr() {
    ExprP e = and_expr();
    while (accept_name("or")) e = bin("or", std::move(e), and_expr());
    return e;
  }
  // The filters of a {% filter f(args) | g %} block, applied to the variable kFilterInput.
  ExprP filter_chain() {
    ExprP e = node(Expr::T::Var);
    e->name = kFilterInput;
    do {
      ExprP f = node(Expr::T::Filter);
      f->name = name();
      adopt(f, std::move(e));
      if (accept_op("(")) call_args(f.get());
      e = std::move(f);
    } while (accept_op("|"));
    return e;
  }

 private:
  struct Depth {
    explicit Depth(Parser* p) : p(p) {
      if (++p->depth_ > kMaxDepth) too_much("expressions nested too deeply");
    }
    ~Depth() { p->depth_--; }
    Parser* p;
  };
  [[noreturn]] void bad(const std::string& want) const {
    const Tok& t = toks_[p_];
    bad_template("expected " + want + ", found " + (t.t == Tok::T::End ? "the end" : "'" + t.s + "'"));
  }
  static ExprP bin(const char* op, ExprP l, ExprP r) {
    ExprP e = node(Expr::T::Bin);
    e->name = op;
    adopt(e, std::move(l));
    adopt(e, std::move(r));
    return e;
  }
  ExprP and_expr() {
    ExprP e = not_expr();
    while (accept_name("and")) e = bin("and", std::move(e), not_expr());
    return e;
  }
  ExprP not_expr() {
    if (accept_name("not")) {
      Depth d(this);
      ExprP e = node(Expr::T::Not);
      adopt(e, not_expr());
      return e;
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = concat();
    for (;;) {
      static const char* const cmp[] = {"==", "!=", "<=", ">=", "<", ">"};
      const char* op = nullptr;
      for (const char* c : cmp)
        if (is_op(c)) op = c;
      if (op) {
        p_++;
        e = bin(op, std::move(e), concat());
      } else if (is_name("in")) {
        p_++;
        e = bin("in", std::move(e), concat());
      } else if (is_name("not") && toks_[p_ + 1].t == Tok::T::Name && toks_[p_ + 1].s == "in") {
        p_ += 2;
        e = bin("not in", std::move(e), concat());
      } else {
        return e;
      }
    }
  }
  ExprP concat() {
    ExprP e = add();
    while (accept_op("~")) e = bin("~", std::move(e), add());
    return e;
  }
  ExprP add() {
    ExprP e = mul();
    for (;;) {
      if (accept_op("+")) e = bin("+", std::move(e), mul());
      else if (accept_op("-")) e = bin("-", std::move(e), mul());
      else return e;
    }
  }
  ExprP mul() {
    ExprP e = unary();
    for (;;) {
      if (accept_op("*")) e = bin("*", std::move(e), unary());
      else if (accept_op("//")) e = bin("//", std::move(e), unary());
      else if (accept_op("/")) e = bin("/", std::move(e), unary());
      else if (accept_op("%")) e = bin("%", std::move(e), unary());
      else return e;
    }
  }
  // As Jinja2 reads it: the filters after a signed operand apply to the signed value (-3|abs is 3).
  ExprP unary(bool with_filter = true) {
    ExprP e;
    if (accept_op("-")) {
      Depth d(this);
      e = node(Expr::T::Neg);
      adopt(e, unary(false));
    } else if (accept_op("+")) {
      Depth d(this);
      e = unary(false);
    } else {
      e = postfix(primary());
    }
    return with_filter ? filtered(std::move(e)) : std::move(e);
  }
  void call_args(Expr* e) {
    if (accept_op(")")) return;
    do {
      if (toks_[p_].t == Tok::T::Name && toks_[p_ + 1].t == Tok::T::Op && toks_[p_ + 1].s == "=") {
        std::string k = name();
        p_++;
        adopt_kw(e, std::move(k), expr());
      } else {
        adopt(e, expr());
      }
    } while (accept_op(","));
    expect_op(")");
  }
  ExprP postfix(ExprP e) {
    for (;;) {
      if (accept_op(".")) {
        std::string n = name();
        if (accept_op("(")) {
          ExprP c = node(Expr::T::Call);
          c->name = n;
          adopt(c, std::move(e));
          call_args(c.get());
          e = std::move(c);
        } else {
          ExprP a = node(Expr::T::Attr);
          a->name = n;
          adopt(a, std::move(e));
          e = std::move(a);
        }
      } else if (accept_op("[")) {
        ExprP lo, hi, step;
        bool slice = false;
        if (!is_op(":")) lo = expr();
        if (accept_op(":")) {
          slice = true;
          if (!is_op(":") && !is_op("]")) hi = expr();
          if (accept_op(":") && !is_op("]")) step = expr();
        }
        expect_op("]");
        ExprP s = node(slice ? Expr::T::Slice : Expr::T::Index);
        adopt(s, std::move(e));
        adopt(s, std::move(lo));
        if (slice) {
          adopt(s, std::move(hi));
          adopt(s, std::move(step));
        }
        e = std::move(s);
      } else if (accept_op("(")) {
        if (e->t != Expr::T::Var) unsupported("only named functions can be called");
        ExprP c = node(Expr::T::Call);
        c->name = e->name;
        adopt(c, nullptr);
        call_args(c.get());
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprP filtered(ExprP e) {
    for (;;) {
      if (accept_op("|")) {
        ExprP f = node(Expr::T::Filter);
        f->name = name();
        adopt(f, std::move(e));
        if (accept_op("(")) call_args(f.get());
        e = std::move(f);
      } else if (is_name("is")) {
        p_++;
        ExprP t = node(Expr::T::Test);
        t->negate = accept_name("not");
        t->name = name();
        adopt(t, std::move(e));
        if (accept_op("(")) {
          call_args(t.get());
        } else if (toks_[p_].t == Tok::T::Str || toks_[p_].t == Tok::T::Int || toks_[p_].t == Tok::T::Float) {
          adopt(t, primary());  // 'is eq 3', 'is divisibleby 2'
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  // The rest of a list or tuple: items separated by commas (one may end it), then `close`.
  void items(Expr* e, const char* close) {
    while (!accept_op(close)) {
      adopt(e, expr());
      if (!accept_op(",")) {
        expect_op(close);
        return;
      }
    }
  }
  ExprP primary() {
    Depth d(this);
    const Tok& t = toks_[p_];
    if (t.t == Tok::T::Str) {
      std::string s = t.s;
      p_++;
      while (toks_[p_].t == Tok::T::Str) s += toks_[p_++].s;  // adjacent literals join
      ExprP e = node(Expr::T::Lit);
      e->lit = Value::str(std::move(s));
      return e;
    }
    if (t.t == Tok::T::Int || t.t == Tok::T::Float) {
      ExprP e = node(Expr::T::Lit);
      e->lit = t.t == Tok::T::Int ? Value::integer(t.i) : Value::real(t.f);
      p_++;
      return e;
    }
    if (t.t == Tok::T::Name) {
      const std::string n = t.s;
      p_++;
      ExprP e = node(Expr::T::Lit);
      if (n == "true" || n == "True") e->lit = Value::boolean(true);
      else if (n == "false" || n == "False") e->lit = Value::boolean(false);
      else if (n == "none" || n == "None") e->lit = Value::none();
      else e->t = Expr::T::Var, e->name = n;
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) {  // () : an empty tuple
        ExprP t = node(Expr::T::ListLit);
        t->negate = true;
        return t;
      }
      ExprP e = expr();
      if (!accept_op(",")) {
        expect_op(")");
        return e;
      }
      ExprP t = node(Expr::T::ListLit);  // a tuple: a list marked as one (what loops, 'in' and filters see is the same)
      t->negate = true;
      adopt(t, std::move(e));
      items(t.get(), ")");
      return t;
    }
    if (accept_op("[")) {
      ExprP e = node(Expr::T::ListLit);
      items(e.get(), "]");
      return e;
    }
    if (accept_op("{")) {
      ExprP e = node(Expr::T::DictLit);
      if (!accept_op("}")) {
        do {
          if (is_op("}")) break;
          adopt(e, expr());
          expect_op(":");
          adopt(e, expr());
        } while (accept_op(","));
        expect_op("}");
      }
      return e;
    }
    bad("a value");
  }

  std::vector<Tok> toks_;
  size_t p_ = 0;
  int depth_ = 0;
};

// Whether an expression or a body reads the variable `n` (outside macros defined inside it).
bool mentions(const Expr* e, const std::string& n) {
  if (!e) return false;
  if (e->t == Expr::T::Var && e->name == n) return true;
  for (const auto& x : e->a)
    if (mentions(x.get(), n)) return true;
  for (const auto& kv : e->kw)
    if (mentions(kv.second.get(), n)) return true;
  return false;
}
bool mentions(const Body& b, const std::string& n) {
  for (const auto& s : b) {
    if (s->t == Stmt::T::Macro) continue;
    if (mentions(s->e.get(), n) || mentions(s->filter.get(), n) || mentions(s->body, n) || mentions(s->else_body, n))
      return true;
    for (const auto& arm : s->arms)
      if (mentions(arm.first.get(), n) || mentions(arm.second, n)) return true;
    for (const auto& pr : s->params)
      if (mentions(pr.second.get(), n)) return true;
  }
  return false;
}

class TreeBuilder {
 public:
  explicit TreeBuilder(const std::vector<Piece>& ps) : ps_(ps) {}
  Body build() {
    Body b = block({});
    if (i_ < ps_.size()) bad_template("'" + head(ps_[i_].body) + "' without its opening tag");
    return b;
  }

 private:
  static std::string head(const std::string& body) {
    Parser p(body);
    return p.at_end() ? std::string() : p.name();
  }
  // Statements up to one whose keyword is in `ends` (left unconsumed).
  Body block(std::initializer_list<const char*> ends) {
    if (++depth_ > kMaxDepth) too_much("blocks nested too deeply");
    Body out;
    while (i_ < ps_.size()) {
      const Piece& pc = ps_[i_];
      if (pc.t == Piece::T::Text) {
        if (!pc.body.empty()) {
          auto s = std::make_unique<Stmt>();
          s->t = Stmt::T::Text;
          s->text = pc.body;
          out.push_back(std::move(s));
        }
        i_++;
        continue;
      }
      if (pc.t == Piece::T::Expr) {
        Parser p(pc.body);
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Out;
        s->e = p.expr();
        p.expect_end();
        out.push_back(std::move(s));
        i_++;
        continue;
      }
      const std::string kw = head(pc.body);
      for (const char* e : ends)
        if (kw == e) {
          depth_--;
          return out;
        }
      i_++;
      Parser p(pc.body);
      p.name();
      if (kw == "if") {
        out.push_back(if_stmt(p));
      } else if (kw == "for") {
        out.push_back(for_stmt(p));
      } else if (kw == "set") {
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Set;
        s->vars.push_back(p.name());
        if (p.accept_op(".")) s->vars.push_back(p.name());
        if (p.accept_op("=")) {
          s->e = p.expr();
          p.expect_end();
        } else {  // {% set name %}...{% endset %}: the rendered body
          p.expect_end();
          s->t = Stmt::T::SetBlock;
          s->body = closed_block("endset", "{% set %}");
        }
        out.push_back(std::move(s));
      } else if (kw == "macro") {
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Macro;
        s->text = p.name();
        p.expect_op("(");
        params(p, s.get());
        p.expect_end();
        const int loops = loops_;
        loops_ = 0;  // a loop around a macro's definition is not around its body
        s->body = closed_block("endmacro", "{% macro %}");
        loops_ = loops;
        s->varargs = mentions(s->body, "varargs");
        s->kwargs = mentions(s->body, "kwargs");
        out.push_back(std::move(s));
      } else if (kw == "call") {
        // {% call(params) name(args) %}body{% endcall %}: the body is the macro's caller().
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::CallBlock;
        if (p.accept_op("(")) params(p, s.get());
        s->e = p.expr();
        if (s->e->t != Expr::T::Call || s->e->a[0]) bad_template("{% call %} needs a macro call");
        p.expect_end();
        const int loops = loops_;
        loops_ = 0;
        s->body = closed_block("endcall", "{% call %}");
        loops_ = loops;
        s->varargs = mentions(s->body, "varargs");
        s->kwargs = mentions(s->body, "kwargs");
        out.push_back(std::move(s));
      } else if (kw == "filter") {  // {% filter f | g(args) %}...{% endfilter %}: the body's text through the filters
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::FilterBlock;
        s->e = p.filter_chain();
        p.expect_end();
        s->body = closed_block("endfilter", "{% filter %}");
        out.push_back(std::move(s));
      } else if (kw == "break" || kw == "continue") {  // Hugging Face enables Jinja's loop controls
        if (loops_ == 0) bad_template("{% " + kw + " %} outside a loop");
        p.expect_end();
        auto s = std::make_unique<Stmt>();
        s->t = kw == "break" ? Stmt::T::Break : Stmt::T::Continue;
        out.push_back(std::move(s));
      } else if (kw == "generation") {
        // Hugging Face's marker of assistant text (for training masks): its body renders as a
        // call block's does, in a scope of its own.
        p.expect_end();
        auto s = std::make_unique<Stmt>();
        s->t = Stmt::T::Generation;
        s->body = closed_block("endgeneration", "{% generation %}");
        out.push_back(std::move(s));
      } else if (kw == "if" || kw == "elif" || kw == "else" || kw == "endif" || kw == "endfor" || kw == "endset" ||
                 kw == "endmacro" || kw == "endcall" || kw == "endfilter" || kw == "endgeneration") {
        bad_template("'" + kw + "' without its opening tag");
      } else {
        unsupported("the '" + kw + "' statement");
      }
    }
    depth_--;
    return out;
  }
  // The statements up to {% end %} (consumed).
  Body closed_block(const char* end, const char* what) {
    Body b = block({end});
    if (i_ >= ps_.size()) bad_template(std::string() + what + " without {% " + end + " %}");
    Parser q(ps_[i_++].body);
    q.name();
    if (!q.at_end()) q.name();  // {% endmacro name %} may repeat the name
    q.expect_end();
    return b;
  }
  // A parameter list after its '(': names with optional '= default'.
  void params(Parser& p, Stmt* s) {
    if (!p.accept_op(")")) {
      do {
        std::string n = p.name();
        ExprP def = p.accept_op("=") ? p.expr() : nullptr;
        s->params.emplace_back(std::move(n), std::move(def));
      } while (p.accept_op(","));
      p.expect_op(")");
    }
  }
  std::unique_ptr<Stmt> if_stmt(Parser& p) {
    auto s = std::make_unique<Stmt>();
    s->t = Stmt::T::If;
    ExprP cond = p.expr();
    p.expect_end();
    for (;;) {
      Body b = block({"elif", "else", "endif"});
      s->arms.emplace_back(std::move(cond), std::move(b));
      if (i_ >= ps_.size()) bad_template("{% if %} without {% endif %}");
      Parser q(ps_[i_++].body);
      const std::string kw = q.name();
      if (kw == "endif") {
        q.expect_end();
        return s;
      }
      cond = kw == "elif" ? q.expr() : nullptr;
      q.expect_end();
      if (kw == "else") {
        Body e = block({"endif"});
        s->arms.emplace_back(nullptr, std::move(e));
        if (i_ >= ps_.size()) bad_template("{% if %} without {% endif %}");
        Parser r(ps_[i_++].body);
        r.name();
        r.expect_end();
        return s;
      }
    }
  }
  std::unique_ptr<Stmt> for_stmt(Parser& p) {
    auto s = std::make_unique<Stmt>();
    s->t = Stmt::T::For;
    s->vars.push_back(p.name());
    if (p.accept_op(",")) s->vars.push_back(p.name());
    if (!p.accept_name("in")) bad_template("expected 'in' in a for loop");
    s->e = p.or_expr();
    if (p.accept_name("if")) s->filter = p.or_expr();
    if (p.accept_name("recursive")) unsupported("recursive loops");
    p.expect_end();
    loops_++;
    s->body = block({"else", "endfor"});
    loops_--;
    if (i_ >= ps_.size()) bad_template("{% for %} without {% endfor %}");
    Parser q(ps_[i_++].body);
    if (q.name() == "else") {
      q.expect_end();
      s->else_body = block({"endfor"});
      if (i_ >= ps_.size()) bad_template("{% for %} without {% endfor %}");
      Parser r(ps_[i_++].body);
      r.name();
    }
    return s;
  }

  const std::vector<Piece>& ps_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // for loops around the statements being read
};

}  // namespace

Body parse_template(const std::string& text) { return TreeBuilder(cut(text)).build(); }

}  // namespace qkv::jinja
