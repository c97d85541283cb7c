#include "gadgets/chain_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "gadgets/gadgetron_xml.h"

namespace larmor {
namespace {

namespace pb = google::protobuf;

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

std::vector<std::string> field_names(const pb::Descriptor* d) {
    std::vector<std::string> names;
    for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
    return names;
}

// Reads `Message type "T" has no field named "F"` (protobuf's text-format error) into type and field.
// Plain string search: std::regex here made GCC 12 warn (-Wmaybe-uninitialized) in the -O2 sanitizer builds.
bool parse_no_field(const std::string& message, std::string& type, std::string& field) {
    static const std::string kType = "Message type \"", kField = "\" has no field named \"";
    const size_t t = message.find(kType);
    if (t == std::string::npos) return false;
    const size_t type_begin = t + kType.size();
    const size_t f = message.find(kField, type_begin);
    if (f == std::string::npos) return false;
    const size_t field_begin = f + kField.size();
    const size_t field_end = message.find('"', field_begin);
    if (field_end == std::string::npos || field_end == field_begin || f == type_begin) return false;
    type = message.substr(type_begin, f - type_begin);
    field = message.substr(field_begin, field_end - field_begin);
    return true;
}

// Parameters that moved into a settings message shared by several gadgets (their old names and
// numbers are reserved in proto/chain.proto): message, old name, new place.
struct MovedParameter {
    const char* message;
    const char* old_name;
    const char* now;
};
constexpr MovedParameter kMovedParameters[] = {
    {"larmor.config.CgSense", "iterations", "solver.iterations"},
    {"larmor.config.CgSense", "tolerance", "solver.tolerance"},
    {"larmor.config.CgSense", "lambda", "solver.lambda"},
    {"larmor.config.CgSense", "progress_interval", "solver.progress_interval"},
    {"larmor.config.CgSense", "deadline_ms", "solver.deadline_ms"},
    {"larmor.config.CgSense", "nufft_tolerance", "nufft.tolerance"},
};

// "solver.iterations" -> "solver { iterations: ... }", the way a chain file writes it.
std::string text_form(const std::string& path) {
    const size_t dot = path.find('.');
    if (dot == std::string::npos) return path + ": ...";
    return path.substr(0, dot) + " { " + text_form(path.substr(dot + 1)) + " }";
}

// Collects protobuf's parse errors and, for the commonest user mistakes (a misspelt gadget or
// parameter, a parameter from before it moved), says what would have been valid at that place.
class ErrorCollector final : public pb::io::ErrorCollector {
public:
    void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
        std::string msg = message;
        std::string type, field;
        if (parse_no_field(message, type, field)) {
            // The type comes from the strict schema (StrictSchema), which has the generated one's names.
            const pb::Descriptor* d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
            const std::string moved = d ? moved_parameter(*d, field) : std::string();
            if (!moved.empty())
                msg = "parameter '" + field + "' of " + d->name() + " has moved: write " + text_form(moved) + " instead";
            else if (d && d->IsReservedName(field))
                msg = "parameter '" + field + "' of " + d->name() + " was retired; valid parameters: " +
                      (d->field_count() ? join(field_names(d)) : std::string("(none)"));
            else if (d && d->full_name() == "larmor.config.Gadget")
                msg = "unknown gadget type or field '" + field + "' in a gadget entry; valid: " + join(field_names(d));
            else if (d)
                msg = "unknown parameter '" + field + "' for " + d->name() + "; valid parameters: " +
                      (d->field_count() ? join(field_names(d)) : std::string("(none)"));
        }
        errors_.push_back("line " + std::to_string(line + 1) + ", column " + std::to_string(column + 1) + ": " + msg);
    }
    void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
    std::string text() const { return join(errors_); }

private:
    std::vector<std::string> errors_;
};

void validate(const config::Chain& chain, const std::string& origin) {
    if (chain.gadget_size() == 0) throw ConfigError(origin + ": the chain has no gadgets");
    for (int i = 0; i < chain.gadget_size(); ++i)
        if (chain.gadget(i).kind_case() == config::Gadget::KIND_NOT_SET)
            throw ConfigError(origin + ": gadget #" + std::to_string(i + 1) +
                              (chain.gadget(i).name().empty() ? "" : " ('" + chain.gadget(i).name() + "')") +
                              " names no gadget type; known types: " + join(known_gadget_types()));
}

// A reconstruction that asks for the stream's density weights (DENSITY_FROM_STREAM) needs the readout
// accumulator before it to read the trajectory's last component as a weight; gadgets are built one by
// one and cannot see each other, so the chain says it for the user, who then sets one option, not two.
// Likewise GRAPPA calibrates on the ACS lines, which the accumulator before it must therefore keep.
void imply_settings(config::Chain& chain) {
    bool from_stream = false, calibration = false;
    for (int i = chain.gadget_size() - 1; i >= 0; --i) {
        config::Gadget& g = *chain.mutable_gadget(i);
        if (g.has_grappa() || g.has_pics_l1() || g.has_spirit()) calibration = true;
        if (g.has_accumulate_trigger() && calibration) {
            g.mutable_accumulate_trigger()->set_emit_calibration(true);
            calibration = false;
        }
        if (g.has_gridding() && g.gridding().density() == config::DENSITY_FROM_STREAM) from_stream = true;
        if (g.has_cg_sense() && g.cg_sense().density() == config::DENSITY_FROM_STREAM) from_stream = true;
        if (g.has_toeplitz_cg() && g.toeplitz_cg().density() == config::DENSITY_FROM_STREAM) from_stream = true;
        if (g.has_accumulate_readouts() && from_stream) g.mutable_accumulate_readouts()->set_trajectory_weights(true);
    }
}

void drop_reserved_names(pb::DescriptorProto& m) {
    m.clear_reserved_name();
    for (pb::DescriptorProto& nested : *m.mutable_nested_type()) drop_reserved_names(nested);
}

// protobuf's text parser skips a reserved field name without a word (old files are meant to keep
// loading), so an old chain saying `iterations: 100` would run with the default and nobody would know.
// Chains are therefore parsed against a copy of the schema without reserved names, where a retired name
// is an unknown field like a misspelt one, and the ErrorCollector says where it went. The copy has the
// same fields and numbers, so its binary form is the generated Chain's.
struct StrictSchema {
    pb::DescriptorPool pool;
    pb::DynamicMessageFactory factory;  // after the pool: its prototypes go before the descriptors they use
    const pb::Descriptor* chain = nullptr;

    StrictSchema() {
        const pb::FileDescriptor* schema = config::Chain::descriptor()->file();
        if (schema->dependency_count() != 0)
            throw std::logic_error("proto/chain.proto imports other files; StrictSchema must copy them too");
        pb::FileDescriptorProto file;
        schema->CopyTo(&file);
        for (pb::DescriptorProto& m : *file.mutable_message_type()) drop_reserved_names(m);
        const pb::FileDescriptor* built = pool.BuildFile(file);
        chain = built ? built->FindMessageTypeByName(config::Chain::descriptor()->name()) : nullptr;
        if (!chain) throw std::logic_error("cannot rebuild proto/chain.proto without its reserved names");
    }
};

std::unique_ptr<pb::Message> new_strict_chain() {
    static StrictSchema schema;
    return std::unique_ptr<pb::Message>(schema.factory.GetPrototype(schema.chain)->New());
}

config::Chain parse_text_format(const std::string& text, const std::string& origin) {
    std::unique_ptr<pb::Message> strict = new_strict_chain();
    pb::TextFormat::Parser parser;
    ErrorCollector errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(text, strict.get())) throw ConfigError(origin + ": " + errors.text());
    // The strict schema has the generated one's field numbers, so the only thing the binary round trip
    // can refuse is a string that is not UTF-8: protobuf's text parser only logs it, its binary parser
    // rejects it (found by fuzz_chain_config; tests/corpus/chain_config/invalid_utf8_description).
    config::Chain chain;
    if (!chain.ParseFromString(strict->SerializeAsString()))
        throw ConfigError(origin + ": a string in the chain (its name, description or a text parameter) is not "
                                   "valid UTF-8");
    return chain;
}

bool looks_like_xml(const std::string& text) {
    auto it = std::find_if(text.begin(), text.end(), [](unsigned char c) { return !std::isspace(c); });
    return it != text.end() && *it == '<';
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw ConfigError("cannot read chain file '" + p.string() + "'");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

// CONFIG_FILE names come from the network: only plain file names inside the config directory.
void check_config_name(const std::string& name) {
    if (name.empty()) throw ConfigError("empty config name");
    if (name.size() > 255) throw ConfigError("config name of " + std::to_string(name.size()) + " characters is too long");
    if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos)
        throw ConfigError("config name '" + name + "' contains a path separator; only names of chains in the config directory are accepted");
    if (name.find("..") != std::string::npos) throw ConfigError("config name '" + name + "' contains '..'");
    if (name.front() == '.') throw ConfigError("config name '" + name + "' starts with '.'");
    for (unsigned char c : name)
        if (c < 0x20 || c == 0x7f) throw ConfigError("config name contains control character " + std::to_string(int(c)));
}

config::Chain parse_chain(const std::string& text, const std::string& origin) {
    config::Chain chain = looks_like_xml(text) ? translate_gadgetron_xml(text, origin) : parse_text_format(text, origin);
    validate(chain, origin);
    imply_settings(chain);
    return chain;
}

config::Chain load_chain_file(const std::string& config_dir, const std::string& name) {
    check_config_name(name);
    namespace fs = std::filesystem;
    for (const std::string& candidate : {name, name + ".pbtxt"}) {
        fs::path p = fs::path(config_dir) / candidate;
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) {
            config::Chain chain = parse_chain(read_file(p), candidate);
            if (chain.name().empty()) chain.set_name(name);
            return chain;
        }
    }
    throw ConfigError("unknown chain '" + name + "'; available chains: " + join(list_chains(config_dir)));
}

std::vector<std::string> list_chains(const std::string& config_dir) {
    namespace fs = std::filesystem;
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(config_dir, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path& p = it->path();
        if (!it->is_regular_file(ec)) continue;
        if (p.extension() == ".pbtxt") names.push_back(p.stem().string());
        else if (p.extension() == ".xml") names.push_back(p.filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::vector<std::string> known_gadget_types() {
    const pb::OneofDescriptor* kind = config::Gadget::descriptor()->FindOneofByName("kind");
    std::vector<std::string> names;
    for (int i = 0; i < kind->field_count(); ++i) names.push_back(kind->field(i)->name());
    return names;
}

std::string moved_parameter(const pb::Descriptor& message, const std::string& field) {
    for (const MovedParameter& m : kMovedParameters)
        if (message.full_name() == m.message && field == m.old_name) return m.now;
    return {};
}

std::string gadget_display_name(const config::Gadget& g) {
    if (!g.name().empty()) return g.name();
    const pb::FieldDescriptor* f = config::Gadget::descriptor()->FindFieldByNumber(static_cast<int>(g.kind_case()));
    return f ? f->message_type()->name() : "Gadget";
}

}  // namespace larmor
