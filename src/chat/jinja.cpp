// The chat-template renderer's entry: messages and JSON variables become Jinja values, then the
// template is parsed and rendered (the interpreter is in jinja_*.{h,cpp}).
#include "jinja.h"

#include <cerrno>
#include <cstdlib>

#include "../json.h"
#include "jinja_runtime.h"

namespace qkv {

namespace {

using jinja::Value;

// A JSON value as Jinja sees it (what Python's json.loads gives): integers stay ints, other
// numbers are floats, an object keeps its key order and a repeated key keeps its first place
// with its last value.
Value from_json(const Json& j, const std::string& what, int depth) {
  if (depth > jinja::kMaxValueDepth) fail(ErrorCode::BadArgument, what + ": invalid JSON (nested too deeply)");
  switch (j.k) {
    case Json::Null: return Value::none();
    case Json::Bool: return Value::boolean(j.b);
    case Json::Str: return Value::str(j.s);
    case Json::Num: {
      const std::string& t = j.s;
      char* end = nullptr;
      if (t.find_first_of(".eE") == std::string::npos) {
        errno = 0;
        const long long v = std::strtoll(t.c_str(), &end, 10);
        if (errno == 0 && end && *end == 0 && t != "-") return Value::integer(v);
      }
      const double f = std::strtod(t.c_str(), &end);
      if (!end || *end != 0 || t.empty() || t == "-")
        fail(ErrorCode::BadArgument, what + ": invalid JSON (a malformed number '" + t + "')");
      return Value::real(f);
    }
    case Json::Arr: {
      jinja::List l;
      for (const Json& x : j.arr) l.push_back(from_json(x, what, depth + 1));
      return Value::list(std::move(l));
    }
    case Json::Obj: {
      jinja::Dict d;
      std::map<std::string, size_t> at;
      for (const auto& kv : j.obj) {
        Value v = from_json(kv.second, what, depth + 1);
        const auto f = at.find(kv.first);
        if (f != at.end()) {
          d[f->second].second = std::move(v);
        } else {
          at.emplace(kv.first, d.size());
          d.emplace_back(kv.first, std::move(v));
        }
      }
      return Value::dict(std::move(d));
    }
  }
  return Value::none();
}

Value read_json(const std::string& text, const std::string& what) {
  return from_json(parse_json(text, what.c_str(), ErrorCode::BadArgument), what, 0);
}

}  // namespace

std::string render_jinja_chat(const std::string& tmpl, const JinjaChatInput& in) {
  using namespace jinja;
  g_work = 0;
  // Jinja drops one newline at the very end of a template (keep_trailing_newline is off).
  size_t n = tmpl.size();
  if (n > 0 && tmpl[n - 1] == '\n') n -= n > 1 && tmpl[n - 2] == '\r' ? 2 : 1;
  const Body tree = parse_template(tmpl.substr(0, n));
  List msgs;
  for (size_t i = 0; i < in.messages.size(); i++) {
    const JinjaMessage& m = in.messages[i];
    Value d = Value::dict({{"role", Value::str(m.role)}, {"content", Value::str(m.content)}});
    if (!m.fields_json.empty()) {  // tool_calls, name, reasoning_content, ...
      const std::string what = "chat message " + std::to_string(i);
      const Value f = read_json(m.fields_json, what);
      if (f.k != Value::K::Dict) fail(ErrorCode::BadArgument, what + ": its fields must be a JSON object");
      for (const auto& kv : *f.d) {
        if (kv.first == "role" || kv.first == "content")
          fail(ErrorCode::BadArgument, what + ": role and content are not extra fields");
        d.put(kv.first, kv.second);
      }
    }
    msgs.push_back(std::move(d));
  }
  std::map<std::string, Value> g;
  g["messages"] = Value::list(std::move(msgs));
  g["add_generation_prompt"] = Value::boolean(in.add_generation_prompt);
  g["bos_token"] = Value::str(in.bos_token);
  g["eos_token"] = Value::str(in.eos_token);
  for (const char* f : {"raise_exception", "namespace", "range", "strftime_now", "dict"}) g[f] = Value::func(f);
  if (!in.vars_json.empty()) {  // tools, enable_thinking, documents, ...
    const Value vars = read_json(in.vars_json, "chat template variables");
    if (vars.k != Value::K::Dict) fail(ErrorCode::BadArgument, "chat template variables must be a JSON object");
    for (const auto& kv : *vars.d) {
      if (g.count(kv.first))
        fail(ErrorCode::BadArgument,
             "chat template variable '" + kv.first +
                 "' is set by qkv itself (messages, add_generation_prompt, bos_token, eos_token and the functions)");
      g[kv.first] = kv.second;
    }
  }
  Renderer r(std::move(g));
  r.run(tree);
  return std::move(r.out());
}

}  // namespace qkv
