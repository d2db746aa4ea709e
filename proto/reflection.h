// Reflection over trainlet's messages, for the few that need it: trainletctl's `-o json` and
// `-o yaml`, and tests that walk every message type.
//
// The generated code is lite (optimize_for = LITE_RUNTIME in every .proto): the daemons parse and
// serialise, and never pay for descriptors or the full runtime. What reflects builds the
// descriptors from the descriptor set protoc writes at build time (embedded in this library) and
// views a lite message as a DynamicMessage of the same type. This library links the full
// libprotobuf; the daemons do not link it.
//
// Threading: every function may be called from any thread.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/message_lite.h>

#include <memory>
#include <string>

namespace trainlet::proto {

// trainlet.v1's descriptors, built once.
const google::protobuf::DescriptorPool& Descriptors();

// The descriptor of a trainlet message type by its full name ("trainlet.v1.Envelope"), or null.
const google::protobuf::Descriptor* FindMessageType(const std::string& full_name);

// An empty reflective message of that type, or null for a name that is not trainlet's.
std::unique_ptr<google::protobuf::Message> NewMessage(const std::string& full_name);

// A reflective copy of `message`: its bytes parsed as its own type. Null only for a message type
// that is not trainlet's.
std::unique_ptr<google::protobuf::Message> Reflect(const google::protobuf::MessageLite& message);

// The proto3 JSON mapping of `message`, indented, with fields at their defaults included.
std::string ToJson(const google::protobuf::MessageLite& message);

}  // namespace trainlet::proto
