// gzip for the dashboard's replies (service/dashboard/gzip_reply.h): which
// Accept-Encoding values allow it, and that a compressed body inflates back.

#include "service/dashboard/gzip_reply.h"

#include <sys/mman.h>
#include <zlib.h>

#include <string>

#include "gtest/gtest.h"

namespace debugplane::service::dashboard {
namespace {

std::string Inflate(const std::string& data) {
  z_stream stream{};
  EXPECT_EQ(inflateInit2(&stream, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&stream, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - stream.avail_out);
  inflateEnd(&stream);
  return out;
}

TEST(AcceptsGzipTest, ListedWithAPositiveQuality) {
  for (const char* yes : {"gzip", "gzip, deflate, br", "br;q=1.0, GZIP;q=0.5", "x-gzip", "*",
                          "identity, *;q=0.1", " deflate ,gzip ", "gzip;q=0.001"}) {
    EXPECT_TRUE(AcceptsGzip(yes)) << yes;
  }
}

TEST(AcceptsGzipTest, AbsentRefusedOrMalformed) {
  for (const char* no : {"", "identity", "br, deflate", "gzip;q=0", "gzip;q=0.000", "*;q=0",
                         "gzip;q=0, *", "gzip;q=abc", "gzip;q=2", "gzipper", ",,;;", "gzip;q=-1"}) {
    EXPECT_FALSE(AcceptsGzip(no)) << no;
  }
}

TEST(GzipTest, RoundTrips) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += std::to_string(i % 97) + ",";
  for (int level : {1, 9}) {
    const std::optional<std::string> compressed = Gzip(text, level);
    ASSERT_TRUE(compressed.has_value());
    EXPECT_LT(compressed->size() * 4, text.size());
    EXPECT_EQ(Inflate(*compressed), text);
  }
  const std::optional<std::string> empty = Gzip("", 1);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(Inflate(*empty), "");
}

// zlib counts in 32 bits: a body past kMaxGzipBytes is refused, not
// compressed in part. (The body is an untouched anonymous mapping: no
// memory behind it is used.)
TEST(GzipTest, ABodyPastTheLimitIsRefusedAndSentAsItIs) {
  const size_t size = kMaxGzipBytes + 1;
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  const absl::string_view huge(static_cast<const char*>(mapped), size);
  EXPECT_FALSE(Gzip(huge, 1).has_value());
  EXPECT_TRUE(Gzip(huge.substr(0, 4096), 1).has_value());
  munmap(mapped, size);
}

TEST(GzipIfAcceptedTest, CompressesLargeBodiesOnlyWhenAccepted) {
  const std::string body(4 * kMinGzipBytes, 'x');
  http::HttpResponse response{.status = 200, .headers = {}, .body = body};
  GzipIfAccepted("gzip", response);
  EXPECT_EQ(Inflate(response.body), body);
  EXPECT_EQ(response.headers,
            (http::HttpHeaders{{"Vary", "Accept-Encoding"}, {"Content-Encoding", "gzip"}}));

  http::HttpResponse refused{.status = 200, .headers = {}, .body = body};
  GzipIfAccepted("identity", refused);
  EXPECT_EQ(refused.body, body);
  EXPECT_EQ(refused.headers, (http::HttpHeaders{{"Vary", "Accept-Encoding"}}));

  http::HttpResponse small{.status = 200, .headers = {}, .body = "{}"};
  GzipIfAccepted("gzip", small);
  EXPECT_EQ(small.body, "{}");

  // Already encoded: left alone.
  http::HttpResponse encoded{.status = 200, .headers = {{"Content-Encoding", "br"}}, .body = body};
  GzipIfAccepted("gzip", encoded);
  EXPECT_EQ(encoded.body, body);
  EXPECT_EQ(encoded.headers.size(), 1u);
}

}  // namespace
}  // namespace debugplane::service::dashboard
