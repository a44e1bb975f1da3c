// Fixed-length features of a scheduled kernel, read off its loop AST (not its knob values).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "codegen/ir/ir.h"

namespace tune::costmodel {

/// Bumped whenever the meaning, order or number of features changes; saved models record it
/// and refuse to load against another version.
inline constexpr int kFeatureVersion = 6;  // 2: GPU bindings, shared memory, barriers; 3: copy widths;
                                           // 4: GPU occupancy, wave fill, registers; 5: coalescing,
                                           // bank conflicts; 6: the busiest SM's work

/// Loops of the main statement described one by one, innermost first.
inline constexpr int kLoopSlots = 8;
/// Buffer accesses of the main statement described one by one: slot 0 is the buffer it stores
/// to, slots 1.. the buffers it loads (other than the stored one), largest footprint first.
inline constexpr int kAccessSlots = 4;
/// Loop levels at which footprints and intensities are measured: level l < kLevels - 1 is one
/// iteration of the (l+2)-th loop from the inside, i.e. the work of the innermost l+1 loops
/// (l = 0: the innermost loop alone); the last level is the whole nest of the main statement.
inline constexpr int kLevels = 9;

// Conventions used below.
//  * "log" fields hold log2(1 + x) of a non-negative quantity x, so 0 means x = 0 and every
//    value is finite; raw fields hold x itself.
//  * The main statement is the store executed most often (ties: more float ops, then first in
//    program order): the reduction update of a GEMM/conv, or its plain store without
//    cache_write. Its nest is the list of loops enclosing it, outermost to innermost.
//  * Elements are fp32 (4 bytes). A "unique element" count is the number of distinct index
//    tuples an access touches, computed exactly for affine indices up to overlaps inside one
//    dimension (approximated by min(span, product of extents)) and bounded by the buffer shape.
//  * Statements under an If count as if taken (an upper bound on the work), except the packing
//    of a weight kept across calls (not in the timed calls) and split-K's fix-up, which only
//    the last of a tile's k_split blocks runs (counted in 1 / k_split of the blocks).
//  * Everything is a float so the struct flattens into the feature vector in field order.

/// The GPU the occupancy and wave features are computed against: an H100 SXM (sm_90). The
/// features are target-agnostic, like the rest of the vector: every CUDA kernel is described
/// against this one machine whatever GPU it runs on, so models trained on another GPU see the
/// same (there less exact) transform of the launch shape.
inline constexpr int kGpuSms = 132;                     // streaming multiprocessors
inline constexpr int kGpuThreadsPerSm = 2048;           // resident threads per SM (64 warps)
inline constexpr int kGpuBlocksPerSm = 32;              // resident blocks per SM
inline constexpr int kGpuSharedPerSm = 228 * 1024;      // shared memory per SM [bytes]
inline constexpr int kGpuSharedPerBlock = 227 * 1024;   // largest shared allocation of a block [bytes]
inline constexpr int kGpuSharedReserved = 1024;         // shared memory the runtime reserves per block [bytes]
inline constexpr int kGpuRegistersPerSm = 65536;        // 32-bit registers per SM
inline constexpr int kGpuMaxRegisters = 255;            // registers one thread can have
/// Estimated registers of a thread besides its kLocal tiles (indices, addresses, loop counters),
/// as the CUDA templates' register constraint estimates them.
inline constexpr int kGpuRegisterOverhead = 28;
/// One SM's fp32 rate: 128 FMA lanes x 2 flops x 1.755 GHz [flops per second].
inline constexpr double kGpuSmFlops = 128 * 2 * 1.755e9;
/// One SM's share of the L2 / memory bandwidth the GEMM tiles stream from: about 2x HBM3's
/// 3.35 TB/s, split over kGpuSms [bytes per second].
inline constexpr double kGpuSmBytes = 2 * 3.35e12 / kGpuSms;

/// One loop of the main statement's nest (slot i: the (i+1)-th loop from the inside). All
/// zero when the nest has fewer loops.
struct LoopFeatures {
  float log_extent;  // log2(1 + trip count) [iterations]
  float vectorized;  // 1 if the loop is vectorized (ForKind::kVectorized) [flag]
  float unrolled;    // 1 if the loop is fully unrolled [flag]
  float parallel;    // 1 if the loop runs on the thread pool [flag]
  float thread_bound;  // 1 if the loop is bound to a GPU block or thread index [flag]
  float reduction;   // 1 if the stored element does not depend on the loop var and the loop
                     // is inside the allocation of a local destination [flag]
};

/// One buffer accessed by the main statement. All zero when the slot is empty.
struct AccessFeatures {
  float present;       // 1 if the slot describes a buffer [flag]
  float reads;         // loads of this buffer per execution of the statement [count]
  float writes;        // stores to this buffer per execution (0 or 1) [count]
  float scope_local;   // 1 if the buffer is a kLocal (register) tile [flag]
  float scope_heap;    // 1 if the buffer is kernel-allocated heap scratch (packed/padded) [flag]
  float scope_shared;  // 1 if the buffer is GPU shared memory [flag]
  float log_bytes[kLevels];  // log2(1 + unique bytes touched at each level, see kLevels) [bytes]
  float log_stride_innermost;  // log2(1 + |address step| per iteration of the innermost loop)
                               // [elements]; 0 when the access is invariant in that loop
  float log_stride_used;  // log2(1 + |address step|) of the innermost loop the index depends
                          // on [elements]; 0 when it depends on none
  float reuse_depth;      // number of consecutive innermost loops the index does not depend
                          // on [loops]
  float log_reuse_run;  // log2(1 + product of the extents of those loops): consecutive
                        // executions that hit the same element [executions]
  float log_reuse;      // log2(1 + executions / unique elements of the whole nest): average
                        // uses of each element [accesses per element]
  float log_accesses;   // log2(1 + executions * (reads + writes)) [accesses]
  float log_lines;      // log2(1 + unique 64-byte cache lines touched by the whole nest) [lines]
};

/// The features of one kernel, in the order of the flattened vector.
struct AstFeatures {
  // --- the whole kernel ---
  float log_total_flops;    // log2(1 + float ops executed by all statements) [flops]
  float log_store_execs;    // log2(1 + executions of all stores) [stores]
  float parallel_fraction;  // share of store executions inside a parallel loop [0..1]
  float log_arg_bytes;      // log2(1 + total size of the argument buffers) [bytes]
  float log_heap_bytes;     // log2(1 + total size of heap scratch buffers) [bytes]
  float num_heap_buffers;   // heap scratch buffers allocated (packing, padding) [count]
  float log_local_floats;   // log2(1 + elements of the largest kLocal tile) [floats]
  float num_stages;         // top-level loop nests (copy stages + compute) [count]
  float num_loops;          // loops in the kernel [count]
  float num_vectorized;     // vectorized loops in the kernel [count]
  float num_unrolled;       // unrolled loops in the kernel [count]
  float num_parallel;       // parallel loops in the kernel [count]
  float max_depth;          // deepest loop nesting in the kernel [loops]
  float log_shared_bytes;   // log2(1 + GPU shared memory per block) [bytes]
  float num_syncs;          // block barriers in the kernel text [count]
  float log_gpu_threads;    // log2(1 + threads per block: product of threadIdx extents), 0 for
                            // CPU kernels [threads]
  float log_gpu_blocks;     // log2(1 + blocks: product of blockIdx extents), 0 for CPU [blocks]
  // --- the main statement ---
  float main_depth;          // loops enclosing the main statement [loops]
  float log_main_execs;      // log2(1 + executions of the main statement) [executions]
  float main_exec_fraction;  // main executions / all store executions [0..1]
  float main_flops;          // float ops per execution of the main statement [flops]
  float vector_lanes;        // extent of the innermost vectorized loop enclosing the main
                             // statement, 1 when there is none [lanes] (raw, not log)
  float vector_innermost;    // 1 if that vectorized loop is the innermost loop [flag]
  float log_unroll_product;  // log2(1 + product of enclosing unrolled extents, 1 if none)
                             // [iterations]
  float log_parallel_extent;  // log2(1 + product of enclosing parallel extents, 0 if none)
                              // [tasks]
  float log_parallel_grain;   // log2(1 + main executions per parallel iteration, 0 if not
                              // parallel) [executions per task]
  float log_reduce_extent;    // log2(1 + product of enclosing reduction-loop extents)
                              // [iterations]
  float log_local_tile;       // log2(1 + elements of the kLocal tile the main statement
                              // stores to, 0 if it stores to memory) [floats]
  LoopFeatures loops[kLoopSlots];
  AccessFeatures accesses[kAccessSlots];
  float log_intensity[kLevels];  // log2(1 + flops / non-local unique bytes) of the main
                                 // statement at each level [flops per byte]
  // --- copies (the stages around the main statement) ---
  float shared_copy_lanes;  // extent of the widest innermost vectorized loop around a store or
                            // cp.async into GPU shared memory, 0 if none (e.g. the vector width
                            // of a CUDA GEMM's tile copies) [lanes] (raw, not log)
  float arg_load_lanes;     // extent of the widest innermost vectorized loop around a load of
                            // an argument buffer (global memory) by any statement, 0 if none
                            // [lanes] (raw, not log)
  // --- GPU occupancy (all 0 for CPU kernels; machine constants kGpu* above) ---
  float log_thread_local_floats;  // log2(1 + elements of all kLocal buffers a thread allocates),
                                  // the register tiles, fragments and staging registers
                                  // [floats per thread]
  float log_register_excess;  // log2(1 + max(0, R - C)), R = local floats + kGpuRegisterOverhead
                              // rounded up to 8, the estimated registers per thread, C = the
                              // most a thread can have with one block resident: min(248, 65536
                              // / (32 x warps per block) rounded down to 8); what the compiler
                              // must spill [registers]
  float lane_fill;         // threads per block / (32 x warps per block) [0..1]
  float resident_blocks;   // blocks resident on one SM at once: the least of the limits by
                           // threads (2048 / SM), blocks (32 / SM), shared memory (228 KiB / SM,
                           // 1 KiB reserved per block, 0 above 227 KiB) and registers (65536 / SM,
                           // min(R, C) per thread, see log_register_excess) [blocks] (raw, not log)
  float occupancy;         // resident warps per SM / 64 [0..1]
  float wave_fill;         // blocks / (ceil(waves) x kGpuSms x resident blocks), waves = blocks
                           // / (kGpuSms x resident blocks): how full the waves are on average,
                           // 1 when the last is full, 0 when no block fits [0..1]
  // --- GPU memory transactions of the first warp of a block (warp_access.h), every statement
  //     weighted by its executions; 0 for CPU kernels and where no such access is computable ---
  float global_load_efficiency;   // sum of the fewest 32-byte sectors that hold the elements a
                                  // warp loads from global memory (loads and cp.async sources)
                                  // / sum of the sectors it touches: 1 when coalesced [0..1]
  float global_store_efficiency;  // the same for the stores to global memory [0..1]
  float log_shared_conflict;      // log2(sum of shared-memory wavefronts / sum of conflict-free
                                  // wavefronts) over the loads and stores of shared memory: 0
                                  // without bank conflicts, 5 when 32 lanes hit one bank [log2 ways]
  // --- the busiest SM's share of the work (0 for CPU kernels): blocks are dealt to the kGpuSms
  //     SMs in turn, so one SM runs ceil(blocks / kGpuSms) of them, in ceil(waves) rounds of
  //     residency; what parallelism saves and what it costs, priced per SM, not per kernel ---
  float log_sm_flops;         // log2(1 + float ops of the busiest SM's blocks: all statements'
                              // flops / blocks x ceil(blocks / kGpuSms)) [flops]
  float log_sm_global_bytes;  // log2(1 + bytes the busiest SM's blocks load from and store to
                              // argument buffers, element accesses x 4 counted per execution
                              // (not unique), cp.async sources included) [bytes]
  float log_thread_serial_stores;  // log2(1 + store executions of one thread x ceil(waves)): the
                                   // dependent work one thread slot runs in turn [stores]
  float log_serial_barriers;  // log2(1 + block barriers one thread passes x ceil(waves))
                              // [barriers]
  float log_thread_serial_global;  // log2(1 + argument-buffer element accesses of one thread x
                                   // ceil(waves)) [accesses]
  float log_sm_roofline_ns;   // log2(1 + max(the busiest SM's flops / kGpuSmFlops, its global
                              // bytes / kGpuSmBytes) in ns): a roofline time of that SM [ns]
  // Tried and left out (held-out networks of cuda-h100, xgb and xgb ensembles): the wave
  // count itself (the program graph carries it), flops per barrier, stores to global memory
  // per flop, and global / shared element loads per flop (pairwise +0.005 to +0.015, but the
  // ensemble's top-1 fell from 0.86 to 0.74: it then picked split-K and thin-channel configs
  // 2-20x slower than the best on a few heavy tasks).
};

/// How a GPU kernel's blocks fill the GPU of the kGpu* constants; all 0 for a CPU kernel (one
/// without GPU bindings). The occupancy fields of AstFeatures and of the program graph are
/// read off it.
struct GpuLaunch {
  double threads = 0;          // threads per block: product of the threadIdx extents [threads]
  double blocks = 0;           // blocks: product of the blockIdx extents [blocks]
  double local_floats = 0;     // elements of all kLocal buffers a thread allocates [floats]
  double register_excess = 0;  // max(0, R - C), see AstFeatures::log_register_excess [registers]
  double lane_fill = 0;        // threads / (32 x warps per block) [0..1]
  double resident_blocks = 0;  // blocks resident per SM, see AstFeatures::resident_blocks [blocks]
  double occupancy = 0;        // resident warps per SM / 64 [0..1]
  double waves = 0;            // blocks / (kGpuSms x resident blocks), 0 when no block fits [waves]
  double wave_fill = 0;        // blocks / (ceil(waves) x kGpuSms x resident blocks) [0..1]
  // The busiest SM's share, see AstFeatures (raw values, not logs):
  double sm_flops = 0;              // flops of its ceil(blocks / kGpuSms) blocks [flops]
  double sm_global_bytes = 0;       // their argument-buffer accesses x 4 [bytes]
  double thread_serial_stores = 0;  // store executions of one thread x ceil(waves) [stores]
  double serial_barriers = 0;       // barriers one thread passes x ceil(waves) [barriers]
  double thread_serial_global = 0;  // argument accesses of one thread x ceil(waves) [accesses]
  double sm_roofline_ns = 0;        // max(sm_flops / kGpuSmFlops, sm_global_bytes / kGpuSmBytes) [ns]
};

/// The launch estimate of `func`. Pure and thread-safe; one walk over the AST.
GpuLaunch EstimateGpuLaunch(const codegen::LoweredFunc& func);

/// Number of floats ExtractFeatures returns.
inline constexpr size_t kNumFeatures = sizeof(AstFeatures) / sizeof(float);

/// One name per feature, in vector order, e.g. "log_total_flops", "loop0.log_extent",
/// "access1.log_bytes.l8", "log_intensity.l3". Stable for a kFeatureVersion.
const std::vector<std::string>& FeatureNames();

/// Index of the feature called `name` in the vector; aborts when absent (a bug).
size_t FeatureIndex(const std::string& name);

/// The features of `func` as a struct. Pure and thread-safe; costs microseconds for the GEMM
/// and conv2d templates. A kernel without any store gives all zeros.
AstFeatures ExtractAstFeatures(const codegen::LoweredFunc& func);

/// ExtractAstFeatures flattened: kNumFeatures finite floats in field order.
std::vector<float> ExtractFeatures(const codegen::LoweredFunc& func);

}  // namespace tune::costmodel
