// Gadgetron users arrive with XML chains; Larmor accepts them for the gadgets it has, so a site can
// point gadgetron_ismrmrd_client -C at Larmor unchanged. Readers and writers are implied by the
// wire protocol and ignored; Gadgetron properties that have no Larmor meaning are ignored too
// (real configs carry many), but a value Larmor does use must be valid.
#include "gadgets/gadgetron_xml.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <pugixml.hpp>
#include <spdlog/spdlog.h>

#include "gadgets/chain_config.h"

namespace larmor {
namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return s;
}

bool truthy(const std::string& v, const std::string& what) {
    std::string l = lower(v);
    if (l == "true" || l == "1" || l == "yes") return true;
    if (l == "false" || l == "0" || l == "no" || l.empty()) return false;
    throw ConfigError(what + ": '" + v + "' is not a boolean (true/false)");
}

struct XmlGadget {
    std::string name, classname;
    std::map<std::string, std::string> properties;
};

config::TriggerDimension trigger_from(const std::string& value) {
    static const std::map<std::string, config::TriggerDimension> kMap = {
        {"", config::TRIGGER_AUTO},           {"none", config::TRIGGER_NONE},
        {"slice", config::TRIGGER_SLICE},     {"contrast", config::TRIGGER_CONTRAST},
        {"phase", config::TRIGGER_PHASE},     {"repetition", config::TRIGGER_REPETITION},
        {"set", config::TRIGGER_SET},         {"average", config::TRIGGER_AVERAGE}};
    auto it = kMap.find(lower(value));
    if (it == kMap.end())
        throw ConfigError("trigger_dimension '" + value +
                          "' is not supported; valid: slice, contrast, phase, repetition, set, average, none, or empty");
    return it->second;
}

// ExtractGadget's extract_mask bits (Gadgetron): 1 magnitude, 2 real, 4 imag, 8 phase.
config::ImageOutput output_from_mask(const std::string& value) {
    int mask = 0;
    try {
        mask = std::stoi(value);
    } catch (const std::exception&) {
        throw ConfigError("extract_mask '" + value + "' is not an integer");
    }
    if (mask & 1) return config::OUTPUT_MAGNITUDE;
    if (mask & 2) return config::OUTPUT_REAL;
    if (mask & 4) return config::OUTPUT_IMAG;
    if (mask & 8) return config::OUTPUT_PHASE;
    throw ConfigError("extract_mask '" + value + "' selects no output (use 1, 2, 4 or 8)");
}

// Sets the Larmor field at `path` ("lambda", or "solver.lambda" inside a settings message) from the
// value of property `prop`, through protobuf reflection and its text syntax. False when the path
// names no scalar field. A name that moved into a settings message is refused with its new path: XML
// properties are flat, so an old chain would otherwise lose the value without a word.
bool set_field(google::protobuf::Message& cfg, const std::string& path, const std::string& prop,
               const std::string& value, const std::string& where) {
    namespace pb = google::protobuf;
    // Resolved on the descriptors first, so a path that ends nowhere leaves no empty message behind.
    std::vector<const pb::FieldDescriptor*> steps;
    const pb::Descriptor* d = cfg.GetDescriptor();
    for (size_t begin = 0;;) {
        const size_t dot = path.find('.', begin);
        const std::string name = path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
        const pb::FieldDescriptor* f = d->FindFieldByName(name);
        if (!f) {
            const std::string moved = moved_parameter(*d, name);
            if (!moved.empty())
                throw ConfigError(where + ": property " + prop + " has moved: name it " + moved + " instead");
            return false;
        }
        steps.push_back(f);
        if (dot == std::string::npos) break;
        if (f->is_repeated() || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) return false;
        d = f->message_type();
        begin = dot + 1;
    }
    const pb::FieldDescriptor* leaf = steps.back();
    if (leaf->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) return false;
    pb::Message* msg = &cfg;
    for (size_t i = 0; i + 1 < steps.size(); ++i) msg = msg->GetReflection()->MutableMessage(msg, steps[i]);
    if (!pb::TextFormat::ParseFieldValueFromString(value, leaf, msg))
        throw ConfigError(where + ": property " + prop + " = '" + value + "' is not a valid " + leaf->type_name());
    return true;
}

// A property named as Larmor's field (so XML can also carry Larmor's own parameters, dotted for those
// in a settings message: solver.deadline_ms).
bool set_same_named_field(google::protobuf::Message& cfg, const std::string& prop, const std::string& value,
                          const std::string& where) {
    return set_field(cfg, prop, prop, value, where);
}

// One translated gadget: appends zero or more Larmor gadgets (or amends the previous one).
using Translator = std::function<void(const XmlGadget&, config::Chain&)>;

config::Gadget& append(config::Chain& chain, const XmlGadget& g) {
    config::Gadget* out = chain.add_gadget();
    out->set_name(g.name);
    return *out;
}

void apply_properties(const XmlGadget& g, google::protobuf::Message& cfg,
                      const std::map<std::string, std::function<void(const std::string&)>>& special) {
    for (const auto& [prop, value] : g.properties) {
        auto it = special.find(prop);
        if (it != special.end()) it->second(value);
        else if (!set_same_named_field(cfg, prop, value, g.classname))
            spdlog::debug("Gadgetron property {}.{} has no Larmor meaning; ignored", g.classname, prop);
    }
}

const std::map<std::string, Translator>& translators() {
    static const std::map<std::string, Translator> kTable = [] {
        std::map<std::string, Translator> t;
        auto pass = [](const XmlGadget& g, config::Chain& c) { append(c, g).mutable_pass_through(); };
        for (const char* n : {"AcquisitionPassthroughGadget", "PassThroughGadget", "PassThrough",
                              // Gadgetron's noise dependency pre-query: the session answers that
                              // chain itself (server/dependency_query.h) before any translation;
                              // inside another chain the gadget has nothing to do.
                              "NoiseSummaryGadget"})
            t[n] = pass;
        t["AcquisitionCounter"] = [](const XmlGadget& g, config::Chain& c) {
            auto* cfg = append(c, g).mutable_acquisition_counter();
            apply_properties(g, *cfg, {});
        };
        auto noise = [](const XmlGadget& g, config::Chain& c) {
            auto* cfg = append(c, g).mutable_noise_adjust();
            apply_properties(g, *cfg, {
                {"noise_dwell_time_us_preset", [cfg](const std::string& v) { cfg->set_noise_dwell_time_us(std::stof(v)); }},
            });
        };
        t["NoiseAdjustGadget"] = t["NoiseAdjust"] = noise;
        auto roos = [](const XmlGadget& g, config::Chain& c) { append(c, g).mutable_remove_ro_oversampling(); };
        t["RemoveROOversamplingGadget"] = t["RemoveROOversampling"] = roos;
        auto acc = [](const XmlGadget& g, config::Chain& c) {
            auto* cfg = append(c, g).mutable_accumulate_trigger();
            apply_properties(g, *cfg, {
                {"trigger_dimension", [cfg](const std::string& v) { cfg->set_trigger(trigger_from(v)); }},
            });
        };
        t["AccumulatorGadget"] = t["AcquisitionAccumulateTriggerGadget"] = t["AccumulateTrigger"] = acc;
        // BucketToBuffer is part of Larmor's accumulator; it must follow one.
        t["BucketToBufferGadget"] = [](const XmlGadget& g, config::Chain& c) {
            if (c.gadget_size() == 0 || !c.gadget(c.gadget_size() - 1).has_accumulate_trigger())
                throw ConfigError("BucketToBufferGadget '" + g.name +
                                  "' must follow AcquisitionAccumulateTriggerGadget (Larmor's AccumulateTrigger does both)");
        };
        auto fft = [](const XmlGadget& g, config::Chain& c) { append(c, g).mutable_fft(); };
        t["FFTGadget"] = t["FFT"] = fft;
        auto combine = [](const XmlGadget& g, config::Chain& c) {
            auto* cfg = append(c, g).mutable_coil_combine();
            apply_properties(g, *cfg, {});
        };
        t["CombineGadget"] = t["CoilCombine"] = combine;
        // Gadgetron 4's SimpleReconGadget = FFT + root-sum-of-squares combination.
        t["SimpleReconGadget"] = [](const XmlGadget& g, config::Chain& c) {
            append(c, g).mutable_fft();
            append(c, XmlGadget{g.name + ".combine", g.classname, {}}).mutable_coil_combine();
        };
        // Splitting image arrays into images is what Larmor's FFT/finish already do.
        t["ImageArraySplitGadget"] = [](const XmlGadget&, config::Chain&) {};
        t["ExtractGadget"] = [](const XmlGadget& g, config::Chain& c) {
            auto* cfg = append(c, g).mutable_image_finish();
            apply_properties(g, *cfg, {
                {"extract_mask", [cfg](const std::string& v) { cfg->set_output(output_from_mask(v)); }},
                {"extract_magnitude", [cfg, &g](const std::string& v) { if (truthy(v, g.classname + ".extract_magnitude")) cfg->set_output(config::OUTPUT_MAGNITUDE); }},
                {"extract_real", [cfg, &g](const std::string& v) { if (truthy(v, g.classname + ".extract_real")) cfg->set_output(config::OUTPUT_REAL); }},
                {"extract_imag", [cfg, &g](const std::string& v) { if (truthy(v, g.classname + ".extract_imag")) cfg->set_output(config::OUTPUT_IMAG); }},
                {"extract_phase", [cfg, &g](const std::string& v) { if (truthy(v, g.classname + ".extract_phase")) cfg->set_output(config::OUTPUT_PHASE); }},
            });
        };
        // ImageFinishGadget after ExtractGadget is the same stage in Larmor.
        auto finish = [](const XmlGadget& g, config::Chain& c) {
            if (c.gadget_size() > 0 && c.gadget(c.gadget_size() - 1).has_image_finish()) {
                apply_properties(g, *c.mutable_gadget(c.gadget_size() - 1)->mutable_image_finish(), {});
                return;
            }
            apply_properties(g, *append(c, g).mutable_image_finish(), {});
        };
        t["ImageFinishGadget"] = t["ImageFinish"] = finish;
        // CG-SENSE under Gadgetron's names (its GPU gadget and parameter names); it calibrates on the
        // ACS lines, so the accumulator before it keeps them.
        auto cg_sense = [](const XmlGadget& g, config::Chain& c) {
            for (int i = c.gadget_size() - 1; i >= 0; --i)
                if (c.gadget(i).has_accumulate_trigger()) {
                    c.mutable_gadget(i)->mutable_accumulate_trigger()->set_emit_calibration(true);
                    break;
                }
            auto* cfg = append(c, g).mutable_cg_sense();
            // Through set_field rather than std::stoi, so a bad value is refused by name and value.
            auto to = [cfg, &g](const char* path, const char* prop) {
                return [cfg, &g, path, prop](const std::string& v) { set_field(*cfg, path, prop, v, g.classname); };
            };
            apply_properties(g, *cfg, {
                {"number_of_iterations", to("solver.iterations", "number_of_iterations")},
                {"cg_limit", to("solver.tolerance", "cg_limit")},
                {"kappa", to("solver.lambda", "kappa")},
            });
        };
        t["gpuCgSenseGadget"] = t["CgSenseGadget"] = t["CgSense"] = cg_sense;
        // Gadgetron's preparation of the GPU SENSE gadgets (buffering, csm): Larmor's accumulator and
        // CgSense do it.
        t["gpuBufferSensePrepGadget"] = [](const XmlGadget&, config::Chain&) {};
        // Generic_Cartesian_Grappa.xml. Its GRAPPA gadget takes Gadgetron's kernel and lambda names; the
        // chain's other generic stages are parts of Larmor's gadgets or have no Larmor meaning (listed
        // below), so the file runs unchanged. The accumulator before it keeps the ACS lines
        // (gadgets/chain_config.cpp implies emit_calibration).
        t["GenericReconCartesianGrappaGadget"] = t["Grappa"] = [](const XmlGadget& g, config::Chain& c) {
            auto* cfg = append(c, g).mutable_grappa();
            auto to = [cfg, &g](const char* path, const char* prop) {
                return [cfg, &g, path, prop](const std::string& v) { set_field(*cfg, path, prop, v, g.classname); };
            };
            apply_properties(g, *cfg, {
                {"grappa_kSize_RO", to("kernel_ro", "grappa_kSize_RO")},
                {"grappa_kSize_E1", to("kernel_e1", "grappa_kSize_E1")},
                {"grappa_kSize_E2", to("kernel_e2", "grappa_kSize_E2")},
                {"grappa_reg_lamda", to("lambda", "grappa_reg_lamda")},
            });
        };
        auto nothing = [](const XmlGadget&, config::Chain&) {};
        // Reference preparation: the Grappa gadget takes the buffer's calibration lines itself.
        t["GenericReconCartesianReferencePrepGadget"] = nothing;
        // Asymmetric echo: Larmor's accumulator places every readout by its center_sample.
        t["AsymmetricEchoAdjustROGadget"] = nothing;
        // Field-of-view adjustment: every Larmor reconstruction crops to the reconstruction matrix.
        t["GenericReconFieldOfViewAdjustmentGadget"] = nothing;
        // Not done by Larmor (every channel is reconstructed; no partial-Fourier or k-space filter; the
        // image keeps its scale until ImageFinish): accepted so the file runs, said in the log.
        auto skipped = [](const XmlGadget& g, config::Chain&) {
            spdlog::info("Gadgetron gadget {} ('{}') has no Larmor counterpart; the chain runs without it", g.classname,
                         g.name);
        };
        for (const char* n : {"GenericReconEigenChannelGadget", "GenericReconPartialFourierHandlingFilterGadget",
                              "GenericReconKSpaceFilteringGadget", "GenericReconImageArrayScalingGadget"})
            t[n] = skipped;
        // Magnitude, then unsigned short: Larmor's ImageFinish does both.
        t["ComplexToFloatGadget"] = [](const XmlGadget& g, config::Chain& c) {
            append(c, g).mutable_image_finish()->set_output(config::OUTPUT_MAGNITUDE);
        };
        t["FloatToUShortGadget"] = t["FloatToShortGadget"] = [](const XmlGadget& g, config::Chain& c) {
            config::ImageFinish* f = c.gadget_size() > 0 && c.gadget(c.gadget_size() - 1).has_image_finish()
                                         ? c.mutable_gadget(c.gadget_size() - 1)->mutable_image_finish()
                                         : append(c, g).mutable_image_finish();
            f->set_pixel_type(config::PIXEL_USHORT);
        };
        // DICOM for PACS. Gadgetron's chains put FloatToUShortGadget before it; without an image stage
        // before it, ImageFinish (magnitude, unsigned short) is added, since DicomFinish takes images.
        t["DicomFinishGadget"] = [](const XmlGadget& g, config::Chain& c) {
            if (c.gadget_size() == 0 || !c.gadget(c.gadget_size() - 1).has_image_finish())
                append(c, XmlGadget{g.name + ".finish", g.classname, {}})
                    .mutable_image_finish()
                    ->set_pixel_type(config::PIXEL_USHORT);
            apply_properties(g, *append(c, g).mutable_dicom_finish(), {});
        };
        return t;
    }();
    return kTable;
}

std::vector<XmlGadget> read_gadgets(const pugi::xml_node& parent, const std::string& origin) {
    std::vector<XmlGadget> out;
    for (const pugi::xml_node& node : parent.children()) {
        std::string tag = node.name();
        if (tag == "parallel" || tag == "distributed" || tag == "external" || tag == "branch")
            throw ConfigError(origin + ": <" + tag + "> stream elements are not supported by Larmor");
        if (tag != "gadget") continue;
        XmlGadget g;
        g.name = node.child_value("name");
        g.classname = node.child_value("classname");
        if (g.classname.empty()) throw ConfigError(origin + ": gadget '" + g.name + "' has no <classname>");
        if (g.name.empty()) g.name = g.classname;
        for (const pugi::xml_node& p : node.children("property")) {
            // Legacy: <property><name/><value/></property>; v2 also: <property name="" value=""/>.
            std::string pname = p.attribute("name") ? p.attribute("name").value() : p.child_value("name");
            std::string pvalue = p.attribute("value") ? p.attribute("value").value() : p.child_value("value");
            if (pname.empty()) throw ConfigError(origin + ": gadget '" + g.name + "' has a property without a name");
            g.properties[pname] = pvalue;
        }
        out.push_back(std::move(g));
    }
    return out;
}

}  // namespace

std::vector<std::string> supported_gadgetron_classnames() {
    std::vector<std::string> names;
    for (const auto& [name, _] : translators()) names.push_back(name);
    return names;
}

config::Chain translate_gadgetron_xml(const std::string& xml, const std::string& origin) {
    pugi::xml_document doc;
    pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
    if (!parsed)
        throw ConfigError(origin + ": XML parse error at byte " + std::to_string(parsed.offset) + ": " + parsed.description());
    std::vector<XmlGadget> gadgets;
    pugi::xml_node root = doc.document_element();
    std::string root_name = root.name();
    if (root_name == "gadgetronStreamConfiguration") {
        gadgets = read_gadgets(root, origin);
    } else if (root_name == "configuration") {
        std::string version = root.child_value("version");
        if (version != "2")
            throw ConfigError(origin + ": <configuration> version '" + version + "' is not supported (only 2)");
        gadgets = read_gadgets(root.child("stream"), origin);
    } else {
        throw ConfigError(origin + ": root element <" + root_name +
                          "> is neither <gadgetronStreamConfiguration> nor <configuration>");
    }

    config::Chain chain;
    chain.set_name(origin);
    const auto& table = translators();
    for (const XmlGadget& g : gadgets) {
        auto it = table.find(g.classname);
        if (it == table.end()) {
            std::string supported;
            for (const auto& n : supported_gadgetron_classnames()) supported += (supported.empty() ? "" : ", ") + n;
            throw ConfigError(origin + ": Gadgetron classname '" + g.classname + "' (gadget '" + g.name +
                              "') has no Larmor equivalent; supported: " + supported);
        }
        try {
            it->second(g, chain);
        } catch (const std::exception& e) {
            throw ConfigError(origin + ": gadget '" + g.name + "': " + e.what());
        }
    }
    return chain;
}

}  // namespace larmor
