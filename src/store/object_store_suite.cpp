// The shared ObjectStore suite (object_store_suite.h).
#include "store/object_store_suite.h"

#include <algorithm>
#include <thread>

namespace burst {
namespace {

namespace fs = std::filesystem;

TEST_P(ObjectStoreTest, PutGetOverwriteStat) {
  std::string binary("a\0b\xff\n", 5);
  ASSERT_TRUE(store_->Put("orgs/o1/files/f1", binary).ok());
  EXPECT_EQ(MustGet("orgs/o1/files/f1"), binary);
  ASSERT_TRUE(store_->Put("orgs/o1/files/f1", "second").ok());
  EXPECT_EQ(MustGet("orgs/o1/files/f1"), "second");
  auto st = store_->Stat("orgs/o1/files/f1");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value().size, 6);
  EXPECT_TRUE(store_->Put("empty", "").ok());
  EXPECT_EQ(MustGet("empty"), "");
}

TEST_P(ObjectStoreTest, MissingKeyIsNotFound) {
  EXPECT_EQ(store_->Get("orgs/o1/files/nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->Stat("orgs/o1/files/nope").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->GetToFile("nope", dir_ / "out").code(), Code::kNotFound);
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_P(ObjectStoreTest, BadKeysAreRejectedBeforeAnyWrite) {
  for (const std::string& key :
       std::vector<std::string>{"", "/abs", "a//b", "a/../b", "..", "a/./b", "a/b/", "sp ace", "semi;colon",
                                "back\\slash", std::string(1025, 'a')}) {
    Status s = store_->Put(key, "x");
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "key \"" << key << "\"";
    EXPECT_EQ(s.param(), "key");
    EXPECT_EQ(store_->Get(key).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->Delete(key).code(), Code::kInvalidArgument);
  }
  EXPECT_TRUE(Keys("").empty());
  // Nothing escaped the store's folder either.
  EXPECT_FALSE(fs::exists(dir_ / "b"));
  EXPECT_TRUE(ValidateKey("orgs/org_1/jobs/ftjob-a.b=c/step-00000100/x.safetensors").ok());
}

TEST_P(ObjectStoreTest, ListIsSortedAndByStringPrefix) {
  for (const char* k : {"orgs/b/files/2", "orgs/a/files/1", "orgs/a/files2/x", "orgs/a/jobs/j/c/m", "other"})
    ASSERT_TRUE(store_->Put(k, k).ok());
  EXPECT_EQ(Keys("orgs/a/"),
            (std::vector<std::string>{"orgs/a/files/1", "orgs/a/files2/x", "orgs/a/jobs/j/c/m"}));
  EXPECT_EQ(Keys("orgs/a/files/"), (std::vector<std::string>{"orgs/a/files/1"}));
  EXPECT_EQ(Keys("orgs/a/files"), (std::vector<std::string>{"orgs/a/files/1", "orgs/a/files2/x"}));
  EXPECT_EQ(Keys("").size(), 5u);
  EXPECT_TRUE(Keys("nothing/here/").empty());
  auto listed = store_->List("orgs/b/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed.value().size(), 1u);
  EXPECT_EQ(listed.value()[0].size, static_cast<int64_t>(std::string("orgs/b/files/2").size()));
}

TEST_P(ObjectStoreTest, DeleteIsIdempotentAndPrefixDeleteIsScoped) {
  for (const char* k : {"orgs/a/jobs/j1/x", "orgs/a/jobs/j1/y/z", "orgs/a/jobs/j10/x", "orgs/a/f"})
    ASSERT_TRUE(store_->Put(k, "v").ok());
  EXPECT_TRUE(store_->Delete("orgs/a/f").ok());
  EXPECT_TRUE(store_->Delete("orgs/a/f").ok());
  EXPECT_EQ(store_->DeletePrefix("orgs/a/jobs/j1").code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->DeletePrefix("orgs/a/jobs/j1/").ok());
  EXPECT_EQ(Keys(""), (std::vector<std::string>{"orgs/a/jobs/j10/x"}));
  EXPECT_TRUE(store_->DeletePrefix("orgs/none/").ok());
}

TEST_P(ObjectStoreTest, FilesInAndOut) {
  fs::path src = dir_ / "src.bin";
  std::string data(300000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  WriteFileAtomic(src, data);
  ASSERT_TRUE(store_->PutFile("orgs/a/files/big", src).ok());
  ASSERT_TRUE(store_->GetToFile("orgs/a/files/big", dir_ / "copy.bin").ok());
  EXPECT_EQ(ReadFile(dir_ / "copy.bin"), data);
  Status missing = store_->PutFile("orgs/a/files/x", dir_ / "no-such-file");
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(store_->Stat("orgs/a/files/x").status().code(), Code::kNotFound);
}

TEST_P(ObjectStoreTest, ConcurrentWritersNeverLeaveAMix) {
  std::vector<std::string> values;
  for (int i = 0; i < 4; ++i) values.push_back(std::string(100000 + i, static_cast<char>('a' + i)));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < 10; ++n) EXPECT_TRUE(store_->Put("shared/key", values[i]).ok());
    });
  }
  for (int n = 0; n < 50; ++n) {
    auto r = store_->Get("shared/key");
    if (!r.ok()) continue;  // not written yet
    EXPECT_NE(std::find(values.begin(), values.end(), r.value()), values.end()) << "a torn read";
  }
  for (auto& t : threads) t.join();
  std::string last = MustGet("shared/key");
  EXPECT_NE(std::find(values.begin(), values.end(), last), values.end());
}

}  // namespace
}  // namespace burst
