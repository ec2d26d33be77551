// Copyright 2026 The ufspack Authors.
//
// SigV4 against published expected values only:
//   - AWS's SigV4 test suite (sigv4_vectors/, see its README.md for the
//     source of every file): canonical request, string to sign and
//     Authorization header, byte for byte;
//   - the four worked examples of the S3 API reference, "Signature
//     Calculations for the Authorization Header: Transferring Payload in a
//     Single Chunk",
//     https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
//     (values checked against AWS's own transcription in
//     aws-amplify/amplify-flutter,
//     packages/aws_signature_v4/test/s3/testdata/single_chunk_testdata.dart,
//     and google/tensorstore,
//     tensorstore/kvstore/s3/s3_request_builder_test.cc).
// The remaining tests pin rules of the specification (encoding, S3's
// unnormalised paths, which headers Sign() adds) without expected
// signatures.
#include "sigv4.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "testutil.h"

namespace ufspack {
namespace remote {
namespace {

// --- AWS's SigV4 test suite
// ---------------------------------------------------

// The suite's fixed inputs, from its driver (aws-c-auth v0.3.15,
// tests/sigv4_tests.c; botocore tests/unit/auth/test_sigv4.py).
constexpr char kSuiteAccessKey[] = "AKIDEXAMPLE";
constexpr char kSuiteSecret[] = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
// get-vanilla-with-session-token's token, which its .req does not carry:
// s_test_suite_session_token in aws-c-auth v0.3.15 tests/sigv4_tests.c.
constexpr char kSuiteSessionToken[] =
    "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267";

SigningScope SuiteScope() {
  SigningScope scope;
  scope.region = "us-east-1";
  scope.service = "service";
  scope.amz_date = "20150830T123600Z";
  scope.s3 = false;
  return scope;
}

const char* const kVectors[] = {
    "get-header-key-duplicate",
    "get-header-value-multiline",
    "get-header-value-order",
    "get-header-value-trim",
    "get-relative",
    "get-relative-relative",
    "get-slash",
    "get-slash-dot-slash",
    "get-slash-pointless-dot",
    "get-slashes",
    "get-space",
    "get-special-character",
    "get-unreserved",
    "get-utf8",
    "get-vanilla",
    "get-vanilla-empty-query-key",
    "get-vanilla-query",
    "get-vanilla-query-order-encoded",
    "get-vanilla-query-order-key",
    "get-vanilla-query-order-key-case",
    "get-vanilla-query-order-value",
    "get-vanilla-query-unreserved",
    "get-vanilla-utf8-query",
    "get-vanilla-with-session-token",
    "post-header-key-case",
    "post-header-key-sort",
    "post-header-value-case",
    "post-sts-header-after",
    "post-sts-header-before",
    "post-vanilla",
    "post-vanilla-empty-query-value",
    "post-vanilla-query",
    "post-x-www-form-urlencoded",
    "post-x-www-form-urlencoded-parameters",
};

std::string VectorPath(const std::string& name, const std::string& ext) {
  return std::string(UFSPACK_SIGV4_VECTORS_DIR) + "/" + name + "/" + name + ext;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 &&
        HexDigit(s[i + 2]) >= 0) {
      out.push_back(
          static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// A .req file: "METHOD target HTTP/1.1", headers ("Name:value", indented
// lines continuing the previous value), a blank line and the body.  The
// target may hold spaces (get-space), so the method ends at the first space
// and the version starts at the last.
::testing::AssertionResult ParseReq(const std::string& text,
                                    SigningRequest* request) {
  const size_t blank = text.find("\n\n");
  const std::string head = text.substr(0, blank);
  const std::string body =
      blank == std::string::npos ? std::string() : text.substr(blank + 2);
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= head.size()) {
    size_t end = head.find('\n', start);
    if (end == std::string::npos) end = head.size();
    lines.push_back(head.substr(start, end - start));
    start = end + 1;
  }
  const std::string& request_line = lines[0];
  const size_t first = request_line.find(' ');
  const size_t last = request_line.rfind(' ');
  if (first == std::string::npos || last == first) {
    return ::testing::AssertionFailure()
           << "bad request line '" << request_line << "'";
  }
  request->method = request_line.substr(0, first);
  const std::string target = request_line.substr(first + 1, last - first - 1);
  const size_t q = target.find('?');
  request->path = target.substr(0, q);
  request->query.clear();
  if (q != std::string::npos) {
    const std::string query = target.substr(q + 1);
    size_t p = 0;
    while (p <= query.size()) {
      size_t amp = query.find('&', p);
      if (amp == std::string::npos) amp = query.size();
      const std::string pair = query.substr(p, amp - p);
      if (!pair.empty()) {
        const size_t eq = pair.find('=');
        request->query.emplace_back(PercentDecode(pair.substr(0, eq)),
                                    eq == std::string::npos
                                        ? std::string()
                                        : PercentDecode(pair.substr(eq + 1)));
      }
      p = amp + 1;
    }
  }
  request->headers.clear();
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty() && i + 1 == lines.size()) break;  // a final newline
    if (!line.empty() && (line[0] == ' ' || line[0] == '\t')) {
      if (request->headers.empty()) {
        return ::testing::AssertionFailure() << "continuation before a header";
      }
      request->headers.back().second += " " + line;  // obs-fold: a space
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      return ::testing::AssertionFailure()
             << "bad header line '" << line << "'";
    }
    request->headers.emplace_back(line.substr(0, colon),
                                  line.substr(colon + 1));
  }
  request->payload_hash = Sha256Hex(body);
  return ::testing::AssertionSuccess();
}

std::string HeaderValue(const std::vector<Header>& headers,
                        const std::string& name) {
  for (const Header& h : headers) {
    if (h.first == name) return h.second;
  }
  return "<absent>";
}

class SigV4SuiteTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SigV4SuiteTest, MatchesPublishedVector) {
  const std::string name = GetParam();
  const std::string req = test::ReadFile(VectorPath(name, ".req"));
  const std::string creq = test::ReadFile(VectorPath(name, ".creq"));
  const std::string sts = test::ReadFile(VectorPath(name, ".sts"));
  const std::string authz = test::ReadFile(VectorPath(name, ".authz"));
  ASSERT_FALSE(req.empty() || creq.empty() || sts.empty() || authz.empty());
  const SigningScope scope = SuiteScope();

  SigningRequest request;
  ASSERT_TRUE(ParseReq(req, &request));
  Credentials credentials{kSuiteAccessKey, kSuiteSecret, ""};
  // post-sts-header-before signs the token its .req carries;
  // get-vanilla-with-session-token signs one given beside the request.
  SigningRequest canonical_input = request;
  for (const Header& h : request.headers) {
    if (h.first == "X-Amz-Security-Token") credentials.session_token = h.second;
  }
  if (name == "get-vanilla-with-session-token") {
    credentials.session_token = kSuiteSessionToken;
    canonical_input.headers.emplace_back("X-Amz-Security-Token",
                                         kSuiteSessionToken);
  }

  const std::string canonical = CanonicalRequest(canonical_input, scope);
  EXPECT_EQ(canonical, creq);
  EXPECT_EQ(StringToSign(creq, scope), sts);
  EXPECT_EQ(StringToSign(canonical, scope), sts);

  // Sign() replaces the .req's X-Amz-Date (and X-Amz-Security-Token) with
  // its own, equal, values and must arrive at the same header.
  const std::vector<Header> added = Sign(request, credentials, scope);
  EXPECT_EQ(HeaderValue(added, "Authorization"), authz);
  EXPECT_EQ(HeaderValue(added, "x-amz-date"), "20150830T123600Z");
  EXPECT_EQ(HeaderValue(added, "x-amz-content-sha256"), "<absent>");
  EXPECT_EQ(HeaderValue(added, "x-amz-security-token"),
            credentials.session_token.empty() ? "<absent>"
                                              : credentials.session_token);
}

std::string TestName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(AwsSuite, SigV4SuiteTest,
                         ::testing::ValuesIn(kVectors), TestName);

// A vector directory that the list above misses would never run.
TEST(SigV4SuiteFilesTest, EveryVectorDirectoryIsListed) {
  std::set<std::string> dirs;
  DIR* d = opendir(UFSPACK_SIGV4_VECTORS_DIR);
  ASSERT_NE(d, nullptr) << UFSPACK_SIGV4_VECTORS_DIR;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != ".." && test::Exists(VectorPath(n, ".req"))) {
      dirs.insert(n);
    }
  }
  closedir(d);
  EXPECT_EQ(dirs,
            std::set<std::string>(std::begin(kVectors), std::end(kVectors)));
}

// --- The S3 API reference's worked examples ---------------------------------
//
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
// ("Examples: Signature Calculations"): bucket examplebucket in us-east-1,
// time 20130524T000000Z, the documentation's example key pair.

constexpr char kDocAccessKey[] = "AKIAIOSFODNN7EXAMPLE";
constexpr char kDocSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kDocHost[] = "examplebucket.s3.amazonaws.com";
constexpr char kEmptySha256[] =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

SigningScope DocScope() {
  SigningScope scope;
  scope.region = "us-east-1";
  scope.service = "s3";
  scope.amz_date = "20130524T000000Z";
  scope.s3 = true;
  return scope;
}

// Checks one documented example: the canonical request and string to sign
// (with the headers Sign() adds, as the example sends them) and the headers
// Sign() returns.
void ExpectDocumentedExample(const SigningRequest& request,
                             const std::string& canonical,
                             const std::string& string_to_sign,
                             const std::string& authorization) {
  const SigningScope scope = DocScope();
  SigningRequest sent = request;
  sent.headers.emplace_back("x-amz-date", "20130524T000000Z");
  sent.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
  EXPECT_EQ(CanonicalRequest(sent, scope), canonical);
  EXPECT_EQ(StringToSign(canonical, scope), string_to_sign);

  const std::vector<Header> added =
      Sign(request, Credentials{kDocAccessKey, kDocSecret, ""}, scope);
  ASSERT_EQ(added.size(), 3u);
  EXPECT_EQ(added[0], Header("x-amz-date", "20130524T000000Z"));
  EXPECT_EQ(added[1], Header("x-amz-content-sha256", request.payload_hash));
  EXPECT_EQ(added[2], Header("Authorization", authorization));
}

// "Example: GET Object": the first 10 bytes of test.txt.
TEST(SigV4S3DocTest, GetObjectWithRange) {
  SigningRequest request;
  request.method = "GET";
  request.path = "/test.txt";
  request.headers = {{"Host", kDocHost}, {"Range", "bytes=0-9"}};
  request.payload_hash = kEmptySha256;
  ExpectDocumentedExample(
      request,
      "GET\n"
      "/test.txt\n"
      "\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "range:bytes=0-9\n"
      "x-amz-content-sha256:"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n"
      "\n"
      "host;range;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "AWS4-HMAC-SHA256\n"
      "20130524T000000Z\n"
      "20130524/us-east-1/s3/aws4_request\n"
      "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
      "AWS4-HMAC-SHA256 "
      "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
      "Signature="
      "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// "Example: PUT Object": test$file.text with body "Welcome to Amazon S3.";
// '$' is not unreserved, so the canonical URI has %24 whether the path was
// sent escaped or not.
TEST(SigV4S3DocTest, PutObject) {
  const std::string body_hash = Sha256Hex("Welcome to Amazon S3.");
  EXPECT_EQ(body_hash,
            "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  for (const char* path : {"/test%24file.text", "/test$file.text"}) {
    SCOPED_TRACE(path);
    SigningRequest request;
    request.method = "PUT";
    request.path = path;
    request.headers = {{"Host", kDocHost},
                       {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                       {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    request.payload_hash = body_hash;
    ExpectDocumentedExample(
        request,
        "PUT\n"
        "/test%24file.text\n"
        "\n"
        "date:Fri, 24 May 2013 00:00:00 GMT\n"
        "host:examplebucket.s3.amazonaws.com\n"
        "x-amz-content-sha256:"
        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\n"
        "x-amz-date:20130524T000000Z\n"
        "x-amz-storage-class:REDUCED_REDUNDANCY\n"
        "\n"
        "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class\n"
        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
        "AWS4-HMAC-SHA256\n"
        "20130524T000000Z\n"
        "20130524/us-east-1/s3/aws4_request\n"
        "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
        "AWS4-HMAC-SHA256 "
        "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
        "x-amz-storage-class, "
        "Signature="
        "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  }
}

// "Example: GET Bucket Lifecycle": a query parameter without a value is
// signed as "lifecycle=".
TEST(SigV4S3DocTest, GetBucketLifecycle) {
  SigningRequest request;
  request.method = "GET";
  request.path = "/";
  request.query = {{"lifecycle", ""}};
  request.headers = {{"Host", kDocHost}};
  request.payload_hash = kEmptySha256;
  ExpectDocumentedExample(
      request,
      "GET\n"
      "/\n"
      "lifecycle=\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "x-amz-content-sha256:"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n"
      "\n"
      "host;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "AWS4-HMAC-SHA256\n"
      "20130524T000000Z\n"
      "20130524/us-east-1/s3/aws4_request\n"
      "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca",
      "AWS4-HMAC-SHA256 "
      "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
      "Signature="
      "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

// "Example: Get Bucket (List Objects)": parameters given as prefix=J and
// max-keys=2 are signed sorted.
TEST(SigV4S3DocTest, GetBucketListObjects) {
  SigningRequest request;
  request.method = "GET";
  request.path = "/";
  request.query = {{"prefix", "J"}, {"max-keys", "2"}};
  request.headers = {{"Host", kDocHost}};
  request.payload_hash = kEmptySha256;
  ExpectDocumentedExample(
      request,
      "GET\n"
      "/\n"
      "max-keys=2&prefix=J\n"
      "host:examplebucket.s3.amazonaws.com\n"
      "x-amz-content-sha256:"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
      "x-amz-date:20130524T000000Z\n"
      "\n"
      "host;x-amz-content-sha256;x-amz-date\n"
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      "AWS4-HMAC-SHA256\n"
      "20130524T000000Z\n"
      "20130524/us-east-1/s3/aws4_request\n"
      "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7",
      "AWS4-HMAC-SHA256 "
      "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
      "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
      "Signature="
      "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

// --- Rules of the specification
// -----------------------------------------------

// The canonical URI (second line) of a GET of `path`.
std::string CanonicalUriOf(const std::string& path, bool s3) {
  SigningRequest request;
  request.method = "GET";
  request.path = path;
  request.headers = {{"host", "example.com"}};
  SigningScope scope = DocScope();
  scope.s3 = s3;
  const std::string c = CanonicalRequest(request, scope);
  const size_t a = c.find('\n');
  return c.substr(a + 1, c.find('\n', a + 1) - a - 1);
}

TEST(UriEncodeTest, KeepsOnlyUnreservedBytes) {
  const std::string unreserved =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~";
  EXPECT_EQ(UriEncode(unreserved, false), unreserved);
  EXPECT_EQ(UriEncode("a b+c*d!e=f&g", false),
            "a%20b%2Bc%2Ad%21e%3Df%26g");  // space is %20, never '+'
  EXPECT_EQ(UriEncode("\xC3\xA9\x7F", false), "%C3%A9%7F");  // uppercase hex
  EXPECT_EQ(UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(UriEncode("a/b", true), "a/b");
  EXPECT_EQ(UriEncode("", true), "");
}

// The suite's note (normalize-path/normalize-path.txt): S3 signs
// "my-object//example//photo.user" as it is; other services normalise.
TEST(CanonicalUriTest, S3PathsAreNotNormalised) {
  EXPECT_EQ(CanonicalUriOf("/my-object//example//photo.user", true),
            "/my-object//example//photo.user");
  EXPECT_EQ(CanonicalUriOf("/my-object//example//photo.user", false),
            "/my-object/example/photo.user");
  EXPECT_EQ(CanonicalUriOf("/a/./b/../c", true), "/a/./b/../c");
  EXPECT_EQ(CanonicalUriOf("/a/./b/../c", false), "/a/c");
}

TEST(CanonicalUriTest, S3SignsTheWirePathInSigV4Encoding) {
  EXPECT_EQ(CanonicalUriOf("", true), "/");
  EXPECT_EQ(CanonicalUriOf("/a%20b", true), "/a%20b");  // already encoded
  EXPECT_EQ(CanonicalUriOf("/a b", true), "/a%20b");
  EXPECT_EQ(CanonicalUriOf("/a%7eb%2a", true), "/a~b%2A");
  EXPECT_EQ(CanonicalUriOf("/dir%2Fkey/x", true), "/dir%2Fkey/x");
  EXPECT_EQ(CanonicalUriOf("/100%", true), "/100%25");  // a stray '%'
}

TEST(CanonicalUriTest, GenericRuleEncodesTheWirePathAgain) {
  EXPECT_EQ(CanonicalUriOf("", false), "/");
  EXPECT_EQ(CanonicalUriOf("/a%20b", false), "/a%2520b");
  EXPECT_EQ(CanonicalUriOf("/../..", false), "/");
  EXPECT_EQ(CanonicalUriOf("/a/b/", false), "/a/b/");
}

TEST(SignTest, AnonymousCredentialsAddNoHeaders) {
  SigningRequest request;
  request.method = "GET";
  request.path = "/bucket/key";
  request.headers = {{"host", "s3.amazonaws.com"}};
  EXPECT_TRUE(Sign(request, Credentials{}, DocScope()).empty());
}

// The caller's own x-amz-date, x-amz-content-sha256, x-amz-security-token
// and Authorization are replaced, not signed twice; a session token is
// signed; an empty payload hash is the hash of an empty body.
TEST(SignTest, AddedHeadersReplaceTheCallersCopies) {
  SigningRequest request;
  request.method = "GET";
  request.path = "/k";
  request.headers = {{"Host", "b.s3.amazonaws.com"},
                     {"X-Amz-Date", "19990101T000000Z"},
                     {"x-amz-content-sha256", "stale"},
                     {"X-Amz-Security-Token", "stale"},
                     {"authorization", "AWS4-HMAC-SHA256 stale"}};
  const std::vector<Header> added =
      Sign(request, Credentials{"AKID", "secret", "TOKEN"}, DocScope());
  ASSERT_EQ(added.size(), 4u);
  EXPECT_EQ(added[0], Header("x-amz-date", "20130524T000000Z"));
  EXPECT_EQ(added[1], Header("x-amz-content-sha256", kEmptySha256));
  EXPECT_EQ(added[2], Header("x-amz-security-token", "TOKEN"));
  EXPECT_EQ(added[3].first, "Authorization");
  EXPECT_TRUE(
      test::Contains(added[3].second,
                     "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                     "x-amz-security-token, Signature="));
  EXPECT_FALSE(test::Contains(added[3].second, "secret"));

  // The same request without the stale headers signs identically.
  SigningRequest clean = request;
  clean.headers = {{"Host", "b.s3.amazonaws.com"}};
  EXPECT_EQ(Sign(clean, Credentials{"AKID", "secret", "TOKEN"}, DocScope()),
            added);
}

TEST(AmzDateNowTest, IsIso8601BasicUtc) {
  const std::string d = AmzDateNow();
  ASSERT_EQ(d.size(), 16u) << d;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i == 8) {
      EXPECT_EQ(d[i], 'T') << d;
    } else if (i == 15) {
      EXPECT_EQ(d[i], 'Z') << d;
    } else {
      EXPECT_TRUE(d[i] >= '0' && d[i] <= '9') << d;
    }
  }
  EXPECT_GE(d, "20200101T000000Z");
}

}  // namespace
}  // namespace remote
}  // namespace ufspack
