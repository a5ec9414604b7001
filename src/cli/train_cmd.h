// The native CLI's training commands.
#pragma once
#include <string>
#include <vector>

namespace qkv {

// qkv train CONFIG [key=value ...]
int cmd_train(const std::vector<std::string>& args);
// qkv train-tokenizer TEXT --vocab N --out tok.gguf|tok.bin
int cmd_train_tokenizer(const std::vector<std::string>& args);
const char* train_usage();

}  // namespace qkv
