// A JSON value as an error message quotes it. nlohmann's dump() recurses once per nesting level,
// so quoting a 100,000-deep array from a crafted config.json or safetensors header overflowed the
// stack; a container is named by its kind and size instead, and a long scalar is cut.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace vkspec {

inline std::string json_excerpt(const nlohmann::json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size()) + " item(s)";
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " key(s)";
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace vkspec
