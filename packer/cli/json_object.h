// Copyright 2026 The ufspack Authors.
//
// JsonObject: the one-line JSON object a command prints with --json, built
// from (key, value) fields instead of concatenated text, so that commas,
// quoting and escaping are written once.  Keys are names the code gives
// (plain ASCII, not escaped); string values are raw bytes, encoded by
// JsonString (valid UTF-8 kept, other bytes as Python's surrogateescape).
//
// Thread safety: none; an object is one command's.
#ifndef UFSPACK_CLI_JSON_OBJECT_H_
#define UFSPACK_CLI_JSON_OBJECT_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ufspack {
namespace cli {

// A JSON string literal for raw bytes (see the file comment).
std::string JsonString(std::string_view bytes);

class JsonObject {
 public:
  // One value, already encoded: bytes become a JSON string, integers and
  // bools their literals.
  class Value {
   public:
    Value(std::string_view bytes) : json_(JsonString(bytes)) {}    // NOLINT
    Value(const std::string& bytes) : json_(JsonString(bytes)) {}  // NOLINT
    Value(const char* bytes) : json_(JsonString(bytes)) {}         // NOLINT
    Value(bool b) : json_(b ? "true" : "false") {}                 // NOLINT
    template <class T,
              std::enable_if_t<
                  std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
    Value(T n) : json_(std::to_string(n)) {}  // NOLINT
    // A number with `digits` decimals ("0.125").
    static Value Fixed(double x, int digits);
    // Text that is already JSON (an array or an object).
    static Value Raw(std::string json);
    static Value Null() { return Raw("null"); }

    const std::string& json() const { return json_; }

   private:
    struct RawTag {};
    Value(RawTag, std::string json) : json_(std::move(json)) {}
    std::string json_;
  };
  using Field = std::pair<std::string_view, Value>;

  JsonObject() = default;
  JsonObject(std::initializer_list<Field> fields) { Add(fields); }

  // Appends the fields in order; a key is not checked against earlier ones.
  JsonObject& Add(std::initializer_list<Field> fields);
  JsonObject& Add(std::string_view key, Value value);

  // "{...}\n", as the commands print it.
  std::string Line() const;
  // "{...}", to nest as a Value::Raw.
  std::string Text() const;

 private:
  std::string body_;
};

// A JSON array of values, for a field of a JsonObject (its Text() as a
// Value::Raw).
class JsonArray {
 public:
  JsonArray& Add(const JsonObject::Value& value);
  // "[...]".
  std::string Text() const { return "[" + body_ + "]"; }

 private:
  std::string body_;
};

}  // namespace cli
}  // namespace ufspack

#endif  // UFSPACK_CLI_JSON_OBJECT_H_
