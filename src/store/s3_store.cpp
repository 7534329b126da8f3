// The s3:// ObjectStore: objects are S3 objects named PREFIX + key in one
// bucket (s3_http.h for the wire side).
//
// Put of up to part_bytes is one PUT; anything larger, and any PutFile of a
// larger file, is a multipart upload whose parts go up parallel_parts at a
// time, each read from the file when its turn comes (memory stays at
// parallel_parts x part_bytes), and completed only when every part is in; a
// failed upload is aborted. Either way the object appears whole or not at
// all, which is what the checkpoint commit rule (manifest last) needs.
// GetToFile streams into a temp file beside the target, checks the length
// and renames it into place.
#include "store/s3_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>

#include "core/fs.h"
#include "store/object_store.h"
#include "store/s3_http.h"

namespace burst {
namespace {

namespace fs = std::filesystem;

class S3Store : public ObjectStore {
 public:
  S3Store(S3Config config, std::string url) : http_(std::move(config)), url_(std::move(url)) {}

  // Checks the bucket exists and takes these credentials (HEAD bucket).
  Status Check() {
    S3Request req;
    req.method = "HEAD";
    auto r = http_.Send(req, http_.Where());
    return r.ok() ? Status() : r.status();
  }

  Status Put(const std::string& key, std::string_view data) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    if (static_cast<int64_t>(data.size()) <= cfg().part_bytes) return PutOne(key, data);
    return Multipart(key, static_cast<int64_t>(data.size()),
                     [&](int64_t off, int64_t len, std::string* out) -> Status {
                       out->assign(data.substr(static_cast<size_t>(off), static_cast<size_t>(len)));
                       return Status();
                     });
  }

  Status PutFile(const std::string& key, const fs::path& src) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    int fd = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return Status(errno == ENOENT ? Code::kNotFound : Code::kUnavailable, "cannot open " + src.string(),
                    src.string());
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    off_t size = ::lseek(fd, 0, SEEK_END);
    if (size < 0) return IoStatus(errno, "cannot size", src, Code::kUnavailable);
    auto read_part = [&](int64_t off, int64_t len, std::string* out) -> Status {
      out->resize(static_cast<size_t>(len));
      int64_t done = 0;
      while (done < len) {
        ssize_t n = ::pread(fd, out->data() + done, static_cast<size_t>(len - done), off + done);
        if (n < 0) return IoStatus(errno, "cannot read", src, Code::kUnavailable);
        if (n == 0)
          return Status(Code::kDataLoss, src.string() + " shrank while it was uploaded", src.string());
        done += n;
      }
      return Status();
    };
    if (size <= cfg().part_bytes) {
      std::string body;
      if (Status s = read_part(0, size, &body); !s.ok()) return s;
      return PutOne(key, body);
    }
    return Multipart(key, size, read_part);
  }

  Result<std::string> Get(const std::string& key) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    S3Request req;
    req.object = Name(key);
    auto r = http_.Send(req, What(key));
    if (!r.ok()) return r.status();
    return std::move(r.value().body);
  }

  Status GetToFile(const std::string& key, const fs::path& dst) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    fs::path tmp = dst;
    tmp += ".part-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++);
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return IoStatus(errno, "cannot create", tmp, Code::kUnavailable);
    int64_t written = 0;
    int write_errno = 0;
    S3Request req;
    req.object = Name(key);
    req.sink = [&](std::string_view chunk) {
      size_t off = 0;
      while (off < chunk.size()) {
        ssize_t n = ::write(fd, chunk.data() + off, chunk.size() - off);
        if (n < 0) {
          write_errno = errno;
          return false;
        }
        off += static_cast<size_t>(n);
      }
      written += static_cast<int64_t>(chunk.size());
      return true;
    };
    req.restart = [&]() -> Status {
      written = 0;
      if (::ftruncate(fd, 0) != 0 || ::lseek(fd, 0, SEEK_SET) != 0) {
        return IoStatus(errno, "cannot rewind", tmp, Code::kUnavailable);
      }
      return Status();
    };
    auto r = http_.Send(req, What(key));
    Status s;
    if (write_errno != 0) {
      s = IoStatus(write_errno, "cannot write", tmp, Code::kUnavailable);
    } else if (!r.ok()) {
      s = r.status();
    } else if (r.value().content_length >= 0 && r.value().content_length != written) {
      s = Status(Code::kUnavailable,
                 What(key) + ": got " + std::to_string(written) + " of " +
                     std::to_string(r.value().content_length) + " bytes",
                 "store");
    } else if (::fsync(fd) != 0) {
      s = IoStatus(errno, "cannot sync", tmp, Code::kUnavailable);
    }
    ::close(fd);
    if (s.ok()) {
      std::error_code ec;
      fs::rename(tmp, dst, ec);
      if (ec) s = IoStatus(ec.value(), "cannot rename into", dst, Code::kUnavailable);
    }
    if (!s.ok()) {
      std::error_code ignored;  // best effort: the error being returned matters more
      fs::remove(tmp, ignored);
    }
    return s;
  }

  Result<ObjectInfo> Stat(const std::string& key) const override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    S3Request req;
    req.method = "HEAD";
    req.object = Name(key);
    auto r = http_.Send(req, What(key));
    if (!r.ok()) return r.status();
    if (r.value().status == 404) return Status(Code::kNotFound, "no object " + key, "key");
    return ObjectInfo{key, std::max<int64_t>(0, r.value().content_length)};
  }

  Result<std::vector<ObjectInfo>> List(const std::string& prefix) const override {
    std::vector<ObjectInfo> out;
    std::string token;
    const std::string& root = cfg().prefix;
    while (true) {
      S3Request req;
      req.query = {{"list-type", "2"}, {"prefix", root + prefix}};
      if (!token.empty()) req.query.emplace_back("continuation-token", token);
      auto r = http_.Send(req, "listing s3://" + cfg().bucket + "/" + root + prefix);
      if (!r.ok()) return r.status();
      const std::string& xml = r.value().body;
      for (std::string_view item : XmlElements(xml, "Contents")) {
        std::string name = XmlText(item, "Key");
        if (name.rfind(root, 0) != 0) continue;
        out.push_back(ObjectInfo{name.substr(root.size()), std::atoll(XmlText(item, "Size").c_str())});
      }
      token = XmlText(xml, "NextContinuationToken");
      if (XmlText(xml, "IsTruncated") != "true" || token.empty()) break;
    }
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  Status Delete(const std::string& key) override {
    if (Status s = ValidateKey(key); !s.ok()) return s;
    S3Request req;
    req.method = "DELETE";
    req.object = Name(key);
    auto r = http_.Send(req, What(key));
    return r.ok() ? Status() : r.status();
  }

  Status DeletePrefix(const std::string& prefix) override {
    if (prefix.empty() || prefix.back() != '/') {
      return Status(Code::kInvalidArgument, "a prefix to delete must end in '/'", "prefix");
    }
    if (Status s = ValidateKey(prefix.substr(0, prefix.size() - 1), "prefix"); !s.ok()) return s;
    auto objects = List(prefix);
    if (!objects.ok()) return objects.status();
    for (const ObjectInfo& o : objects.value()) {
      if (Status s = Delete(o.key); !s.ok()) return s;
    }
    return Status();
  }

  std::string Url() const override { return url_; }

 private:
  using ReadPart = std::function<Status(int64_t off, int64_t len, std::string* out)>;

  const S3Config& cfg() const { return http_.config(); }
  std::string Name(const std::string& key) const { return cfg().prefix + key; }
  std::string What(const std::string& key) const { return "s3://" + cfg().bucket + "/" + Name(key); }

  Status PutOne(const std::string& key, std::string_view body) {
    S3Request req;
    req.method = "PUT";
    req.object = Name(key);
    req.body = body;
    auto r = http_.Send(req, What(key));
    return r.ok() ? Status() : r.status();
  }

  Status Multipart(const std::string& key, int64_t size, const ReadPart& read_part) {
    S3Request init;
    init.method = "POST";
    init.object = Name(key);
    init.query = {{"uploads", ""}};
    auto started = http_.Send(init, What(key));
    if (!started.ok()) return started.status();
    const std::string upload_id = XmlText(started.value().body, "UploadId");
    if (upload_id.empty()) {
      return Status(Code::kUnavailable, What(key) + ": " + http_.Where() + " started no multipart upload",
                    "store");
    }
    const int64_t part = cfg().part_bytes;
    const int parts = static_cast<int>((size + part - 1) / part);
    std::vector<std::string> etags(static_cast<size_t>(parts));
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::mutex mu;
    Status first_error;
    auto worker = [&] {
      std::string body;
      while (!failed.load()) {
        int i = next.fetch_add(1);
        if (i >= parts) return;
        int64_t off = static_cast<int64_t>(i) * part;
        Status s = read_part(off, std::min(part, size - off), &body);
        if (s.ok()) {
          S3Request put;
          put.method = "PUT";
          put.object = Name(key);
          put.query = {{"partNumber", std::to_string(i + 1)}, {"uploadId", upload_id}};
          put.body = body;
          auto r = http_.Send(put, What(key) + " part " + std::to_string(i + 1));
          if (r.ok() && r.value().etag.empty()) {
            s = Status(Code::kUnavailable,
                       What(key) + ": part " + std::to_string(i + 1) + " came back without an ETag", "store");
          } else if (r.ok()) {
            etags[static_cast<size_t>(i)] = r.value().etag;
          } else {
            s = r.status();
          }
        }
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = s;
          failed = true;
        }
      }
    };
    std::vector<std::thread> threads;
    int n = std::max(1, std::min(cfg().parallel_parts, parts));
    for (int t = 0; t < n; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();

    Status s = first_error;
    if (s.ok()) {
      std::string xml = "<CompleteMultipartUpload>";
      for (int i = 0; i < parts; ++i) {
        xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
               XmlEscape(etags[static_cast<size_t>(i)]) + "</ETag></Part>";
      }
      xml += "</CompleteMultipartUpload>";
      S3Request done;
      done.method = "POST";
      done.object = Name(key);
      done.query = {{"uploadId", upload_id}};
      done.body = xml;
      auto r = http_.Send(done, What(key));
      // S3 may answer 200 and still fail the completion in the body.
      if (!r.ok()) {
        s = r.status();
      } else if (r.value().body.find("<Error>") != std::string::npos) {
        s = Status(Code::kUnavailable,
                   What(key) + ": completing the upload failed: " + XmlText(r.value().body, "Code") + " " +
                       XmlText(r.value().body, "Message"),
                   "store");
      }
    }
    if (!s.ok()) {
      S3Request abort;
      abort.method = "DELETE";
      abort.object = Name(key);
      abort.query = {{"uploadId", upload_id}};
      auto a = http_.Send(abort, What(key));
      if (!a.ok()) {
        return Status(s.code(),
                      s.message() + " (and aborting upload " + upload_id +
                          " failed: " + a.status().message() +
                          "; a bucket lifecycle rule for incomplete uploads reclaims it)",
                      s.param());
      }
    }
    return s;
  }

  mutable S3Http http_;
  std::string url_;
  mutable std::atomic<uint64_t> counter_{0};
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

}  // namespace

Result<S3Config> ParseS3Url(const std::string& url) {
  const std::string scheme = "s3://";
  if (url.rfind(scheme, 0) != 0) {
    return Status(Code::kInvalidArgument, "\"" + url + "\" is not an s3:// URL", "store");
  }
  std::string rest = url.substr(scheme.size()), query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest.resize(q);
  }
  S3Config c;
  size_t slash = rest.find('/');
  c.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) c.prefix = rest.substr(slash + 1);
  if (c.bucket.size() < 3 || c.bucket.size() > 63 ||
      c.bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string::npos) {
    return Status(Code::kInvalidArgument,
                  "bucket \"" + c.bucket + "\" in " + url +
                      " must be 3-63 characters of lowercase letters, digits, '.' and '-'",
                  "store");
  }
  while (!c.prefix.empty() && c.prefix.back() == '/') c.prefix.pop_back();
  if (!c.prefix.empty()) {
    if (Status s = ValidateKey(c.prefix, "store"); !s.ok()) {
      return Status(Code::kInvalidArgument, "prefix of " + url + ": " + s.message(), "store");
    }
    c.prefix += '/';
  }
  std::map<std::string, std::string> params;
  size_t pos = 0;
  while (pos < query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string item = query.substr(pos, amp - pos);
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (name != "endpoint" && name != "region") {
      return Status(
          Code::kInvalidArgument,
          "unknown parameter \"" + name + "\" in " + url + " (s3:// URLs take endpoint= and region=)",
          "store");
    }
    params[name] = value;
    pos = amp + 1;
  }
  c.region = params.count("region") ? params["region"] : Env("AWS_REGION");
  if (c.region.empty()) c.region = Env("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = "us-east-1";
  c.endpoint = params.count("endpoint") ? params["endpoint"] : Env("BURST_S3_ENDPOINT");
  if (c.endpoint.empty()) c.endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = Env("AWS_ENDPOINT_URL");
  if (c.endpoint.empty()) c.endpoint = "https://s3." + c.region + ".amazonaws.com";
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (c.endpoint.rfind("http://", 0) != 0 && c.endpoint.rfind("https://", 0) != 0) {
    return Status(Code::kInvalidArgument,
                  "S3 endpoint \"" + c.endpoint + "\" must start with http:// or https://", "s3_endpoint");
  }
  return c;
}

std::string S3StoreUrl(const S3Config& c) {
  std::string url = "s3://" + c.bucket;
  if (!c.prefix.empty()) url += "/" + c.prefix.substr(0, c.prefix.size() - 1);
  return url + "?endpoint=" + c.endpoint + "&region=" + c.region;
}

Result<std::unique_ptr<ObjectStore>> NewS3Store(S3Config config) {
  if (config.creds.access_key_id.empty()) {
    config.creds =
        AwsCredentials{Env("AWS_ACCESS_KEY_ID"), Env("AWS_SECRET_ACCESS_KEY"), Env("AWS_SESSION_TOKEN")};
  }
  if (config.creds.access_key_id.empty() || config.creds.secret_access_key.empty()) {
    return Status(
        Code::kUnauthenticated,
        "s3://" + config.bucket + " at " + config.endpoint +
            ": no credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN "
            "for temporary ones)",
        "store");
  }
  if (config.part_bytes < (5 << 20)) {
    return Status(Code::kInvalidArgument, "S3 multipart parts must be at least 5 MiB", "part_bytes");
  }
  std::string url = S3StoreUrl(config);
  auto store = std::make_unique<S3Store>(std::move(config), url);
  if (Status s = store->Check(); !s.ok()) return s;
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace burst
