// DecodeEnvelope is the first code to touch every byte a peer sends: each rejection must be
// classified, and every body type must survive a round trip.
#include "common/envelope.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "proto/reflection.h"

namespace trainlet {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::util::MessageDifferencer;

std::optional<DecodeError> Decode(const std::string& bytes, v1::Envelope& out) {
  return DecodeEnvelope(bytes.data(), bytes.size(), out);
}

std::optional<DropReason> ReasonFor(const std::string& bytes) {
  v1::Envelope out;
  auto err = Decode(bytes, out);
  if (!err) return std::nullopt;
  return err->reason;
}

v1::Envelope LaunchPlanEnvelope() {
  v1::Envelope env;
  auto* plan = env.mutable_launch_plan();
  plan->set_job("allreduce");
  plan->set_attempt(2);
  auto* w = plan->add_workers();
  w->set_rank(3);
  w->add_argv("/usr/bin/python3");
  (*w->mutable_env())["RANK"] = "3";
  return env;
}

// Serialises without EncodeEnvelope's fix-ups, to build envelopes a buggy or hostile peer sends.
std::string RawBytes(const v1::Envelope& env) {
  std::string out;
  EXPECT_TRUE(env.SerializeToString(&out));
  return out;
}

// The generated code is lite: reflection is over the descriptor set (proto/reflection.h).
bool Same(const google::protobuf::MessageLite& a, const google::protobuf::MessageLite& b) {
  return MessageDifferencer::Equals(*proto::Reflect(a), *proto::Reflect(b));
}

std::string Text(const google::protobuf::MessageLite& m) {
  return proto::Reflect(m)->DebugString();
}

// Every member of the `body` oneof, so a body added to the contract is covered automatically.
std::vector<const FieldDescriptor*> BodyFields() {
  const auto* envelope = proto::FindMessageType("trainlet.v1.Envelope");
  EXPECT_NE(envelope, nullptr);
  if (envelope == nullptr) return {};
  const auto* body = envelope->FindOneofByName("body");
  std::vector<const FieldDescriptor*> out;
  for (int i = 0; i < body->field_count(); ++i) out.push_back(body->field(i));
  return out;
}

TEST(EnvelopeTest, EmptyBufferIsRejectedForMissingVersion) {
  v1::Envelope out;
  auto err = DecodeEnvelope(nullptr, 0, out);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->reason, DropReason::kBadVersion);
  EXPECT_NE(err->detail.find("version 0"), std::string::npos) << err->detail;
}

TEST(EnvelopeTest, GarbageIsMalformed) {
  EXPECT_EQ(ReasonFor(std::string("\xff\xff\xff\xff\xff", 5)), DropReason::kMalformed);
  EXPECT_EQ(ReasonFor("hello, trainlet"), DropReason::kMalformed);
  // Wire type 7 does not exist.
  EXPECT_EQ(ReasonFor(std::string("\x0f", 1)), DropReason::kMalformed);
}

TEST(EnvelopeTest, EveryTruncationOfAValidMessageIsRejected) {
  v1::Envelope env = LaunchPlanEnvelope();
  const std::string bytes = EncodeEnvelope(env);
  ASSERT_FALSE(ReasonFor(bytes).has_value());
  // version (2 bytes) and type (2 bytes) come first, then the length-delimited body.
  for (size_t n = 0; n < bytes.size(); ++n) {
    const auto reason = ReasonFor(bytes.substr(0, n));
    ASSERT_TRUE(reason.has_value()) << "prefix of " << n << " bytes was accepted";
    if (n > 4) EXPECT_EQ(*reason, DropReason::kMalformed) << "prefix of " << n << " bytes";
  }
}

TEST(EnvelopeTest, OversizedInputIsRejectedBeforeParsing) {
  // Size alone decides: a hostile peer must not make the parser walk 8 MiB.
  const std::string big(kMaxMessageBytes + 1, '\0');
  v1::Envelope out;
  auto err = Decode(big, out);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->reason, DropReason::kTooLarge);
  EXPECT_NE(err->detail.find(std::to_string(kMaxMessageBytes + 1)), std::string::npos);
}

TEST(EnvelopeTest, MessageAtTheCapIsParsed) {
  v1::Envelope env;
  env.mutable_log_chunk()->set_data(std::string(kMaxMessageBytes - 64, 'x'));
  std::string bytes = EncodeEnvelope(env);
  ASSERT_LE(bytes.size(), kMaxMessageBytes);
  EXPECT_FALSE(ReasonFor(bytes).has_value());
}

TEST(EnvelopeTest, VersionOtherThanOursIsRejected) {
  v1::Envelope env = LaunchPlanEnvelope();
  EncodeEnvelope(env);
  for (uint32_t version : {0u, 2u, 0xffffffffu}) {
    env.set_version(version);
    v1::Envelope out;
    auto err = Decode(RawBytes(env), out);
    ASSERT_TRUE(err.has_value()) << "version " << version;
    EXPECT_EQ(err->reason, DropReason::kBadVersion);
    EXPECT_NE(err->detail.find(std::to_string(version)), std::string::npos) << err->detail;
  }
}

TEST(EnvelopeTest, TypeThatDoesNotMatchTheBodyIsRejected) {
  v1::Envelope env;
  env.set_version(kProtocolVersion);
  env.mutable_heartbeat()->set_node("n1");

  env.set_type(v1::MESSAGE_TYPE_REGISTER);
  EXPECT_EQ(ReasonFor(RawBytes(env)), DropReason::kTypeMismatch);
  env.set_type(v1::MESSAGE_TYPE_UNSPECIFIED);
  EXPECT_EQ(ReasonFor(RawBytes(env)), DropReason::kTypeMismatch);
  // A type number this build does not know.
  env.set_type(static_cast<v1::MessageType>(99));
  EXPECT_EQ(ReasonFor(RawBytes(env)), DropReason::kTypeMismatch);

  // A type without any body.
  v1::Envelope no_body;
  no_body.set_version(kProtocolVersion);
  no_body.set_type(v1::MESSAGE_TYPE_HEARTBEAT);
  EXPECT_EQ(ReasonFor(RawBytes(no_body)), DropReason::kTypeMismatch);
}

TEST(EnvelopeTest, EveryBodyTypeHasItsOwnMessageType) {
  std::set<v1::MessageType> seen;
  for (const FieldDescriptor* f : BodyFields()) {
    const auto body = static_cast<v1::Envelope::BodyCase>(f->number());
    const v1::MessageType type = TypeForBody(body);
    EXPECT_NE(type, v1::MESSAGE_TYPE_UNSPECIFIED) << f->name() << " has no message type";
    EXPECT_TRUE(seen.insert(type).second) << f->name() << " shares its type with another body";
  }
  EXPECT_EQ(TypeForBody(v1::Envelope::BODY_NOT_SET), v1::MESSAGE_TYPE_UNSPECIFIED);
}

TEST(EnvelopeTest, EveryBodyTypeRoundTrips) {
  for (const FieldDescriptor* f : BodyFields()) {
    SCOPED_TRACE(f->name());
    std::unique_ptr<google::protobuf::Message> filled = proto::NewMessage("trainlet.v1.Envelope");
    auto* body = filled->GetReflection()->MutableMessage(filled.get(), f);
    // Give the body content, so a body that silently disappears cannot pass as an empty one.
    const auto* d = body->GetDescriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* bf = d->field(i);
      if (bf->is_repeated() || bf->containing_oneof() != nullptr) continue;
      if (bf->type() == FieldDescriptor::TYPE_STRING) {
        body->GetReflection()->SetString(body, bf, "value-" + bf->name());
      } else if (bf->type() == FieldDescriptor::TYPE_UINT64) {
        body->GetReflection()->SetUInt64(body, bf, 1ull << 40);
      }
    }
    v1::Envelope env;
    ASSERT_TRUE(env.ParseFromString(filled->SerializeAsString()));
    const std::string bytes = EncodeEnvelope(env);
    EXPECT_EQ(env.version(), kProtocolVersion);
    EXPECT_EQ(env.type(), TypeForBody(env.body_case()));

    v1::Envelope out;
    auto err = Decode(bytes, out);
    ASSERT_FALSE(err.has_value()) << err->detail;
    EXPECT_EQ(static_cast<int>(out.body_case()), f->number());
    EXPECT_TRUE(Same(env, out)) << Text(out);
    const auto reflected = proto::Reflect(out);
    EXPECT_TRUE(
        MessageDifferencer::Equals(*body, reflected->GetReflection()->GetMessage(*reflected, f)))
        << "the body's content was lost: " << Text(out);
  }
}

// proto::ToJson converts a lite message's own bytes; the output is what MessageToJsonString makes
// of its reflective copy, as before, for `-o json` and `-o yaml`: every field at its default,
// enums by name, int64 as strings, repeated messages, a map, escapes and UTF-8.
TEST(ReflectionTest, ToJsonIsTheJsonOfTheReflectiveCopy) {
  v1::Envelope env;
  auto* jobs = env.mutable_operator_response()->mutable_jobs();
  for (int i = 0; i < 3; ++i) {
    auto* j = jobs->add_jobs();
    j->set_name("job-" + std::to_string(i) + " \"quoted\" \xc3\xa9t\xc3\xa9\n");
    j->set_job_phase(v1::JOB_PHASE_RUNNING);
    j->set_attempt(static_cast<uint32_t>(i));
    j->set_created_unix_ms(1'700'000'000'000 + i);
    auto* r = j->add_ranks();
    r->set_rank(1);
    r->set_node("node-1");
    r->set_rank_state(v1::RANK_STATE_RUNNING);
    j->add_events()->set_message("started");
    j->add_placement("node-1");
  }
  env.mutable_operator_response()->set_request_id(7);
  v1::NodeList nodes;
  auto* node = nodes.add_nodes();
  (*node->mutable_used_resources())["nvidia.com/gpu"] = 4;
  (*node->mutable_used_resources())["cpu"] = 1500;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  for (const google::protobuf::MessageLite* m :
       {static_cast<const google::protobuf::MessageLite*>(&env),
        static_cast<const google::protobuf::MessageLite*>(jobs),
        static_cast<const google::protobuf::MessageLite*>(&jobs->jobs(0)),
        static_cast<const google::protobuf::MessageLite*>(&nodes)}) {
    std::string expected;
    ASSERT_TRUE(
        google::protobuf::util::MessageToJsonString(*proto::Reflect(*m), &expected, options).ok());
    EXPECT_EQ(proto::ToJson(*m), expected) << m->GetTypeName();
  }
  EXPECT_NE(proto::ToJson(*jobs).find("\"jobPhase\": \"JOB_PHASE_RUNNING\""), std::string::npos);
  EXPECT_NE(proto::ToJson(*jobs).find("\"createdUnixMs\": \"1700000000000\""), std::string::npos);
}

TEST(EnvelopeTest, DecodeReplacesWhatTheOutputHeld) {
  v1::Envelope first = LaunchPlanEnvelope();
  v1::Envelope second;
  second.mutable_heartbeat()->set_node("n2");
  v1::Envelope out;
  ASSERT_FALSE(Decode(EncodeEnvelope(first), out).has_value());
  ASSERT_FALSE(Decode(EncodeEnvelope(second), out).has_value());
  EXPECT_TRUE(Same(out, second)) << Text(out);
}

TEST(EnvelopeTest, EncodeWithoutBodyIsABug) {
  v1::Envelope env;
  EXPECT_DEATH(EncodeEnvelope(env), "without a body");
}

TEST(DropCountersTest, CountsEachReasonAndTheTotal) {
  DropCounters drops;
  EXPECT_EQ(drops.Total(), 0u);
  for (int r = 0; r < static_cast<int>(DropReason::kCount); ++r) {
    EXPECT_EQ(drops.Get(static_cast<DropReason>(r)), 0u);
  }
  drops.Add(DropReason::kMalformed);
  drops.Add(DropReason::kMalformed);
  drops.Add(DropReason::kUnauthorized);
  EXPECT_EQ(drops.Get(DropReason::kMalformed), 2u);
  EXPECT_EQ(drops.Get(DropReason::kUnauthorized), 1u);
  EXPECT_EQ(drops.Get(DropReason::kTooLarge), 0u);
  EXPECT_EQ(drops.Total(), 3u);
}

TEST(DropCountersTest, EveryReasonHasADistinctName) {
  std::set<std::string> names;
  for (int r = 0; r < static_cast<int>(DropReason::kCount); ++r) {
    const std::string name = DropReasonName(static_cast<DropReason>(r));
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_STREQ(DropReasonName(DropReason::kTooLarge), "too_large");
}

}  // namespace
}  // namespace trainlet
