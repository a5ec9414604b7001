// Jinja's syntax: template pieces, tag tokens, and the expression and statement trees the parser builds.
#pragma once
#include "jinja_value.h"

namespace qkv::jinja {

struct Piece {
  enum class T { Text, Expr, Stmt } t;
  std::string body;
  size_t at;  // offset in the template, for messages
};

// Cuts the template into text and tags, applying '-' controls, trim_blocks (the newline after
// a statement or comment tag goes) and lstrip_blocks (spaces and tabs from the start of a line
// up to a statement or comment tag go).
std::vector<Piece> cut(const std::string& src);

struct Tok {
  enum class T { Name, Str, Int, Float, Op, End } t;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

// The tokens of one tag's body.
std::vector<Tok> lex(const std::string& s);

struct Expr;
using ExprP = std::unique_ptr<Expr>;
struct Expr {
  enum class T { Lit, Var, Attr, Index, Slice, Call, Filter, Test, Neg, Not, Bin, Cond, ListLit, DictLit } t;
  Value lit;
  std::string name;      // Var, Attr, Call (method or function), Filter, Test, Bin (operator)
  std::vector<ExprP> a;  // operands; Call/Filter/Test: a[0] is the object (null for plain calls), then arguments
  std::vector<std::pair<std::string, ExprP>> kw;  // keyword arguments
  bool negate = false;                            // Test: 'is not'; ListLit: a tuple
  int h = 1;                                      // the height of the tree under this node
};

// The name a {% filter %} block's text goes under (no template can spell it).
const char* const kFilterInput = "\x01filter";

using Body = std::vector<std::unique_ptr<Stmt>>;
struct Stmt {
  enum class T { Text, Out, If, For, Set, SetBlock, Macro, CallBlock, Break, Continue, FilterBlock, Generation } t;
  std::string text;                          // Text; Macro: its name
  ExprP e;                                   // Out, Set value, For iterable; CallBlock: the macro call
  std::vector<std::pair<ExprP, Body>> arms;  // If: condition (null for else) and body
  std::vector<std::string> vars;             // For: loop names; Set, SetBlock: target name [, attribute]
  ExprP filter;                              // For: 'if' condition
  Body body, else_body;                      // For; SetBlock, Macro, CallBlock: the body
  // Macro and CallBlock (caller's parameters): parameter names and defaults (null: none), and
  // whether the body reads varargs / kwargs (Jinja then takes extra arguments into them).
  std::vector<std::pair<std::string, ExprP>> params;
  bool varargs = false, kwargs = false;
};

// The statement tree of a whole template (its text without the final newline Jinja drops).
Body parse_template(const std::string& text);

}  // namespace qkv::jinja
