// Copyright 2026 The ufspack Authors.
#include "tree.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "ufspack/text.h"

namespace ufspack {
namespace mount {
namespace {

constexpr uint64_t kDirTag = uint64_t{1} << 63;

unsigned TreeKey(char c) {
  return c == '/' ? 0u
                  : static_cast<unsigned>(static_cast<unsigned char>(c)) + 1;
}

std::string Quoted(std::string_view name) {
  return "'" + EscapeBytes(name) + "'";
}

std::string_view LastComponent(std::string_view name) {
  const size_t slash = name.rfind('/');
  return slash == std::string_view::npos ? name : name.substr(slash + 1);
}

}  // namespace

int CompareTreeOrder(std::string_view a, std::string_view b) {
  auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (ia == a.end()) return ib == b.end() ? 0 : -1;
  if (ib == b.end()) return 1;
  return TreeKey(*ia) < TreeKey(*ib) ? -1 : 1;
}

Status Tree::ValidateName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("empty name");
  if (name.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("name holds a NUL byte");
  }
  if (name.front() == '/')
    return Status::InvalidArgument("name starts with '/'");
  if (name.back() == '/') return Status::InvalidArgument("name ends with '/'");
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view c = name.substr(start, end - start);
    if (c.empty())
      return Status::InvalidArgument("name has an empty component");
    if (c == "." || c == "..") {
      return Status::InvalidArgument("name has a '" + std::string(c) +
                                     "' component");
    }
    if (c.size() > kMaxComponent) {
      return Status::InvalidArgument("name has a component of " +
                                     std::to_string(c.size()) +
                                     " bytes (the host takes at most " +
                                     std::to_string(kMaxComponent) + ")");
    }
    start = end + 1;
  }
  return Status::OK();
}

// Walks the names in tree order with a stack of the directories open on the
// current path, creating directories as their first name arrives and
// recording every (parent, child) pair; Finish() then groups the children
// by parent (a counting sort, stable, so each directory's children keep the
// tree order, which is byte order of their names).
//
// Items 0 .. n-1 are the records; item n + k is empty directory k, which
// walks as a record would but makes its last component a directory too.
class Tree::Builder {
 public:
  Builder(Tree* tree, const std::vector<std::string_view>& empty_dirs)
      : t_(tree), empty_dirs_(empty_dirs) {}

  Status Run() {
    const uint64_t items = t_->names_.size() + empty_dirs_.size();
    for (uint64_t i = 0; i < items; ++i) {
      Status s = ValidateName(NameOf(i));
      if (!s.ok()) return Refuse(i, std::string(s.message()));
    }
    std::vector<uint64_t> order(items);
    std::iota(order.begin(), order.end(), uint64_t{0});
    auto less = [&](uint64_t a, uint64_t b) {
      return CompareTreeOrder(NameOf(a), NameOf(b)) < 0;
    };
    if (!std::is_sorted(order.begin(), order.end(), less)) {
      std::sort(order.begin(), order.end(), less);
    }
    t_->dirs_.assign(1, Dir());  // the root
    stack_.push_back(Frame{0, {}, {}, false, 0});
    for (uint64_t r : order) UFSPACK_RETURN_IF_ERROR(Add(r));
    Finish();
    return Status::OK();
  }

 private:
  struct Frame {
    uint64_t dir = 0;             // index into dirs_
    std::string_view name;        // its component
    std::string_view last_child;  // the child added last, and what it is
    bool last_is_dir = false;
    uint64_t last_record = 0;  // an item under (or of) the last child
  };

  bool IsRecord(uint64_t item) const { return item < t_->names_.size(); }
  std::string_view NameOf(uint64_t item) const {
    return IsRecord(item) ? t_->names_[item]
                          : empty_dirs_[item - t_->names_.size()];
  }
  // "record 7" or "the class 'cats' (no records)".
  std::string What(uint64_t item) const {
    return IsRecord(item)
               ? "record " + std::to_string(item)
               : "the class " + Quoted(NameOf(item)) + " (no records)";
  }

  Status Refuse(uint64_t item, const std::string& why) {
    const std::string what =
        IsRecord(item) ? What(item) + " " + Quoted(NameOf(item)) : What(item);
    return Status::InvalidArgument(
        what + ": " + why + "; a pack with such a name cannot be mounted");
  }

  void Split(std::string_view name) {
    parts_.clear();
    size_t start = 0;
    for (size_t end; (end = name.find('/', start)) != std::string_view::npos;
         start = end + 1) {
      parts_.push_back(name.substr(start, end - start));
    }
    parts_.push_back(name.substr(start));
  }

  Status Add(uint64_t r) {
    Split(NameOf(r));
    // The directories of the path: all its components but the last, and
    // the last too for an empty directory.
    const size_t dirs = IsRecord(r) ? parts_.size() - 1 : parts_.size();
    size_t d = 0;  // directories of the path already open
    while (d + 1 < stack_.size() && d < dirs &&
           stack_[d + 1].name == parts_[d]) {
      ++d;
    }
    stack_.resize(d + 1);
    for (size_t j = d; j < dirs; ++j) {
      Frame& top = stack_.back();
      if (top.last_child == parts_[j] && !top.last_is_dir) {
        return Refuse(r, "its directory " + Quoted(parts_[j]) +
                             " is also the file of " + What(top.last_record));
      }
      const uint64_t dir = t_->dirs_.size();
      Dir node;
      node.parent = top.dir + 1;
      node.name = parts_[j];
      t_->dirs_.push_back(node);
      Link(&top, parts_[j], true, r, kDirTag | dir);
      stack_.push_back(Frame{dir, parts_[j], {}, false, 0});
    }
    if (!IsRecord(r)) return Status::OK();
    Frame& top = stack_.back();
    if (top.last_child == parts_.back()) {
      return Refuse(
          r, top.last_is_dir
                 ? "it is also a directory (of " + What(top.last_record) + ")"
                 : What(top.last_record) + " has the same name");
    }
    Link(&top, parts_.back(), false, r, r);
    return Status::OK();
  }

  void Link(Frame* parent, std::string_view name, bool is_dir, uint64_t r,
            uint64_t child) {
    parent->last_child = name;
    parent->last_is_dir = is_dir;
    parent->last_record = r;
    parents_.push_back(parent->dir);
    kids_.push_back(child);
  }

  void Finish() {
    std::vector<Dir>& dirs = t_->dirs_;
    for (size_t k = 0; k < parents_.size(); ++k) {
      Dir& p = dirs[parents_[k]];
      ++p.child_count;
      if (kids_[k] & kDirTag) ++p.subdirs;
    }
    uint64_t next = 0;
    for (Dir& d : dirs) {
      d.first_child = next;
      next += d.child_count;
    }
    std::vector<uint64_t> filled(dirs.size(), 0);
    t_->children_.resize(kids_.size());
    const uint64_t file_base = dirs.size() + 1;
    for (size_t k = 0; k < parents_.size(); ++k) {
      const uint64_t p = parents_[k];
      const uint64_t kid = kids_[k];
      const uint64_t ino =
          (kid & kDirTag) ? (kid & ~kDirTag) + 1 : file_base + kid;
      t_->children_[dirs[p].first_child + filled[p]++] = ino;
    }
  }

  Tree* t_;
  const std::vector<std::string_view>& empty_dirs_;
  std::vector<Frame> stack_;
  std::vector<std::string_view> parts_;
  std::vector<uint64_t> parents_;  // parents_[k]: dir index of pair k
  std::vector<uint64_t> kids_;     // kids_[k]: record, or kDirTag | dir
};

Status Tree::Build(std::vector<std::string_view> names,
                   const std::vector<std::string_view>& empty_dirs) {
  names_ = std::move(names);
  dirs_.clear();
  children_.clear();
  Builder builder(this, empty_dirs);
  Status s = builder.Run();
  if (!s.ok()) {
    names_.clear();
    dirs_.clear();
    children_.clear();
  }
  return s;
}

std::string_view Tree::NameOf(uint64_t ino) const {
  if (IsDir(ino)) return D(ino).name;
  return LastComponent(names_[RecordOf(ino)]);
}

uint64_t Tree::Lookup(uint64_t dir, std::string_view name) const {
  if (!IsDir(dir)) return 0;
  const Dir& d = D(dir);
  auto first = children_.begin() + static_cast<std::ptrdiff_t>(d.first_child);
  auto last = first + static_cast<std::ptrdiff_t>(d.child_count);
  auto it = std::lower_bound(
      first, last, name,
      [&](uint64_t ino, std::string_view n) { return NameOf(ino) < n; });
  return it != last && NameOf(*it) == name ? *it : 0;
}

}  // namespace mount
}  // namespace ufspack
