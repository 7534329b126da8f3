// Opening an s3:// ObjectStore (the store itself is in s3_store.cpp).
//
// URL: s3://BUCKET[/PREFIX][?endpoint=URL&region=R]. Without endpoint=, the
// endpoint comes from BURST_S3_ENDPOINT, AWS_ENDPOINT_URL_S3 or
// AWS_ENDPOINT_URL, else AWS's regional one; without region=, AWS_REGION or
// AWS_DEFAULT_REGION, else us-east-1. Credentials are never in the URL: they
// come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
// Opening checks the bucket answers to these credentials (HEAD bucket), so a
// wrong secret fails at once, naming the bucket and the endpoint.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "store/object_store.h"
#include "store/s3_http.h"

namespace burst {

// Parses the URL and fills what it leaves out from the environment, except
// the credentials.
Result<S3Config> ParseS3Url(const std::string& url);
// The canonical URL of a config, endpoint and region spelled out, so that a
// worker given it opens the same bucket whatever its own environment says.
std::string S3StoreUrl(const S3Config& config);
// Takes credentials from the environment when config.creds is empty.
Result<std::unique_ptr<ObjectStore>> NewS3Store(S3Config config);

}  // namespace burst
