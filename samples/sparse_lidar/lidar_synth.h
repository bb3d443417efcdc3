#pragma once
// A synthetic LiDAR scan, voxelised as 3-D detectors (SECOND, PointPillars,
// PV-RCNN) take it: the input of the sparse_lidar sample and of
// bench/spconv's benchmarks. No Backplane dependency: it yields plain
// vectors, which callers turn into tensors.
//
//   VoxelScan scan = syntheticKittiScan(/*seed=*/0, /*batch_size=*/2);
//   Tensor indices = tensorFromVector(scan.indices, {scan.numVoxels(), 4});          // int32 (b, z, y, x)
//   Tensor features = tensorFromVector(scan.features, {scan.numVoxels(), scan.channels});
//
// Note [Synthetic LiDAR scene]
// A 64-beam spinning scanner like KITTI's Velodyne HDL-64E (vertical angles
// from +2 to -24.8 degrees, 1.73 m above a flat ground) ray-casts a street:
// cars and pedestrians (boxes standing on the ground, turned by a yaw), walls
// and building fronts along the road, and poles. Every ray returns its first
// hit within max_range, with Gaussian range noise, a random drop (as real
// scanners lose rays on dark or specular surfaces) and an intensity from the
// surface's reflectivity and the angle of incidence. Only the forward half
// (x > 0) is cast: KITTI's detection range keeps only that. What matters for
// sparse convolution is the shape of the occupancy, and this has the real
// one: dense rings on the ground near the sensor thinning with range, and
// vertical surfaces on the objects; at the default settings a scan occupies
// about 16k to 40k voxels of KITTI's grid, as real KITTI frames do.
//
// Determinism: the scene and every noise draw come from the seed through a
// generator written here (not std:: distributions, whose algorithms differ
// between standard libraries), so a seed gives the same scan on every
// machine.

#include <array>
#include <cstdint>
#include <vector>

namespace sparse_lidar {

// The scanner and the scene around it.
struct LidarConfig {
  int beams = 64;  // elevation angles spread evenly over [min, max]
  double max_elevation_deg = 2.0;
  double min_elevation_deg = -24.8;
  double azimuth_step_deg = 0.2;  // horizontal resolution
  double sensor_height_m = 1.73;  // above the ground plane
  double max_range_m = 120.0;
  double range_noise_m = 0.02;  // standard deviation
  double ray_drop = 0.15;       // probability that a ray returns nothing
  int cars = 16;
  int pedestrians = 6;
  int walls = 4;
  int poles = 10;
  // 0: every return. Else at most this many points, every (size / max_points)-th
  // return of the scan kept, so a small scan still spans the whole scene (the
  // simulator runs the backbone on one in seconds).
  int64_t max_points = 0;
};

// Points in the sensor frame (x forward, y left, z up, metres).
struct PointCloud {
  std::vector<float> xyzi;  // [size, 4]: x, y, z, intensity in [0, 1]
  int64_t size() const { return static_cast<int64_t>(xyzi.size() / 4); }
};

// One scan of the scene drawn from `seed`.
PointCloud simulateScan(uint64_t seed, const LidarConfig& config = {});

// A regular grid over a box of the sensor frame: the voxel of a point is
// floor((p - range_min) / voxel_size) per axis. The defaults are OpenPCDet's
// KITTI settings (POINT_CLOUD_RANGE [0, -40, -3, 70.4, 40, 1], VOXEL_SIZE
// [0.05, 0.05, 0.1]); spatial_shape is (z, y, x) with one more z plane than
// the range holds, as SECOND's backbone expects ([41, 1600, 1408]).
struct VoxelGridSpec {
  std::array<double, 3> range_min = {0.0, -40.0, -3.0};  // x, y, z
  std::array<double, 3> range_max = {70.4, 40.0, 1.0};
  std::array<double, 3> voxel_size = {0.05, 0.05, 0.1};
  std::array<int64_t, 3> spatial_shape = {41, 1600, 1408};  // z, y, x
};

// Occupied voxels of a batch of point clouds, as spconv takes them.
struct VoxelScan {
  int64_t batch_size = 0;
  std::array<int64_t, 3> spatial_shape = {0, 0, 0};  // z, y, x
  int64_t channels = 4;                              // mean x, y, z, intensity of the voxel's points
  // [numVoxels(), 4] (batch, z, y, x), unique, sorted by that tuple.
  std::vector<int32_t> indices;
  std::vector<float> features;  // [numVoxels(), channels], the row of the same voxel
  std::vector<int64_t> points;  // points that fell into the grid, per batch item

  int64_t numVoxels() const { return static_cast<int64_t>(indices.size() / 4); }
};

// Voxelises clouds[b] as batch item b; points outside the grid's range are
// dropped. Throws std::invalid_argument if the spec's range, voxel size and
// spatial_shape disagree.
VoxelScan voxelize(const std::vector<PointCloud>& clouds, const VoxelGridSpec& spec = {});

// `batch_size` scans (item b from a seed derived from `seed` and b) on
// KITTI's grid: the input of the sample and the benchmarks.
VoxelScan syntheticKittiScan(uint64_t seed, int64_t batch_size = 1, const LidarConfig& config = {});

}  // namespace sparse_lidar
