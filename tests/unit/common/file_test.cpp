#include "common/file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace pagoda {
namespace {

TEST(File, ReadsAndMapsAWholeFile) {
    auto path = (std::filesystem::temp_directory_path() / "pagoda_file_test.bin").string();
    {
        std::ofstream out(path, std::ios::binary);
        out << std::string("hello\0world", 11);
    }
    auto text = read_file(path);
    ASSERT_TRUE(text.ok()) << text.message();
    EXPECT_EQ(text->size(), 11u);
    auto mapped = MappedFile::open(path);
    ASSERT_TRUE(mapped.ok()) << mapped.message();
    EXPECT_EQ(mapped->view(), *text);
    MappedFile moved = std::move(*mapped);
    EXPECT_EQ(moved.size(), 11u);
    std::remove(path.c_str());
}

TEST(File, MissingFilesAndDirectoriesGiveClearErrors) {
    auto missing = read_file("/nonexistent/pagoda/file.json");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find("/nonexistent/pagoda/file.json"), std::string::npos);
    EXPECT_NE(missing.message().find("No such file"), std::string::npos);
    EXPECT_FALSE(read_file("/tmp").ok());
    EXPECT_FALSE(MappedFile::open("/tmp").ok());
    EXPECT_FALSE(file_exists("/tmp"));
}

}  // namespace
}  // namespace pagoda
