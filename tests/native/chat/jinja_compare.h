// The Jinja2 comparison of test_jinja.cpp, shared with the other chat-template tests.
#pragma once
#include <string>
#include <vector>

#include "chat/jinja.h"

struct JinjaCase {
  const char* tmpl;
  const std::vector<qkv::JinjaMessage>* msgs;
  bool gen;
  std::string vars;  // a JSON object of further template variables, or empty
};

// Renders every case with qkv and with Jinja2 set up as transformers sets it up
// (tests/native/chat/jinja_reference.py), expecting byte-identical text, or a refusal (bad_argument or
// bad_model) where Jinja2 raises; per_template cases make one template (for the messages).
// Returns how many Jinja2 refused.
int compare_with_jinja2(const std::vector<JinjaCase>& cases, size_t per_template);
