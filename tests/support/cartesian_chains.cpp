#include "tests/support/cartesian_chains.h"

#include "gadgets/factories.h"

namespace larmor::test {

std::vector<std::unique_ptr<Gadget>> cartesian_front(bool keep_acs) {
    std::vector<std::unique_ptr<Gadget>> g;
    g.push_back(make_noise_adjust(config::NoiseAdjust{}));
    g.push_back(make_remove_ro_oversampling(config::RemoveROOversampling{}));
    config::AccumulateTrigger acc;
    acc.set_emit_calibration(keep_acs);
    g.push_back(make_accumulate_trigger(acc));
    return g;
}

std::vector<std::unique_ptr<Gadget>> rss_chain(bool keep_acs) {
    std::vector<std::unique_ptr<Gadget>> g = cartesian_front(keep_acs);
    g.push_back(make_fft(config::FFT{}));
    config::CoilCombine rss;
    rss.set_method(config::COMBINE_RSS);
    g.push_back(make_coil_combine(rss));
    g.push_back(make_image_finish(config::ImageFinish{}));
    return g;
}

ChainOutput run_dataset(std::vector<std::unique_ptr<Gadget>> chain, const Dataset& ds, std::shared_ptr<Backend> be,
                        const std::string& chain_name, std::vector<std::shared_ptr<Backend>> peers) {
    std::vector<Message> in(ds.acquisitions.begin(), ds.acquisitions.end());
    SessionContext ctx = make_session(ds.header_xml, std::move(be));
    ctx.chain_name = chain_name;
    ctx.peers = std::move(peers);
    ChainOutput out;
    for (Message& m : run_chain(std::move(chain), ctx, in)) {
        if (auto* im = std::get_if<Image>(&m)) out.images.push_back(std::move(*im));
        if (auto* t = std::get_if<Text>(&m)) out.texts.push_back(t->text);
    }
    return out;
}

}  // namespace larmor::test
