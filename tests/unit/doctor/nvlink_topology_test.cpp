// NVLink and topology rules: a partial NVLink or a GPU with fewer links than its siblings fails,
// PCIe-only systems pass, and GPU pairs across sockets or without P2P warn.
#include <gtest/gtest.h>

#include "fake_nvml.h"

namespace pagoda::doctor {
namespace {

using testing::add_switch_links;
using testing::cuda_13_probe;
using testing::evaluate_fake;
using testing::FakeNvml;
using testing::healthy_h100;
using testing::level_of;

FakeNvml hgx(unsigned gpus) {
    FakeNvml nvml;
    for (unsigned i = 0; i < gpus; ++i) {
        nvml.gpus.push_back(healthy_h100(i));
        add_switch_links(nvml.gpus.back());
    }
    for (unsigned a = 0; a < gpus; ++a)
        for (unsigned b = a + 1; b < gpus; ++b) {
            nvml.topology_levels[{a, b}] = a / 4 == b / 4 ? TopologyLevel::kNode : TopologyLevel::kSystem;
            nvml.p2p[{a, b}] = true;
        }
    return nvml;
}

TEST(DoctorNvLink, FullNvSwitchBoardPasses) {
    FakeNvml nvml = hgx(8);
    const Report r = evaluate_fake(nvml, cuda_13_probe(8));
    for (unsigned i = 0; i < 8; ++i)
        EXPECT_EQ(level_of(r, "gpu" + std::to_string(i) + ".nvlink"), Level::kPass);
    // Pairs across sockets are linked through NVSwitch, so they pass.
    EXPECT_EQ(level_of(r, "topology.gpu0-gpu7"), Level::kPass);
    EXPECT_FALSE(r.has_fail());
}

TEST(DoctorNvLink, SomeLinksDownFails) {
    FakeNvml nvml = hgx(8);
    nvml.gpus[3].nvlinks[5].active = false;
    nvml.gpus[3].nvlinks[11].active = false;
    const Report r = evaluate_fake(nvml, cuda_13_probe(8));
    ASSERT_EQ(level_of(r, "gpu3.nvlink"), Level::kFail);
    EXPECT_NE(r.find("gpu3.nvlink")->value.find("down: 5,11"), std::string::npos);
    EXPECT_NE(r.find("gpu3.nvlink")->action.find("nvidia-smi nvlink -s -i 3"), std::string::npos);
    EXPECT_EQ(level_of(r, "gpu2.nvlink"), Level::kPass);
}

TEST(DoctorNvLink, MissingLinksComparedWithSiblingsFail) {
    // NVML answers for only 12 links on one GPU (the others are not even reported).
    FakeNvml nvml = hgx(4);
    nvml.gpus[1].nvlinks.resize(12);
    const Report r = evaluate_fake(nvml, cuda_13_probe(4));
    EXPECT_EQ(level_of(r, "gpu1.nvlink"), Level::kFail);
    EXPECT_EQ(level_of(r, "gpu0.nvlink"), Level::kPass);
}

TEST(DoctorNvLink, AllLinksDownOnOneGpuFails) {
    FakeNvml nvml = hgx(4);
    for (auto& l : nvml.gpus[2].nvlinks)
        l.active = false;
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(4)), "gpu2.nvlink"), Level::kFail);
}

TEST(DoctorNvLink, NoLinkUpAnywhereWarnsWithSeveralGpus) {
    FakeNvml nvml = hgx(2);
    for (auto& g : nvml.gpus)
        for (auto& l : g.nvlinks)
            l.active = false;
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(2)), "gpu0.nvlink"), Level::kWarn);
}

TEST(DoctorNvLink, MixedVersionsWarn) {
    FakeNvml nvml = hgx(2);
    nvml.gpus[0].nvlinks[0].version = 3;
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(2)), "gpu0.nvlink"), Level::kWarn);
}

TEST(DoctorNvLink, PcieOnlyGpuIsInfo) {
    FakeNvml nvml;
    nvml.gpus.push_back(healthy_h100(0));
    const Report r = evaluate_fake(nvml, cuda_13_probe(1));
    EXPECT_EQ(level_of(r, "gpu0.nvlink"), Level::kInfo);
    EXPECT_EQ(level_of(r, "topology"), Level::kInfo);
}

TEST(DoctorTopology, DirectNvLinkBridgePasses) {
    FakeNvml nvml;
    nvml.gpus = {healthy_h100(0), healthy_h100(1)};
    for (unsigned a = 0; a < 2; ++a)
        for (unsigned l = 0; l < 4; ++l) {
            NvLinkInfo link;
            link.link = l;
            link.active = true;
            link.version = 4;
            link.remote_type = NvLinkRemote::kGpu;
            link.remote_bus_id = nvml.gpus[1 - a].bus_id;
            nvml.gpus[a].nvlinks.push_back(link);
        }
    nvml.topology_levels[{0, 1}] = TopologyLevel::kSystem;
    const Report r = evaluate_fake(nvml, cuda_13_probe(2));
    EXPECT_EQ(level_of(r, "topology.gpu0-gpu1"), Level::kPass);
    EXPECT_NE(r.find("topology.gpu0-gpu1")->value.find("NVLink (4 links)"), std::string::npos);
}

TEST(DoctorTopology, PcieLevels) {
    FakeNvml nvml;
    nvml.gpus = {healthy_h100(0), healthy_h100(1)};
    nvml.p2p[{0, 1}] = true;
    nvml.topology_levels[{0, 1}] = TopologyLevel::kSingle;
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(2)), "topology.gpu0-gpu1"), Level::kPass);
    nvml.topology_levels[{0, 1}] = TopologyLevel::kSystem;
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(2)), "topology.gpu0-gpu1"), Level::kWarn);
    nvml.topology_levels[{0, 1}] = TopologyLevel::kHostBridge;
    nvml.p2p[{0, 1}] = false;
    EXPECT_EQ(level_of(evaluate_fake(nvml, cuda_13_probe(2)), "topology.gpu0-gpu1"), Level::kWarn);
}

}  // namespace
}  // namespace pagoda::doctor
