#include "api/tinker_proto.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/status.h"
#include "core/utf8.h"

namespace burst {
namespace {

[[noreturn]] void Bad(const std::string& path, const std::string& what) {
  throw Error(Code::kInvalidArgument, "forward_backward body (protobuf): " + path + ": " + what, path);
}

// ----------------------------------------------------------------------------
// reading

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

class Reader {
 public:
  Reader(std::string_view bytes, std::string path) : b_(bytes), path_(std::move(path)) {}
  bool done() const { return pos_ >= b_.size(); }
  const std::string& path() const { return path_; }

  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) Bad(path_, "truncated varint");
      const uint8_t c = static_cast<uint8_t>(b_[pos_++]);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
    Bad(path_, "varint longer than 10 bytes");
  }
  // The next field's number and wire type; false at the end.
  bool Next(uint32_t* field, int* type) {
    if (done()) return false;
    const uint64_t tag = Varint();
    *field = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<int>(tag & 7);
    if (*field == 0) Bad(path_, "field number 0");
    return true;
  }
  std::string_view Bytes() {
    const uint64_t n = Varint();
    if (n > b_.size() - pos_) Bad(path_, "a length of " + std::to_string(n) + " bytes runs past the message");
    std::string_view out = b_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  double Double() {
    if (b_.size() - pos_ < 8) Bad(path_, "truncated double");
    double d;
    std::memcpy(&d, b_.data() + pos_, 8);
    pos_ += 8;
    return d;
  }
  void Skip(int type) {
    switch (type) {
      case kVarint:
        Varint();
        return;
      case kFixed64:
        Take(8);
        return;
      case kLen:
        Bytes();
        return;
      case kFixed32:
        Take(4);
        return;
      default:
        Bad(path_, "wire type " + std::to_string(type) + " (groups) is not supported");
    }
  }
  void Expect(int type, int want, const char* field) {
    if (type != want) Bad(path_ + "." + field, "has the wrong wire type " + std::to_string(type));
  }

 private:
  void Take(size_t n) {
    if (b_.size() - pos_ < n) Bad(path_, "truncated field");
    pos_ += n;
  }
  std::string_view b_;
  size_t pos_ = 0;
  std::string path_;
};

// Little-endian numbers in a bytes field (the SDK writes numpy's tobytes).
template <typename T>
std::vector<T> LittleEndian(std::string_view bytes, const std::string& path, int64_t* budget) {
  if (bytes.size() % sizeof(T) != 0) {
    Bad(path, std::to_string(bytes.size()) + " bytes is not a whole number of " + std::to_string(sizeof(T)) +
                  "-byte values");
  }
  const int64_t n = static_cast<int64_t>(bytes.size() / sizeof(T));
  if (n > *budget)
    Bad(path, "the request holds more numbers than a request may (" + std::to_string(n) + " here)");
  *budget -= n;
  std::vector<T> out(static_cast<size_t>(n));
  if (n > 0)
    std::memcpy(out.data(), bytes.data(), bytes.size());  // this machine is little-endian (x86-64, arm64)
  return out;
}

Json TokensOfChunk(std::string_view chunk, const std::string& path, int64_t* budget) {
  Reader r(chunk, path);
  Json tokens = Json::array();
  uint32_t f;
  int t;
  bool text = false;
  while (r.Next(&f, &t)) {
    if (f == 1) {
      r.Expect(t, kLen, "encoded_text");
      text = true;
      Reader e(r.Bytes(), path + ".encoded_text");
      uint32_t ef;
      int et;
      while (e.Next(&ef, &et)) {
        if (ef != 1) {
          e.Skip(et);
          continue;
        }
        e.Expect(et, kLen, "tokens");
        for (int32_t id : LittleEndian<int32_t>(e.Bytes(), path + ".encoded_text.tokens", budget))
          tokens.push_back(id);
      }
    } else if (f == 2 || f == 3) {
      Bad(path, std::string(f == 2 ? "image" : "dmel") + " chunks are not supported (text models only)");
    } else {
      r.Skip(t);
    }
  }
  if (!text) Bad(path, "holds no encoded_text");
  return {{"tokens", tokens}, {"type", "encoded_text"}};
}

// A Tensor as TensorData JSON ({data, dtype, shape}).
Json TensorOf(std::string_view bytes, const std::string& path, int64_t* budget) {
  Reader r(bytes, path);
  std::string_view dense;
  bool has_dense = false;
  uint64_t dtype = 0;
  Json shape = Json::array();
  uint32_t f;
  int t;
  while (r.Next(&f, &t)) {
    if (f == 1) {
      r.Expect(t, kLen, "dense");
      dense = r.Bytes();
      has_dense = true;
    } else if (f == 2) {
      Bad(path, "sparse tensors are not supported: send the dense row");
    } else if (f == 3) {
      r.Expect(t, kVarint, "dtype");
      dtype = r.Varint();
    } else if (f == 4) {
      if (t == kLen) {  // packed
        Reader p(r.Bytes(), path + ".shape");
        while (!p.done()) shape.push_back(static_cast<int64_t>(p.Varint()));
      } else {
        r.Expect(t, kVarint, "shape");
        shape.push_back(static_cast<int64_t>(r.Varint()));
      }
      if (shape.size() > 8) Bad(path + ".shape", "has more than 8 dimensions");
    } else {
      r.Skip(t);
    }
  }
  if (!has_dense) dense = std::string_view();
  Json data = Json::array();
  std::string name;
  switch (dtype) {
    case 1:  // float32
      for (float x : LittleEndian<float>(dense, path + ".dense", budget))
        data.push_back(static_cast<double>(x));
      name = "float32";
      break;
    case 2:  // int64
      for (int64_t x : LittleEndian<int64_t>(dense, path + ".dense", budget)) data.push_back(x);
      name = "int64";
      break;
    case 3:  // int32, read as int64
      for (int32_t x : LittleEndian<int32_t>(dense, path + ".dense", budget))
        data.push_back(static_cast<int64_t>(x));
      name = "int64";
      break;
    case 4:  // bfloat16, widened
      for (uint16_t x : LittleEndian<uint16_t>(dense, path + ".dense", budget)) {
        const uint32_t bits = static_cast<uint32_t>(x) << 16;
        float v;
        std::memcpy(&v, &bits, 4);
        data.push_back(static_cast<double>(v));
      }
      name = "float32";
      break;
    default:
      Bad(path + ".dtype", "must be FLOAT32, INT64, INT32 or BFLOAT16 (got " + std::to_string(dtype) + ")");
  }
  Json out = {{"data", data}, {"dtype", name}};
  // loop_data checks the shape against the data: [n] for a row.
  out["shape"] = shape.empty() ? Json() : shape;
  return out;
}

// A map entry {1: key string, 2: value}; returns the key and the value's bytes / double.
std::string_view MapEntry(std::string_view entry, const std::string& path, std::string* key, int value_type,
                          double* number) {
  Reader r(entry, path);
  std::string_view value;
  uint32_t f;
  int t;
  while (r.Next(&f, &t)) {
    if (f == 1) {
      r.Expect(t, kLen, "key");
      *key = std::string(r.Bytes());
    } else if (f == 2) {
      r.Expect(t, value_type, "value");
      if (value_type == kFixed64)
        *number = r.Double();
      else
        value = r.Bytes();
    } else {
      r.Skip(t);
    }
  }
  return value;
}

Json DatumOf(std::string_view bytes, const std::string& path, int64_t* budget) {
  Reader r(bytes, path);
  Json chunks = Json::array(), inputs = Json::object();
  uint32_t f;
  int t;
  while (r.Next(&f, &t)) {
    if (f == 1) {
      r.Expect(t, kLen, "model_input");
      if (chunks.size() >= 4096) Bad(path + ".model_input", "has more than 4096 chunks");
      chunks.push_back(TokensOfChunk(
          r.Bytes(), path + ".model_input.chunks[" + std::to_string(chunks.size()) + "]", budget));
    } else if (f == 2) {
      r.Expect(t, kLen, "loss_fn_inputs");
      std::string key;
      double unused = 0;
      std::string_view value = MapEntry(r.Bytes(), path + ".loss_fn_inputs", &key, kLen, &unused);
      if (key.empty() || key.size() > 64) Bad(path + ".loss_fn_inputs", "a key must be 1-64 bytes");
      if (inputs.size() >= 16) Bad(path + ".loss_fn_inputs", "has more than 16 inputs");
      inputs[key] = TensorOf(value, path + ".loss_fn_inputs." + key, budget);
    } else {
      r.Skip(t);
    }
  }
  return {{"model_input", {{"chunks", chunks}}}, {"loss_fn_inputs", inputs}};
}

// A LossConfigValue {1: number (double), 2: text}: the number; Burst's losses take no text.
double LossConfigNumber(std::string_view bytes, const std::string& path) {
  Reader r(bytes, path);
  std::optional<double> number;
  uint32_t f;
  int t;
  while (r.Next(&f, &t)) {
    if (f == 1) {
      r.Expect(t, kFixed64, "number");
      number = r.Double();
    } else if (f == 2) {
      r.Expect(t, kLen, "text");
      r.Bytes();
      Bad(path, "is text; Burst's losses take numbers only");
    } else {
      r.Skip(t);
    }
  }
  if (!number) Bad(path, "has no number");
  return *number;
}

// ----------------------------------------------------------------------------
// writing

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutTag(std::string& out, uint32_t field, int type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | type);
}
void PutBytes(std::string& out, uint32_t field, std::string_view bytes) {
  PutTag(out, field, kLen);
  PutVarint(out, bytes.size());
  out.append(bytes);
}
void PutDouble(std::string& out, uint32_t field, double d) {
  PutTag(out, field, kFixed64);
  char b[8];
  std::memcpy(b, &d, 8);
  out.append(b, 8);
}
template <typename T>
void Append(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
float AsFloat(const Json& v) {
  return v.is_number() ? static_cast<float>(v.get<double>()) : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace

ProtoFwdBwd DecodeFwdBwdRequest(std::string_view bytes, int64_t max_values) {
  ProtoFwdBwd out;
  Json v2 = Json::object();
  Reader r(bytes, "body");
  int64_t budget = max_values;
  uint32_t f;
  int t;
  while (r.Next(&f, &t)) {
    switch (f) {
      case 1:
        r.Expect(t, kLen, "model_id");
        out.model_id = std::string(r.Bytes());
        break;
      case 2:
        r.Expect(t, kVarint, "seq_id");
        out.seq_id = static_cast<int32_t>(r.Varint());
        break;
      case 3:
        r.Expect(t, kLen, "data");
        if (out.data.size() >= 65536) Bad("data", "holds more than 65536 datums");
        out.data.push_back(DatumOf(r.Bytes(), "data[" + std::to_string(out.data.size()) + "]", &budget));
        break;
      case 4:
        r.Expect(t, kLen, "loss_fn");
        out.loss_fn = std::string(r.Bytes());
        break;
      case 5: {
        r.Expect(t, kLen, "loss_fn_config");
        std::string key;
        double v = 0;
        MapEntry(r.Bytes(), "loss_fn_config", &key, kFixed64, &v);
        if (out.loss_fn_config.size() >= 16) Bad("loss_fn_config", "has more than 16 settings");
        out.loss_fn_config[key] = v;
        break;
      }
      case 6:
        r.Expect(t, kVarint, "forward_only");
        out.forward_only = r.Varint() != 0;
        break;
      case 7: {  // SDK 0.3x: {key: LossConfigValue{number | text}}, preferred over field 5
        r.Expect(t, kLen, "loss_fn_config_v2");
        std::string key;
        double unused = 0;
        std::string_view value = MapEntry(r.Bytes(), "loss_fn_config_v2", &key, kLen, &unused);
        if (v2.size() >= 16) Bad("loss_fn_config_v2", "has more than 16 settings");
        v2[key] = LossConfigNumber(value, "loss_fn_config_v2." + ToValidUtf8(key.substr(0, 64)));
        break;
      }
      default:
        r.Skip(t);
    }
  }
  for (auto& [key, v] : v2.items()) out.loss_fn_config[key] = v;
  return out;
}

std::string EncodeFwdBwdOutput(const Json& result) {
  const Json& outputs = result.at("loss_fn_outputs");
  std::string record;
  PutBytes(record, 1, "ArrayRecord");
  if (!outputs.empty()) {
    // logprobs first (what forward_backward_custom reads), then the rest by name.
    std::vector<std::string> names;
    if (outputs[0].contains("logprobs")) names.push_back("logprobs");
    for (const auto& [name, first] : outputs[0].items())
      if (name != "logprobs") names.push_back(name);
    for (const std::string& name : names) {
      std::string data, offsets, tensor, entry;
      Append<int64_t>(offsets, 0);
      for (const Json& o : outputs) {
        for (const Json& v : o.at(name)) Append<float>(data, AsFloat(v));
        Append<int64_t>(offsets, static_cast<int64_t>(data.size()));
      }
      PutBytes(tensor, 1, data);
      PutBytes(tensor, 2, offsets);
      PutTag(tensor, 3, kVarint);
      PutVarint(tensor, 1);  // DTYPE_FLOAT32
      PutBytes(entry, 1, name);
      PutBytes(entry, 2, tensor);
      PutBytes(record, 2, entry);
    }
  }
  PutTag(record, 3, kVarint);
  PutVarint(record, outputs.size());
  std::string out;
  PutBytes(out, 1, "ArrayRecord");
  PutBytes(out, 2, record);
  const Json metrics = result.value("metrics", Json::object());
  for (const auto& [name, v] : metrics.items()) {
    std::string entry;
    PutBytes(entry, 1, name);
    PutDouble(entry, 2, v.get<double>());
    PutBytes(out, 3, entry);
  }
  return out;
}

std::string EncodeSampleResponse(const Json& result) {
  std::string out;
  for (const Json& s : result.value("sequences", Json::array())) {
    std::string seq, tokens, logprobs;
    if (s.value("stop_reason", "length") == "length") {
      PutTag(seq, 1, kVarint);
      PutVarint(seq, 1);  // STOP_REASON_LENGTH (STOP is 0, the default, not written)
    }
    for (const Json& id : s.value("tokens", Json::array())) Append<int32_t>(tokens, id.get<int32_t>());
    if (!tokens.empty()) PutBytes(seq, 2, tokens);  // proto3 leaves empty bytes out
    const Json lp = s.value("logprobs", Json());
    if (lp.is_array()) {
      for (const Json& v : lp) Append<float>(logprobs, AsFloat(v));
      PutBytes(seq, 3, logprobs);
    }
    PutBytes(out, 1, seq);
  }
  const Json plp = result.value("prompt_logprobs", Json());
  if (plp.is_array()) {
    std::string bytes;
    for (const Json& v : plp) Append<float>(bytes, AsFloat(v));
    PutBytes(out, 2, bytes);
  }
  // topk_prompt_logprobs: dense N x K matrices, row-major; a position
  // without entries (the first) is token 0, logprob -99999 (the SDK's mask).
  const Json topk = result.value("topk_prompt_logprobs", Json());
  if (topk.is_array()) {
    size_t k = 0;
    for (const Json& row : topk) k = std::max(k, row.is_array() ? row.size() : size_t{0});
    std::string ids, lps, msg;
    for (const Json& row : topk) {
      for (size_t j = 0; j < k; ++j) {
        const bool has = row.is_array() && j < row.size();
        Append<int32_t>(ids, has ? row[j][0].get<int32_t>() : 0);
        Append<float>(lps, has ? AsFloat(row[j][1]) : -99999.0f);
      }
    }
    PutBytes(msg, 1, ids);
    PutBytes(msg, 2, lps);
    PutTag(msg, 3, kVarint);
    PutVarint(msg, k);
    PutTag(msg, 4, kVarint);
    PutVarint(msg, topk.size());
    PutBytes(out, 3, msg);
  }
  return out;
}

}  // namespace burst
