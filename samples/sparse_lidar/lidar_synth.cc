#include "lidar_synth.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <utility>

namespace sparse_lidar {
namespace {

// SplitMix64: a small, well-mixed generator whose output is the same on
// every platform (Note [Synthetic LiDAR scene]).
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  double normal() {  // Box-Muller; 1 - uniform() is in (0, 1], so the log is finite
    return std::sqrt(-2.0 * std::log(1.0 - uniform())) * std::cos(2.0 * std::numbers::pi * uniform());
  }

 private:
  uint64_t state_;
};

// A box standing on the ground, turned by a yaw around the vertical axis.
struct Box {
  double cx, cy;            // centre of the footprint
  double length, width;     // along the box's own x and y
  double bottom, height;    // z range [bottom, bottom + height]
  double reflectivity;      // in (0, 1]
  double cos_yaw, sin_yaw;  // of the yaw
  double bound_radius;      // of the footprint around (cx, cy): a cheap rejection test
};

Box makeBox(double cx, double cy, double length, double width, double bottom, double height, double yaw,
            double reflectivity) {
  return Box{cx,     cy,           length,        width,         bottom,
             height, reflectivity, std::cos(yaw), std::sin(yaw), 0.5 * std::hypot(length, width)};
}

struct Hit {
  double t = 0;  // distance along the unit ray
  double cos_incidence = 1;
  double reflectivity = 0;
};

// The first intersection of the ray from the origin along unit `dir` with
// `box` (slab method in the box's frame), if closer than `best.t`.
void intersect(const Box& box, const std::array<double, 3>& dir, Hit& best) {
  // Reject boxes whose bounding cylinder the ray's horizontal line misses.
  const double along = box.cx * dir[0] + box.cy * dir[1];
  const double horizontal = std::hypot(dir[0], dir[1]);
  if (horizontal > 0) {
    const double cross = std::abs(box.cx * dir[1] - box.cy * dir[0]) / horizontal;
    if (cross > box.bound_radius || along < -box.bound_radius) return;
  }
  // Origin and direction in the box's frame (centred, axis-aligned).
  const std::array<double, 3> o = {-(box.cx * box.cos_yaw + box.cy * box.sin_yaw),
                                   -(-box.cx * box.sin_yaw + box.cy * box.cos_yaw), -(box.bottom + 0.5 * box.height)};
  const std::array<double, 3> d = {dir[0] * box.cos_yaw + dir[1] * box.sin_yaw,
                                   -dir[0] * box.sin_yaw + dir[1] * box.cos_yaw, dir[2]};
  const std::array<double, 3> half = {0.5 * box.length, 0.5 * box.width, 0.5 * box.height};
  double t_near = 0, t_far = best.t;
  int axis = -1;
  for (int a = 0; a < 3; ++a) {
    if (std::abs(d[a]) < 1e-12) {
      if (std::abs(o[a]) > half[a]) return;
      continue;
    }
    double t0 = (-half[a] - o[a]) / d[a], t1 = (half[a] - o[a]) / d[a];
    if (t0 > t1) std::swap(t0, t1);
    if (t0 > t_near) {
      t_near = t0;
      axis = a;
    }
    t_far = std::min(t_far, t1);
    if (t_near > t_far) return;
  }
  if (axis < 0) return;  // the sensor is inside the box
  best = {t_near, std::abs(d[axis]), box.reflectivity};
}

// The objects of the scene drawn from `rng`: what stands on the ground.
std::vector<Box> makeScene(Random& rng, const LidarConfig& c) {
  const double ground = -c.sensor_height_m;
  std::vector<Box> boxes;
  // Footprint centres of the movable objects so far, to keep them apart.
  std::vector<std::array<double, 3>> placed;  // x, y, radius
  auto place = [&](double radius, double x_lo, double x_hi, double y_lo, double y_hi, double& x, double& y) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      x = rng.uniform(x_lo, x_hi);
      y = rng.uniform(y_lo, y_hi);
      const bool free = std::none_of(placed.begin(), placed.end(), [&](const std::array<double, 3>& p) {
        return std::hypot(p[0] - x, p[1] - y) < p[2] + radius;
      });
      if (free && std::hypot(x, y) > 4.0) {  // none on top of the car carrying the sensor
        placed.push_back({x, y, radius});
        return true;
      }
    }
    return false;
  };
  double x = 0, y = 0;
  for (int i = 0; i < c.cars; ++i) {
    // Cars in lanes along the road (yaw near 0 or pi), some parked at an angle.
    if (!place(2.6, 3.0, 68.0, -14.0, 14.0, x, y)) continue;
    const double yaw = (rng.uniform() < 0.5 ? 0.0 : std::numbers::pi) + rng.uniform(-0.15, 0.15) +
                       (rng.uniform() < 0.2 ? rng.uniform(-1.2, 1.2) : 0.0);
    boxes.push_back(makeBox(x, y, rng.uniform(3.6, 4.8), rng.uniform(1.6, 1.9), ground, rng.uniform(1.4, 1.7), yaw,
                            rng.uniform(0.4, 0.95)));
  }
  for (int i = 0; i < c.pedestrians; ++i) {
    if (!place(0.5, 3.0, 40.0, -16.0, 16.0, x, y)) continue;
    boxes.push_back(makeBox(x, y, rng.uniform(0.4, 0.7), rng.uniform(0.4, 0.7), ground, rng.uniform(1.5, 1.9),
                            rng.uniform(0.0, std::numbers::pi), rng.uniform(0.2, 0.6)));
  }
  // Walls and building fronts along both sides of the road, and one across its far end.
  for (int i = 0; i < c.walls; ++i) {
    const double side = i % 2 == 0 ? 1.0 : -1.0;
    const double length = rng.uniform(15.0, 45.0);
    boxes.push_back(makeBox(rng.uniform(0.5 * length, 70.0), side * rng.uniform(16.0, 30.0), length,
                            rng.uniform(0.3, 0.6), ground, rng.uniform(2.0, 8.0), rng.uniform(-0.05, 0.05),
                            rng.uniform(0.3, 0.6)));
  }
  boxes.push_back(makeBox(rng.uniform(60.0, 69.0), rng.uniform(-10.0, 10.0), 0.5, rng.uniform(20.0, 50.0), ground,
                          rng.uniform(4.0, 10.0), rng.uniform(-0.2, 0.2), rng.uniform(0.3, 0.6)));
  for (int i = 0; i < c.poles; ++i) {
    const double side = i % 2 == 0 ? 1.0 : -1.0;
    boxes.push_back(makeBox(rng.uniform(3.0, 70.0), side * rng.uniform(7.0, 15.0), 0.25, 0.25, ground,
                            rng.uniform(4.0, 7.0), 0.0, rng.uniform(0.5, 0.9)));
  }
  return boxes;
}

// Mixes (seed, item) into the seed of batch item `item`, so items differ
// and item 0 of seed s is not item 1 of seed s - 1.
uint64_t itemSeed(uint64_t seed, int64_t item) {
  Random mix(seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(item + 1)));
  return mix.next();
}

}  // namespace

PointCloud simulateScan(uint64_t seed, const LidarConfig& c) {
  if (c.beams < 1 || !(c.azimuth_step_deg > 0) || !(c.max_range_m > 0) || !(c.sensor_height_m > 0)) {
    throw std::invalid_argument(
        "simulateScan: beams, azimuth_step_deg, max_range_m and sensor_height_m must be "
        "positive");
  }
  Random rng(seed);
  const std::vector<Box> boxes = makeScene(rng, c);
  const double ground_reflectivity = 0.25;
  const double deg = std::numbers::pi / 180.0;
  // The forward half: azimuths in [-90, 90] degrees.
  const int columns = static_cast<int>(std::floor(180.0 / c.azimuth_step_deg)) + 1;

  PointCloud cloud;
  cloud.xyzi.reserve(static_cast<size_t>(columns) * static_cast<size_t>(c.beams) * 4);
  for (int beam = 0; beam < c.beams; ++beam) {
    const double elevation =
        (c.beams == 1 ? c.max_elevation_deg
                      : c.max_elevation_deg + (c.min_elevation_deg - c.max_elevation_deg) * beam / (c.beams - 1)) *
        deg;
    for (int column = 0; column < columns; ++column) {
      const double azimuth = (-90.0 + column * c.azimuth_step_deg) * deg;
      const std::array<double, 3> dir = {std::cos(elevation) * std::cos(azimuth),
                                         std::cos(elevation) * std::sin(azimuth), std::sin(elevation)};
      Hit hit{c.max_range_m, 1.0, 0.0};
      if (dir[2] < 0) {
        const double t_ground = c.sensor_height_m / -dir[2];
        if (t_ground < hit.t) hit = {t_ground, -dir[2], ground_reflectivity};
      }
      for (const Box& box : boxes) intersect(box, dir, hit);
      // Draw the noise of every ray, hit or not, so that one ray's outcome
      // does not shift the draws of the next.
      const double drop = rng.uniform(), noise = rng.normal(), shade = rng.normal();
      if (hit.reflectivity == 0 || drop < c.ray_drop) continue;
      const double range = hit.t + c.range_noise_m * noise;
      const double intensity = std::clamp(hit.reflectivity * (0.3 + 0.7 * hit.cos_incidence) + 0.03 * shade, 0.0, 1.0);
      cloud.xyzi.insert(cloud.xyzi.end(), {static_cast<float>(range * dir[0]), static_cast<float>(range * dir[1]),
                                           static_cast<float>(range * dir[2]), static_cast<float>(intensity)});
    }
  }
  if (c.max_points > 0 && cloud.size() > c.max_points) {
    // Point j of the cap is return floor(j * size / max_points): evenly spread,
    // in scan order, the same for a seed on every machine.
    const int64_t size = cloud.size();
    std::vector<float> kept(static_cast<size_t>(c.max_points) * 4);
    for (int64_t j = 0; j < c.max_points; ++j) {
      const int64_t i = j * size / c.max_points;
      std::copy_n(cloud.xyzi.begin() + i * 4, 4, kept.begin() + j * 4);
    }
    cloud.xyzi = std::move(kept);
  }
  return cloud;
}

VoxelScan voxelize(const std::vector<PointCloud>& clouds, const VoxelGridSpec& spec) {
  // Grid axes in (z, y, x) order, as spatial_shape and the indices are.
  constexpr std::array<int, 3> kAxis = {2, 1, 0};
  for (int a = 0; a < 3; ++a) {
    const int p = kAxis[a];
    const double cells = (spec.range_max[p] - spec.range_min[p]) / spec.voxel_size[p];
    if (!(spec.voxel_size[p] > 0) || !(cells > 0) || spec.spatial_shape[a] < std::llround(cells)) {
      throw std::invalid_argument("voxelize: spatial_shape[" + std::to_string(a) +
                                  "] = " + std::to_string(spec.spatial_shape[a]) + " cannot hold the range " +
                                  std::to_string(spec.range_min[p]) + ".." + std::to_string(spec.range_max[p]) +
                                  " in voxels of " + std::to_string(spec.voxel_size[p]));
    }
  }
  VoxelScan scan;
  scan.batch_size = static_cast<int64_t>(clouds.size());
  scan.spatial_shape = spec.spatial_shape;
  scan.points.assign(clouds.size(), 0);
  const int64_t volume = spec.spatial_shape[0] * spec.spatial_shape[1] * spec.spatial_shape[2];

  // (linear voxel key, point) for every point inside the grid, sorted: the
  // points of one voxel become adjacent, voxels come in (b, z, y, x) order,
  // and ties keep the points' order, so the sums below are deterministic.
  std::vector<std::pair<int64_t, const float*>> keyed;
  for (size_t b = 0; b < clouds.size(); ++b) {
    for (int64_t i = 0; i < clouds[b].size(); ++i) {
      const float* point = &clouds[b].xyzi[static_cast<size_t>(i) * 4];
      int64_t key = static_cast<int64_t>(b);
      bool inside = true;
      for (int a = 0; a < 3 && inside; ++a) {
        const int p = kAxis[a];
        const double cell = std::floor((point[p] - spec.range_min[p]) / spec.voxel_size[p]);
        inside = point[p] < spec.range_max[p] && cell >= 0 && cell < static_cast<double>(spec.spatial_shape[a]);
        key = key * spec.spatial_shape[a] + static_cast<int64_t>(cell);
      }
      if (!inside) continue;
      keyed.emplace_back(key, point);
      ++scan.points[b];
    }
  }
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& l, const auto& r) { return l.first < r.first; });

  for (size_t begin = 0; begin < keyed.size();) {
    size_t end = begin;
    std::array<double, 4> sum = {0, 0, 0, 0};
    for (; end < keyed.size() && keyed[end].first == keyed[begin].first; ++end) {
      for (int f = 0; f < 4; ++f) sum[static_cast<size_t>(f)] += keyed[end].second[f];
    }
    const int64_t key = keyed[begin].first;
    const int64_t x = key % spec.spatial_shape[2], y = key / spec.spatial_shape[2] % spec.spatial_shape[1];
    const int64_t z = key / (spec.spatial_shape[2] * spec.spatial_shape[1]) % spec.spatial_shape[0];
    scan.indices.insert(scan.indices.end(), {static_cast<int32_t>(key / volume), static_cast<int32_t>(z),
                                             static_cast<int32_t>(y), static_cast<int32_t>(x)});
    for (double s : sum) scan.features.push_back(static_cast<float>(s / static_cast<double>(end - begin)));
    begin = end;
  }
  return scan;
}

VoxelScan syntheticKittiScan(uint64_t seed, int64_t batch_size, const LidarConfig& config) {
  if (batch_size < 1) throw std::invalid_argument("syntheticKittiScan: batch_size must be at least 1");
  std::vector<PointCloud> clouds;
  for (int64_t b = 0; b < batch_size; ++b) clouds.push_back(simulateScan(itemSeed(seed, b), config));
  return voxelize(clouds);
}

}  // namespace sparse_lidar
