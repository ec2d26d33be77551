// Copyright 2026 The ufspack Authors.
//
// AWS's shared config and credentials files (~/.aws/config,
// ~/.aws/credentials), read the way botocore's configparser reads them:
//   - "[name]" section headers; in the config file "[default]" and
//     "[profile name]" are profiles, "[services name]" are services sections
//     and every other section (sso-session, plugins, a "[name]" missing its
//     "profile " prefix) is parsed but not used;
//   - "name = value" (or "name: value") settings, names case-insensitive,
//     whitespace around the delimiter ignored, no inline comments (a '#'
//     after a value is part of the value, as with the AWS CLI);
//   - whole-line comments starting with '#' or ';', blank lines;
//   - a sub-section: "s3 =" with nothing after the '=' followed by indented
//     "name = value" lines, stored as "s3.name".
//
// Secrets: a line that cannot be parsed is never echoed in a message (it
// may be a pasted key).
#ifndef UFSPACK_REMOTE_AWS_SHARED_FILE_H_
#define UFSPACK_REMOTE_AWS_SHARED_FILE_H_

#include <map>
#include <string>
#include <string_view>

#include "ufspack/status.h"

namespace ufspack {
namespace remote {

constexpr char kDefaultProfile[] = "default";

// A setting's value and the line it was read from.
struct Setting {
  std::string value;
  int line = 0;
};

// One section of a shared file.  Nested settings are keyed "parent.name".
struct Section {
  std::string header;  // as written in the file, e.g. "[profile dev]"
  std::map<std::string, Setting> settings;

  // The setting, or nullptr when absent or empty.
  const Setting* Find(const std::string& key) const {
    auto it = settings.find(key);
    if (it == settings.end() || it->second.value.empty()) return nullptr;
    return &it->second;
  }
};

enum class FileKind { kCredentials, kConfig };

// A parsed shared credentials or config file.
class SharedFile {
 public:
  SharedFile(std::string path, FileKind kind)
      : path_(std::move(path)), kind_(kind) {}

  // Reads and parses the file; a missing one is an empty one.  Never blocks
  // (a FIFO at the path is refused, not opened for reading).
  Status Load();

  const std::string& path() const { return path_; }
  bool exists() const { return exists_; }
  // The path, or "(no file: HOME is not set)", for messages.
  std::string Describe() const;

  // The profile `name` (nullptr when the file has none).
  const Section* Profile(const std::string& name) const;
  const Section* Services(const std::string& name) const;
  // Whether the config file has "[name]" (a profile written without its
  // "profile " prefix, which AWS's tools ignore).
  bool HasUnprefixed(const std::string& name) const;

  // "<path>:<line>: " for messages.
  std::string At(int line) const {
    return path_ + ":" + std::to_string(line) + ": ";
  }

 private:
  Status ReadWholeFile(std::string* text);
  const char* Kind() const;
  // The section that "[name]" opens in this file.
  Section* OpenSection(const std::string& name, const std::string& header);
  Status Parse(const std::string& text);
  // One non-blank, non-comment line: a header (switches *section) or a
  // setting of *section (or of its sub-section *parent).
  Status ParseLine(std::string_view line, int line_no, Section** section,
                   std::string* parent);

  std::string path_;
  FileKind kind_;
  bool exists_ = false;
  std::map<std::string, Section> profiles_;
  std::map<std::string, Section> services_;
  std::map<std::string, Section> others_;
};

// Text helpers the settings loaders share.
std::string_view TrimBlanks(std::string_view s);
bool StartsWith(std::string_view s, std::string_view prefix);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_AWS_SHARED_FILE_H_
