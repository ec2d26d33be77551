// Copyright 2026 The ufspack Authors.

#include "json_object.h"

#include <cstdio>

#include "ufspack/text.h"

namespace ufspack {
namespace cli {

// Valid UTF-8 is kept, control characters are escaped, and bytes that are
// not valid UTF-8 become "\udcXX" (Python's surrogateescape), so
// os.fsencode(json.loads(s)) gives the original bytes back.
std::string JsonString(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7f) {
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    size_t len = Utf8SequenceLength(s, n, i);
    if (len == 0) {
      std::snprintf(buf, sizeof(buf), "\\udc%02x", c);
      out += buf;
      ++i;
    } else {
      out.append(bytes.data() + i, len);
      i += len;
    }
  }
  out += "\"";
  return out;
}

JsonObject::Value JsonObject::Value::Fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, x);
  return Value(RawTag{}, buf);
}

JsonObject::Value JsonObject::Value::Raw(std::string json) {
  return Value(RawTag{}, std::move(json));
}

JsonObject& JsonObject::Add(std::initializer_list<Field> fields) {
  for (const Field& f : fields) Add(f.first, f.second);
  return *this;
}

JsonObject& JsonObject::Add(std::string_view key, Value value) {
  if (!body_.empty()) body_ += ',';
  body_ += '"';
  body_ += key;
  body_ += "\":";
  body_ += value.json();
  return *this;
}

JsonArray& JsonArray::Add(const JsonObject::Value& value) {
  if (!body_.empty()) body_ += ',';
  body_ += value.json();
  return *this;
}

std::string JsonObject::Text() const { return "{" + body_ + "}"; }

std::string JsonObject::Line() const { return "{" + body_ + "}\n"; }

}  // namespace cli
}  // namespace ufspack
