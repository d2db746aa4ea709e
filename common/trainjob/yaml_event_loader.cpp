#include "common/trainjob/yaml_event_loader.h"

#include <yaml.h>

#include <string>
#include <unordered_map>

#include "common/trainjob/yaml_support.h"

namespace trainlet::trainjob {
namespace {

std::string At(const yaml_mark_t& mark) {
  return "line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
}

std::string Text(const yaml_char_t* s) {
  return s == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(s));
}

// yaml-cpp's tag for an untagged node: "!" for a quoted scalar, "?" for the rest.
std::string TagOf(const yaml_char_t* tag, bool non_specific_quoted) {
  if (tag != nullptr) return Text(tag);
  return non_specific_quoted ? "!" : "?";
}

class Parser {
 public:
  explicit Parser(std::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_encoding(&parser_, YAML_UTF8_ENCODING);
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
  }
  ~Parser() { yaml_parser_delete(&parser_); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  bool Next(yaml_event_t* event) { return yaml_parser_parse(&parser_, event) != 0; }

  // libyaml's problem, where it is, and what it was inside of.
  std::string Error() const {
    if (parser_.error == YAML_MEMORY_ERROR) return "out of memory";
    if (parser_.error == YAML_READER_ERROR) {
      return "byte " + std::to_string(parser_.problem_offset) + ": " + Problem();
    }
    std::string out = At(parser_.problem_mark) + ": YAML syntax error: " + Problem();
    if (parser_.context != nullptr) {
      out +=
          std::string(" (") + parser_.context + " that starts at " + At(parser_.context_mark) + ")";
    }
    return out;
  }

 private:
  std::string Problem() const {
    return parser_.problem != nullptr ? parser_.problem : "unreadable YAML";
  }

  yaml_parser_t parser_{};
};

// The last event read. libyaml zeroes an event before it fills it, and deleting a zeroed one
// frees nothing, so the previous one is deleted before each read, the last one at the end.
class Event {
 public:
  Event() = default;
  ~Event() { yaml_event_delete(&event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  yaml_event_t* Reset() {
    yaml_event_delete(&event_);
    return &event_;
  }
  const yaml_event_t& operator*() const { return event_; }

 private:
  yaml_event_t event_{};
};

// Builds one document's tree from its events. Never assigned: assigning a YAML::Node makes the
// node it refers to a reference to the other (the document already handed out included), so
// every slot here is rebound with reset().
class TreeBuilder {
 public:
  // Puts `node` where the document is: its root, the next item of the open sequence, or the next
  // key or value of the open map. `anchor` (may be null) names it for later aliases.
  void Add(const YAML::Node& node, const yaml_char_t* anchor) {
    if (anchor != nullptr) anchors_[Text(anchor)].reset(node);
    if (open_.empty()) {
      root_.reset(node);
      return;
    }
    Open& parent = open_.back();
    if (parent.node.IsSequence()) {
      parent.node.push_back(node);
    } else if (!parent.has_key) {
      parent.key.reset(node);
      parent.has_key = true;
    } else {
      parent.node.force_insert(parent.key, node);
      parent.has_key = false;
    }
  }
  void Start(const YAML::Node& collection, const yaml_char_t* anchor) {
    Add(collection, anchor);
    open_.push_back(Open{collection, YAML::Node(), false});
  }
  void End() { open_.pop_back(); }
  void Clear() {
    root_.reset(YAML::Node());
    open_.clear();
    anchors_.clear();
  }
  size_t depth() const { return open_.size(); }
  const YAML::Node* Anchored(const yaml_char_t* anchor) const {
    auto it = anchors_.find(Text(anchor));
    return it == anchors_.end() ? nullptr : &it->second;
  }
  YAML::Node Root() const { return root_; }

 private:
  struct Open {
    YAML::Node node;
    YAML::Node key;
    bool has_key = false;
  };
  YAML::Node root_;
  std::vector<Open> open_;
  std::unordered_map<std::string, YAML::Node> anchors_;
};

YAML::EmitterStyle::value StyleOf(bool flow) {
  return flow ? YAML::EmitterStyle::Flow : YAML::EmitterStyle::Block;
}

}  // namespace

Result<YamlStream> ParseYamlStream(std::string_view text) {
  Parser parser(text);
  Event event;
  YamlStream out;
  TreeBuilder tree;
  int documents = 0;
  auto fail = [&](const std::string& what) {
    return InvalidError("document " + std::to_string(documents < 1 ? 1 : documents) + ": " + what);
  };
  for (;;) {
    if (!parser.Next(event.Reset())) return fail(parser.Error());
    const yaml_event_t& e = *event;
    switch (e.type) {
      case YAML_STREAM_END_EVENT:
        return out;
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > kMaxYamlDocuments) {
          return InvalidError("more than " + std::to_string(kMaxYamlDocuments) + " documents");
        }
        tree.Clear();
        break;
      case YAML_DOCUMENT_END_EVENT:
        out.documents.push_back(tree.Root());
        break;
      case YAML_SCALAR_EVENT: {
        const auto& s = e.data.scalar;
        std::string value(reinterpret_cast<const char*>(s.value), s.length);
        if (s.tag == nullptr && s.plain_implicit && IsNullText(value)) {
          tree.Add(YAML::Node(YAML::NodeType::Null), s.anchor);
          break;
        }
        YAML::Node node(value);
        node.SetTag(TagOf(s.tag, !s.plain_implicit));
        tree.Add(node, s.anchor);
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (tree.depth() >= static_cast<size_t>(kMaxYamlDepth)) {
          return fail(At(e.start_mark) + ": nested deeper than " + std::to_string(kMaxYamlDepth) +
                      " levels");
        }
        const bool sequence = e.type == YAML_SEQUENCE_START_EVENT;
        YAML::Node node(sequence ? YAML::NodeType::Sequence : YAML::NodeType::Map);
        node.SetTag(TagOf(sequence ? e.data.sequence_start.tag : e.data.mapping_start.tag, false));
        node.SetStyle(StyleOf(sequence ? e.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                                       : e.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE));
        tree.Start(node, sequence ? e.data.sequence_start.anchor : e.data.mapping_start.anchor);
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        tree.End();
        break;
      case YAML_ALIAS_EVENT: {
        const YAML::Node* anchored = tree.Anchored(e.data.alias.anchor);
        if (anchored == nullptr) {
          return fail(At(e.start_mark) + ": YAML syntax error: alias *" +
                      Text(e.data.alias.anchor) + " names no anchor before it");
        }
        out.has_alias = true;
        tree.Add(*anchored, nullptr);
        break;
      }
      default:  // stream start, and no other event there is
        break;
    }
  }
}

}  // namespace trainlet::trainjob
