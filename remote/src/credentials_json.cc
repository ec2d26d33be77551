// Copyright 2026 The ufspack Authors.
//
// The JSON and times of credential documents (see credentials_json.h).
#include "credentials_json.h"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <utility>

namespace ufspack {
namespace remote {
namespace {

// --- JSON (just enough for credential documents)

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}

  Status Object(std::map<std::string, std::string>* out) {
    Space();
    if (!Eat('{')) return Error("expected '{'");
    Space();
    if (Eat('}')) return End();
    for (;;) {
      Space();
      std::string key;
      UFSPACK_RETURN_IF_ERROR(String(&key));
      Space();
      if (!Eat(':')) return Error("expected ':'");
      Space();
      std::string value;
      bool scalar = false;
      UFSPACK_RETURN_IF_ERROR(Value(&value, &scalar, 0));
      if (scalar) (*out)[key] = std::move(value);
      Space();
      if (Eat(',')) continue;
      if (Eat('}')) return End();
      return Error("expected ',' or '}'");
    }
  }

 private:
  Status End() {
    Space();
    return i_ == s_.size() ? Status::OK()
                           : Error("expected the end after the object");
  }
  Status Error(const char* what) const {
    return Status::InvalidArgument(std::string("invalid JSON at byte ") +
                                   std::to_string(i_) + ": " + what);
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' ||
                              s_[i_] == '\n' || s_[i_] == '\r')) {
      ++i_;
    }
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  static void Utf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  bool Hex4(uint32_t* v) {
    if (s_.size() - i_ < 4) return false;
    *v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      *v <<= 4;
      if (c >= '0' && c <= '9') {
        *v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        *v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        *v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    return true;
  }
  Status String(std::string* out) {
    if (!Eat('"')) return Error("expected a string");
    for (;;) {
      if (i_ >= s_.size()) return Error("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return Status::OK();
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in a string");
      }
      if (c != '\\') {
        out->push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return Error("unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out->push_back(e);
          break;
        case 'b':
          out->push_back('\b');
          break;
        case 'f':
          out->push_back('\f');
          break;
        case 'n':
          out->push_back('\n');
          break;
        case 'r':
          out->push_back('\r');
          break;
        case 't':
          out->push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return Error("bad \\u escape");
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo = 0;
            if (!Eat('\\') || !Eat('u') || !Hex4(&lo) || lo < 0xDC00 ||
                lo > 0xDFFF) {
              return Error("bad surrogate pair");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          Utf8(cp, out);
          break;
        }
        default:
          return Error("bad escape");
      }
    }
  }
  Status Value(std::string* out, bool* scalar, int depth) {
    if (depth > 32) return Error("nested too deeply");
    if (i_ >= s_.size()) return Error("expected a value");
    const char c = s_[i_];
    if (c == '"') {
      *scalar = true;
      return String(out);
    }
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++i_;
      Space();
      if (Eat(close)) return Status::OK();
      for (;;) {
        Space();
        std::string ignored;
        bool ignored_scalar = false;
        if (c == '{') {
          UFSPACK_RETURN_IF_ERROR(String(&ignored));
          Space();
          if (!Eat(':')) return Error("expected ':'");
          Space();
          ignored.clear();
        }
        UFSPACK_RETURN_IF_ERROR(Value(&ignored, &ignored_scalar, depth + 1));
        Space();
        if (Eat(',')) continue;
        if (Eat(close)) return Status::OK();
        return Error("expected ',' or a closing bracket");
      }
    }
    for (const char* word : {"true", "false", "null"}) {
      const size_t n = std::strlen(word);
      if (s_.compare(i_, n, word) == 0) {
        i_ += n;
        *scalar = word[0] != 'n';
        if (*scalar) *out = word;
        return Status::OK();
      }
    }
    const size_t begin = i_;
    while (i_ < s_.size() && (std::strchr("+-.eE", s_[i_]) != nullptr ||
                              (s_[i_] >= '0' && s_[i_] <= '9'))) {
      ++i_;
    }
    if (i_ == begin) return Error("expected a value");
    *scalar = true;
    *out = s_.substr(begin, i_ - begin);
    return Status::OK();
  }

  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace

// Reads a credentials document's fields.  `id`, `secret`, `token` and
// `expiration` are member names; `what` names the source for messages.
Status CredentialsFromJson(const std::string& body, const std::string& what,
                           const char* token_field, TimedCredentials* out) {
  std::map<std::string, std::string> m;
  Status s = ParseJsonObject(body, &m);
  if (!s.ok()) {
    return Status::InvalidArgument(
        what + ": expected a JSON object of credentials; found " +
        std::string(s.message()) +
        " (the output is not shown: it may hold "
        "secrets)");
  }
  for (const char* field : {"AccessKeyId", "SecretAccessKey"}) {
    auto it = m.find(field);
    if (it == m.end() || it->second.empty()) {
      return Status::InvalidArgument(what + ": expected a non-empty \"" +
                                     field + "\" member; found none");
    }
  }
  TimedCredentials c;
  c.credentials.access_key_id = m["AccessKeyId"];
  c.credentials.secret_access_key = m["SecretAccessKey"];
  auto token = m.find(token_field);
  if (token != m.end()) c.credentials.session_token = token->second;
  auto exp = m.find("Expiration");
  if (exp != m.end() && !exp->second.empty()) {
    if (!ParseIso8601(exp->second, &c.expiration)) {
      return Status::InvalidArgument(
          what +
          ": expected \"Expiration\" as an ISO 8601 time such as "
          "2026-11-27T10:42:30Z; found '" +
          exp->second + "'");
    }
  }
  *out = std::move(c);
  return Status::OK();
}

Status ParseJsonObject(const std::string& json,
                       std::map<std::string, std::string>* members) {
  members->clear();
  return JsonParser(json).Object(members);
}

bool ParseIso8601(const std::string& t, int64_t* seconds) {
  int y, mo, d, h, mi, s, n = 0;
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi,
                  &s, &n) != 6 ||
      n != 19) {
    return false;
  }
  size_t i = 19;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  }
  int64_t offset = 0;
  if (i < t.size() && (t[i] == 'Z' || t[i] == 'z')) {
    ++i;
  } else if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
    int oh = 0, om = 0, m = 0;
    if (std::sscanf(t.c_str() + i + 1, "%2d:%2d%n", &oh, &om, &m) != 2 ||
        m != 5) {
      return false;
    }
    offset = (t[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    i += 6;
  } else {
    return false;
  }
  if (i != t.size() || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
      mi > 59 || s > 60) {
    return false;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  *seconds = static_cast<int64_t>(::timegm(&tm)) - offset;
  return true;
}

}  // namespace remote
}  // namespace ufspack
