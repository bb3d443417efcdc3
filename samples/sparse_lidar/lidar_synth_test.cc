// The synthetic LiDAR scan: deterministic, KITTI-sized, and valid input for
// spconv (indices in the grid, unique, sorted; features the voxels' means).
#include "lidar_synth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <vector>

namespace sparse_lidar {
namespace {

using Site = std::tuple<int32_t, int32_t, int32_t, int32_t>;

Site siteAt(const VoxelScan& scan, int64_t row) {
  const int32_t* s = &scan.indices[static_cast<size_t>(row) * 4];
  return {s[0], s[1], s[2], s[3]};
}

TEST(LidarSynthTest, SameSeedSameScanOtherSeedOtherScan) {
  const VoxelScan a = syntheticKittiScan(3);
  const VoxelScan b = syntheticKittiScan(3);
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_EQ(a.features, b.features);
  EXPECT_NE(syntheticKittiScan(4).indices, a.indices);
}

TEST(LidarSynthTest, ScansOccupyAsManyVoxelsAsKittiFrames) {
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const VoxelScan scan = syntheticKittiScan(seed);
    EXPECT_GE(scan.numVoxels(), 16000) << "seed " << seed;
    EXPECT_LE(scan.numVoxels(), 40000) << "seed " << seed;
    // Several points share a voxel near the sensor; far away most are alone.
    EXPECT_GT(scan.points[0], scan.numVoxels()) << "seed " << seed;
  }
}

TEST(LidarSynthTest, MaxPointsKeepsThatManyReturnsSpreadOverTheWholeScan) {
  const PointCloud full = simulateScan(5);
  LidarConfig capped_config;
  capped_config.max_points = 2000;
  const PointCloud capped = simulateScan(5, capped_config);
  ASSERT_EQ(capped.size(), 2000);
  // Every kept point is a return of the full scan, taken in scan order at an
  // even step: the first one, and the last kept near the end of the scan.
  const int64_t step = full.size() / 2000;
  for (int64_t j : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{1999}}) {
    const int64_t i = j * full.size() / 2000;
    for (int c = 0; c < 4; ++c) EXPECT_EQ(capped.xyzi[j * 4 + c], full.xyzi[i * 4 + c]) << "point " << j;
  }
  EXPECT_GE(1999 * full.size() / 2000, full.size() - step - 1);
  // A cap above the scan's size keeps every return.
  capped_config.max_points = full.size() + 1;
  EXPECT_EQ(simulateScan(5, capped_config).xyzi, full.xyzi);
  // The capped scan still voxelises into a valid, smaller grid input.
  capped_config.max_points = 2000;
  const VoxelScan scan = syntheticKittiScan(5, 1, capped_config);
  EXPECT_GT(scan.numVoxels(), 500);
  EXPECT_LE(scan.numVoxels(), 2000);
}

TEST(LidarSynthTest, IndicesAreInsideTheGridUniqueAndSorted) {
  const VoxelScan scan = syntheticKittiScan(1, 2);
  ASSERT_EQ(scan.spatial_shape, (std::array<int64_t, 3>{41, 1600, 1408}));
  ASSERT_EQ(scan.indices.size(), static_cast<size_t>(scan.numVoxels()) * 4);
  ASSERT_EQ(scan.features.size(), static_cast<size_t>(scan.numVoxels() * scan.channels));
  for (int64_t r = 0; r < scan.numVoxels(); ++r) {
    const auto [b, z, y, x] = siteAt(scan, r);
    ASSERT_TRUE(b >= 0 && b < scan.batch_size && z >= 0 && z < 41 && y >= 0 && y < 1600 && x >= 0 && x < 1408)
        << "row " << r;
    // Strictly increasing: sorted and no duplicates.
    if (r > 0) {
      ASSERT_LT(siteAt(scan, r - 1), siteAt(scan, r)) << "row " << r;
    }
  }
}

TEST(LidarSynthTest, FeaturesAreMeansOfPointsInsideTheirVoxel) {
  const VoxelScan scan = syntheticKittiScan(2);
  const VoxelGridSpec spec;
  for (int64_t r = 0; r < scan.numVoxels(); ++r) {
    const auto [b, z, y, x] = siteAt(scan, r);
    const float* f = &scan.features[static_cast<size_t>(r * scan.channels)];
    // A mean of points in a voxel lies in it (float rounding aside).
    const double tol = 1e-4;
    ASSERT_GE(f[0], spec.range_min[0] + x * spec.voxel_size[0] - tol) << "row " << r;
    ASSERT_LE(f[0], spec.range_min[0] + (x + 1) * spec.voxel_size[0] + tol) << "row " << r;
    ASSERT_GE(f[1], spec.range_min[1] + y * spec.voxel_size[1] - tol) << "row " << r;
    ASSERT_LE(f[1], spec.range_min[1] + (y + 1) * spec.voxel_size[1] + tol) << "row " << r;
    ASSERT_GE(f[2], spec.range_min[2] + z * spec.voxel_size[2] - tol) << "row " << r;
    ASSERT_LE(f[2], spec.range_min[2] + (z + 1) * spec.voxel_size[2] + tol) << "row " << r;
    ASSERT_TRUE(f[3] >= 0 && f[3] <= 1) << "intensity of row " << r;
  }
}

TEST(LidarSynthTest, BatchItemsAreScansOfTheirOwn) {
  const VoxelScan batch = syntheticKittiScan(5, 3);
  EXPECT_EQ(batch.batch_size, 3);
  ASSERT_EQ(batch.points.size(), 3u);
  // Item 0 is the single scan of the same seed; each item has its own voxels.
  const VoxelScan single = syntheticKittiScan(5);
  std::vector<int64_t> per_item(3, 0);
  for (int64_t r = 0; r < batch.numVoxels(); ++r) ++per_item[static_cast<size_t>(batch.indices[r * 4])];
  EXPECT_EQ(per_item[0], single.numVoxels());
  EXPECT_EQ(std::vector<int32_t>(batch.indices.begin(), batch.indices.begin() + single.numVoxels() * 4),
            single.indices);
  EXPECT_NE(per_item[1], per_item[2]);
  for (int64_t n : per_item) EXPECT_GE(n, 16000);
}

TEST(LidarSynthTest, VoxelizeAveragesPointsAndDropsThoseOutsideTheRange) {
  PointCloud cloud;
  cloud.xyzi = {
      1.01f, 0.01f, 0.01f, 0.2f,  // voxel (z 30, y 800, x 20)
      1.03f, 0.03f, 0.05f, 0.4f,  // the same voxel
      -1.0f, 0.0f,  0.0f,  0.5f,  // behind the sensor: outside
      1.0f,  0.0f,  2.0f,  0.5f,  // above the range: outside
  };
  const VoxelScan scan = voxelize({cloud});
  ASSERT_EQ(scan.numVoxels(), 1);
  EXPECT_EQ(scan.indices, (std::vector<int32_t>{0, 30, 800, 20}));
  EXPECT_EQ(scan.points, std::vector<int64_t>{2});
  EXPECT_NEAR(scan.features[0], 1.02, 1e-6);
  EXPECT_NEAR(scan.features[1], 0.02, 1e-6);
  EXPECT_NEAR(scan.features[2], 0.03, 1e-6);
  EXPECT_NEAR(scan.features[3], 0.3, 1e-6);
}

TEST(LidarSynthTest, AGridTooSmallForItsRangeIsRejected) {
  VoxelGridSpec spec;
  spec.spatial_shape = {41, 1600, 1000};
  EXPECT_THROW(voxelize({}, spec), std::invalid_argument);
  EXPECT_THROW(syntheticKittiScan(0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace sparse_lidar
