// Copyright 2026 The ufspack Authors.
#include "http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

namespace ufspack {
namespace remote {
namespace {

std::atomic<uint64_t> g_requests{0};
std::atomic<uint64_t> g_bytes{0};
std::atomic<uint64_t> g_retries{0};
std::atomic<uint64_t> g_coalesced{0};

constexpr size_t kMaxBody = 16 << 20;  // bodies without a destination

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// A multi handle, its connection cache and its idle easy handles, used by
// one RunTransfers() call at a time.
struct Session {
  pid_t pid = ::getpid();
  CURLM* multi = nullptr;
  std::vector<CURL*> idle;

  Session() {
    multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 128L);
  }
  ~Session() {
    if (pid != ::getpid()) return;  // a parent's: never touch it
    for (CURL* e : idle) curl_easy_cleanup(e);
    curl_multi_cleanup(multi);
  }
  CURL* Easy() {
    if (idle.empty()) return curl_easy_init();
    CURL* e = idle.back();
    idle.pop_back();
    curl_easy_reset(e);
    return e;
  }
};

class SessionPool {
 public:
  // Sessions kept for the next calls, each with its open connections: as
  // many as calls run at once (the mount serves up to 64 reads at once,
  // each a call).  One freed beyond this closes its connections, and the
  // next call opens new ones (TCP and TLS handshakes): with 32 threads
  // reading and 16 kept, half the calls of every round did.
  static constexpr size_t kMaxIdleSessions = 128;

  std::unique_ptr<Session> Acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const pid_t pid = ::getpid();
      if (pid_ != pid) {
        // Forked: the parent's sessions share its sockets and TLS state.
        // Leak them rather than close or use them.
        for (auto& s : free_) (void)s.release();
        free_.clear();
        pid_ = pid;
      }
      if (!free_.empty()) {
        std::unique_ptr<Session> s = std::move(free_.back());
        free_.pop_back();
        return s;
      }
    }
    GlobalInit();
    return std::make_unique<Session>();
  }
  void Release(std::unique_ptr<Session> s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (s->pid == pid_ && free_.size() < kMaxIdleSessions) {
      free_.push_back(std::move(s));
    } else if (s->pid != ::getpid()) {
      (void)s.release();
    }
  }

 private:
  std::mutex mu_;
  pid_t pid_ = ::getpid();
  std::vector<std::unique_ptr<Session>> free_;
};

SessionPool& Pool() {
  static SessionPool* pool = new SessionPool();  // never destroyed
  return *pool;
}

bool StartsWithNoCase(const char* line, size_t len, const char* prefix) {
  const size_t n = std::strlen(prefix);
  if (len < n) return false;
  for (size_t i = 0; i < n; ++i) {
    char c = line[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

std::string HeaderValue(const char* line, size_t len, size_t name_len) {
  size_t b = name_len, e = len;
  while (b < e && (line[b] == ' ' || line[b] == '\t')) ++b;
  while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' ||
                   line[e - 1] == ' ' || line[e - 1] == '\t')) {
    --e;
  }
  return std::string(line + b, e - b);
}

// The text between <tag> and </tag> in an S3 XML error body.
std::string XmlField(const std::string& body, const std::string& tag) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t b = body.find(open);
  if (b == std::string::npos) return "";
  const size_t e = body.find(close, b + open.size());
  if (e == std::string::npos) return "";
  std::string v = body.substr(b + open.size(), e - b - open.size());
  if (v.size() > 300) v = v.substr(0, 300) + "...";
  return v;
}

bool Cancelled(const Transfer& t) {
  return t.cancel != nullptr && t.cancel->load(std::memory_order_relaxed);
}

struct Active {
  Transfer* t = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {0};
  bool too_long = false;
  // Start() refused the transfer before libcurl saw it (the signer failed,
  // or a header was unsafe); t->status says why.
  bool refused = false;
  std::chrono::steady_clock::time_point first_start;
  bool started = false;
};

size_t OnWrite(char* p, size_t size, size_t n, void* user) {
  Active* a = static_cast<Active*>(user);
  Transfer* t = a->t;
  const size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &code);
  g_bytes.fetch_add(len, std::memory_order_relaxed);
  if (code >= 200 && code < 300 && t->dst != nullptr) {
    if (len > t->capacity - t->received) {
      a->too_long = true;
      return 0;
    }
    std::memcpy(t->dst + t->received, p, len);
    t->received += len;
    return len;
  }
  if (len > kMaxBody - t->body.size()) {
    a->too_long = true;
    return 0;
  }
  t->body.append(p, len);
  if (code >= 200 && code < 300) t->received += len;
  return len;
}

size_t OnHeader(char* line, size_t size, size_t n, void* user) {
  Active* a = static_cast<Active*>(user);
  Transfer* t = a->t;
  const size_t len = size * n;
  if (StartsWithNoCase(line, len, "http/")) {
    // A new response (after a redirect or 100 Continue).
    t->etag.clear();
    t->content_range.clear();
  } else if (StartsWithNoCase(line, len, "etag:")) {
    t->etag = HeaderValue(line, len, 5);
  } else if (StartsWithNoCase(line, len, "content-range:")) {
    t->content_range = HeaderValue(line, len, 14);
  }
  return len;
}

// libcurl's progress callback: stops a cancelled transfer, counts the
// body bytes sent.
int OnProgress(void* user, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/,
               curl_off_t /*ultotal*/, curl_off_t ulnow) {
  Transfer* t = static_cast<Active*>(user)->t;
  if (t->sent != nullptr) {
    t->sent->store(static_cast<uint64_t>(ulnow), std::memory_order_relaxed);
  }
  // Once the whole body is sent the server may already have stored it:
  // stopping then would leave the outcome unknown, so the answer is awaited.
  if (t->upload != nullptr && static_cast<uint64_t>(ulnow) >= t->upload_size) {
    return 0;
  }
  return Cancelled(*t) ? 1 : 0;
}

// "bytes a-b/total" or "bytes */total": sets *first and *total (total
// UINT64_MAX when "*").
bool ParseContentRange(const std::string& v, uint64_t* first, uint64_t* total) {
  if (v.compare(0, 6, "bytes ") != 0) return false;
  const size_t slash = v.find('/');
  if (slash == std::string::npos) return false;
  const std::string range = v.substr(6, slash - 6);
  const std::string tot = v.substr(slash + 1);
  char* end = nullptr;
  if (tot == "*") {
    *total = UINT64_MAX;
  } else {
    *total = std::strtoull(tot.c_str(), &end, 10);
    if (end == tot.c_str() || *end != '\0') return false;
  }
  if (range == "*") {
    *first = 0;
    return true;
  }
  *first = std::strtoull(range.c_str(), &end, 10);
  return end != range.c_str() && *end == '-';
}

std::string Describe(const Transfer& t) {
  std::string d = t.method + " " + t.display;
  if (t.has_range) {
    d += " bytes=" + std::to_string(t.range_begin) + "-" +
         std::to_string(t.range_begin + t.range_length - 1);
  }
  return d;
}

std::string HttpWhat(const Transfer& t) {
  std::string what = "HTTP " + std::to_string(t.http_code);
  const std::string code = XmlField(t.body, "Code");
  const std::string message = XmlField(t.body, "Message");
  if (!code.empty()) what += " " + code;
  if (!message.empty()) what += ": " + message;
  return what;
}

bool RetryableCurl(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

// Sets t->status (and t->retryable) from a finished attempt.
void Classify(Active* a, CURLcode rc) {
  Transfer* t = a->t;
  t->retryable = false;
  curl_easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &t->http_code);
  if (rc != CURLE_OK) {
    if (rc == CURLE_ABORTED_BY_CALLBACK && Cancelled(*t)) {
      t->status = Status::Aborted(Describe(*t) + ": cancelled");
      return;
    }
    if (a->too_long && t->has_range && t->http_code == 200) {
      t->status = Status::NotSupported(
          Describe(*t) +
          ": the server ignored the Range header (HTTP 200 with the whole "
          "object); ufspack needs byte ranges");
      return;
    }
    if (a->too_long) {
      t->status = Status::Corruption(
          Describe(*t) + ": the response is longer than asked for (" +
          std::to_string(t->dst ? t->capacity : kMaxBody) + " bytes)");
      return;
    }
    std::string what = curl_easy_strerror(rc);
    if (a->errbuf[0] != '\0') what += " (" + std::string(a->errbuf) + ")";
    t->retryable = RetryableCurl(rc);
    if (rc == CURLE_OUT_OF_MEMORY) {
      // libcurl holds each response header line in a buffer capped at
      // 100 KiB and reports a longer one as out of memory, saying nothing
      // else: name the likely cause instead of blaming this machine.
      what =
          "the response header is too large (libcurl refuses a header line "
          "over 100 KiB and reports it as \"" +
          what + "\"); the server sent an oversized or malformed header";
    }
    if (rc == CURLE_PEER_FAILED_VERIFICATION) {
      what +=
          "; the server's certificate is not trusted (a CA file can be "
          "named by AWS_CA_BUNDLE for s3://, CURL_CA_BUNDLE or "
          "SSL_CERT_FILE for https://)";
    }
    t->status = Status::IOError(Describe(*t) + ": " + what);
    return;
  }
  const long code = t->http_code;
  if (code >= 200 && code < 300) {
    if (!t->expect_etag.empty() && !t->etag.empty() &&
        t->etag != t->expect_etag) {
      t->status = Status::Corruption(
          Describe(*t) + ": the object changed since it was opened (ETag " +
          t->expect_etag + ", now " + t->etag +
          "): reopen the pack to read the new version");
      return;
    }
    if (t->method == "HEAD") {
      curl_off_t length = -1;
      curl_easy_getinfo(a->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      if (length >= 0) t->object_size = static_cast<uint64_t>(length);
      t->status = Status::OK();
      return;
    }
    if (t->has_range) {
      uint64_t first = 0, total = UINT64_MAX;
      if (code == 206) {
        if (!ParseContentRange(t->content_range, &first, &total) ||
            first != t->range_begin) {
          t->status = Status::IOError(Describe(*t) + ": bad Content-Range '" +
                                      t->content_range + "'");
          return;
        }
        t->object_size = total;
        uint64_t expected = t->range_length;
        if (total != UINT64_MAX) {
          expected = total <= t->range_begin
                         ? 0
                         : std::min(expected, total - t->range_begin);
        }
        if (t->received < expected) {
          t->retryable = true;
          t->status =
              Status::IOError(Describe(*t) + ": short body: expected " +
                              std::to_string(expected) + " bytes, received " +
                              std::to_string(t->received));
          return;
        }
      } else if (t->range_begin == 0) {
        t->object_size = t->received;  // the whole object, and it fit
      } else {
        t->status = Status::NotSupported(
            Describe(*t) + ": the server ignored the Range header (HTTP " +
            std::to_string(code) + "); ufspack needs byte ranges");
        return;
      }
    } else if (t->method == "GET") {
      t->object_size = t->received;
    }
    t->status = Status::OK();
    return;
  }
  const std::string what = HttpWhat(*t);
  const std::string s3code = XmlField(t->body, "Code");
  if (code == 404) {
    t->status = Status::NotFound(Describe(*t) + ": not found (" + what + ")");
  } else if (code == 403 || code == 401) {
    t->status = Status::IOError(
        Describe(*t) + ": access denied (" + what +
        "): check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and "
        "the bucket's policy");
  } else if (code == 412) {
    t->status = Status::Corruption(Describe(*t) +
                                   ": the object changed since it was "
                                   "opened (" +
                                   what + "): reopen the pack");
  } else if (code == 416) {
    uint64_t first = 0, total = UINT64_MAX;
    if (ParseContentRange(t->content_range, &first, &total)) {
      t->object_size = total;
    }
    t->status = Status::OutOfRange(Describe(*t) + ": range not satisfiable (" +
                                   what + ")");
  } else {
    t->retryable = code == 408 || code == 429 || code == 500 || code == 502 ||
                   code == 503 || code == 504 ||
                   (code == 400 && s3code == "RequestTimeout");
    t->status = Status::IOError(Describe(*t) + ": " + what);
  }
}

// `s` with control characters as \xHH, for naming a header in a message.
std::string Printable(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out.push_back(c);
      continue;
    }
    char hex[8];
    std::snprintf(hex, sizeof(hex), "\\x%02x", u);
    out += hex;
  }
  return out;
}

// OK when no header name or value of `headers` holds CR, LF or NUL.
// libcurl sends each header line as given: CR or LF would end the line
// and start a header of the value's choosing (whatever the value's
// source), NUL would cut it short.  The error names the request and the
// header, never the value (it may be a token).
Status CheckHeaders(const Transfer& t, const std::vector<Header>& headers) {
  static const std::string kBreaks("\r\n\0", 3);
  for (const Header& h : headers) {
    const bool in_name = h.first.find_first_of(kBreaks) != std::string::npos;
    const std::string& part = in_name ? h.first : h.second;
    const size_t bad = part.find_first_of(kBreaks);
    if (bad == std::string::npos) continue;
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02x",
                  static_cast<unsigned char>(part[bad]));
    return Status::InvalidArgument(
        Describe(t) + ": header '" + Printable(h.first) + "': expected " +
        (in_name ? "a name" : "a value") + " without CR, LF or NUL; found " +
        byte + " at offset " + std::to_string(bad) +
        (in_name ? "" : " (the value is not shown)") + "; not sent");
  }
  return Status::OK();
}

// Starts an attempt of a->t; false when it is refused before libcurl (the
// signer fails: no usable credentials; or a header holds CR, LF or NUL:
// a->refused, t->status says why) or libcurl cannot make a handle (out of
// memory).
bool Start(Session* s, Active* a, const RemoteOptions& options) {
  Transfer* t = a->t;
  std::vector<Header> headers = t->headers;
  a->refused = false;
  if (t->sign) {
    Status signed_ok = t->sign(*t, &headers);
    if (!signed_ok.ok()) {
      t->status = signed_ok.WithContext(Describe(*t));
      a->refused = true;
      return false;
    }
  }
  Status safe = CheckHeaders(*t, headers);
  if (!safe.ok()) {
    t->status = std::move(safe);
    a->refused = true;
    return false;
  }
  CURL* e = s->Easy();
  a->easy = e;
  if (e == nullptr) return false;
  a->too_long = false;
  a->errbuf[0] = '\0';
  t->received = 0;
  t->body.clear();
  t->etag.clear();
  t->content_range.clear();
  t->http_code = 0;
  t->object_size = UINT64_MAX;
  if (!a->started) {
    a->started = true;
    a->first_start = std::chrono::steady_clock::now();
  }
  curl_easy_setopt(e, CURLOPT_URL, t->url.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PRIVATE, a);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnWrite);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, a);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, a);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, a->errbuf);
  if (t->cancel != nullptr || t->sent != nullptr) {
    if (t->sent != nullptr) t->sent->store(0, std::memory_order_relaxed);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, a);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  }
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options.connect_timeout_ms));
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                   static_cast<long>(options.stall_seconds));
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                   static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  if (!t->ca_bundle.empty()) {
    curl_easy_setopt(e, CURLOPT_CAINFO, t->ca_bundle.c_str());
  }
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, t->follow_redirects ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
  if (t->method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (t->method != "GET") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, t->method.c_str());
  }
  if (t->upload != nullptr || t->method == "PUT" || t->method == "POST") {
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->upload ? t->upload : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(t->upload_size));
  }
  std::string range;
  if (t->has_range) {
    range = std::to_string(t->range_begin) + "-" +
            std::to_string(t->range_begin + t->range_length - 1);
    curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());  // copied by curl
  }
  curl_slist* list = curl_slist_append(nullptr, "Expect:");
  for (const Header& h : headers) {
    list = curl_slist_append(list, (h.first + ": " + h.second).c_str());
  }
  a->headers = list;
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
  if (t->attempts > 0) g_retries.fetch_add(1, std::memory_order_relaxed);
  ++t->attempts;
  g_requests.fetch_add(1, std::memory_order_relaxed);
  if (curl_multi_add_handle(s->multi, e) != CURLM_OK) {
    curl_slist_free_all(a->headers);
    a->headers = nullptr;
    s->idle.push_back(e);
    a->easy = nullptr;
    return false;
  }
  return true;
}

void Finish(Session* s, Active* a) {
  curl_multi_remove_handle(s->multi, a->easy);
  curl_slist_free_all(a->headers);
  a->headers = nullptr;
  s->idle.push_back(a->easy);
  a->easy = nullptr;
}

thread_local std::minstd_rand t_rng(
    static_cast<unsigned>(
        std::hash<std::thread::id>()(std::this_thread::get_id())) ^
    static_cast<unsigned>(::getpid()));

}  // namespace

std::string Redact(const std::string& url) {
  const size_t q = url.find('?');
  return q == std::string::npos ? url : url.substr(0, q) + "?...";
}

void CountCoalesced(uint64_t n) {
  g_coalesced.fetch_add(n, std::memory_order_relaxed);
}

Status RunTransfers(Transfer* const* transfers, size_t count,
                    const RemoteOptions& options) {
  if (count == 0) return Status::OK();
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<Session> session = Pool().Acquire();
  Session* s = session.get();
  std::vector<Active> actives(count);
  std::deque<size_t> pending;
  for (size_t k = 0; k < count; ++k) {
    actives[k].t = transfers[k];
    transfers[k]->attempts = 0;
    transfers[k]->status = Status::OK();
    pending.push_back(k);
  }
  std::vector<std::pair<Clock::time_point, size_t>> delayed;
  const size_t max_in_flight =
      static_cast<size_t>(std::max(1, options.max_in_flight));
  size_t in_flight = 0;
  bool stop = false;
  Status first_error;
  for (;;) {
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < delayed.size();) {
      if (delayed[i].first <= now || Cancelled(*transfers[delayed[i].second])) {
        pending.push_front(delayed[i].second);
        delayed[i] = delayed.back();
        delayed.pop_back();
      } else {
        ++i;
      }
    }
    while (!stop && in_flight < max_in_flight && !pending.empty()) {
      const size_t k = pending.front();
      pending.pop_front();
      if (Cancelled(*transfers[k])) {
        Transfer* t = transfers[k];
        t->status = Status::Aborted(Describe(*t) + ": cancelled");
        if (first_error.ok()) first_error = t->status;
        stop = true;
        break;
      }
      if (!Start(s, &actives[k], options)) {
        if (!actives[k].refused) {
          transfers[k]->status =
              Status::IOError(Describe(*transfers[k]) +
                              ": libcurl could not start a transfer "
                              "(out of memory?)");
        }
        if (first_error.ok()) first_error = transfers[k]->status;
        stop = true;
        break;
      }
      ++in_flight;
    }
    if (in_flight == 0) {
      if (stop || delayed.empty()) break;
      Clock::time_point due = delayed[0].first;
      for (const auto& d : delayed) due = std::min(due, d.first);
      // In slices, so that a cancelled transfer stops waiting.
      std::this_thread::sleep_until(
          std::min(due, Clock::now() + std::chrono::milliseconds(100)));
      continue;
    }
    int running = 0;
    curl_multi_perform(s->multi, &running);
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(s->multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Active* a = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &a);
      const CURLcode rc = msg->data.result;
      Classify(a, rc);
      Finish(s, a);
      --in_flight;
      Transfer* t = a->t;
      if (t->status.ok()) continue;
      const double elapsed =
          std::chrono::duration<double>(Clock::now() - a->first_start).count();
      if (t->retryable && !stop && t->attempts < options.max_attempts &&
          elapsed < options.retry_seconds) {
        const double cap = std::min(
            2000.0,
            50.0 * static_cast<double>(1u << std::min(t->attempts, 10)));
        std::uniform_real_distribution<double> jitter(0.0, cap);
        const auto wait = std::chrono::microseconds(
            static_cast<int64_t>(jitter(t_rng) * 1000.0));
        delayed.emplace_back(Clock::now() + wait,
                             static_cast<size_t>(a - actives.data()));
        continue;
      }
      if (t->attempts > 1) {
        char when[64];
        std::snprintf(when, sizeof(when), "after %d attempts in %.1f s",
                      t->attempts, elapsed);
        t->status = t->status.WithContext(when);
      }
      if (first_error.ok()) first_error = t->status;
      stop = true;
    }
    if (in_flight > 0) {
      int timeout_ms = 1000;
      if (!delayed.empty()) {
        Clock::time_point due = delayed[0].first;
        for (const auto& d : delayed) due = std::min(due, d.first);
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            due - Clock::now())
                            .count();
        timeout_ms =
            static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(ms, 1000)));
      }
      curl_multi_poll(s->multi, nullptr, 0, timeout_ms, nullptr);
    }
  }
  for (size_t k : pending) {
    transfers[k]->status = Status::Aborted(Describe(*transfers[k]) +
                                           ": not sent (another request of "
                                           "the batch failed)");
  }
  for (const auto& d : delayed) {
    Transfer* t = transfers[d.second];
    t->status = t->status.WithContext(
        "not retried (another request of the "
        "batch failed)");
  }
  Pool().Release(std::move(session));
  return first_error;
}

bool XmlText(const std::string& xml, const std::string& tag,
             std::string* text) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t b = xml.find(open);
  if (b == std::string::npos) return false;
  const size_t e = xml.find(close, b + open.size());
  if (e == std::string::npos) return false;
  const std::string raw = xml.substr(b + open.size(), e - b - open.size());
  static const std::pair<const char*, char> kEntities[] = {{"&amp;", '&'},
                                                           {"&lt;", '<'},
                                                           {"&gt;", '>'},
                                                           {"&quot;", '"'},
                                                           {"&apos;", '\''}};
  text->clear();
  for (size_t i = 0; i < raw.size();) {
    bool decoded = false;
    if (raw[i] == '&') {
      for (const auto& ent : kEntities) {
        if (raw.compare(i, std::char_traits<char>::length(ent.first),
                        ent.first) == 0) {
          text->push_back(ent.second);
          i += std::char_traits<char>::length(ent.first);
          decoded = true;
          break;
        }
      }
    }
    if (!decoded) text->push_back(raw[i++]);
  }
  return true;
}

}  // namespace remote

RemoteStats GetRemoteStats() {
  RemoteStats s;
  s.requests = remote::g_requests.load(std::memory_order_relaxed);
  s.bytes = remote::g_bytes.load(std::memory_order_relaxed);
  s.retries = remote::g_retries.load(std::memory_order_relaxed);
  s.coalesced = remote::g_coalesced.load(std::memory_order_relaxed);
  return s;
}

}  // namespace ufspack
