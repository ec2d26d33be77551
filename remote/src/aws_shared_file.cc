// Copyright 2026 The ufspack Authors.
//
// The shared config and credentials file parser (see aws_shared_file.h).
#include "aws_shared_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "credentials.h"

namespace ufspack {
namespace remote {

namespace {

// Shared config files are a few KiB; anything larger is not one.
constexpr size_t kMaxFileBytes = size_t{1} << 20;

}  // namespace

std::string_view TrimBlanks(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Status SharedFile::Load() {
  if (path_.empty()) return Status::OK();
  std::string text;
  Status s = ReadWholeFile(&text);
  if (!s.ok() || !exists_) return s;
  return Parse(text);
}

std::string SharedFile::Describe() const {
  return path_.empty() ? "(no file: HOME is not set)" : path_;
}

const Section* SharedFile::Profile(const std::string& name) const {
  auto it = profiles_.find(name);
  return it == profiles_.end() ? nullptr : &it->second;
}

const Section* SharedFile::Services(const std::string& name) const {
  auto it = services_.find(name);
  return it == services_.end() ? nullptr : &it->second;
}

bool SharedFile::HasUnprefixed(const std::string& name) const {
  return others_.count(name) != 0;
}

Status SharedFile::ReadWholeFile(std::string* text) {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::OK();
    return Status::InvalidArgument(path_ +
                                   ": cannot open: " + std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(
        path_ + ": expected a regular file (an AWS " + Kind() + " file)");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    ::close(fd);
    return Status::InvalidArgument(
        path_ + ": expected an AWS " + Kind() + " file of at most " +
        std::to_string(kMaxFileBytes) + " bytes; found " +
        std::to_string(st.st_size) + " bytes");
  }
  text->clear();
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Status::InvalidArgument(path_ +
                                     ": cannot read: " + std::strerror(err));
    }
    if (n == 0) break;
    text->append(buf, static_cast<size_t>(n));
    if (text->size() > kMaxFileBytes) {
      ::close(fd);
      return Status::InvalidArgument(path_ + ": grew past " +
                                     std::to_string(kMaxFileBytes) +
                                     " bytes while being read");
    }
  }
  ::close(fd);
  exists_ = true;
  return Status::OK();
}

const char* SharedFile::Kind() const {
  return kind_ == FileKind::kConfig ? "config" : "credentials";
}

Section* SharedFile::OpenSection(const std::string& name,
                                 const std::string& header) {
  std::map<std::string, Section>* table = &others_;
  std::string key = name;
  if (kind_ == FileKind::kCredentials || name == kDefaultProfile) {
    table = &profiles_;
  } else if (StartsWith(name, "profile ") || StartsWith(name, "profile\t")) {
    table = &profiles_;
    key = std::string(TrimBlanks(std::string_view(name).substr(8)));
  } else if (StartsWith(name, "services ") || StartsWith(name, "services\t")) {
    table = &services_;
    key = std::string(TrimBlanks(std::string_view(name).substr(9)));
  }
  Section& section = (*table)[key];
  if (section.header.empty()) section.header = header;
  return &section;
}

Status SharedFile::Parse(const std::string& text) {
  std::string_view rest(text);
  if (StartsWith(rest, "\xEF\xBB\xBF")) rest.remove_prefix(3);  // BOM
  Section* section = nullptr;
  std::string parent;  // the "name =" that opened the current sub-section
  int line_no = 0;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string_view t = TrimBlanks(line);
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    UFSPACK_RETURN_IF_ERROR(ParseLine(line, line_no, &section, &parent));
  }
  return Status::OK();
}

Status SharedFile::ParseLine(std::string_view line, int line_no,
                             Section** section, std::string* parent) {
  const std::string_view t = TrimBlanks(line);
  const bool indented = line[0] == ' ' || line[0] == '\t';
  if (!indented && t[0] == '[') {
    if (t.back() != ']') {
      return Status::InvalidArgument(
          At(line_no) + "expected ']' at the end of the section header");
    }
    const std::string name(TrimBlanks(t.substr(1, t.size() - 2)));
    if (name.empty()) {
      return Status::InvalidArgument(
          At(line_no) + "expected a section name between '[' and ']'");
    }
    *section = OpenSection(name, std::string(t));
    parent->clear();
    return Status::OK();
  }
  if (*section == nullptr) {
    return Status::InvalidArgument(
        At(line_no) +
        "expected a section header such as [default] before the first "
        "setting");
  }
  // The line is not echoed: a malformed line may be a pasted secret.
  const size_t eq = t.find_first_of("=:");
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument(
        At(line_no) + "expected 'name = value', a [section] header or a " +
        "comment; found a line without '=' (not shown: it may hold a "
        "secret)");
  }
  const std::string name = AsciiLower(std::string(TrimBlanks(t.substr(0, eq))));
  if (name.empty()) {
    return Status::InvalidArgument(
        At(line_no) + "expected a setting name before '" + t[eq] + "'");
  }
  Setting setting{std::string(TrimBlanks(t.substr(eq + 1))), line_no};
  if (indented && !parent->empty()) {
    (*section)->settings[*parent + "." + name] = std::move(setting);
    return Status::OK();
  }
  // An empty value may open a sub-section of indented lines.
  *parent = setting.value.empty() ? name : std::string();
  (*section)->settings[name] = std::move(setting);
  return Status::OK();
}

}  // namespace remote
}  // namespace ufspack
