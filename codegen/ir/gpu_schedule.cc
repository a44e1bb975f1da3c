// GPU schedule primitives: bindings, cooperative copies, register-tile loops, pipelining.
#include "codegen/ir/gpu_schedule.h"

#include <algorithm>

#include "base/check.h"

namespace tune::codegen {

Stmt Bind(Expr var, int64_t extent, ForKind axis, Stmt body) {
  TUNE_CHECK(IsGpuBinding(axis)) << ForKindName(axis) << " is not a GPU binding";
  return For(std::move(var), extent, axis, std::move(body));
}

Stmt BindLaunch(const BlockGrid& grid, const ThreadBlock& threads, Stmt body) {
  body = Bind(threads.tx, threads.nx, ForKind::kThreadX, std::move(body));
  body = Bind(threads.ty, threads.ny, ForKind::kThreadY, std::move(body));
  if (threads.tz.defined()) body = Bind(threads.tz, threads.nz, ForKind::kThreadZ, std::move(body));
  body = Bind(grid.bx, grid.nx, ForKind::kBlockX, std::move(body));
  body = Bind(grid.by, grid.ny, ForKind::kBlockY, std::move(body));
  if (grid.bz.defined()) body = Bind(grid.bz, grid.nz, ForKind::kBlockZ, std::move(body));
  return body;
}

Expr ThreadBlock::Linear() const {
  Expr yz = nz > 1 ? tz * Expr(ny) + ty : ty;
  return yz * Expr(nx) + tx;
}

bool TileCopy::Fits() const { return vector >= 1 && cols % vector == 0; }

namespace {

// The loops of a cooperative copy: run `e` (unrolled) and lane `v`; `first`, the run's first
// element, clamped to the last run when the tile is not exact; `valid`, whether the run is a
// real one (undefined when exact).
struct CopyRuns {
  Expr e, v, first, valid;
};

CopyRuns RunsOf(const TileCopy& copy, const std::string& prefix) {
  TUNE_CHECK(copy.Fits()) << "tile " << copy.rows << "x" << copy.cols << " rows are not whole runs of " << copy.vector
                          << " lanes";
  CopyRuns r{MakeVar(prefix + "_e"), MakeVar(prefix + "_v"), Expr(), Expr()};
  r.first = (r.e * Expr(copy.threads.count()) + copy.threads.Linear()) * Expr(copy.vector);
  if (!copy.Exact()) {
    r.valid = r.first < Expr(copy.rows * copy.cols);
    r.first = Min(r.first, Expr(copy.rows * copy.cols - copy.vector));  // the last run: a valid address
  }
  return r;
}

}  // namespace

Stmt TileCopy::Emit(
    const std::string& prefix,
    const std::function<Stmt(const Expr& row, const Expr& col, const Expr& slot, const Expr& valid)>& body) const {
  const CopyRuns runs = RunsOf(*this, prefix);
  const Expr &e = runs.e, &v = runs.v, &first = runs.first, &valid = runs.valid;
  Expr row = first / Expr(cols), col = first % Expr(cols) + v;
  Stmt lanes = For(v, vector, vector > 1 ? ForKind::kVectorized : ForKind::kSerial,
                   body(row, col, e * Expr(vector) + v, valid));
  return For(e, VectorsPerThread(), ForKind::kUnrolled, lanes);
}

Stmt TileCopy::EmitGuarded(
    const std::string& prefix, const std::function<Expr(const Expr& row, const Expr& col)>& inside,
    const std::function<Stmt(const Expr& row, const Expr& col, const Expr& slot, const Expr& valid, const Expr& guard)>&
        body) const {
  const CopyRuns runs = RunsOf(*this, prefix);
  const Expr &e = runs.e, &v = runs.v, &first = runs.first, &valid = runs.valid;
  Expr row = first / Expr(cols), run = first % Expr(cols);
  auto lane_loop = [&](const Expr& lane, ForKind kind, bool guarded) {
    Expr col = run + lane;
    return For(lane, vector, kind, body(row, col, e * Expr(vector) + lane, valid, guarded ? inside(row, col) : Expr()));
  };
  Stmt lanes;
  if (vector == 1) {
    lanes = lane_loop(v, ForKind::kSerial, true);
  } else {
    // Runs wholly inside keep their wide accesses; a run across the edge (or past it) goes
    // lane by lane, each lane guarded.
    Expr run_inside = inside(row, run) && inside(row, run + Expr(vector - 1));
    lanes = Seq({If(run_inside, lane_loop(v, ForKind::kVectorized, false)),
                 If(run_inside == Expr(int64_t{0}), lane_loop(MakeVar(prefix + "_t"), ForKind::kUnrolled, true))});
  }
  return For(e, VectorsPerThread(), ForKind::kUnrolled, lanes);
}

Stmt VectorizedLoop(const std::string& name, int64_t extent, const std::function<Stmt(const Expr&)>& body) {
  return VectorizedLoop(name, extent, [&](const Expr& i, const Expr&, const Expr&) { return body(i); });
}

Stmt VectorizedLoop(const std::string& name, int64_t extent,
                    const std::function<Stmt(const Expr& var, const Expr& quad, const Expr& lane)>& body) {
  if (extent % 4 != 0 || extent == 0) {
    return UnrolledLoop(name, extent, [&](const Expr& i) { return body(i, Expr(), Expr()); });
  }
  Expr outer = MakeVar(name + "_o"), lane = MakeVar(name + "_v");
  return For(outer, extent / 4, ForKind::kUnrolled,
             For(lane, 4, ForKind::kVectorized, body(outer * Expr(4) + lane, outer, lane)));
}

Stmt UnrolledLoop(const std::string& name, int64_t extent, const std::function<Stmt(const Expr&)>& body) {
  Expr var = MakeVar(name);
  return For(var, extent, ForKind::kUnrolled, body(var));
}

Stmt PipelinedLoop::Emit(const std::string& prefix, int64_t tiles, bool double_buffer) const {
  TUNE_CHECK(tiles >= 1) << "no tiles";
  Expr t = MakeVar(prefix);
  if (!double_buffer) {
    Expr zero(int64_t{0});
    return For(t, tiles, ForKind::kSerial, Seq({load(t, zero), Sync(), compute(zero), Sync()}));
  }
  std::vector<Stmt> out = {load(Expr(int64_t{0}), Expr(int64_t{0})), Sync()};
  // Iteration `tile` of the loop: the next tile to the registers, this one's FMAs, the
  // registers to the other stage.
  auto iteration = [&](const Expr& tile, const Expr& stage, const Expr& other) {
    return Seq({fetch(tile + Expr(1)), compute(stage), store(other), Sync()});
  };
  if (tiles > 1 && !unroll_stages) {
    out.push_back(For(t, tiles - 1, ForKind::kSerial, iteration(t, t % Expr(2), (t + Expr(1)) % Expr(2))));
  } else if (tiles > 1) {
    out.push_back(StageUnrolled(t, tiles - 1, 2, [&](const Expr& tile, int64_t r) {
      return iteration(tile, Expr(r), Expr((r + 1) % 2));
    }));
  }
  out.push_back(compute(Expr((tiles - 1) % 2)));
  return Seq(std::move(out));
}

Stmt PipelinedLoop::StageUnrolled(const Expr& var, int64_t iterations, int64_t stages,
                                  const std::function<Stmt(const Expr& tile, int64_t stage)>& iteration) {
  std::vector<Stmt> out;
  const int64_t rounds = iterations / stages;
  if (rounds > 0) {
    std::vector<Stmt> round;
    for (int64_t r = 0; r < stages; ++r) round.push_back(iteration(var * Expr(stages) + Expr(r), r));
    out.push_back(For(var, rounds, ForKind::kSerial, Seq(std::move(round))));
  }
  for (int64_t i = rounds * stages; i < iterations; ++i) out.push_back(iteration(Expr(i), i % stages));
  return Seq(std::move(out));
}

Stmt PipelinedLoop::EmitAsync(const std::string& prefix, int64_t tiles, int64_t stages) const {
  TUNE_CHECK(tiles >= 1 && stages >= 2) << tiles << " tiles, " << stages << " stages";
  const int64_t ahead = stages - 1;  // tiles in flight while one is computed
  const bool staged = static_cast<bool>(fetch);  // part of each tile goes through registers
  std::vector<Stmt> out;
  for (int64_t i = 0; i < std::min(ahead, tiles); ++i) {
    std::vector<Stmt> first = {issue(Expr(i), Expr(i)), AsyncCommit()};
    if (staged) first.push_back(load(Expr(i), Expr(i)));
    out.push_back(Seq(std::move(first)));
  }
  const int64_t steady = tiles - ahead;  // iterations that issue a tile
  // Iteration `tile` of the steady loop, its stage and the stage of the tile it issues.
  auto iteration = [&](const Expr& tile, const Expr& stage, const Expr& next_stage) {
    const Expr next = tile + Expr(ahead);
    std::vector<Stmt> step = {AsyncWait(stages - 2), Sync(), issue(next, next_stage), AsyncCommit()};
    if (staged) step.push_back(fetch(next));
    step.push_back(compute(stage));
    if (staged) step.push_back(store(next_stage));
    return Seq(std::move(step));
  };
  Expr t = MakeVar(prefix);
  if (steady > 0 && !unroll_stages) {
    out.push_back(For(t, steady, ForKind::kSerial, iteration(t, t % Expr(stages), (t + Expr(ahead)) % Expr(stages))));
  } else if (steady > 0) {
    out.push_back(StageUnrolled(t, steady, stages, [&](const Expr& tile, int64_t r) {
      return iteration(tile, Expr(r), Expr((r + ahead) % stages));
    }));
  }
  for (int64_t i = std::max<int64_t>(steady, 0); i < tiles; ++i) {
    out.push_back(Seq({AsyncWait(tiles - 1 - i), Sync(), compute(Expr(i % stages))}));
  }
  return Seq(std::move(out));
}

Stmt AsAsyncCopy(const Stmt& store) {
  TUNE_CHECK(store->kind == StmtKind::kStore) << "an asynchronous copy of a statement that is no store";
  auto* st = static_cast<const StoreNode*>(store.get());
  TUNE_CHECK(st->value->kind == ExprKind::kLoad) << "an asynchronous copy of a computed value";
  auto* ld = static_cast<const LoadNode*>(st->value.get());
  return AsyncCopy(st->buffer, st->indices, ld->buffer, ld->indices);
}

}  // namespace tune::codegen
