// ParseQueueDocument: a Kueue YAML document -> a validated QueueObject. The ClusterQueue's spec is
// read in cluster_queue_parser.cpp.
#include <algorithm>
#include <cctype>
#include <mutex>

#include "common/kueue/embedded_schemas.h"
#include "common/kueue/kueue_model.h"
#include "common/kueue/parse_support.h"
#include "common/trainjob/crd_schema.h"
#include "common/trainjob/object_names.h"

namespace trainlet::kueue {

using trainjob::AppendKey;
using trainjob::Classify;
using trainjob::CrdSchema;
using trainjob::DescribeValue;
using trainjob::IsSet;
using trainjob::MapGet;
using trainjob::QuoteForMessage;
using trainjob::SchemaFindings;
using trainjob::YamlDocument;
using trainjob::YamlKind;

namespace internal {

std::map<std::string, std::string> StringMap(const YAML::Node& n) {
  std::map<std::string, std::string> out;
  if (!n.IsMap()) return out;
  for (auto it = n.begin(); it != n.end(); ++it) out[Text(it->first)] = Text(it->second);
  return out;
}

Result<Quantity> ReadQuantity(const YAML::Node& n, const std::string& resource,
                              const std::string& path, const DocLabel& doc) {
  Quantity q{Text(n), 0};
  auto units = ParseQuantity(q.text, UnitScale(resource));
  if (!units.ok()) return doc.Error(path, units.status().message());
  q.units = *units;
  return q;
}

}  // namespace internal

using internal::DocLabel;
using internal::StringMap;
using internal::Text;

namespace {

// One compiled schema per kind, compiled on first use, thread-safely. An embedded schema that does
// not compile is a build bug.
const CrdSchema& SchemaOf(Kind kind) {
  static std::unique_ptr<CrdSchema> compiled[std::size(kAllKinds)];
  static std::once_flag once[std::size(kAllKinds)];
  const auto i = static_cast<size_t>(kind);
  std::call_once(once[i], [i, kind] {
    auto schema = CrdSchema::Compile(EmbeddedCrdSchemaJson(KindName(kind)));
    TRAINLET_CHECK(schema.ok());
    compiled[i] = std::move(schema).value();
  });
  return *compiled[i];
}

Status CheckApiVersionAndKind(const YAML::Node& node, const DocLabel& unnamed, Kind* kind) {
  YAML::Node api_version = MapGet(node, "apiVersion");
  if (!IsSet(api_version)) return unnamed.Error("apiVersion", "required field missing");
  if (Classify(api_version) != YamlKind::kString || api_version.Scalar() != kApiVersion) {
    return unnamed.Error("apiVersion", "must be " + std::string(kApiVersion) + ", got " +
                                           DescribeValue(api_version));
  }
  YAML::Node kind_node = MapGet(node, "kind");
  if (!IsSet(kind_node)) return unnamed.Error("kind", "required field missing");
  std::optional<Kind> k =
      Classify(kind_node) == YamlKind::kString ? KindOf(kind_node.Scalar()) : std::nullopt;
  if (!k) {
    return unnamed.Error("kind", DescribeValue(kind_node) +
                                     " is not a Kueue kind trainlet accepts (ResourceFlavor, "
                                     "ClusterQueue, LocalQueue or WorkloadPriorityClass)");
  }
  *kind = *k;
  return Status::Ok();
}

// metadata.name, and a LocalQueue's metadata.namespace ("default" when unset).
Status ReadMetadata(const YAML::Node& node, Kind kind, const DocLabel& unnamed, QueueObject* out) {
  YAML::Node meta = MapGet(node, "metadata");
  if (IsSet(meta) && !meta.IsMap()) {
    return unnamed.Error("metadata", "must be an object, got " + DescribeValue(meta));
  }
  YAML::Node name = MapGet(meta, "name");
  if (!IsSet(name)) return unnamed.Error("metadata.name", "required field missing");
  if (Classify(name) != YamlKind::kString || !trainjob::IsDns1123Subdomain(name.Scalar())) {
    return unnamed.Error("metadata.name",
                         "must be a lowercase RFC 1123 subdomain (letters, digits, '-' and '.', "
                         "at most 253 characters), got " +
                             DescribeValue(name));
  }
  out->name = name.Scalar();
  const DocLabel doc(std::string(KindName(kind)) + "/" + out->name, nullptr);
  YAML::Node ns = MapGet(meta, "namespace");
  if (IsSet(ns)) {
    if (Classify(ns) != YamlKind::kString || !trainjob::IsDns1123Label(ns.Scalar())) {
      return doc.Error("metadata.namespace",
                       "must be a lowercase RFC 1123 label, got " + DescribeValue(ns));
    }
    if (Namespaced(kind)) out->namespace_ = ns.Scalar();
  }
  if (Namespaced(kind) && out->namespace_.empty()) out->namespace_ = "default";
  for (const char* map : {"labels", "annotations"}) {
    YAML::Node m = MapGet(meta, map);
    if (!IsSet(m)) continue;
    if (!m.IsMap()) {
      return doc.Error(std::string("metadata.") + map,
                       "must be an object, got " + DescribeValue(m));
    }
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (Classify(it->second) != YamlKind::kString) {
        return doc.Error(AppendKey(std::string("metadata.") + map, Text(it->first)),
                         "must be a string, got " + DescribeValue(it->second));
      }
    }
  }
  return Status::Ok();
}

bool IsTaintEffect(const std::string& e) {
  return e == "NoSchedule" || e == "PreferNoSchedule" || e == "NoExecute";
}

// spec.tolerations, with the CRD's CEL rules on them (the schema checked the items' types).
Status ReadFlavorTolerations(const YAML::Node& list, const DocLabel& doc, ResourceFlavor* f) {
  for (size_t i = 0; list.IsSequence() && i < list.size(); ++i) {
    const YAML::Node& n = list[i];
    const std::string at = trainjob::AppendIndex("spec.tolerations", i);
    Toleration t{Text(MapGet(n, "key")), Text(MapGet(n, "operator")), Text(MapGet(n, "value")),
                 Text(MapGet(n, "effect"))};
    if (IsSet(MapGet(n, "operator")) && t.op != "Equal" && t.op != "Exists") {
      return doc.Error(at + ".operator", "supported toleration values: 'Equal'(default), 'Exists'");
    }
    if (!IsSet(MapGet(n, "key")) && t.op != "Exists") {
      return doc.Error(at + ".operator",
                       "operator must be Exists when 'key' is empty, which "
                       "means 'match all values and all keys'");
    }
    if (t.op == "Exists" && IsSet(MapGet(n, "value"))) {
      return doc.Error(at + ".value", "a value must be empty when 'operator' is 'Exists'");
    }
    if (IsSet(MapGet(n, "effect")) && !IsTaintEffect(t.effect)) {
      return doc.Error(at + ".effect",
                       "supported taint effect values: 'NoSchedule', "
                       "'PreferNoSchedule', 'NoExecute'");
    }
    if (IsSet(MapGet(n, "tolerationSeconds")) && t.effect != "NoExecute") {
      return doc.Error(at + ".effect",
                       "effect must be 'NoExecute' when 'tolerationSeconds' is set");
    }
    f->tolerations.push_back(std::move(t));
  }
  return Status::Ok();
}

Result<ResourceFlavor> ReadFlavor(const YAML::Node& spec, const std::string& name,
                                  const DocLabel& doc) {
  ResourceFlavor f;
  f.name = name;
  f.node_labels = StringMap(MapGet(spec, "nodeLabels"));
  // The schema checked the items: objects of strings, key and effect required.
  const YAML::Node taints = MapGet(spec, "nodeTaints");
  for (size_t i = 0; taints.IsSequence() && i < taints.size(); ++i) {
    Taint t{Text(MapGet(taints[i], "key")), Text(MapGet(taints[i], "value")),
            Text(MapGet(taints[i], "effect"))};
    if (!IsTaintEffect(t.effect)) {
      return doc.Error(trainjob::AppendIndex("spec.nodeTaints", i) + ".effect",
                       "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', "
                       "'NoExecute', got " +
                           QuoteForMessage(t.effect));
    }
    f.node_taints.push_back(std::move(t));
  }
  TRAINLET_RETURN_IF_ERROR(ReadFlavorTolerations(MapGet(spec, "tolerations"), doc, &f));
  if (IsSet(MapGet(spec, "topologyName"))) {
    doc.Warn("spec.topologyName", "ignored (trainlet has no Topology objects)");
  }
  return f;
}

Result<LocalQueue> ReadLocalQueue(const YAML::Node& spec, const QueueObject& obj,
                                  const DocLabel& doc) {
  LocalQueue q;
  q.namespace_ = obj.namespace_;
  q.name = obj.name;
  YAML::Node cq = MapGet(spec, "clusterQueue");
  if (!IsSet(cq)) return doc.Error("spec.clusterQueue", "required field missing");
  q.cluster_queue = Text(cq);
  if (!trainjob::IsDns1123Subdomain(q.cluster_queue)) {
    return doc.Error("spec.clusterQueue",
                     "must be a ClusterQueue's name (an RFC 1123 subdomain), got " +
                         QuoteForMessage(q.cluster_queue));
  }
  if (IsSet(MapGet(spec, "stopPolicy"))) q.stop_policy = Text(MapGet(spec, "stopPolicy"));
  return q;
}

Result<WorkloadPriorityClass> ReadPriorityClass(const YAML::Node& node, const std::string& name,
                                                const DocLabel& doc) {
  WorkloadPriorityClass p;
  p.name = name;
  // The schema checked the range of an integer, but it lets through a scalar that reads as null
  // (`value: !tag` with no text), which is set yet not an integer.
  const YAML::Node value = MapGet(node, "value");
  const std::optional<int64_t> v =
      Classify(value) == YamlKind::kInt ? trainjob::ParseInt64(Text(value)) : std::nullopt;
  if (!v) return doc.Error("value", "must be an integer, got " + DescribeValue(value));
  p.value = static_cast<int32_t>(*v);
  p.description = Text(MapGet(node, "description"));
  return p;
}

// Fills the member of obj's kind from the schema-checked document.
Status ReadKind(const YAML::Node& node, const DocLabel& doc, QueueObject* obj) {
  const YAML::Node spec = MapGet(node, "spec");
  switch (obj->kind) {
    case Kind::kResourceFlavor: {
      TRAINLET_ASSIGN_OR_RETURN(ResourceFlavor f, ReadFlavor(spec, obj->name, doc));
      obj->flavor = std::move(f);
      break;
    }
    case Kind::kClusterQueue: {
      TRAINLET_ASSIGN_OR_RETURN(ClusterQueue cq, internal::ReadClusterQueue(spec, obj->name, doc));
      obj->cluster_queue = std::move(cq);
      break;
    }
    case Kind::kLocalQueue: {
      TRAINLET_ASSIGN_OR_RETURN(LocalQueue lq, ReadLocalQueue(spec, *obj, doc));
      obj->local_queue = std::move(lq);
      break;
    }
    case Kind::kWorkloadPriorityClass: {
      TRAINLET_ASSIGN_OR_RETURN(WorkloadPriorityClass p, ReadPriorityClass(node, obj->name, doc));
      obj->priority_class = std::move(p);
      break;
    }
  }
  return Status::Ok();
}

std::string JoinErrors(const std::string& label, const std::vector<std::string>& errors) {
  std::string out = label + ": ";
  for (size_t i = 0; i < errors.size(); ++i) out += (i > 0 ? "; " : "") + errors[i];
  return out;
}

}  // namespace

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kResourceFlavor:
      return "ResourceFlavor";
    case Kind::kClusterQueue:
      return "ClusterQueue";
    case Kind::kLocalQueue:
      return "LocalQueue";
    case Kind::kWorkloadPriorityClass:
      return "WorkloadPriorityClass";
  }
  return "ResourceFlavor";
}

std::optional<Kind> KindOf(std::string_view name) {
  for (Kind k : kAllKinds) {
    if (name == KindName(k)) return k;
  }
  return std::nullopt;
}

bool IsQueueDocument(std::string_view api_version, std::string_view kind) {
  return api_version.starts_with(std::string(kApiGroup) + "/") || KindOf(kind).has_value();
}

int64_t UnitScale(std::string_view resource) { return resource == "cpu" ? 1000 : 1; }

const char* QueueingStrategyName(QueueingStrategy strategy) {
  return strategy == QueueingStrategy::kStrictFifo ? "StrictFIFO" : "BestEffortFIFO";
}

std::string QueueObject::Ref() const {
  std::string kind_lower = KindName(kind);
  for (char& c : kind_lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return kind_lower + "/" + (namespace_.empty() ? "" : namespace_ + "/") + name;
}

Result<QueueObject> ParseQueueDocument(const YAML::Node& node, int index,
                                       std::vector<std::string>* warnings) {
  const DocLabel unnamed("document " + std::to_string(index), warnings);
  if (!node.IsMap()) {
    return InvalidError(unnamed.label() + ": must be an object with apiVersion and kind, got " +
                        DescribeValue(node));
  }
  QueueObject obj;
  TRAINLET_RETURN_IF_ERROR(CheckApiVersionAndKind(node, unnamed, &obj.kind));
  TRAINLET_RETURN_IF_ERROR(ReadMetadata(node, obj.kind, unnamed, &obj));
  const DocLabel doc(std::string(KindName(obj.kind)) + "/" + obj.name, warnings);
  if (!Namespaced(obj.kind) && IsSet(MapGet(MapGet(node, "metadata"), "namespace"))) {
    doc.Warn("metadata.namespace",
             std::string("ignored (a ") + KindName(obj.kind) + " is cluster-scoped)");
  }
  const SchemaFindings findings = SchemaOf(obj.kind).Validate(node, {"metadata"});
  if (!findings.errors.empty()) return InvalidError(JoinErrors(doc.label(), findings.errors));
  for (const auto& w : findings.warnings) warnings->push_back(doc.label() + ": " + w);
  if (IsSet(MapGet(node, "status"))) doc.Warn("status", "ignored (the status is trainlet's)");
  TRAINLET_RETURN_IF_ERROR(ReadKind(node, doc, &obj));
  obj.yaml = trainjob::EmitYaml(node);
  return obj;
}

Result<ParsedQueueObjects> ParseQueueDocuments(const std::vector<YamlDocument>& docs) {
  ParsedQueueObjects out;
  std::map<std::string, int> defined;  // Ref() -> document index
  try {
    for (const YamlDocument& d : docs) {
      if (!IsSet(d.node)) continue;
      TRAINLET_ASSIGN_OR_RETURN(QueueObject obj,
                                ParseQueueDocument(d.node, d.index, &out.warnings));
      auto [it, inserted] = defined.emplace(obj.Ref(), d.index);
      if (!inserted) {
        return InvalidError(std::string(KindName(obj.kind)) + "/" + obj.name +
                            ": defined twice in this file (documents " +
                            std::to_string(it->second) + " and " + std::to_string(d.index) + ")");
      }
      out.objects.push_back(std::move(obj));
    }
  } catch (const YAML::Exception& e) {
    // The readers do not throw by design; should yaml-cpp still throw, the input is refused.
    return InvalidError("YAML error: " + e.msg);
  }
  return out;
}

Result<ParsedQueueObjects> ParseQueueDocuments(std::string_view yaml_text) {
  TRAINLET_ASSIGN_OR_RETURN(std::vector<YamlDocument> docs, trainjob::LoadDocuments(yaml_text));
  return ParseQueueDocuments(docs);
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  for (const auto& r : match_expressions) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    const bool in =
        has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    if ((r.op == "In" && !in) || (r.op == "NotIn" && in) || (r.op == "Exists" && !has) ||
        (r.op == "DoesNotExist" && has)) {
      return false;
    }
  }
  return true;
}

}  // namespace trainlet::kueue
